"""Sweeps: parameter lists and ranges -> an open mesh (one numpy axis per parameter) -> predictions.

The axes are the problem's (B, H, and Hkv where given, N or Nq and Nk, d: shape.given_axes) followed by the kernel's
tile fields. Each sits on its own broadcast axis, so the whole mesh is one vectorised evaluation
(perfmodel.model.engine.evaluate).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np

from perfmodel.errors import InputError
from perfmodel.hw.calibration import Calibration
from perfmodel.hw.gpu import GPUSpec
from perfmodel.kernels.base import Kernel
from perfmodel.model import engine
from perfmodel.shape import MAX_SIZE, AttentionShape, given_axes

MAX_VALUES = 100_000                 # values of one axis
MAX_CONFIGURATIONS = 2_000_000       # cells of a whole mesh (docs/cli.md, "Size limits": time and memory there)
ROWS_AT_ONCE = 65_536                # rows of a listing made at once (SweepResult.cells)


def _integer(t: str) -> int:
    """An integer written in ASCII digits ('64', '+64', '64.0'); ValueError for '6_4', '1e3', non-ASCII digits,
    '64.000000000000001' (which int() or float() would take)."""
    t = t.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,30}(\.0*)?", t):
        raise ValueError(t)
    return int(t.split(".")[0])


def parse_values(name: str, text: str, lo: int = 1) -> list[int]:
    """'64' | '16,32,64' | '128:8192:x2' (geometric) | '16:128:16' or '16:128:+16' (arithmetic)."""
    text = str(text).strip()
    bad = InputError(f"--{name}: cannot read '{text}' (use 64, 16,32,64, 128:8192:x2 or 16:128:16)")
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) != 3:
                raise bad
            a, b, step = _integer(parts[0]), _integer(parts[1]), parts[2].strip()
            if a < lo or b > MAX_SIZE:
                raise InputError(f"--{name}: values must lie in {lo}..{MAX_SIZE}, got '{text}'")
            if step.startswith("x"):
                f = _integer(step[1:])
                if f < 2 or a <= 0:
                    raise bad
                vals, v = [], a
                while v <= b:
                    vals.append(v)
                    v *= f
            else:
                s = _integer(step)
                if s <= 0:
                    raise bad
                if (b - a) // s + 1 > MAX_VALUES:
                    raise InputError(f"--{name}: '{text}' gives more than {MAX_VALUES} values")
                vals = list(range(a, b + 1, s))
        else:
            vals = [_integer(v) for v in re.split(r"\s*,\s*", text) if v != ""]
    except InputError:
        raise
    except ValueError:
        raise bad from None
    if not vals:
        raise InputError(f"--{name}: '{text}' gives no values")
    if any(v < lo or v > MAX_SIZE for v in vals):
        raise InputError(f"--{name}: values must lie in {lo}..{MAX_SIZE}, got '{text}'")
    return sorted(set(vals))


@dataclass
class SweepResult:
    kernel: str
    axes: tuple              # the problem's axes (shape.given_axes) + the kernel's tile fields
    values: dict             # axis -> list of values
    time_s: np.ndarray       # one numpy axis per entry of ``axes``; inf where the tile does not fit
    fits: np.ndarray
    bound: np.ndarray
    prediction: engine.Prediction
    seconds: float           # wall time of the evaluation
    n_shape: int = 4         # how many of ``axes`` are the problem's

    @property
    def shape_axes(self) -> tuple:
        return self.axes[:self.n_shape]

    @property
    def tile_axes(self) -> tuple:
        return self.axes[self.n_shape:]

    def shape_of(self, p: dict) -> AttentionShape:
        """The problem of one cell's parameters."""
        s = self.prediction.shape
        return AttentionShape.from_columns(p, s.dtype, s.causal, s.mode)

    @property
    def size(self) -> int:
        return int(self.time_s.size)

    def params_at(self, ix) -> list[dict]:
        """Parameter dicts of the cells at the index arrays ``ix`` (one array per axis)."""
        cols = [np.asarray(self.values[a])[i].tolist() for a, i in zip(self.axes, ix)]
        return [dict(zip(self.axes, v)) for v in zip(*cols)]

    def cells(self, ix):
        """(params, time_s, bound) of the cells at the index arrays ``ix``, in their order, made ROWS_AT_ONCE
        at a time: a listing of 2M configurations is written as it is made, never held as dicts."""
        for s in range(0, len(ix[0]), ROWS_AT_ONCE):
            part = tuple(i[s:s + ROWS_AT_ONCE] for i in ix)
            yield from zip(self.params_at(part), self.time_s[part].tolist(), self.bound[part].tolist())

    def fitting(self, fastest_first: bool = False):
        """Index arrays (one per axis) of every fitting configuration, in axis order or fastest first (ties in
        axis order)."""
        flat = np.flatnonzero(self.fits)
        if fastest_first:
            flat = flat[np.argsort(self.time_s.ravel()[flat], kind="stable")]
        return np.unravel_index(flat, self.time_s.shape)

    def rows(self):
        """(params, time_s, bound) for every fitting configuration, in axis order."""
        return list(self.cells(self.fitting()))

    def listing(self, best: bool = False):
        """(how many, iterator of ((params, time_s, bound), runner-up)): with ``best``, each problem's fastest
        fitting tiles with its runner-up (runners_up), in axis order; else every fitting configuration, fastest
        first, with None. Made as it is read (cells)."""
        if not best:
            ix = self.fitting(fastest_first=True)
            return len(ix[0]), ((row, None) for row in self.cells(ix))
        first = self._kth_fastest(0)
        if int(np.prod(self.time_s.shape[self.n_shape:])) < 2:
            return len(first[0]), ((row, None) for row in self.cells(first))
        second = self._kth_fastest(1)
        runner = ((p, t) if np.isfinite(t) else None for p, t, _ in self.cells(second))
        return len(first[0]), zip(self.cells(first), runner)

    def why_unfit(self, look: int = 500, mask=None) -> str:
        """Why configurations do not fit, in one line: the reason of the one (among the first ``look`` that do not,
        of those ``mask`` selects where given) that came nearest to fitting, i.e. broke the latest of the kernel's
        limits: where every compiled tile breaks a limit of the problem (its memory, its grid), that limit, not the
        first tile's lack of an instance."""
        from perfmodel.kernels import get

        k, found = get(self.kernel), []
        unfit = ~self.fits if mask is None else ~self.fits & mask
        for p in self.params_at(tuple(i[:look] for i in np.nonzero(unfit))):
            shape = self.shape_of(p)
            broken = k.first_broken(self.prediction.gpu, shape, k.Tiles(**{f: p[f] for f in k.Tiles.fields()}))
            if broken:
                found.append(broken)
        return max(found, key=lambda b: b[0])[1] if found else ""

    def unfit(self) -> list[dict]:
        """The parameters of every configuration that does not fit the GPU."""
        return self.params_at(np.nonzero(~self.fits))

    def _kth_fastest(self, k: int):
        """Index arrays (one per axis) of each problem's k-th fastest tile configuration (0: the fastest; ties in
        axis order), over the problems where some configuration fits."""
        n_shape = self.n_shape
        shape = self.time_s.shape
        flat = self.time_s.reshape(shape[:n_shape] + (-1,))
        keep = np.nonzero(np.isfinite(flat.min(axis=-1)))
        arg = (flat.argmin(axis=-1) if k == 0 else np.argsort(flat, axis=-1, kind="stable")[..., k])[keep]
        return tuple(keep) + tuple(np.unravel_index(arg, shape[n_shape:]))

    def best(self):
        """For each problem (the shape axes' cell): the fitting tile configuration with the least predicted time."""
        return [row for row, _ in self.listing(best=True)[1]]

    def runners_up(self):
        """For each problem of ``best`` (same order): the fitting tile configuration with the second least
        predicted time, as (params, time_s), or None where only one tile fits."""
        return [second for _, second in self.listing(best=True)[1]]


