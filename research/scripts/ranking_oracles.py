"""Where fa2_tc's Spearman over tiles falls short of 0.95 (analysis only; nothing here is a model or is fitted).

    python3 research/scripts/ranking_oracles.py [h100|h200]

Scores fa2_tc's predictions, as shipped, on the H100's held-out rows (every row on the H200, whose fit is carried):
Spearman over tiles and MAPE, and, over every problem of the grid, how often the tile a ranking picks is the fastest
measured and how often within 5% of it, as validate and examples/tile_advice.py score them. Then the same
predictions corrected by what two measurements the model does not have say about each launch (oracles: they read
the launch's own measurements, so no model can use them as they are):

* uneven: the fairness traces (probe/fa2_tc_trace_fair.json, research/scripts/trace_fairness.py): in one round the last of
  an SM's blocks ends U after the blocks' mean end (U = last / mean - 1, above 2% only for the d <= 64 128-row
  tiles; traced on the H100, whose SM design the H200 shares). A non-causal launch of those tiles whose last round
  holds two or more blocks an SM is taken to end U of a round later: its prediction times 1 + U / rounds.
* clock: the SM clock the bench's spins read around each timed run (spin_clock_mhz_before/after; docs/
  measurements.md says why they are not a clock to model with). A launch longer than 5 ms is taken to run at
  min(spin, boost) / boost of the clock the model prices it at: its prediction divided by that.

The uneven ends have since been modelled (the age-ordered tail: timing, the FIT_PARAM ``age_tail``, shipped): the
oracles correct the predictions without it ("without tail"), which they were written for, and "shipped+clock" is
the clock oracle on the shipped predictions.

Run from the repository root.
"""
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfmodel import api  # noqa: E402
from perfmodel.evaluation import dataset, validate  # noqa: E402
from perfmodel.hw import calibration  # noqa: E402

import trace_fairness  # noqa: E402


def data(gpu: str = "h100") -> Path:
    return ROOT / "examples" / "measurements" / gpu / "fa2_tc.csv"

UNEVEN_ABOVE = 0.02          # last / mean - 1 above this: the traced instance's blocks do not end together
LONG_S = 5e-3                # launches the clock oracle rescales


def unevenness() -> dict:
    """(d, Br, Bc, warps) -> U, for the instances whose one-round trace at the measured build's blocks per SM ends
    its SMs' last block more than UNEVEN_ABOVE after their mean end."""
    out = {}
    for r in trace_fairness.compute():
        if "last_over_mean" in r and r["measured_build_blocks"] == r["blocks_per_sm"]:
            u = r["last_over_mean"] - 1
            if u > UNEVEN_ABOVE:
                out[trace_fairness.key(r)] = u
    return out


