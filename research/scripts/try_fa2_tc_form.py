"""fa2_tc priced in a form not shipped, refitted: what it does to the scores.

    python3 research/scripts/try_fa2_tc_form.py FORM        FORM: compiled-order | read-code

compiled-order: the source runs the softmax while V's load is in flight; the compiled loop waits for V before the
softmax and issues the next K after it, so the softmax overlaps neither load (research/scripts/sass_phases.py, on the
committed listings). The model keeps the source's order (FA2TC.softmax_overlaps_load); this sets it False.
read-code: each instance's instructions as its compiled code has them (FA2TC.instructions_read; the CODE tables,
research/scripts/sass_code.py) instead of the overhead estimates.
Either way this refits every path cost on the H100's declared training split from the shipped calibration as
`perfmodel fit` starts (the age-ordered tail after, as shipped), carries the costs to the H200, and scores both
forms: fa2_tc on the H100's held-out rows and every H200 row (MAPE, Spearman over tiles, picks within 5% of the
fastest over every problem), SDPA flash on every row (its preset is unchanged; only the shared costs move), and both
on off-grid sets 1-5, which no fit has seen. The sealed sixth set is not read. Nothing here is shipped
(research/notes/known-gaps-log.md). Run from the repository root.
"""
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research" / "scripts"))

from perfmodel import api  # noqa: E402
from perfmodel.evaluation import dataset, validate  # noqa: E402
from perfmodel.evaluation.fit import fit_path  # noqa: E402
from perfmodel.hw import calibration  # noqa: E402
from perfmodel.kernels import get  # noqa: E402

import ranking_oracles  # noqa: E402

M = ROOT / "examples" / "measurements"
SETS = ("committed", "offgrid", "offgrid2", "offgrid3", "offgrid4", "offgrid5")
# form -> the FA2TC attribute it sets, and to what
SWITCHES = {"compiled-order": ("softmax_overlaps_load", False), "read-code": ("instructions_read", True)}


class form:
    """fa2_tc priced in ``name``'s form while inside the block; as shipped again after."""

    def __init__(self, name: str):
        self.attr, self.value = SWITCHES[name]

    def __enter__(self):
        self.kept = getattr(get("fa2_tc"), self.attr)
        setattr(get("fa2_tc"), self.attr, self.value)

    def __exit__(self, *exc):
        setattr(get("fa2_tc"), self.attr, self.kept)


def calibrations(name: str) -> dict:
    """gpu -> {"shipped" or name: calibration}; the refit on the H100's training split, carried to the H200."""
    h100, h200 = api.load_gpu("h100"), api.load_gpu("h200")
    cal, cal200 = calibration.resolve(h100), calibration.resolve(h200)
    (ms,) = dataset.load([M / "h100" / "fa2_tc.csv"])
    with form(name):
        refit = fit_path(h100, cal, ms)
    fits = lambda c: dataclasses.replace(c, path_fits={**c.path_fits, "fa2_tc": refit})
    return {"h100": {"shipped": cal, name: fits(cal)}, "h200": {"shipped": cal200, name: fits(cal200)}}


def compute(name: str) -> dict:
    """(set, gpu, kernel) -> {form: scores}; "costs" -> {form: the H100's fa2_tc path costs}."""
    cals = calibrations(name)
    out = {}
    for sname, gpu, kernel, spec, ms, held in ranking_oracles.scored_sets(SETS):
        score = ranking_oracles.set_score
        row = {"shipped": score(ms, validate.predict_set(ms, spec, cals[gpu]["shipped"])[0], held)}
        with form(name):
            row[name] = score(ms, validate.predict_set(ms, spec, cals[gpu][name])[0], held)
        out[(sname, gpu, kernel)] = row
    out["costs"] = {f: c.path_costs("fa2_tc") for f, c in cals["h100"].items()}
    return out


def main(name: str):
    res = compute(name)
    for f, costs in res.pop("costs").items():
        print(f"{f:15s} " + " ".join(f"{k}={v:.4g}" for k, v in costs.items()))
    print(f"each score: shipped -> {name}")
    for (sname, gpu, kernel), s in res.items():
        a, b = s["shipped"], s[name]
        parts = [f"MAPE {a['mape']:.2f} -> {b['mape']:.2f}%"]
        if "spearman" in a:
            parts += [f"Spearman {a['spearman']:.4f} -> {b['spearman']:.4f}",
                      f"within 5% {a['within_5'] * 100:.1f} -> {b['within_5'] * 100:.1f}%"]
        print(f"{sname:9s} {gpu} {kernel:10s} " + "  ".join(parts))


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SWITCHES:
        sys.exit(f"usage: python3 research/scripts/try_fa2_tc_form.py {{{' | '.join(SWITCHES)}}}")
    main(sys.argv[1])
