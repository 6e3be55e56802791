"""Predicted vs measured: per-row errors and the summary statistics ``perfmodel validate`` reports."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from perfmodel.errors import InputError
from perfmodel.evaluation.dataset import MeasurementSet, problem_keys
from perfmodel.evaluation.fit import training_mask
from perfmodel.hw import calibration as cal_mod, gpu as gpu_mod
from perfmodel.kernels import get as get_kernel
from perfmodel.model import engine, seed
from perfmodel.shape import AXES, AttentionShape


def average_ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    xs = x[order]
    i = 0
    while i < len(x):                     # ties get the mean of their ranks
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        if j > i:
            ranks[order[i:j + 1]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a, b) -> float:
    ra, rb = average_ranks(np.asarray(a, float)), average_ranks(np.asarray(b, float))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def tile_choices(groups):
    """The row indices (an array) of each problem in ``groups`` (one key per row) with >= 3 tile configurations: a
    choice of tiles to rank, in the order the problems first appear."""
    idx = defaultdict(list)
    for i, g in enumerate(groups):
        idx[g].append(i)
    return [np.array(ii) for ii in idx.values() if len(ii) >= 3]


def grouped_spearman(groups, pred, meas) -> tuple[float, int]:
    """Mean Spearman correlation over groups of >= 3 tile configurations sharing (B, H, N, d)."""
    vals, weights = [], []
    for ii in tile_choices(groups):
        s = spearman(pred[ii], meas[ii])
        if np.isfinite(s):
            vals.append(s)
            weights.append(len(ii))
    if not vals:
        return float("nan"), 0
    return float(np.average(vals, weights=weights)), len(vals)


def best_picks(groups, ranked, truth) -> tuple[int, np.ndarray]:
    """Tile advice over groups of >= 3 tile configurations sharing a problem: how many groups' fastest by
    ``ranked`` is their fastest by ``truth``, and each group's slowdown of that pick against its fastest."""
    return shortlist_picks(groups, ranked, truth, 1)[:2]


def shortlist_picks(groups, ranked, truth, k: int) -> tuple[int, np.ndarray, np.ndarray]:
    """The ``k`` fastest by ``ranked`` of each group of >= 3 tile configurations, timed and the faster kept: how
    many groups' short-lists hold their fastest by ``truth``, each group's slowdown of the short-list's fastest
    against its fastest, and each group's size (a short-list of k drawn at random holds the fastest with chance
    k / size)."""
    hits, slow, sizes = 0, [], []
    for ii in tile_choices(groups):
        short = ii[np.argsort(ranked[ii], kind="stable")[:k]]
        best = ii[np.argmin(truth[ii])]
        hits += int(best in short)
        slow.append(truth[short].min() / truth[best] - 1)
        sizes.append(len(ii))
    return hits, np.array(slow), np.array(sizes)


@dataclass(frozen=True)
class Evaluation:
    kernel: str
    gpu: str
    n: int
    params: dict            # column -> int array
    measured_s: np.ndarray
    predicted_s: np.ndarray
    seed_s: np.ndarray
    roofline_s: np.ndarray  # a plain roofline: max(FLOPs / datasheet compute peak of the dtype, DRAM bytes / bandwidth)
    files: list
    split: str = "test"
    fitted: bool = False
    constants: str = ""

    @property
    def ape(self):
        return np.abs(self.predicted_s / self.measured_s - 1) * 100

    @property
    def seed_ape(self):
        return np.abs(self.seed_s / self.measured_s - 1) * 100

    @property
    def roofline_ape(self):
        return np.abs(self.roofline_s / self.measured_s - 1) * 100

    @property
    def problems(self) -> list:
        """Each row's problem (dataset.problem_keys)."""
        return problem_keys(self.params, self.params["dtype"], self.params["causal"], self.params["mode"])

    def summary(self) -> dict:
        groups = self.problems
        sp, ng = grouped_spearman(groups, self.predicted_s, self.measured_s)
        ssp, _ = grouped_spearman(groups, self.seed_s, self.measured_s)
        return {
            "kernel": self.kernel, "gpu": self.gpu, "n": self.n, "split": self.split,
            "path_costs_fitted": self.fitted, "constants": self.constants,
            "mape": float(self.ape.mean()), "median_ape": float(np.median(self.ape)), "max_ape": float(self.ape.max()),
            "spearman": sp, "spearman_groups": ng,
            "seed_mape": float(self.seed_ape.mean()), "seed_median_ape": float(np.median(self.seed_ape)),
            "seed_max_ape": float(self.seed_ape.max()), "seed_spearman": ssp,
            "roofline_mape": float(self.roofline_ape.mean()),
            "roofline_median_ape": float(np.median(self.roofline_ape)),
            "roofline_max_ape": float(self.roofline_ape.max()),
            "roofline_spearman": grouped_spearman(groups, self.roofline_s, self.measured_s)[0],
            "files": sorted(set(self.files)),
        }


SPLITS = ("test", "train", "all")


