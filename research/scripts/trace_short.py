"""Where the tile picks that miss the measured best by more than 5% lose their time, from the short-walk phase traces
(analysis only; nothing is fitted).

    python3 research/scripts/trace_short.py

Reads research/data/h100/probe/fa2_tc_trace_short.json (`research/scripts/gpu_run.sh trace-tc-short`: the phase build,
each launch after an L2 flush, on the problems of trace_fa2_tc.SHORT with their three measured tiles). Prints per
launch the blocks' span (first start to last end, median of five launches), each block's warp 0 cycles a KV tile by
phase (waiting for K, QK^T with the softmax, waiting for V, PV; causal blocks walk fewer tiles than the ceil(N / Bc)
it divides by), its cycles outside the loop, the trace build's and the measured build's launches timed interleaved
in the same run (L2 flush and spins as the timed grid's runs), and beside them the timed grid's median
(examples/measurements/h100/fa2_tc.csv, fp16 and bf16) and the model's prediction. Run from the repository root.
"""
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfmodel import api  # noqa: E402
from perfmodel.evaluation import dataset  # noqa: E402
from trace_phases import PHASES  # noqa: E402  (the KV loop's four phases a phase record holds)

TRACE = ROOT / "research" / "data" / "h100" / "probe" / "fa2_tc_trace_short.json"
TIMED = ROOT / "examples" / "measurements" / "h100" / "fa2_tc.csv"


def key(r) -> tuple:
    return r["B"], r["H"], r["N"], r["d"], bool(r["causal"]), r["Br"], r["Bc"], r["warps"]


def compute() -> dict:
    """key -> {span_us, per_tile: phase -> median cycles a KV tile, outside: median cycles beyond the loop,
    timed_us: {dtype: the timed grid's median}, model_us}."""
    (ms,) = dataset.load([TIMED])
    timed = {}
    c = ms.cols
    for i in range(len(ms)):
        k = (*(int(c[a][i]) for a in ("B", "H", "N", "d")), bool(ms.causal[i]), int(c["Br"][i]), int(c["Bc"][i]),
             int(c["threads"][i]) // 32)
        timed.setdefault(k, {})[str(ms.dtype[i])] = float(ms.measured_s[i]) * 1e6
    out = {}
    for r in json.loads(TRACE.read_text())["runs"]:
        rep = r["reps"][-1]
        tiles = -(-r["N"] // r["Bc"])
        loop = sum(np.asarray(rep[p], float) for p in PHASES)
        k = key(r)
        out[k] = {
            "span_us": float(np.median([max(x["end_ns"]) - min(x["start_ns"]) for x in r["reps"]])) / 1e3,
            "per_tile": {p: float(np.median(rep[p])) / tiles for p in PHASES},
            "outside": float(np.median(np.asarray(rep["total_cycles"], float) - loop)),
            "timed_us": timed.get(k, {}),
            # the trace build's launch and the measured build's, timed interleaved in the same run (fp16)
            "trace_build_us": r["timed"]["trace_build"]["median_ms"] * 1e3,
            "measured_build_us": r["timed"]["measured_build"]["median_ms"] * 1e3,
            "model_us": api.predict("h100", "fa2_tc", B=r["B"], H=r["H"], N=r["N"], d=r["d"], dtype="fp16",
                                    causal=r["causal"], Br=r["Br"], Bc=r["Bc"], warps=r["warps"]).time_s * 1e6}
    return out


if __name__ == "__main__":
    for (B, H, N, d, causal, Br, Bc, w), v in compute().items():
        pt = v["per_tile"]
        timed = " ".join(f"{dt} {t:6.2f}" for dt, t in sorted(v["timed_us"].items()))
        print(f"B{B} H{H} N{N} d{d} {'causal' if causal else 'full  '} {Br:3d}x{Bc:<3d}/{w}w: span {v['span_us']:5.1f} us"
              f" | a tile: wait K {pt['wait_k_cycles']:5.0f} S {pt['s_cycles']:5.0f} wait V {pt['wait_v_cycles']:4.0f}"
              f" PV {pt['pv_cycles']:5.0f} | outside {v['outside']:5.0f} | trace build {v['trace_build_us']:6.2f}, "
              f"measured build {v['measured_build_us']:6.2f} | timed {timed} | model {v['model_us']:6.2f}")
