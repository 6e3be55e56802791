"""The age-ordered tail: what it does to the scores, shipped as fitted and in the form that was not shipped.

    python3 research/scripts/fit_age_tail.py

fa2_tc's age-ordered tail (``age_tail``: timing, Counts.age_split_warps) is shipped fitted after the path costs, on
the H100's declared training split with those costs held (`perfmodel fit ... --after-only`, Kernel.fit_after), and
carried to the H200. Three calibrations are scored per GPU: the shipped one without the tail (age_tail 0, its
other costs as they are), the shipped one, and the form first tried and not shipped: every path cost refitted with
the tail beside them (fit_path's ``extra_features``), from the shipped calibration as `perfmodel fit` starts.
fa2_tc on the H100's held-out rows and on every H200 row (Spearman over tiles, MAPE; over every problem, how often
the pick is within 5% of the fastest), SDPA flash on every row (nothing fitted to it; its kernel keeps an even
split), and both on the off-grid sets, which no fit has seen; the fifth judged shipping the tail, by the rule
research/notes/tensorcore.md stated before it was read. Run from the repository root.
"""
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from perfmodel import api  # noqa: E402
from perfmodel.evaluation import dataset, validate  # noqa: E402
from perfmodel.evaluation.fit import fit_path  # noqa: E402
from perfmodel.hw import calibration  # noqa: E402

import ranking_oracles  # noqa: E402

M = ROOT / "examples" / "measurements"
OFFGRID = ("offgrid", "offgrid2", "offgrid3", "offgrid4", "offgrid5")
FORMS = ("without tail", "shipped", "refit with tail")


def with_fit(cal, entry):
    return dataclasses.replace(cal, path_fits={**cal.path_fits, "fa2_tc": entry})


def calibrations() -> dict:
    """gpu -> {form: calibration} for FORMS; the refit is made on the H100's training split and carried."""
    h100, h200 = api.load_gpu("h100"), api.load_gpu("h200")
    cal, cal200 = calibration.resolve(h100), calibration.resolve(h200)
    (ms,) = dataset.load([M / "h100" / "fa2_tc.csv"])
    start = dataclasses.replace(cal, path_fits={k: v for k, v in cal.path_fits.items() if k != "fa2_tc"})
    refit = fit_path(h100, start, ms, extra_features=("age_tail",))
    return {gpu: dict(zip(FORMS, (ranking_oracles.without_tail(c), c, with_fit(c, refit))))
            for gpu, c in (("h100", cal), ("h200", cal200))}


def compute() -> dict:
    """(set, gpu, kernel) -> {form: scores}; "age_tail" -> {form: fa2_tc's age_tail on the H100}."""
    cals = calibrations()
    out = {}
    for name, gpu, kernel, spec, ms, held in ranking_oracles.scored_sets(("committed", *OFFGRID)):
        out[(name, gpu, kernel)] = {form: ranking_oracles.set_score(ms, validate.predict_set(ms, spec, c)[0], held)
                                    for form, c in cals[gpu].items()}
    out["age_tail"] = {form: c.path_costs("fa2_tc")["age_tail"] for form, c in cals["h100"].items()}
    return out


def main():
    res = compute()
    print("age_tail on the H100: " + ", ".join(f"{form} {v:.4f}" for form, v in res.pop("age_tail").items()))
    print("each score: " + " / ".join(FORMS))
    for (name, gpu, kernel), s in res.items():
        parts = ["MAPE " + " / ".join(f"{s[f]['mape']:.2f}" for f in FORMS) + "%"]
        if "spearman" in s["shipped"]:
            parts += ["Spearman " + " / ".join(f"{s[f]['spearman']:.3f}" for f in FORMS),
                      "within 5% " + " / ".join(f"{s[f]['within_5'] * 100:.1f}" for f in FORMS) + "%"]
        print(f"{name:9s} {gpu} {kernel:10s} " + "  ".join(parts))


if __name__ == "__main__":
    main()
