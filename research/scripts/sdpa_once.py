"""Call PyTorch's scaled_dot_product_attention through one backend, a few times, for a profiler to watch.

    python3 research/scripts/sdpa_once.py BACKEND B H N d CAUSAL [CALLS]

BACKEND: an SDPBackend name (FLASH_ATTENTION, CUDNN_ATTENTION, ...); CAUSAL: 0/1 (or False/True); CALLS: how many
identical calls (default 2, so that a profiler can skip the first's kernels). fp16 inputs from torch.randn
(SDPA_DTYPE=bf16: bf16). The Nsight Compute scripts (ncu_sdpa_sass.sh, ncu_sdpa_stalls.sh) run this under the
profiler.
"""
import os
import sys


def main(argv):
    if len(argv) not in (6, 7):
        sys.exit(__doc__.strip().splitlines()[2].strip())
    backend, (B, H, N, d) = argv[0], (int(x) for x in argv[1:5])
    causal = argv[5].strip().lower() in ("1", "true")
    calls = int(argv[6]) if len(argv) == 7 else 2
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[os.environ.get("SDPA_DTYPE", "fp16")]
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dtype) for _ in range(3))
    for _ in range(calls):
        with sdpa_kernel([getattr(SDPBackend, backend)]):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
