"""The age-ordered tail, fitted and scored (analysis only: no shipped calibration holds it; docs/known-gaps.md).

    python3 scripts/fit_age_tail.py

fa2_tc's path costs refitted on the H100's declared training split, from the shipped calibration as `perfmodel fit`
starts, with the age-ordered tail's share (``age_tail``: timing, Counts.age_split_warps) fitted beside them, and
carried to the H200 as `perfmodel fit --from` carries them. Scored against the shipped calibrations: fa2_tc on the
H100's held-out rows and on every H200 row (Spearman over tiles, MAPE; over every problem, how often the pick is
within 5% of the fastest), SDPA flash on every row (nothing fitted to it; its kernel keeps an even split), and both on
the off-grid sets 1-4, which no fit has seen. The sealed fifth off-grid set is not read. Run from the repository root.
"""
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfmodel import api  # noqa: E402
from perfmodel.evaluation import dataset, validate  # noqa: E402
from perfmodel.evaluation.fit import fit_path  # noqa: E402
from perfmodel.hw import calibration  # noqa: E402

import ranking_oracles  # noqa: E402

M = ROOT / "examples" / "measurements"
OFFGRID = ("offgrid", "offgrid2", "offgrid3", "offgrid4")


def with_fit(cal, entry):
    return dataclasses.replace(cal, path_fits={**cal.path_fits, "fa2_tc": entry})


def fitted() -> dict:
    """gpu -> (shipped calibration, calibration with the tail fitted on the H100's training split)."""
    h100, h200 = api.load_gpu("h100"), api.load_gpu("h200")
    cal, cal200 = calibration.resolve(h100), calibration.resolve(h200)
    (ms,) = dataset.load([M / "h100" / "fa2_tc.csv"])
    start = dataclasses.replace(cal, path_fits={k: v for k, v in cal.path_fits.items() if k != "fa2_tc"})
    entry = fit_path(h100, start, ms, extra_features=("age_tail",))
    return {"h100": (cal, with_fit(cal, entry)), "h200": (cal200, with_fit(cal200, entry))}


def score(ms, pred, held_out=None) -> dict:
    """fa2_tc: ranking_oracles.score (Spearman over tiles and MAPE on ``held_out``, default every row; the picks
    over every problem); a library kernel: MAPE over every row."""
    if ms.kernel == "fa2_tc":
        return ranking_oracles.score(ms, pred, np.ones(len(ms), bool) if held_out is None else held_out)
    return {"mape": float(np.mean(np.abs(pred / ms.measured_s - 1)) * 100)}


def compute() -> dict:
    """(set, gpu, kernel) -> (shipped, with the tail) scores."""
    cals = fitted()
    out = {}
    for name in ("committed", *OFFGRID):
        for gpu in ("h100", "h200"):
            spec = api.load_gpu(gpu)
            for kernel in ("fa2_tc", "sdpa-flash"):
                suffix = "" if name == "committed" else f".{name}"
                (ms,) = dataset.load([M / gpu / f"{kernel}{suffix}.csv"])
                held = (validate.split_mask(ms, "test")
                        if (name, gpu, kernel) == ("committed", "h100", "fa2_tc") else None)
                out[(name, gpu, kernel)] = tuple(score(ms, validate.predict_set(ms, spec, c)[0], held)
                                                 for c in cals[gpu])
    out["age_tail"] = cals["h100"][1].path_costs("fa2_tc")["age_tail"]
    return out


def main():
    res = compute()
    print(f"age_tail fitted on the H100's training split: {res.pop('age_tail'):.4f}")
    for (name, gpu, kernel), (a, b) in res.items():
        parts = [f"MAPE {a['mape']:.2f} -> {b['mape']:.2f}%"]
        if "spearman" in a:
            parts += [f"Spearman {a['spearman']:.3f} -> {b['spearman']:.3f}",
                      f"within 5% {a['within_5'] * 100:.1f} -> {b['within_5'] * 100:.1f}%"]
        print(f"{name:9s} {gpu} {kernel:10s} " + "  ".join(parts))


if __name__ == "__main__":
    main()
