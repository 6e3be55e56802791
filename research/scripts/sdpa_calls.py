"""What one timed SDPA call runs on the GPU, under `measure`'s conditions, as JSON.
    python3 research/scripts/sdpa_calls.py OUT.json
For the problems where the model misses SDPA flash and cuDNN most (small launches, split-KV, causal N = 1000), each
call is profiled (torch.profiler) after `measure`'s L2 flush and head start, three times: every GPU activity it
runs (kernels, memsets, copies: name, category, start, duration and a kernel's launch shape), so that the span
from the first activity's start to the last one's end can be set beside the call's event time, taken here as
`measure` takes it (perfmodel.measure.bench.Bencher). An empty kernel (research/csrc/probe_cold.cu) is profiled and timed
the same way: the event time of a launch that does nothing, and what the profiler gives it. Diagnosis only: no
timing here enters the model (the SDPA kernels are predicted with nothing fitted to their timings).
SDPA_CALLS_SET=splitkv: flash's split-KV launches instead (B = 1, N = 512 and 1000, d 64 and 128, causal or not).
"""

import os
from perfmodel.measure.bench import Bencher
import common

PROBLEMS = [  # (backend, B, H, N, d, causal)
    *[("FLASH_ATTENTION", 1, 16, 512, 128, c) for c in (False, True)],
    *[("FLASH_ATTENTION", 1, 8, 512, 64, c) for c in (False, True)],
    *[("FLASH_ATTENTION", 32, 16, N, 64, c) for N in (992, 1000, 1024) for c in (False, True)],
    *[("FLASH_ATTENTION", 4, 16, N, 128, c) for N in (1000, 1024) for c in (False, True)],
    *[("CUDNN_ATTENTION", 4, 8, 512, d, c) for d in (64, 128) for c in (False, True)],
    *[("CUDNN_ATTENTION", 1, 16, N, d, False) for N in (512, 1000) for d in (64, 128)],
    *[("CUDNN_ATTENTION", 32, 16, N, 64, c) for N in (1000, 1024) for c in (False, True)],
]
SPLITKV_PROBLEMS = [("FLASH_ATTENTION", 1, H, N, d, c) for H in (8, 16) for N in (512, 1000) for d in (64, 128)
                    for c in (False, True)]
CATEGORIES = ("kernel", "gpu_memset", "gpu_memcpy")
LAUNCH_KEYS = ("grid", "block", "registers per thread", "shared memory", "blocks per SM", "warps per SM")
PROFILED_CALLS = 3


def activities(torch, bench, fn):
    """Every GPU activity of PROFILED_CALLS calls, each profiled on its own after the flush and head start
    `measure` uses (and a synchronize, so that the profile holds the call alone): per call, a list of {name, cat,
    start_us (from the call's first activity), dur_us}."""
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(PROFILED_CALLS):
        bench.flush_l2()
        torch.cuda._sleep(bench.sleep_cycles)
        torch.cuda.synchronize()
        evs = sorted((ev for ev in common.profiled_gpu_events(torch, fn) if ev.get("cat") in CATEGORIES),
                     key=lambda ev: ev["ts"])
        t0 = evs[0]["ts"] if evs else 0
        out.append([{"name": ev.get("name"), "cat": ev.get("cat"), "start_us": ev["ts"] - t0,
                     "dur_us": ev.get("dur"), **{k: ev.get("args", {}).get(k) for k in LAUNCH_KEYS
                                                  if k in ev.get("args", {})}} for ev in evs])
    return out


def span_us(call):
    return max(a["start_us"] + a["dur_us"] for a in call) if call else None


def profile_runner(torch, bench, r, row: dict, seed: int, min_runs: int, max_runs: int) -> None:
    """Profile and time the call of a perfmodel runner ``r`` on its inputs of ``seed`` into ``row``: its activities
    (activities), their spans, its event median and runs."""
    Q, K, V = r.inputs(seed)
    fn = lambda: r.timed_launch(Q, K, V)
    acts = activities(torch, bench, fn)
    t = bench.run(fn, setup=r.setup, min_runs=min_runs, max_runs=max_runs, target_s=0.05)
    row.update(calls=acts, span_us=[span_us(c) for c in acts], event_median_us=t.median_ms * 1e3, n_runs=t.n_runs)


def main(path):
    torch, tool, ext = common.load_cuda("probe_cold.cu", "cold")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    bench = Bencher(torch)
    rows = []

    def record(row, fn):
        acts = activities(torch, bench, fn)
        t = bench.run(fn)
        row.update(calls=acts, span_us=[span_us(c) for c in acts], event_median_us=t.median_ms * 1e3,
                   event_p20_us=t.p20_ms * 1e3, event_p80_us=t.p80_ms * 1e3, n_runs=t.n_runs)
        rows.append(row)
        print(row.get("backend", "empty"), row.get("B"), row.get("H"), row.get("N"), row.get("d"), row.get("causal"),
              "event %.2f us" % row["event_median_us"], "spans", [round(s or 0, 2) for s in row["span_us"]],
              [(a["cat"], a["name"][:50], a["dur_us"]) for a in (acts[0] if acts else [])], flush=True)

    record({"what": "empty"}, lambda: ext.empty(0))
    problems = SPLITKV_PROBLEMS if os.environ.get("SDPA_CALLS_SET") == "splitkv" else PROBLEMS
    for backend, B, H, N, d, causal in problems:
        q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.float16) for _ in range(3))

        def call():
            with sdpa_kernel([getattr(SDPBackend, backend)]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        row = {"what": "sdpa", "backend": backend, "B": B, "H": H, "N": N, "d": d, "causal": causal, "dtype": "fp16"}
        try:
            record(row, call)
        except RuntimeError as exc:
            row["error"] = str(exc).splitlines()[0]
            rows.append(row)
        del q, k, v
    common.write_record(path, torch, tool, {"rows": rows}, indent=1, cudnn=torch.backends.cudnn.version())


if __name__ == "__main__":
    common.run_script(main)
