"""Fitting a kernel's latency-path costs to measured timings, on a declared training split only.

The microbenchmarks of ``perfmodel probe`` price the loop forms they mirror (dot, reduction and exp steps,
conflict replays, barriers, round trips). Where a kernel's phases interact in ways no microbenchmark covers,
its path costs may be fitted here instead — on the rows of the *training split* and nowhere else:

    a row is in the training split  <=>  crc32("kernel,B,H,N,d,Br,Bc,threads,pad") % 4 == 0     (25%)

``perfmodel validate`` leaves those rows out by default, so every accuracy figure is on held-out data.
The fit minimises the squared log error of the whole model (throughput side unchanged, from the probe) by
Levenberg-Marquardt over log-costs, so costs stay positive.
"""

from __future__ import annotations

import dataclasses
import datetime
import zlib

import numpy as np

from perfmodel import model
from perfmodel.calibration import Calibration
from perfmodel.gpu import GPUSpec

SPLIT_RULE = 'crc32("kernel,B,H,N,d,Br,Bc,threads,pad") % 4 == 0'
FIT_FEATURES = ("chain_dot", "chain_red", "chain_exp", "chain_outer", "chain_gmem", "chain_syncs")
KEY = ("kernel", "B", "H", "N", "d", "Br", "Bc", "threads", "pad")


def in_training_split(row: dict) -> bool:
    key = ",".join(str(row[k]) for k in KEY)
    return zlib.crc32(key.encode()) % 4 == 0


def _predict(gpu, cal, kernel, P, regs, costs):
    fits = dict(cal.path_fits)
    fits[kernel] = {"costs": costs}
    c2 = dataclasses.replace(cal, path_fits=fits)
    return np.asarray(model.predict_arrays(gpu, kernel, c2, P["B"], P["H"], P["N"], P["d"], P["Br"], P["Bc"],
                                           P["threads"], P["pad"], regs=regs).time_s, float)


def fit_path(gpu: GPUSpec, cal: Calibration, kernel: str, rows: list[dict], iters: int = 60) -> dict:
    """Fit ``kernel``'s path costs on the training rows among ``rows``. Returns the path_fits entry."""
    train = [r for r in rows if r["kernel"] == kernel and in_training_split(r)]
    if len(train) < 3 * len(FIT_FEATURES):
        raise ValueError(f"only {len(train)} training rows for {kernel}")
    P = {k: np.array([int(r[k]) for r in train]) for k in KEY[1:]}
    regs = np.array([int(r["regs_per_thread"]) for r in train])
    meas = np.array([float(r["median_ms"]) for r in train]) * 1e-3
    base = cal.path_costs(kernel)
    theta = np.log(np.array([max(base[f], 1e-3) for f in FIT_FEATURES]))

    def resid(th):
        costs = dict(zip(FIT_FEATURES, np.exp(np.clip(th, -20, 20)).tolist()))
        return np.log(_predict(gpu, cal, kernel, P, regs, costs) / meas)

    lam = 1e-2
    r = resid(theta)
    for _ in range(iters):
        J = np.empty((len(r), len(theta)))
        for j in range(len(theta)):
            t = theta.copy()
            t[j] += 1e-4
            J[:, j] = (resid(t) - r) / 1e-4
        A = J.T @ J
        g = J.T @ r
        step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-12), -g)
        r_new = resid(theta + step)
        if (r_new ** 2).sum() < (r ** 2).sum():
            theta, r, lam = theta + step, r_new, lam / 3
        else:
            lam *= 5
        if np.abs(step).max() < 1e-6:
            break
    # features the data cannot see (absent from this kernel's path) keep their start value; costs driven to
    # nothing are written as 0
    costs = {f: (float(v) if v > 1e-6 else 0.0) for f, v in zip(FIT_FEATURES, np.exp(theta))}
    ape = np.abs(np.exp(r) - 1) * 100
    return {"costs": costs,
            "training": {"rule": SPLIT_RULE, "rows": len(train), "mape_on_training_rows": float(ape.mean()),
                         "features_fitted": list(FIT_FEATURES),
                         "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}}
