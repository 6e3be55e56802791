"""Sweeps: parameter lists and ranges -> an open mesh (one numpy axis per parameter) -> predictions.

Each parameter sits on its own broadcast axis, so per-head counts are computed once per distinct shape and
only the assembly over B*H and the timing run over every configuration (see kernels.common.assemble).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np

from perfmodel import kernels, model
from perfmodel.calibration import Calibration
from perfmodel.errors import InputError
from perfmodel.gpu import GPUSpec

AXES = ("B", "H", "N", "d", "Br", "Bc", "threads", "pad")


def parse_values(name: str, text: str) -> list[int]:
    """'64' | '16,32,64' | '128:8192:x2' (geometric) | '16:128:16' or '16:128:+16' (arithmetic)."""
    text = str(text).strip()
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) != 3:
                raise ValueError
            lo, hi, step = int(parts[0]), int(parts[1]), parts[2]
            if step.startswith("x"):
                f = int(step[1:])
                if f < 2 or lo <= 0:
                    raise ValueError
                vals, v = [], lo
                while v <= hi:
                    vals.append(v)
                    v *= f
            else:
                s = int(step.lstrip("+"))
                if s <= 0:
                    raise ValueError
                vals = list(range(lo, hi + 1, s))
        else:
            vals = [int(v) for v in re.split(r"\s*,\s*", text) if v != ""]
    except ValueError:
        raise InputError(f"--{name}: cannot read '{text}' (use 64, 16,32,64, 128:8192:x2 or 16:128:16)") from None
    if not vals:
        raise InputError(f"--{name}: '{text}' gives no values")
    if any(v < (0 if name == "pad" else 1) for v in vals):
        raise InputError(f"--{name}: values must be positive integers, got '{text}'")
    return sorted(set(vals))


@dataclass
class SweepResult:
    kernel: str
    values: dict            # axis -> list of values
    time_s: np.ndarray      # shape: one axis per AXES entry; inf where the tile does not fit
    fits: np.ndarray
    bound: np.ndarray
    prediction: model.Prediction
    seconds: float          # wall time of counts + timing
    padded: bool = True     # False: the kernel runs Br threads and no padding (threads/pad axes are dummies)

    def _params(self, ix) -> dict:
        p = {a: int(self.values[a][i]) for a, i in zip(AXES, ix)}
        if not self.padded:
            p["threads"], p["pad"] = p["Br"], 0
        return p

    @property
    def size(self) -> int:
        return int(self.time_s.size)

    def rows(self):
        """(params dict, time_s, bound) for every fitting configuration, in axis order."""
        for ix in np.argwhere(self.fits):
            yield self._params(ix), float(self.time_s[tuple(ix)]), str(self.bound[tuple(ix)])

    def best(self):
        """For each problem (B, H, N, d): the fitting tile configuration with the least predicted time."""
        shape = self.time_s.shape                   # already inf where the tile does not fit
        flat = self.time_s.reshape(shape[:4] + (-1,))
        arg = flat.argmin(axis=-1)
        out = []
        for ix in np.ndindex(*shape[:4]):
            j = arg[ix]
            tj = flat[ix + (j,)]
            if not np.isfinite(tj):
                continue
            tile = np.unravel_index(j, shape[4:])
            out.append((self._params(ix + tuple(tile)), float(tj), str(self.bound[ix + tuple(tile)])))
        return out


def run(gpu: GPUSpec, kernel: str, cal: Calibration, values: dict) -> SweepResult:
    k = kernels.get(kernel)
    vals = dict(values)
    if not k.PADDED:                               # fa1 runs Br threads and has no padding: one value each
        vals["threads"], vals["pad"] = [0], [0]
    if vals.get("threads") is None:
        vals["threads"] = [k.DEFAULT_THREADS]
    if vals.get("pad") is None:
        vals["pad"] = [k.DEFAULT_PAD]
    arrays = {}
    for i, a in enumerate(AXES):
        shape = [1] * len(AXES)
        shape[i] = len(vals[a])
        arrays[a] = np.asarray(vals[a], dtype=np.int64).reshape(shape)
    t0 = time.perf_counter()
    threads = arrays["threads"] if k.PADDED else arrays["Br"]
    pred = model.predict_arrays(gpu, kernel, cal, arrays["B"], arrays["H"], arrays["N"], arrays["d"], arrays["Br"],
                                arrays["Bc"], threads, arrays["pad"])
    fits = k.fits(gpu, arrays["d"], arrays["Br"], arrays["Bc"], threads, arrays["pad"])
    full = np.broadcast_shapes(*(x.shape for x in arrays.values()))
    time_s = np.where(fits, np.broadcast_to(pred.time_s, full), np.inf)
    seconds = time.perf_counter() - t0
    return SweepResult(kernel, vals, time_s, np.broadcast_to(fits, full), np.broadcast_to(pred.timing.bound, full),
                       pred, seconds, padded=bool(k.PADDED))


def benchmark(gpu: GPUSpec, cal: Calibration, kernel: str = "fa2", repeats: int = 3) -> dict:
    """Configurations per second for counts plus timing on a sweep of about a million configurations."""
    batches = 40 if kernels.get(kernel).PADDED else 240     # fa1 has no threads/pad axes: more batch sizes
    values = {"B": list(range(1, batches + 1)), "H": list(range(1, 9)), "N": [128, 256, 512, 1024, 2048, 4096, 8192],
              "d": [32, 64, 128], "Br": [16, 32, 64, 128, 256], "Bc": [16, 32, 64, 128, 256],
              "threads": [64, 128, 256], "pad": [0, 1]}
    best = None
    for _ in range(repeats):
        r = run(gpu, kernel, cal, values)
        best = r.seconds if best is None else min(best, r.seconds)
    return {"kernel": kernel, "configurations": r.size, "seconds": best, "per_second": r.size / best}
