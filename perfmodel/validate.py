"""Predicted vs measured: per-row errors and the summary statistics ``perfmodel validate`` reports."""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfmodel import calibration as cal_mod, gpu as gpu_mod, model, seed_model
from perfmodel.errors import InputError

INT_COLUMNS = ["B", "H", "N", "d", "Br", "Bc", "threads", "pad"]
REQUIRED = INT_COLUMNS + ["kernel", "median_ms", "gpu_name"]


def read_measurements(paths, note=None) -> list[dict]:
    """Rows of measurement CSVs. Skip lists written beside them by ``measure`` (.skipped.csv) are passed over."""
    rows = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise InputError(f"measurement file not found: {p}")
        with p.open(newline="") as f:
            reader = csv.DictReader(line for line in f if not line.startswith("#"))
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
            if missing and "reason" in (reader.fieldnames or []):
                if note:
                    note(f"{p}: a list of skipped configurations, not measurements; passed over")
                continue
            if missing:
                raise InputError(f"{p}: not a measurement CSV (missing column '{missing[0]}')")
            for r in reader:
                r["_file"] = str(p)
                rows.append(r)
    if not rows:
        raise InputError("no measurement rows in the given files")
    return rows


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


def grouped_spearman(groups, pred, meas) -> tuple[float, int]:
    """Mean Spearman correlation over groups of >= 3 tile configurations sharing (B, H, N, d)."""
    idx = defaultdict(list)
    for i, g in enumerate(groups):
        idx[g].append(i)
    vals, weights = [], []
    for ii in idx.values():
        if len(ii) >= 3:
            s = spearman(pred[ii], meas[ii])
            if np.isfinite(s):
                vals.append(s)
                weights.append(len(ii))
    if not vals:
        return float("nan"), 0
    return float(np.average(vals, weights=weights)), len(vals)


@dataclass(frozen=True)
class Evaluation:
    kernel: str
    gpu: str
    n: int
    params: dict            # column -> int array
    measured_s: np.ndarray
    predicted_s: np.ndarray
    seed_s: np.ndarray
    files: list
    split: str = "test"
    fitted: bool = False

    @property
    def ape(self):
        return np.abs(self.predicted_s / self.measured_s - 1) * 100

    @property
    def seed_ape(self):
        return np.abs(self.seed_s / self.measured_s - 1) * 100

    def summary(self) -> dict:
        groups = list(zip(*(self.params[k] for k in ("B", "H", "N", "d"))))
        sp, ng = grouped_spearman(groups, self.predicted_s, self.measured_s)
        ssp, _ = grouped_spearman(groups, self.seed_s, self.measured_s)
        return {
            "kernel": self.kernel, "gpu": self.gpu, "n": self.n, "split": self.split,
            "path_costs_fitted": self.fitted,
            "mape": float(self.ape.mean()), "median_ape": float(np.median(self.ape)), "max_ape": float(self.ape.max()),
            "spearman": sp, "spearman_groups": ng,
            "seed_mape": float(self.seed_ape.mean()), "seed_median_ape": float(np.median(self.seed_ape)),
            "seed_max_ape": float(self.seed_ape.max()), "seed_spearman": ssp,
            "files": sorted(set(self.files)),
        }


SPLITS = ("test", "train", "all")


def evaluate(rows: list[dict], gpu_name: str | None = None, cal_path: str | None = None,
             use_builtin_calibration: bool = True, split: str = "test", use_fits: bool = True) -> list[Evaluation]:
    """Predict every row with the spec matching its GPU (or ``gpu_name``), grouped by (kernel, GPU).

    ``split``: "test" leaves out the training split that path costs may be fitted on (perfmodel.fit), so the
    figures are on held-out data; "train" keeps only those rows; "all" keeps every row."""
    from perfmodel.fit import in_training_split

    if split not in SPLITS:
        raise InputError(f"unknown split '{split}'; known: {', '.join(SPLITS)}")
    by = defaultdict(list)
    for r in rows:
        if split != "all" and in_training_split(r) != (split == "train"):
            continue
        by[(r["kernel"], r["gpu_name"])].append(r)
    if not by:
        raise InputError(f"no rows in the '{split}' split")
    out = []
    for (kernel, device), rs in sorted(by.items()):
        spec = gpu_mod.resolve(gpu_name) if gpu_name else gpu_mod.match_device_name(device)
        if spec is None:
            raise InputError(f"no built-in spec matches the measured GPU '{device}'; pass --gpu")
        cal = cal_mod.resolve(spec, cal_path, use_builtin=use_builtin_calibration, use_fits=use_fits)
        P = {k: np.array([int(r[k]) for r in rs]) for k in INT_COLUMNS}
        regs = np.array([int(r["regs_per_thread"]) if r.get("regs_per_thread") else 0 for r in rs])
        regs = np.where(regs > 0, regs, np.nan)
        meas = np.array([float(r["median_ms"]) for r in rs]) * 1e-3
        pred = model.predict_arrays(spec, kernel, cal, P["B"], P["H"], P["N"], P["d"], P["Br"], P["Bc"],
                                    P["threads"], P["pad"],
                                    regs=np.where(np.isnan(regs), model.default_regs(kernel), regs).astype(int))
        seed = seed_model.predict(spec, P["B"], P["H"], P["N"], P["d"], P["Br"], P["Bc"])
        out.append(Evaluation(kernel, spec.key, len(rs), P, meas, np.asarray(pred.time_s, float),
                              np.asarray(seed.time_s, float), [r["_file"] for r in rs], split,
                              kernel in cal.path_fits))
    return out
