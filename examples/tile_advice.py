"""How good is the model's tile advice for fa2_tc? For every measured problem (B, H, N, d, dtype, causal) with three
or more measured tile instances, compare the tile the model ranks fastest (among the measured ones, which is what
`perfmodel sweep --best` chooses from) with the measured fastest; and the short-list of the model's two fastest
(the pick and the runner-up `sweep --best` names), timed and the faster kept, beside the chance that two tiles
drawn at random hold the fastest; and, by the margin of the runner-up over the pick, how often the pick was the
fastest (perfmodel.evaluation.advice, whose shares are the H100's and which the off-grid sets 1-5 check). Writes
examples/benchmarks/tile_advice_fa2_tc.json.
Run from the repository root: python examples/tile_advice.py"""
import json
from pathlib import Path

import numpy as np

from perfmodel.evaluation import advice, dataset, validate

ROOT = Path(__file__).resolve().parents[1]


def every_row(path) -> validate.Evaluation:
    """One fa2_tc dataset, every row predicted with the shipped calibration."""
    (ms,) = dataset.load([path])
    return validate.evaluate([ms], split="all")[0]


def by_margin(evs) -> list:
    """advice.shares over every problem of these evaluations."""
    picks = [advice.pick_margins(ev.problems, ev.predicted_s, ev.measured_s) for ev in evs]
    return advice.shares(np.concatenate([m for m, _ in picks]), np.concatenate([h for _, h in picks]))


def compute() -> dict:
    out = {}
    meas = ROOT / "examples" / "measurements"
    grids = []                          # each GPU's committed grid, scored once here and pooled below
    for gpu in ("h100", "h200"):
        ev = every_row(meas / gpu / "fa2_tc.csv")
        grids.append(ev)
        groups = ev.problems
        hits, slow = validate.best_picks(groups, ev.predicted_s, ev.measured_s)
        out[gpu] = {"problems": len(slow), "predicted_best_is_measured_best": int(hits),
                    "share": float(hits / len(slow)), "slowdown_of_predicted_best_median": float(np.median(slow)),
                    "slowdown_of_predicted_best_mean": float(slow.mean()),
                    "slowdown_of_predicted_best_worst": float(slow.max()),
                    "within_5_percent": float((slow <= 0.05).mean())}
        hits2, slow2, sizes = validate.shortlist_picks(groups, ev.predicted_s, ev.measured_s, 2)
        out[gpu]["top_two"] = {
            "holds_measured_best": float(hits2 / len(slow2)), "random_pair_holds_best": float(np.mean(2 / sizes)),
            "slowdown_worst": float(slow2.max()), "within_5_percent": float((slow2 <= 0.05).mean()),
            "by_measured_tiles": {str(n): {"problems": int((sizes == n).sum()),
                                           "holds_measured_best": float(np.mean(slow2[sizes == n] == 0)),
                                           "slowdown_worst": float(slow2[sizes == n].max())}
                                  for n in np.unique(sizes)}}
        out[gpu]["pick_best_by_margin"] = by_margin([ev])
    # the off-grid sets no fit has seen, both GPUs pooled: 1-5, which the packaged table pools with the grids, and
    # the sixth, held out from it
    off = [every_row(meas / g / f"fa2_tc.offgrid{s}.csv") for g in ("h100", "h200") for s in ("", "2", "3", "4", "5")]
    out["offgrid_1_5_pick_best_by_margin"] = by_margin(off)
    out["offgrid6_pick_best_by_margin"] = by_margin([every_row(meas / g / "fa2_tc.offgrid6.csv")
                                                     for g in ("h100", "h200")])
    out["pooled_pick_best_by_margin"] = by_margin(grids + off)
    out["margin_edges"] = list(advice.MARGIN_EDGES)
    out["command"] = "python examples/tile_advice.py"
    out["note"] = ("every row scored (the H100 fit's training rows included; the H200 has nothing fitted to its "
                   "timings); predicted with the shipped calibrations")
    return out


def picks(result: dict) -> dict:
    """The packaged table `sweep --best` prints beside a pick's margin (perfmodel/evaluation/pick_best.json): the
    shares per margin bin of the grids and off-grid sets 1-5, pooled."""
    return {"kernels": {"fa2_tc": result["pooled_pick_best_by_margin"]}, "margin_edges": result["margin_edges"],
            "source": advice.SOURCE, "command": result["command"]}


if __name__ == "__main__":
    result = compute()
    (ROOT / "examples" / "benchmarks" / "tile_advice_fa2_tc.json").write_text(json.dumps(result, indent=2) + "\n")
    advice.PICKS.write_text(json.dumps(picks(result), indent=1) + "\n")
    print(json.dumps(result, indent=2))
