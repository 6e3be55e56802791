"""What one timed SDPA call runs on the GPU for the inference and training workloads, as JSON.
    python3 research/scripts/sdpa_workload_calls.py OUT.json
For decode (one to 128 queries against a KV cache, grouped heads), cross-attention, head dims 32-256, and the
backward (torch.autograd.grad of the output, as `measure` times it), each call of SDPA's flash and cuDNN
backends is built by perfmodel's own runner (perfmodel/kernels/sdpa.py) and profiled as research/scripts/
sdpa_calls.py profiles one: every GPU activity (name, launch shape, start, duration) after `measure`'s L2 flush and
head start, beside the call's event time. The kernel names and launch shapes say which kernels a closed library
runs (cuDNN's tiles are in its kernel names); the spans say how much of the event time is GPU work. Diagnosis
only: no timing here enters the model (the SDPA presets are predicted with nothing fitted to their timings).
"""

import os

from perfmodel.kernels import get
from perfmodel.measure.bench import Bencher
from perfmodel.shape import make_shape
import sdpa_calls
from sdpa_calls import profile_runner
import common

sdpa_calls.PROFILED_CALLS = 2

BACKENDS = ("sdpa-flash", "sdpa-cudnn")
PROBLEMS = [  # (B, H, Hkv, Nq, Nk, d, causal, mode)
    # decode: one query and speculative batches, grouped heads, short and long caches
    *[(B, 32, Hkv, Nq, Nk, 128, False, "fwd") for B in (1, 8) for Hkv in (32, 8, 1) for Nq in (1, 16)
      for Nk in (1024, 32768)],
    (8, 32, 8, 128, 32768, 128, False, "fwd"),
    *[(1, 32, 8, 1, Nk, 64, False, "fwd") for Nk in (4096, 131072)],
    # cross-attention both ways
    *[(4, 16, 16, Nq, Nk, d, c, "fwd") for Nq, Nk in ((512, 4096), (4096, 512)) for d in (64, 128)
      for c in (False, True)],
    # head dims the presets were not read at
    *[(2, 16, 16, 2048, 2048, d, False, "fwd") for d in (32, 80, 96, 256)],
    # the backward: short and long, both head dims, causal or not, grouped heads, the odd head dims
    *[(B, 16, 16, N, N, d, c, "bwd") for B, N in ((1, 256), (4, 1024), (1, 4096), (1, 16384)) for d in (64, 128)
      for c in (False, True)],
    *[(2, 32, 8, 1024, 1024, 128, c, "bwd") for c in (False, True)],
    *[(2, 16, 16, 2048, 2048, d, False, "bwd") for d in (32, 96, 256)],
]

# SDPA_WORKLOAD_SET=decode-cudnn: cuDNN's one-query decode where the model misses it most (2026-12-02): the head
# dims its record lacked (32, 80, 96, 256), one K/V head under 64 batches, and long caches of many blocks
DECODE_CUDNN = [*[(8, 32, 8, 1, Nk, d, False, "fwd") for d in (32, 80, 96, 256) for Nk in (8192, 32768)],
                *[(64, 32, 1, 1, Nk, d, False, "fwd") for d in (64, 128) for Nk in (1024, 8192, 32768)],
                *[(B, 32, Hkv, 1, Nk, 64, False, "fwd") for B, Hkv in ((8, 32), (8, 8), (64, 8))
                  for Nk in (8192, 131072)],
                *[(B, 32, Hkv, 1, 8192, 128, False, "fwd") for B, Hkv in ((1, 8), (8, 1), (32, 32))]]
# SDPA_WORKLOAD_SET=headdims3: the head dims of examples/grids/h200-headdims3.yaml (48, 112, 160, 192, 200), which
# kernel each backend runs for them, prefill and decode
HEADDIMS3 = [*[(2, 16, 16, 2048, 2048, d, False, "fwd") for d in (48, 112, 160, 192, 200)],
             *[(4, 32, 8, 1, 8192, d, False, "fwd") for d in (48, 112, 160, 192, 200)]]
if os.environ.get("SDPA_WORKLOAD_SET") == "decode-cudnn":
    BACKENDS, PROBLEMS = ("sdpa-cudnn",), DECODE_CUDNN
elif os.environ.get("SDPA_WORKLOAD_SET") == "headdims3":
    PROBLEMS = HEADDIMS3


def main(path):
    from perfmodel.measure import build

    torch = build.require_torch()
    tool = build.check_toolchain(torch)
    bench = Bencher(torch)
    rows = []
    for name in BACKENDS:
        k = get(name)
        for B, H, Hkv, Nq, Nk, d, causal, mode in PROBLEMS:
            shape = make_shape(B, H, None, d, dtype="bf16", causal=causal, Hkv=Hkv, Nq=Nq, Nk=Nk, mode=mode)
            row = {"backend": name, "B": B, "H": H, "Hkv": Hkv, "Nq": Nq, "Nk": Nk, "d": d, "causal": causal,
                   "mode": mode, "dtype": "bf16"}
            try:
                profile_runner(torch, bench, k.runner(torch, None, shape, k.make_tiles(shape)), row, 0, 5, 30)
            except Exception as exc:          # a shape a backend refuses: kept with its reason
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            rows.append(row)
            print(name, B, H, Hkv, Nq, Nk, d, int(causal), mode, row.get("error") or
                  ("event %.1f us spans %s %s" % (row["event_median_us"], [round(s or 0, 1) for s in row["span_us"]],
                   [(a["name"][:70], a.get("grid"), a.get("block"), round(a["dur_us"], 1)) for a in row["calls"][0]])),
                  flush=True)
            torch.cuda.empty_cache()
    common.write_record(path, torch, tool, {"rows": rows}, indent=1, cudnn=torch.backends.cudnn.version())


if __name__ == "__main__":
    common.run_script(main)
