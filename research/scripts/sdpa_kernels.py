"""Which CUDA kernels PyTorch's SDPA backends launch, with what launch shape, and at what clock, as JSON.

    python3 research/scripts/sdpa_kernels.py OUT.json

For each problem below and each backend (flash, cuDNN), one call runs under torch.profiler: every GPU kernel it
launches is recorded with its name, grid, block, registers per thread and shared memory (what the presets in
perfmodel/kernels/sdpa.py assume about the loop nest, read off the launch rather than fitted to its time). Then the
call is repeated back to back for about a second while nvidia-smi samples the SM clock and power: the clock
the kernel runs at when it keeps the GPU busy. No timing here is used by the model.
"""
import time

from perfmodel.measure import build
from common import Sampler
import common

PROBLEMS = [(B, H, N, d, causal)
            for d in (64, 128) for causal in (False, True)
            for B, H, N in ((1, 8, 512), (4, 16, 1024), (1, 16, 4096), (4, 16, 8192), (32, 16, 2048), (1, 8, 16384))]
SUSTAIN_S = 1.0
KEYS = ("grid", "block", "registers per thread", "shared memory", "blocks per SM", "warps per SM",
        "est. achieved occupancy %")


def kernels_of(torch, fn):
    """The GPU kernels one call of fn launches: name, duration and launch attributes from the profiler trace."""
    fn()
    torch.cuda.synchronize()
    out = []
    for ev in common.profiled_gpu_events(torch, fn):
        if ev.get("cat") == "kernel":
            a = ev.get("args", {})
            out.append({"name": ev.get("name"), "us": ev.get("dur"), **{k: a.get(k) for k in KEYS}})
    return out


def main(path):
    torch = build.require_torch()
    tool = build.check_toolchain(torch)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    F = torch.nn.functional
    rows = []
    for backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
        for B, H, N, d, causal in PROBLEMS:
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.float16) for _ in range(3))

            def call():
                with sdpa_kernel([getattr(SDPBackend, backend)]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            row = {"backend": backend, "B": B, "H": H, "N": N, "d": d, "causal": causal, "dtype": "fp16"}
            try:
                row["kernels"] = kernels_of(torch, call)
            except RuntimeError as exc:
                row["error"] = str(exc).splitlines()[0]
                rows.append(row)
                continue
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            n = 0
            with Sampler() as smi:
                s.record()
                t_end = time.time() + SUSTAIN_S
                while time.time() < t_end:
                    for _ in range(4):
                        call()
                    n += 4
                    torch.cuda.synchronize()
                e.record()
                torch.cuda.synchronize()
            row["back_to_back_ms_per_call"] = s.elapsed_time(e) / n
            row["nvidia_smi"] = smi.summary()
            rows.append(row)
            print(backend, B, H, N, d, causal, [(x["name"][:90], x["grid"], x["block"], x["registers per thread"],
                                                   x["shared memory"]) for x in row["kernels"]],
                  row["nvidia_smi"]["sm_clock_mhz_median"], flush=True)
            del q, k, v
    common.write_record(path, torch, tool, {"rows": rows}, indent=1, cudnn=torch.backends.cudnn.version())


if __name__ == "__main__":
    common.run_script(main)
