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
from perfmodel.evaluation.dataset import MeasurementSet, split_keys
from perfmodel.hw.calibration import FIT_START, Calibration
from perfmodel.hw.gpu import GPUSpec
from perfmodel.shape import AXES

# the rule a calibration records for its training split; rows of grouped heads, Nq != Nk or another mode hash
# "kernel,B,H,Hkv,Nq,Nk,d,Br,Bc,threads,pad,mode" under it (dataset.split_key)
SPLIT_RULE = 'crc32("kernel,B,H,N,d,Br,Bc,threads,pad") % 4 == 0'


def in_training_split(row: dict) -> bool:
    return bool(training_mask([row])[0])


def training_mask(rows) -> np.ndarray:
    """Which of ``rows`` lie in the training split (in_training_split), as a bool array."""
    return np.array([zlib.crc32(k.encode()) % 4 == 0 for k in split_keys(rows)], bool)


def _predict(gpu, cal, ms: MeasurementSet, costs):
    from perfmodel.evaluation.validate import predict_set

    from perfmodel.kernels import get

    fits = dict(cal.path_fits)
    fits[get(ms.kernel).fit_key_for(ms.mode[0] if len(ms) else "fwd")] = {"costs": costs}
    return predict_set(ms, gpu, dataclasses.replace(cal, path_fits=fits))[0]


# the training rows a fit's least squares take at most: far more than any measured campaign's (a few hundred a
# kernel), few enough that a fit on a million-row file takes seconds (docs/cli.md, "Size limits")
MAX_FIT_ROWS = 10_000
SAMPLE_RULE = (f"whole problems in the order of crc32 of 'B,H,Hkv,Nq,Nk,d,dtype,causal,mode', up to "
               f"{MAX_FIT_ROWS} rows")


def fitted_rows(train: MeasurementSet) -> MeasurementSet:
    """The rows a fit's least squares take: every training row up to MAX_FIT_ROWS; beyond, the rows of whole
    problems (so tiles are still ranked against each other) by SAMPLE_RULE, which does not depend on the files'
    order."""
    if len(train) <= MAX_FIT_ROWS:
        return train
    cols = [train.cols[a].tolist() for a in AXES] + [train.dtype.tolist(), train.causal.tolist(), train.mode.tolist()]
    crc = np.array([zlib.crc32(",".join(map(str, p)).encode()) for p in zip(*cols)])
    _, problem, rows = np.unique(crc, return_inverse=True, return_counts=True)
    taken = np.cumsum(rows) <= MAX_FIT_ROWS
    taken[0] = True
    return train.select(taken[problem])


def problem_pairs(ms: MeasurementSet) -> np.ndarray:
    """(i, j) index pairs, i < j, of the rows of ``ms`` that share a problem (MeasurementSet.problems)."""
    groups = {}
    for i, key in enumerate(ms.problems()):
        groups.setdefault(key, []).append(i)
    pairs = [(a, b) for g in groups.values() for x, a in enumerate(g) for b in g[x + 1:]]
    return np.array(pairs, dtype=int).reshape(-1, 2)


def _levenberg_marquardt(resid, theta, iters: int):
    """(theta, residuals) minimising the sum of squared ``resid(theta)`` by damped Gauss-Newton steps."""
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
    return theta, r


