"""Analysis only: how far fa2_tc's timing form can rank tiles on the H100 when its path costs are fitted for the
ranking, or on more than the training split (research/notes/known-gaps-log.md, Spearman over tiles). Nothing here is written to a
calibration.

    python3 research/scripts/fit_ceiling.py [RANKING_SHARE ...]

Fits the nine fa2_tc costs and scores each fit on the held-out rows, as validate does: on the declared training
split (what ships); on it with the log-error differences of every two rows of one problem carrying each
RANKING_SHARE (default 0.5) of the least squares' weight (perfmodel fit --ranking-share), which weighs the tiles'
ranking; and the same two on every row, held-out rows included (an oracle: no longer a held-out score; if even it
stays below the target, the form, not the fit, limits the ranking). Each fit starts where `perfmodel fit` does
(without the shipped fit), so the first reproduces the shipped costs. About twenty seconds a fit.
"""
import dataclasses
import sys
from pathlib import Path

import numpy as np

from perfmodel.evaluation import dataset, fit, validate
from perfmodel.hw import calibration
from perfmodel.hw import gpu as gpu_mod

ROOT = Path(__file__).resolve().parents[2]


def main(shares=(0.5,)):
    ms = dataset.load([str(ROOT / "examples" / "measurements" / "h100" / "fa2_tc.csv")])[0]
    spec = gpu_mod.match_device_name(ms.gpu_name)
    cal = calibration.resolve(spec)
    # every fit starts where `perfmodel fit` starts: from the costs without the shipped fa2_tc fit
    start = dataclasses.replace(cal, path_fits={k: v for k, v in cal.path_fits.items() if k != "fa2_tc"})
    test = ms.select(validate.split_mask(ms, "test"))
    problems = test.problems()
    every = np.ones(len(ms), bool)
    fits = [("training split (shipped)", None, 0.0)]
    fits += [(f"training split, ranking share {w:g}", None, w) for w in shares]
    fits += [("every row (oracle)", every, 0.0)]
    fits += [(f"every row, ranking share {w:g}", every, w) for w in shares]
    for label, mask, w in fits:
        entry = fit.fit_path(spec, start, ms, train=mask, ranking_share=w)
        fitted = dataclasses.replace(cal, path_fits={**cal.path_fits, "fa2_tc": {"costs": entry["costs"]}})
        pred, _ = validate.predict_set(test, spec, fitted)
        ape = np.abs(pred / test.measured_s - 1) * 100
        sp, groups = validate.grouped_spearman(problems, pred, test.measured_s)
        print(f"{label:34s} held-out rows {len(test)}: MAPE {ape.mean():.2f}%, worst {ape.max():.1f}%, "
              f"Spearman over tiles {sp:.3f} ({groups} problems)")


if __name__ == "__main__":
    main(tuple(float(a) for a in sys.argv[1:]) or (0.5,))
