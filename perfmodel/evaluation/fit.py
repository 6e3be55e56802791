"""Fitting a kernel's latency-path costs to measured timings, on a declared training split only.

The microbenchmarks of ``perfmodel probe`` price the loop forms they mirror (dot, reduction and exp steps,
conflict replays, barriers, round trips). Where a kernel's phases interact in ways no microbenchmark covers,
its path costs may be fitted here instead — on the rows of the *training split* and nowhere else:

    a row is in the training split  <=>  crc32("kernel,B,H,N,d,Br,Bc,threads,pad") % 4 == 0     (25%)

``perfmodel validate`` leaves those rows out by default, so every accuracy figure is on held-out data.
The fit minimises the squared log error of the whole model (throughput side unchanged, from the probe) by
Levenberg-Marquardt over log-costs, so costs stay positive. It is deterministic: the command a calibration records
reproduces its costs (a test reruns each). Features that grow alike along a kernel's path (fa1's exp, gmem, sync
and outer steps all scale with the K/V tiles) are nearly collinear: the fit determines their sum on a path, not
each cost, so individual fitted costs are not to be read as microarchitectural figures. A kernel may also fit
its own latency/throughput p-norm exponent ("overlap", hw.calibration.FIT_PARAMS), how it falls with the rows a
scheduler holds ("overlap_rows") and the rate of a warp's own work on its path ("own_path"); a parameter without a
value starts at hw.calibration.FIT_START.
"""

from __future__ import annotations

import dataclasses
import datetime
import zlib

import numpy as np

from perfmodel.errors import InputError
from perfmodel.evaluation.dataset import KEY, MeasurementSet
from perfmodel.hw.calibration import FIT_START, Calibration
from perfmodel.hw.gpu import GPUSpec

SPLIT_RULE = 'crc32("kernel,B,H,N,d,Br,Bc,threads,pad") % 4 == 0'


def in_training_split(row: dict) -> bool:
    key = ",".join(str(row[k]).strip() for k in KEY)
    return zlib.crc32(key.encode()) % 4 == 0


def _predict(gpu, cal, ms: MeasurementSet, costs):
    from perfmodel.evaluation.validate import predict_set

    fits = dict(cal.path_fits)
    fits[ms.kernel] = {"costs": costs}
    return predict_set(ms, gpu, dataclasses.replace(cal, path_fits=fits))[0]


def fit_path(gpu: GPUSpec, cal: Calibration, ms: MeasurementSet, iters: int = 60) -> dict:
    """Fit the kernel's path costs on the training rows of ``ms``. Returns the path_fits entry."""
    from perfmodel.kernels import get

    kernel = get(ms.kernel)
    if kernel.external:
        raise InputError(f"{ms.kernel} is a library's kernel: nothing is fitted to its timings (it is predicted "
                         f"with {kernel.fit_key}'s path costs and the probe's constants)")
    features = kernel.fit_features
    train = ms.select(np.array([in_training_split(r) for r in ms.rows], bool))
    if len(train) < 3 * len(features):
        raise InputError(f"only {len(train)} training rows for {ms.kernel}; a fit of {len(features)} costs "
                         f"needs at least {3 * len(features)}")
    meas = train.measured_s
    base = cal.path_costs(ms.kernel)
    theta = np.log(np.array([base[f] if base[f] > 0 else FIT_START.get(f, 1e-3) for f in features]))

    def resid(th):
        costs = dict(zip(features, np.exp(np.clip(th, -20, 20)).tolist()))
        # a trial step far out (a p near zero) may overflow: its residuals are not finite and the step is rejected
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return np.log(_predict(gpu, cal, train, costs) / meas)
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
    costs = {f: (float(v) if v > 1e-6 else 0.0) for f, v in zip(features, np.exp(theta))}
    ape = np.abs(np.exp(r) - 1) * 100
    return {"costs": costs,
            "training": {"rule": SPLIT_RULE, "rows": len(train), "mape_on_training_rows": float(ape.mean()),
                         "features_fitted": list(features),
                         "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}}
