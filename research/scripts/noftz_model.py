"""The model against fa2_tc with SDPA flash's exponential (research/scripts/fa2_tc_noftz.py's record).

    python3 research/scripts/noftz_model.py [RECORD.json]     (default research/data/h200/noftz/fa2_tc_noftz.json)

The no-ftz build is fa2_tc with three more FP32-class instructions a score (an FSETP and two predicated FMULs
around each MUFU.EX2), the surplus SDPA flash's softmax carries beside fa2_tc's. It is predicted as fa2_tc with
``elem_fp32`` = 6 in place of 3, nothing else changed and nothing fitted to it. Prints, by head dim and tile, the
model's error on each build and on SDPA flash where it ran, and the surplus (no-ftz less measured build) as measured
and as predicted."""

import functools
import json
import sys
from pathlib import Path

import numpy as np

from perfmodel import api
from perfmodel.kernels import fa2_tc

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "research" / "data" / "h200" / "noftz" / "fa2_tc_noftz.json"
SURPLUS = 3          # FP32-class instructions a score the no-ftz exponential adds (FSETP, two FMULs)


def predictions(rows, dtype):
    """(fa2_tc, no-ftz build, SDPA flash or nan) predicted seconds per row."""
    base = fa2_tc.head_counts_fa2
    out = []
    for r in rows:
        kw = dict(B=r["B"], H=r["H"], N=r["N"], d=r["d"], dtype=dtype, causal=bool(r["causal"]))
        tile = dict(Br=r["Br"], Bc=r["Bc"], warps=r["warps"])
        tc = api.predict("h200", "fa2_tc", **kw, **tile).time_s
        fa2_tc.head_counts_fa2 = functools.partial(base, elem_fp32=3 + SURPLUS)
        try:
            noftz = api.predict("h200", "fa2_tc", **kw, **tile).time_s
        finally:
            fa2_tc.head_counts_fa2 = base
        flash = api.predict("h200", "sdpa-flash", **kw).time_s if "sdpa-flash_ms" in r else float("nan")
        out.append((tc, noftz, flash))
    return np.array(out)


def summary(rec):
    """(by tile: {(d, Br, Bc, warps): (rows, [MAPE of fa2_tc, no-ftz, SDPA flash or nan], surplus measured,
    surplus predicted)}, overall: {name: (rows, MAPE, median error, worst)}), errors and surpluses as fractions."""
    rows = rec["rows"]
    pred = predictions(rows, rec["dtype"])
    meas = np.array([[r["fa2_tc_ms"], r["fa2_tc_noftz_ms"], r.get("sdpa-flash_ms", np.nan)] for r in rows]) / 1e3
    err = pred / meas - 1
    tiles = [(r["d"], r["Br"], r["Bc"], r["warps"]) for r in rows]
    by_tile = {}
    for k in sorted(set(tiles)):
        m = np.array([t == k for t in tiles])
        mape = [float(np.mean(np.abs(err[m, i]))) if np.all(np.isfinite(err[m, i])) else float("nan") for i in range(3)]
        by_tile[k] = (int(m.sum()), mape, float(np.mean(meas[m, 1] / meas[m, 0] - 1)),
                      float(np.mean(pred[m, 1] / pred[m, 0] - 1)))
    overall = {}
    for i, name in enumerate(("fa2_tc", "no-ftz build", "SDPA flash")):
        ok = np.isfinite(err[:, i])
        e = err[ok, i]
        overall[name] = (int(ok.sum()), float(np.mean(np.abs(e))), float(np.median(e)), float(np.max(np.abs(e))))
    return by_tile, overall


def main(path=RECORD):
    by_tile, overall = summary(json.loads(Path(path).read_text()))
    pct = lambda x: "    — " if not np.isfinite(x) else f"{100 * x:5.1f}%"
    print("tile              rows  fa2_tc  no-ftz  flash    surplus measured / predicted (mean, share of fa2_tc)")
    for (d, br, bc, w), (n, mape, s_meas, s_pred) in by_tile.items():
        print(f"d{d:<4d}{br}x{bc}/{w}w{'':<{6 - len(str(br) + str(bc))}} {n:4d}  {'  '.join(pct(x) for x in mape)}    "
              f"{pct(s_meas)} / {pct(s_pred)}")
    for name, (n, mape, med, worst) in overall.items():
        print(f"{name:13s} {n:4d} rows  MAPE {pct(mape)}  median error {100 * med:+5.1f}%  worst {pct(worst)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
