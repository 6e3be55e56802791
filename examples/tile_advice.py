"""How good is the model's tile advice for fa2_tc? For every measured problem (B, H, N, d, dtype, causal) with three
or more measured tile instances, compare the tile the model ranks fastest (among the measured ones, which is what
`perfmodel sweep --best` chooses from) with the measured fastest. Writes examples/benchmarks/tile_advice_fa2_tc.json.
Run from the repository root: python examples/tile_advice.py"""
import json

import numpy as np

from perfmodel.evaluation import dataset, validate

out = {}
for gpu in ("h100", "h200"):
    (ms,) = dataset.load([f"examples/measurements/{gpu}/fa2_tc.csv"])
    ev = validate.evaluate([ms], split="all")[0]
    P = ev.params
    groups = [tuple(str(P[k][i]) for k in ("B", "H", "N", "d", "dtype", "causal")) for i in range(ev.n)]
    hits, slow = validate.best_picks(groups, ev.predicted_s, ev.measured_s)
    out[gpu] = {"problems": len(slow), "predicted_best_is_measured_best": int(hits),
                "share": float(hits / len(slow)), "slowdown_of_predicted_best_median": float(np.median(slow)),
                "slowdown_of_predicted_best_mean": float(slow.mean()), "slowdown_of_predicted_best_worst": float(slow.max()),
                "within_5_percent": float((slow <= 0.05).mean())}
out["command"] = "python examples/tile_advice.py"
out["note"] = "every row scored (the H100 fit's training rows included); predicted with the shipped calibrations"
json.dump(out, open("examples/benchmarks/tile_advice_fa2_tc.json", "w"), indent=2)
print(json.dumps(out, indent=2))