def split_mask(ms: MeasurementSet, split: str) -> np.ndarray:
    if split not in SPLITS:
        raise InputError(f"unknown split '{split}'; known: {', '.join(SPLITS)}")
    if split == "all":
        return np.ones(len(ms), bool)
    train = training_mask(ms.rows)
    return train if split == "train" else ~train


def predict_set(ms: MeasurementSet, spec, cal) -> tuple[np.ndarray, tuple]:
    """Our prediction of every row of a measurement set (its measured registers where recorded); and the
    notes the predictions carry."""
    pred, _, notes = _predict_rows(ms, spec, cal)
    return pred, notes


def row_predictions(ms: MeasurementSet, spec, cal):
    """(row mask, engine.Prediction of those rows) for each (dtype, causal, mode) of a measurement set (its measured
    registers where recorded)."""
    kernel = get_kernel(ms.kernel)
    for group in ms.shapes():
        m = ms.group(*group)
        shape = ms.shape(m)
        lack = kernel.lacks(shape)
        if lack:
            row = ms.rows[np.flatnonzero(m)[0]]
            raise InputError(f"{ms.kernel} rows of {row['_file']}: kernel {ms.kernel} {lack}")
        # a library picks its own tiles (a row's columns record the preset of the day it was measured)
        tiles = (kernel.library_tiles(shape, spec) if kernel.external
                 else kernel.Tiles.from_columns(ms.tile_columns(m)))
        unfit = np.flatnonzero(~np.broadcast_to(kernel.fits(spec, shape, tiles), np.shape(shape.Nq)))
        if unfit.size:
            i = unfit[0]
            one = lambda x: np.asarray(x).reshape(-1)[i].item() if np.ndim(x) else x
            reason = kernel.why_not(spec, AttentionShape.from_columns({f: one(getattr(shape, f)) for f in AXES},
                                                                      shape.dtype, shape.causal, shape.mode),
                                    type(tiles)(**{f: one(getattr(tiles, f)) for f in tiles.fields()}))
            row = ms.rows[np.flatnonzero(m)[i]]
            raise InputError(f"{unfit.size} of {len(ms)} {ms.kernel} rows cannot run on {spec.name} (first: "
                             f"{row['_file']}, line {row['_line']}: {reason})")
        yield m, engine.evaluate(spec, kernel, shape, tiles, cal, regs=ms.regs(m))


def _predict_rows(ms: MeasurementSet, spec, cal) -> tuple[np.ndarray, np.ndarray, tuple]:
    """predict_set's predictions, the plain roofline time of every row, and the notes."""
    out = np.empty(len(ms))
    roof = np.empty(len(ms))
    notes = ()
    for m, p in row_predictions(ms, spec, cal):
        out[m] = np.asarray(p.time_s, float)
        roof[m] = np.asarray(p.roofline_time_s, float)
        notes = notes + tuple(n for n in p.notes if n not in notes)
    return out, roof, notes


def evaluate(sets: list[MeasurementSet], gpu_name: str | None = None, cal_path: str | None = None,
             use_builtin_calibration: bool = True, split: str = "test", use_fits: bool = True) -> list[Evaluation]:
    """Predict every row with the spec matching its GPU (or ``gpu_name``), one Evaluation per (kernel, GPU).

    ``split``: "test" leaves out the training split that path costs may be fitted on (perfmodel.evaluation.fit),
    so the figures are on held-out data; "train" keeps only those rows; "all" keeps every row."""
    out = []
    for ms in sets:
        ms = ms.select(split_mask(ms, split))
        if not len(ms):
            continue
        spec = gpu_mod.resolve(gpu_name) if gpu_name else gpu_mod.match_device_name(ms.gpu_name)
        if spec is None:
            raise InputError(f"no built-in spec matches the measured GPU '{ms.gpu_name}'; pass --gpu")
        cal = cal_mod.resolve(spec, cal_path, use_builtin=use_builtin_calibration, use_fits=use_fits)
        pred, roof, _ = _predict_rows(ms, spec, cal)
        bad = int((~np.isfinite(pred)).sum())
        if bad:
            raise InputError(f"{bad} of {len(ms)} {ms.kernel} rows cannot run on {spec.name} (they do not fit it); "
                             f"predict them with the GPU they were measured on")
        P = {k: ms.cols[k] for k in AXES + ("Br", "Bc", "threads", "pad")}
        P.update(dtype=ms.dtype, causal=ms.causal, mode=ms.mode, N=ms.cols["Nq"])
        # the seed's baseline knows the plain forward only
        plain = (ms.cols["Nq"] == ms.cols["Nk"]) & (ms.cols["H"] == ms.cols["Hkv"]) & (ms.mode == "fwd")
        sd = np.where(plain, np.asarray(seed.predict(spec, P["B"], P["H"], P["N"], P["d"], P["Br"], P["Bc"]).time_s,
                                        float), np.nan)
        key = get_kernel(ms.kernel).fit_key
        out.append(Evaluation(ms.kernel, spec.key, len(ms), P, ms.measured_s, pred, sd, roof, list(ms.files), split,
                              cal.fitted(key), cal.describe(key, ms.kernel)))
    if not out:
        raise InputError(f"no rows in the '{split}' split")
    return out