def fit_path(gpu: GPUSpec, cal: Calibration, ms: MeasurementSet, iters: int = 60, train=None,
             ranking_share: float = 0.0, extra_features: tuple = (), hold: bool = False) -> dict:
    """Fit the kernel's path costs on the training rows of ``ms``. Returns the path_fits entry.

    The least squares take each fitted row's log error. ``ranking_share`` > 0: they also take the difference of
    the log errors of every two fitted rows of one problem (the error in the ratio of two tiles' times, which
    ranks the tiles), weighted so that these terms carry that share of the total weight. ``train``: a mask of the
    rows to fit instead of the declared training split (analysis only: research/scripts/fit_ceiling.py fits every row to
    bound what the model's form can reach). ``extra_features``: FIT_PARAMS fitted beside the kernel's own
    (Kernel.fit_features), for a form no shipped fit holds. The kernel's ``fit_after`` are fitted next, alone, on
    the same rows, with the first fit's costs held: a term that only some launches pay, fitted after the costs
    that every launch pays, moves no launch outside it. Where ``extra_features`` names one, the first fit fits it.
    ``hold``: fit only the ``fit_after``, the calibration's costs of the kernel's other features held (``perfmodel
    fit --after-only``: a calibration's recorded first fit stays as it is). Of more than MAX_FIT_ROWS training
    rows, the least squares take whole problems up to that many (fitted_rows, recorded as rows_fitted); the
    recorded percent error is over every training row."""
    if not 0 <= ranking_share < 1:
        raise InputError(f"the ranking share is a fraction in [0, 1), not {ranking_share}")
    from perfmodel.kernels import get

    kernel = get(ms.kernel)
    if kernel.external:
        raise InputError(f"{ms.kernel} is a library's kernel: nothing is fitted to its timings (it is predicted "
                         f"with {kernel.fit_key}'s path costs and the probe's constants)")
    features = tuple(kernel.fit_features) + tuple(f for f in extra_features if f not in kernel.fit_features)
    # what a kernel fits after its path costs is a forward's (fa2_tc's age-ordered tail): a backward's fit has none
    after = tuple(f for f in kernel.fit_after if f not in features) if set(ms.mode.tolist()) <= {"fwd"} else ()
    if hold and not after:
        raise InputError(f"{ms.kernel} fits nothing after its path costs (Kernel.fit_after): nothing to fit with "
                         f"them held")
    chosen = train is not None
    train = ms.select(np.asarray(train, bool) if chosen else training_mask(ms.rows))
    if len(train) < 3 * len(features):
        raise InputError(f"only {len(train)} training rows for {ms.kernel}; a fit of {len(features)} costs "
                         f"needs at least {3 * len(features)}")
    modes = sorted(set(ms.mode.tolist()))
    if len(modes) != 1:
        raise InputError(f"rows of several modes ({', '.join(modes)}): fit one pass at a time (--mode)")
    base = cal.path_costs(kernel.fit_key_for(modes[0]))
    start = lambda names: np.log(np.array([base[f] if base[f] > 0 else FIT_START.get(f, 1e-3) for f in names]))
    rows = fitted_rows(train)               # the rows the least squares take: at most MAX_FIT_ROWS

    pairs = problem_pairs(rows) if ranking_share > 0 else np.zeros((0, 2), int)
    if ranking_share > 0 and not len(pairs):
        raise InputError(f"no two training rows of {ms.kernel} share a problem: nothing to rank")
    # each row's term has weight 1; the pairs' together ranking_share of the whole
    pair_weight = ranking_share / (1 - ranking_share) * len(rows) / max(len(pairs), 1)

    def residuals(names, held: dict, rows=rows, pairs=pairs):
        """The least squares' residuals as a function of the log costs of ``names``, the costs ``held`` fixed."""
        def resid(th):
            costs = {**held, **dict(zip(names, np.exp(np.clip(th, -20, 20)).tolist()))}
            # a trial step far out (a p near zero) may overflow: its residuals are not finite and the step is
            # rejected
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                e = np.log(_predict(gpu, cal, rows, costs) / rows.measured_s)
            return np.concatenate([e, np.sqrt(pair_weight) * (e[pairs[:, 0]] - e[pairs[:, 1]])])
        return resid

    # features the data cannot see (absent from this kernel's path) keep their start value; costs driven to
    # nothing are written as 0
    written = lambda names, th: {f: (float(v) if v > 1e-6 else 0.0) for f, v in zip(names, np.exp(th))}

    def mape(r, names, held, th) -> float:
        """The percent error over every training row: the fit's own residuals ``r`` where it took them all."""
        if rows is not train:
            r = residuals(names, held, train, np.zeros((0, 2), int))(th)
        return float(np.mean(np.abs(np.exp(r[:len(train)]) - 1) * 100))
    # where the training rows were more than the fit takes, which it took
    sampled = {} if rows is train else {"rows_fitted": len(rows), "rows_fitted_rule": SAMPLE_RULE}
    if hold:
        first = {f: base[f] for f in features}
        costs, training = dict(first), {}
    else:
        theta, r = _levenberg_marquardt(residuals(features, {}), start(features), iters)
        first, costs = dict(zip(features, np.exp(theta).tolist())), written(features, theta)
        ranking = ({"ranking_share": ranking_share, "problem_pairs": len(pairs), "pair_weight": pair_weight}
                   if ranking_share > 0 else {})
        training = {"rule": "rows chosen by the caller" if chosen else SPLIT_RULE, "rows": len(train), **sampled,
                    **ranking, "mape_on_training_rows": mape(r, features, {}, theta),
                    "features_fitted": list(features)}
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if after:
        theta_after, r = _levenberg_marquardt(residuals(after, first), start(after), iters)
        costs.update(written(after, theta_after))
        training["fitted_after"] = {"features": list(after), **sampled,
                                    "mape_on_training_rows": mape(r, after, first, theta_after), "date": now}
    return {"costs": costs, "training": {**training, "date": now}}