def check_size(counts: dict, more: bool = False) -> None:
    """InputError, in one line, where an axis (name -> its number of values) holds more than MAX_VALUES values or
    the mesh more than MAX_CONFIGURATIONS cells; counted before anything is expanded. ``more``: the counts leave
    axes out (the size is a lower bound)."""
    size = int(np.prod([float(n) for n in counts.values()]))
    if size > MAX_CONFIGURATIONS:
        raise InputError(f"{'at least ' if more else ''}{size} configurations: a sweep holds at most "
                         f"{MAX_CONFIGURATIONS}; narrow the ranges")
    for a, n in counts.items():
        if n > MAX_VALUES:
            raise InputError(f"{a}: {n} values; a sweep's axis holds at most {MAX_VALUES}")


def run(gpu: GPUSpec, kernel: Kernel, cal: Calibration, values: dict, dtype: str = "fp32",
        causal: bool = False, explore: bool = True, mode: str = "fwd") -> SweepResult:
    """``values``: axis -> list of ints (B, H, Hkv, N, Nq, Nk, d and the kernel's tile fields). A tile field not
    given takes the kernel's sweep values (``explore``) or else its default."""
    given = [a for a, v in values.items() if v is not None]
    shape_axes = given_axes(given)
    if "N" not in shape_axes:                       # one length given, the other from N (or its default)
        for a in ("Nq", "Nk"):
            if values.get(a) is None:
                values = {**values, a: values.get("N") or [512]}
    axes = shape_axes + kernel.Tiles.fields()
    first = {a: values.get(a, [1])[0] for a in shape_axes}
    defaults = kernel.default_tiles(AttentionShape.from_columns(first, dtype, causal, mode), gpu)
    vals = {}
    for a in axes:
        v = values.get(a)
        if v is None and explore:
            v = kernel.sweep_values(a)
        if v is None:
            dv = getattr(defaults, a, None)
            if dv is None:
                raise InputError(f"kernel {kernel.name}: give --{a}")
            v = [int(dv)]
        vals[a] = list(v)
    extra = [a for a, v in values.items() if v is not None and a not in axes and not (a == "N" and
                                                                                      "N" not in axes)]
    if extra:
        raise InputError(f"kernel {kernel.name} has no tile parameter '{extra[0]}' (its tiles: "
                         f"{', '.join(kernel.Tiles.fields())})")
    check_size({a: len(v) for a, v in vals.items()})
    arrays = {}
    for i, a in enumerate(axes):
        shp = [1] * len(axes)
        shp[i] = len(vals[a])
        arrays[a] = np.asarray(vals[a], dtype=np.int64).reshape(shp)
    shape = AttentionShape.from_columns(arrays, dtype, causal, mode)
    tiles = kernel.Tiles(**{a: arrays[a] for a in kernel.Tiles.fields()})
    t0 = time.perf_counter()
    pred = engine.evaluate(gpu, kernel, shape, tiles, cal)
    fits = kernel.fits(gpu, shape, tiles)
    full = np.broadcast_shapes(*(x.shape for x in arrays.values()))
    time_s = np.where(fits, np.broadcast_to(pred.time_s, full), np.inf)
    seconds = time.perf_counter() - t0
    return SweepResult(kernel.name, axes, vals, time_s, np.broadcast_to(fits, full),
                       np.broadcast_to(pred.timing.bound, full), pred, seconds, n_shape=len(shape_axes))


def benchmark(gpu: GPUSpec, cal: Calibration, kernel: Kernel, repeats: int = 3) -> dict:
    """Configurations per second for counts plus timing on a sweep of about a million configurations."""
    tile_axes = {"Br": [16, 32, 64, 128, 256], "Bc": [16, 32, 64, 128, 256], "threads": [64, 128, 256],
                 "pad": [0, 1]}
    values = {a: v for a, v in tile_axes.items() if a in kernel.Tiles.fields()}
    other = int(np.prod([len(v) for v in values.values()]))
    batches = max(1, round(1_008_000 / (8 * 7 * 3 * other)))
    values.update({"B": list(range(1, batches + 1)), "H": list(range(1, 9)),
                   "N": [128, 256, 512, 1024, 2048, 4096, 8192], "d": [32, 64, 128]})
    best = None
    for _ in range(repeats):
        r = run(gpu, kernel, cal, values)
        best = r.seconds if best is None else min(best, r.seconds)
    return {"kernel": kernel.name, "configurations": r.size, "seconds": best, "per_second": r.size / best}
