"""How evenly co-resident fa2_tc blocks share their SM, from the fairness traces (analysis only; nothing is fitted).

    python3 research/scripts/trace_fairness.py

Reads research/data/h100/probe/fa2_tc_trace_fair.json (`research/scripts/gpu_run.sh trace-tc-fair`): every instance
at the measured build's blocks per SM, in grids of exactly one and four rounds, and the one-block instances at B32
H8 N1000 and B2 H8 N8192. Prints, per launch of one round, when the first and the last of an SM's blocks end (the
mean over SMs and the timed repetitions after the first) and the ratio of the last end to the mean end: 1 when the
blocks share the SM evenly; above 1 when the schedulers favour one block, so that the last one runs part of its way
alone. The model prices a round as its blocks ending together (model.timing). Beside each launch: the model's
prediction and the traced span (first start to last end). For the launches of several rounds: each block's duration
by its place on its SM (the first round's blocks, then the second's, ...). Run from the repository root.
"""
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfmodel import api  # noqa: E402
from perfmodel.evaluation import dataset, validate  # noqa: E402
from perfmodel.hw import calibration  # noqa: E402

TRACE = ROOT / "research" / "data" / "h100" / "probe" / "fa2_tc_trace_fair.json"
SMS = api.load_gpu("h100").sm_count          # the traced GPU's SMs


def summarise(run: dict) -> dict:
    """One traced launch: its shape, its span and, per SM place, the mean block duration (us); for one round, the
    mean first and last end of an SM's blocks (us from the launch's first start)."""
    places, firsts, lasts, means, spans = {}, [], [], [], []
    for rep in run["reps"][1:]:
        start, end, sm = (np.asarray(rep[k], dtype=float) for k in ("start_ns", "end_ns", "smid"))
        t0 = start.min()
        spans.append((end.max() - t0) / 1e3)
        for s in np.unique(sm):
            mine = np.flatnonzero(sm == s)
            order = mine[np.argsort(start[mine])]
            for k, i in enumerate(order):
                places.setdefault(k, []).append((end[i] - start[i]) / 1e3)
            ends = (end[order] - t0) / 1e3
            firsts.append(ends.min())
            lasts.append(ends.max())
            means.append(ends.mean())
    blocks = len(run["reps"][0]["smid"])
    one_round = blocks == SMS * run["blocks_per_sm"]      # (the trace build's blocks per SM)
    out = {k: run[k] for k in ("B", "H", "N", "d", "Br", "Bc", "warps", "blocks_per_sm", "extra_smem")}
    out.update(blocks=blocks, span_us=float(np.mean(spans)), max_abs_err=run["max_abs_err_vs_fp32_sdpa"],
               durations_us=[float(np.mean(places[k])) for k in sorted(places)])
    if one_round:
        out.update(first_end_us=float(np.mean(firsts)), last_end_us=float(np.mean(lasts)),
                   last_over_mean=float(np.mean(lasts) / np.mean(means)))
    return out


def compute() -> list:
    """Each traced launch (summarise) with the model's prediction, where the trace build ran the measured build's
    blocks per SM (``measured_build_blocks``: the trace build holds its own registers, and unused shared memory can
    only lower its blocks per SM; where it still runs fewer, its launches are not the measured kernel's)."""
    runs = [summarise(r) for r in json.loads(TRACE.read_text())["runs"]]
    for r in runs:
        p = api.predict("h100", "fa2_tc", B=r["B"], H=r["H"], N=r["N"], d=r["d"], dtype="fp16", causal=False,
                        Br=r["Br"], Bc=r["Bc"], warps=r["warps"])
        r["measured_build_blocks"] = int(p.prediction.blocks_per_sm)
        r["model_us"] = float(p.time_s) * 1e6 if r["measured_build_blocks"] == r["blocks_per_sm"] else None
    return runs