def uneven_factor(ms, table: dict, sms: int) -> np.ndarray:
    """Per row: 1 + U / rounds where the row's instance is in ``table``, it is not causal and its last round holds
    two or more blocks an SM (blocks per SM as CUDA reported them); 1 elsewhere."""
    c = ms.cols
    out = np.ones(len(ms))
    for i in range(len(ms)):
        k = (int(c["d"][i]), int(c["Br"][i]), int(c["Bc"][i]), int(c["threads"][i]) // 32)
        if k not in table or ms.causal[i]:
            continue
        per_sm, bpsm = trace_fairness.sm_blocks(ms, i, sms)
        rounds = -(-per_sm // bpsm)
        if per_sm - (rounds - 1) * bpsm >= 2:
            out[i] = 1 + table[k] / rounds
    return out


def clock_factor(ms, boost_mhz: float) -> np.ndarray:
    """Per row: min(spin clock, boost) / boost for launches longer than LONG_S (the mean of the two spins), else 1."""
    spin = ms.spin_clock_mhz()
    return np.where(ms.measured_s > LONG_S, np.minimum(spin, boost_mhz) / boost_mhz, 1.0)


def scored_sets(names, kernels=("fa2_tc", "sdpa-flash")):
    """(set, gpu, kernel, spec, measurements, rows scored) for each set of ``names`` ("committed": the grids'
    datasets; "offgridN": the off-grid sets) on the H100 and the H200: the rows held out from fitting for fa2_tc's
    committed H100 set, every row (None) elsewhere."""
    m = ROOT / "examples" / "measurements"
    for name in names:
        for gpu in ("h100", "h200"):
            spec = api.load_gpu(gpu)
            for kernel in kernels:
                suffix = "" if name == "committed" else f".{name}"
                (ms,) = dataset.load([m / gpu / f"{kernel}{suffix}.csv"])
                held = (validate.split_mask(ms, "test")
                        if (name, gpu, kernel) == ("committed", "h100", "fa2_tc") else None)
                yield name, gpu, kernel, spec, ms, held


def score(ms, pred, held_out) -> dict:
    """Held-out Spearman over tiles and MAPE; over every problem, how often the pick is the fastest and within 5%."""
    groups = ms.problems()
    keep = np.flatnonzero(held_out)
    sp = validate.grouped_spearman([groups[i] for i in keep], pred[keep], ms.measured_s[keep])[0]
    hits, slow = validate.best_picks(groups, pred, ms.measured_s)
    return {"spearman": sp, "mape": float(np.mean(np.abs(pred[keep] / ms.measured_s[keep] - 1)) * 100),
            "best": hits / len(slow), "within_5": float(np.mean(slow <= 0.05)), "bad_picks": int(np.sum(slow > 0.05))}


def set_score(ms, pred, held_out=None) -> dict:
    """A scored_sets entry's scores: fa2_tc, ``score`` (``held_out``: None for every row); a library kernel, its MAPE
    over every row."""
    if ms.kernel == "fa2_tc":
        return score(ms, pred, np.ones(len(ms), bool) if held_out is None else held_out)
    return {"mape": float(np.mean(np.abs(pred / ms.measured_s - 1)) * 100)}


def with_tail(cal, share: float):
    """``cal`` with fa2_tc's age-ordered tail (the FIT_PARAM ``age_tail``) at ``share``: its other costs as they are."""
    fit = cal.path_fits["fa2_tc"]
    return dataclasses.replace(cal, path_fits={**cal.path_fits,
                                               "fa2_tc": {**fit, "costs": {**fit["costs"], "age_tail": share}}})


def without_tail(cal):
    return with_tail(cal, 0.0)


def compute(gpu: str = "h100") -> dict:
    """Scores of the shipped predictions, of the same without the age-ordered tail (which the uneven oracle stood in
    for before it was modelled: the oracles correct these), and of each oracle's correction."""
    (ms,) = dataset.load([data(gpu)])
    spec = api.load_gpu(gpu)
    cal = calibration.resolve(spec)
    shipped = validate.predict_set(ms, spec, cal)[0]
    pred = validate.predict_set(ms, spec, without_tail(cal))[0]
    held_out = validate.split_mask(ms, "test" if gpu == "h100" else "all")     # the H200 has nothing fitted
    uneven = uneven_factor(ms, unevenness(), spec.sm_count)
    clock = clock_factor(ms, spec.clock_hz / 1e6)
    variants = {"as shipped": shipped, "shipped+clock": shipped / clock, "without tail": pred,
                "uneven": pred * uneven, "clock": pred / clock, "both": pred * uneven / clock}
    return {name: score(ms, p, held_out) for name, p in variants.items()}


def main(gpu: str = "h100"):
    rows = "held-out" if gpu == "h100" else "every row's"
    print(f"fa2_tc, {gpu.upper()}: {rows} Spearman over tiles and MAPE; the pick over every problem")
    for name, s in compute(gpu).items():
        print(f"  {name:13s} Spearman {s['spearman']:.4f}  MAPE {s['mape']:.2f}%  pick fastest {s['best'] * 100:.1f}%"
              f"  within 5% {s['within_5'] * 100:.1f}% ({s['bad_picks']} problems beyond)")


if __name__ == "__main__":
    main(*sys.argv[1:2])
