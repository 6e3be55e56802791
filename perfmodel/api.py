"""The Python API, and the one place where user-facing names (a GPU name, a kernel name, sizes as given) become
validated objects. The CLI calls these functions too.

    >>> import perfmodel
    >>> p = perfmodel.predict(gpu="h100", kernel=NAME, B=4, H=16, N=4096, d=64, Br=64, Bc=64)
    >>> p.time_s, p.bound                       # a float (seconds) and a string
    >>> s = perfmodel.sweep(gpu="h100", kernel=NAME, N=[1024, 4096], Br=[32, 64], Bc=[32, 64])
    >>> s.time_s                                # numpy array, one axis per swept parameter

The problem's keywords are those of ``perfmodel.shape``: B, H (query heads), Hkv (K/V heads, default H), N (both
lengths) or Nq and Nk (queries and keys; causal aligned bottom-right), d, dtype, causal and mode (fwd, bwd,
fwd_bwd).

(NAME: a registered kernel, ``perfmodel.kernels.names()``; README has a worked example.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from perfmodel.errors import InputError
from perfmodel.hw import calibration as cal_mod, gpu as gpu_mod
from perfmodel.hw.gpu import GPUSpec
from perfmodel.kernels import DEFAULT, get as get_kernel
from perfmodel.model import engine
from perfmodel.shape import DEFAULT_SIZES, make_shape, positive_int


def load_gpu(gpu) -> GPUSpec:
    """A GPUSpec from a built-in name or alias, a YAML path, or a GPUSpec (returned as is)."""
    if isinstance(gpu, GPUSpec):
        return gpu
    if isinstance(gpu, os.PathLike) and isinstance(os.fspath(gpu), str):
        gpu = os.fspath(gpu)
    if not isinstance(gpu, str) or not gpu.strip():
        raise InputError(f"a GPU is a name, a YAML path or a GPUSpec, got {gpu!r}")
    return gpu_mod.resolve(gpu)


def _flag(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def load_calibration(spec: GPUSpec, calibration=None, use_builtin: bool = True, use_fits: bool = True):
    """``calibration``: None (the GPU's shipped one, if any), or a calibration YAML path (str or os.PathLike)."""
    if calibration is not None:
        path = os.fspath(calibration) if isinstance(calibration, os.PathLike) else calibration
        if not isinstance(path, str) or not path.strip():
            raise InputError(f"calibration is a YAML path (str or pathlib.Path) or None, got {calibration!r}")
        calibration = path
    return cal_mod.resolve(spec, calibration, use_builtin=_flag("use_builtin_calibration", use_builtin),
                           use_fits=_flag("use_fits", use_fits))


def kernel_dtype(k, dtype=None) -> str:
    """``dtype``, or where None the kernel's first element type (fp32 for fa1/fa2, fp16 for the tensor-core ones)."""
    return k.dtypes[0] if dtype is None else dtype


def configure(kernel: str, B, H, N=None, d=None, dtype=None, causal=False, gpu=None, Hkv=None, Nq=None, Nk=None,
              mode="fwd", **tiles):
    """(Kernel, AttentionShape, Tiles), validated: sizes, dtype (None: the kernel's first), what the kernel runs
    (causal, grouped heads, Nq != Nk, mode), tile parameters (defaults may depend on the GPU: a library kernel's
    tile table does), and, with a GPU, that the launch fits it."""
    k = get_kernel(kernel)
    shape = make_shape(B, H, N, d, kernel_dtype(k, dtype), causal, Hkv=Hkv, Nq=Nq, Nk=Nk, mode=mode)
    k.check_shape(shape)
    t = k.make_tiles(shape, gpu, **tiles)
    reason = k.why_not(gpu, shape, t) if gpu is not None else None
    if reason:
        raise InputError(reason)
    return k, shape, t


@dataclass(frozen=True)
class Result:
    """One prediction: time_s (float, seconds), bound (str), times_s (resource -> float), and the full
    engine.Prediction behind them (counts, launch, occupancy, traffic, ceilings)."""

    time_s: float
    bound: str
    times_s: dict
    prediction: engine.Prediction

    def to_dict(self) -> dict:
        from perfmodel.report import prediction_dict

        return prediction_dict(self.prediction)


def predict(gpu="h100", kernel: str = DEFAULT, B=DEFAULT_SIZES["B"], H=DEFAULT_SIZES["H"], N=None,
            d=DEFAULT_SIZES["d"], dtype=None, causal=False, calibration=None, regs=None,
            use_builtin_calibration: bool = True, use_fits: bool = True, Hkv=None, Nq=None, Nk=None, mode="fwd",
            **tiles) -> Result:
    """Predict one call (one launch, or the several a split-KV decode or a backward runs). ``N`` sets both lengths
    (default 512 when neither Nq nor Nk is given); ``tiles``: the kernel's tile parameters (Br, Bc, and
    threads/pad for fa2, warps for the tensor-core kernels); ``dtype``: None is the kernel's first
    (kernel_dtype); ``calibration``: a calibration YAML (default: the GPU's shipped one, if any)."""
    if N is None and Nq is None and Nk is None:
        N = DEFAULT_SIZES["N"]
    spec = load_gpu(gpu)
    k, shape, t = configure(kernel, B, H, N, d, dtype, causal, gpu=spec, Hkv=Hkv, Nq=Nq, Nk=Nk, mode=mode, **tiles)
    if regs is not None:
        regs = positive_int("regs", regs)
        if regs > spec.max_regs_per_thread:
            raise InputError(f"regs = {regs}: {spec.name} allows at most {spec.max_regs_per_thread} per thread")
    cal = load_calibration(spec, calibration, use_builtin_calibration, use_fits)
    p = engine.evaluate(spec, k, shape, t, cal, regs=regs)
    if not np.all(np.isfinite(p.time_s)):
        raise InputError(f"{k.name}: no block of this configuration can run on {spec.name} (occupancy 0)")
    return Result(time_s=float(np.asarray(p.time_s)), bound=str(np.asarray(p.bound)),
                  times_s={r: float(np.asarray(v)) for r, v in p.timing.times_s.items()}, prediction=p)


def _axis(name: str, v):
    """One sweep axis's values as a sequence, none read yet: a list, tuple, range or 1-d array as it is; any
    other value (a string included) is one value."""
    if isinstance(v, np.ndarray):
        if v.ndim > 1:
            raise InputError(f"{name}: a list of values, not an array of shape {v.shape}")
        return v.reshape(-1)
    return v if isinstance(v, (list, tuple, range)) else [v]


def _axis_value(name: str, x) -> int:
    """One value of a sweep axis: an integer (positive_int); a list inside the list is refused in one line."""
    if isinstance(x, (list, tuple, range)) or (isinstance(x, np.ndarray) and x.ndim > 0):
        raise InputError(f"{name}: a list of values, not a list of lists")
    return positive_int(name, x, lo=0 if name == "pad" else 1)


def sweep(gpu="h100", kernel: str = DEFAULT, calibration=None, dtype=None, causal=False, explore=True, mode="fwd",
          **axes):
    """Predict every combination of the given lists (B, H, Hkv, N or Nq and Nk, d, and the kernel's tile fields; a
    scalar is a one-value list; a tile field not given: the kernel's usual values when ``explore``, else its
    default). Returns an evaluation.sweep.SweepResult: ``time_s`` has one axis per parameter and is inf where a
    configuration does not fit (a tile, or H not a multiple of Hkv)."""
    from perfmodel.evaluation import sweep as sw
    from perfmodel.shape import parse_dtype, parse_mode

    spec = load_gpu(gpu)
    k = get_kernel(kernel)
    given = {a: v for a, v in axes.items() if v is not None}
    # dtype, causal and mode hold for the whole sweep; grouped heads and Nq != Nk are per cell (Kernel.limits)
    shape_probe = make_shape(1, 1, 1, 1, parse_dtype(kernel_dtype(k, dtype)), causal, mode=parse_mode(mode))
    k.check_shape(shape_probe)
    if "N" not in given and not ({"Nq", "Nk"} & set(given)):
        given["N"] = DEFAULT_SIZES["N"]
    axes = {**{a: v for a, v in DEFAULT_SIZES.items() if a != "N"}, **given}
    axes = {a: _axis(a, v) for a, v in axes.items()}
    empty = [a for a, v in axes.items() if len(v) == 0]
    if empty:
        raise InputError(f"{empty[0]}: no values to sweep")
    # counted before a value is read: N=np.arange(1, 20_000_001) is one line at once, not seconds and gigabytes
    sw.check_size({a: len(v) for a, v in axes.items()}, more=True)
    values = {a: [_axis_value(a, x) for x in v] for a, v in axes.items()}
    return sw.run(spec, k, load_calibration(spec, calibration), values, dtype=shape_probe.dtype,
                  causal=shape_probe.causal, explore=explore, mode=shape_probe.mode)