def traced_fixed_parts(runs: list) -> dict:
    """One-block instances: (us a block keeps beside its KV tiles, us a KV tile), from their traced blocks of the
    later places at N = 1000 and N = 8192 (two points, a line through them)."""
    out = {}
    for k in {key(r) for r in runs if r["N"] == 1000}:
        pts = sorted((-(-r["N"] // r["Bc"]), float(np.mean(r["durations_us"][2:]))) for r in runs
                     if key(r) == k and r["N"] in (1000, 8192))
        (t1, d1), (t2, d2) = pts
        slope = (d2 - d1) / (t2 - t1)
        out[k] = (d1 - slope * t1, slope)
    return out


def measured_fixed_parts(kernel="fa2_tc", gpu="h100", min_rounds=6) -> dict:
    """Per (d, Br, Bc, warps, blocks per SM) of the measured grid's non-causal launches of at least ``min_rounds``
    rounds: least squares of the time per round on the KV tiles a block walks, measured and predicted (us a round
    keeps beside its tiles, us a KV tile), for the classes measured at three or more N."""
    (ms,) = dataset.load([ROOT / "examples" / "measurements" / gpu / f"{kernel}.csv"])
    spec = api.load_gpu(gpu)
    cal = calibration.resolve(spec)
    pred = validate.predict_set(ms, spec, cal)[0]
    c, groups = ms.cols, {}
    for i in range(len(ms)):
        per_sm, bpsm = sm_blocks(ms, i, spec.sm_count)
        if ms.causal[i] or per_sm / bpsm < min_rounds:
            continue
        k = (int(c["d"][i]), int(c["Br"][i]), int(c["Bc"][i]), int(c["threads"][i]) // 32, bpsm)
        groups.setdefault(k, []).append((c["N"][i] / c["Bc"][i], per_sm / bpsm, ms.measured_s[i], pred[i], c["N"][i]))
    out = {}
    for k, g in groups.items():
        tiles, rounds, meas, model, n = (np.array(x, dtype=float) for x in zip(*g))
        if len(set(n)) < 3:
            continue
        a = np.c_[np.ones(len(tiles)), tiles]
        fit = lambda t: np.linalg.lstsq(a, t * 1e6 / rounds, rcond=None)[0]
        out[k] = (tuple(fit(meas)), tuple(fit(model)))
    return out


def sm_blocks(ms, i: int, sms: int) -> tuple:
    """Row ``i`` of a measured fa2_tc set: (blocks on its busiest SM, blocks per SM as CUDA reported them)."""
    c = ms.cols
    grid = int(c["B"][i] * c["H"][i] * -(-c["N"][i] // c["Br"][i]))
    return -(-grid // sms), int(ms.rows[i]["cuda_blocks_per_sm"])


def key(r):
    """A traced launch's instance, (d, Br, Bc, warps) as in fa2_tc.INSTANCES."""
    return (r["d"], r["Br"], r["Bc"], r["warps"])


def main():
    runs = compute()
    for r in runs:
        name = f"B{r['B']} H{r['H']} N{r['N']} d{r['d']} {r['Br']}x{r['Bc']}/{r['warps']}w, {r['blocks_per_sm']} a SM"
        model = (f"model {r['model_us']:7.1f} us" if r["model_us"] is not None
                 else f"(measured build: {r['measured_build_blocks']} a SM)")
        head = f"{name:40s} span {r['span_us']:7.1f} us, {model}"
        if "last_over_mean" in r:
            print(f"{head}; one round: ends {r['first_end_us']:.1f}-{r['last_end_us']:.1f} us, "
                  f"last / mean {r['last_over_mean']:.3f}")
        else:
            print(f"{head}; durations by place: " + " ".join(f"{x:.1f}" for x in r["durations_us"]))

    print("\none block a SM, traced: us a block keeps beside its KV tiles, us a KV tile (N = 1000 and 8192)")
    for k, (fixed, slope) in sorted(traced_fixed_parts(runs).items()):
        print(f"  d {k[0]} {k[1]}x{k[2]}/{k[3]}w: {fixed:.1f} us + {slope:.3f} us a tile")
    print("measured grid, non-causal launches of 6 rounds or more: us a round keeps beside its tiles, us a tile")
    for k, (m, p) in sorted(measured_fixed_parts().items()):
        print(f"  d {k[0]} {k[1]}x{k[2]}/{k[3]}w, {k[4]} a SM: measured {m[0]:.1f} + {m[1]:.3f}, "
              f"model {p[0]:.1f} + {p[1]:.3f}")


if __name__ == "__main__":
    main()
