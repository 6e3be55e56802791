"""How repeatable is the ground truth? fa2_tc's whole H100 grid was timed twice, back to back, with each run's SM
clock measured (examples/measurements/h100/fa2_tc.csv and fa2_tc.repeat.csv; `research/scripts/gpu_run.sh clocked-tc`, RUN=2
for the second). This compares the two runs row by row and scores the second run as if it were a model of the first:
its timing differences, its Spearman rank correlation over tiles and its tile advice, computed exactly as `perfmodel
validate` and examples/tile_advice.py score the model. No model can be expected to rank tiles better against one run
than the other run does. The model (fitted on the first run's training split only) is scored against both runs'
held-out rows beside it. The same comparison of the two earlier runs, timed hours apart without the clock measured
(fa2_tc.unclocked.csv and fa2_tc.unclocked-repeat.csv, the ground truth until the clocked runs replaced it), is
recorded under "unclocked". The two SDPA kernels (PyTorch's flash and cuDNN backends) were timed twice the same way on
the H100 and the H200 (`research/scripts/gpu_run.sh sdpa-fresh`, once into sdpa-*.csv, again into sdpa-*.repeat.csv); under
"sdpa" their runs are compared row by row, with the model (nothing fitted to their timings) scored on both and the
first run compared with the earlier, unclocked one (sdpa-*.unclocked.csv).
Writes research/data/benchmarks/repeatability_fa2_tc.json. Run from the repository root:
python research/scripts/repeatability.py"""
import json
from pathlib import Path

import numpy as np

from perfmodel.evaluation import dataset, validate
from perfmodel.evaluation.fit import in_training_split

ROOT = Path(__file__).resolve().parents[2]
M, R = "examples/measurements/h100/", "research/data/h100/"      # the committed ground truth; its repeats
FIRST, SECOND = M + "fa2_tc.csv", R + "fa2_tc.repeat.csv"
UNCLOCKED = R + "fa2_tc.unclocked.csv", R + "fa2_tc.unclocked-repeat.csv"
OUT = "research/data/benchmarks/repeatability_fa2_tc.json"
GROUP = ("B", "H", "N", "d", "dtype", "causal")
ROW = GROUP + ("Br", "Bc", "threads")


def by_config(ev, key=ROW):
    return {tuple(str(ev.params[k][i]) for k in key): i for i in range(ev.n)}


def tile_advice(ranked, truth, groups):
    """Share of problems whose fastest by ``ranked`` is the fastest by ``truth``; share and worst slowdown of the
    pick against the fastest (validate.best_picks, as examples/tile_advice.py scores the model)."""
    hits, slow = validate.best_picks(groups, ranked, truth)
    return {"problems": len(slow), "share_best": float(hits / len(slow)),
            "within_5_percent": float((slow <= 0.05).mean()), "worst_slowdown": float(slow.max())}


def row_diff(a, b) -> dict:
    """b against a, row by row: median, mean and worst absolute difference and the mean signed one, in percent."""
    diff = b / a - 1
    return {"median_abs_pct": float(np.median(np.abs(diff)) * 100), "mean_abs_pct": float(np.abs(diff).mean() * 100),
            "worst_abs_pct": float(np.abs(diff).max() * 100), "bias_pct": float(diff.mean() * 100)}


def external_pair(gpu: str, kernel: str) -> dict:
    """A library kernel's two clocked runs and its earlier unclocked one: row differences and the model's MAPE."""
    d = f"{gpu}/{kernel}"
    evs = {name: validate.evaluate(dataset.load([str(ROOT / f"{folder}/{d}{suffix}.csv")]), split="all")[0]
           for name, folder, suffix in (("first", "examples/measurements", ""), ("second", "research/data", ".repeat"),
                                        ("unclocked", "research/data", ".unclocked"))}
    idx = {name: by_config(ev, GROUP) for name, ev in evs.items()}      # one row a problem: the preset's tiles
    assert all(len(i) == ev.n for i, ev in zip(idx.values(), evs.values())), f"{d}: a problem timed twice"
    common = sorted(set.intersection(*(set(i) for i in idx.values())))
    meas = {name: np.array([evs[name].measured_s[idx[name][k]] for k in common]) for name in evs}
    model = np.array([evs["first"].predicted_s[idx["first"][k]] for k in common])
    return {"rows_in_all": len(common), "second_over_first": row_diff(meas["first"], meas["second"]),
            "first_over_unclocked": row_diff(meas["unclocked"], meas["first"]),
            "model_mape": {name: float(np.abs(model / meas[name] - 1).mean() * 100) for name in meas}}


def compute(first_path=FIRST, second_path=SECOND, unclocked=True) -> dict:
    (first,), (second,) = dataset.load([str(ROOT / first_path)]), dataset.load([str(ROOT / second_path)])
    ev1, ev2 = validate.evaluate([first], split="all")[0], validate.evaluate([second], split="all")[0]
    i1, i2 = by_config(ev1), by_config(ev2)
    common = sorted(set(i1) & set(i2))
    a = np.array([ev1.measured_s[i1[k]] for k in common])
    b = np.array([ev2.measured_s[i2[k]] for k in common])
    model = np.array([ev1.predicted_s[i1[k]] for k in common])
    groups = [k[:len(GROUP)] for k in common]
    held = np.array([not in_training_split(first.rows[i1[k]]) for k in common])
    out = {
        "rows_in_both": len(common),
        "second_over_first": row_diff(a, b),
        # the second run as a "model" of the first: the ceiling of what any model can show against one run
        "second_run_as_model": {"spearman": validate.grouped_spearman(groups, b, a)[0],
                                "tile_advice": tile_advice(b, a, groups)},
        "model_held_out": {},
        "command": "python research/scripts/repeatability.py",
        "first": first_path, "second": second_path,
    }
    for name, truth in (("first", a), ("second", b)):
        g = [groups[i] for i in np.flatnonzero(held)]
        ape = np.abs(model / truth - 1)[held] * 100
        out["model_held_out"][name] = {
            "rows": int(held.sum()), "mape": float(ape.mean()), "worst": float(ape.max()),
            "spearman": validate.grouped_spearman(g, model[held], truth[held])[0],
            "tile_advice_all_rows": tile_advice(model, truth, groups)}
    if unclocked:
        out["unclocked"] = compute(*UNCLOCKED, unclocked=False)
        out["sdpa"] = {f"{gpu}/{k}": external_pair(gpu, k) for gpu in ("h100", "h200") for k in ("sdpa-flash", "sdpa-cudnn")}
    return out


def main():
    out = compute()
    (ROOT / OUT).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
