"""Problem and tile parameters, and their validation (one-line InputErrors for the CLI)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from perfmodel.errors import InputError

DTYPES = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class Config:
    """One configuration: problem (B, H, N, d, dtype) and tiles (Br, Bc, threads, pad)."""

    kernel: str
    B: int
    H: int
    N: int
    d: int
    Br: int
    Bc: int
    threads: int
    pad: int
    dtype: str = "fp32"

    def to_dict(self) -> dict:
        return asdict(self)


def positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            as_float = float(value)
        except (TypeError, ValueError):
            raise InputError(f"{name} must be a positive integer, got {value!r}") from None
        if not as_float.is_integer():
            raise InputError(f"{name} must be a positive integer, got {value!r}")
        value = int(as_float)
    if value <= 0:
        raise InputError(f"{name} must be a positive integer, got {value}")
    return value


def make_config(kernel, B, H, N, d, Br, Bc, threads=None, pad=None, dtype="fp32") -> Config:
    """Validate sizes (not yet the GPU fit: see kernels' ``check``) and fill the kernel's defaults."""
    from perfmodel import kernels

    k = kernels.get(kernel)
    sizes = {n: positive_int(n, v) for n, v in dict(B=B, H=H, N=N, d=d, Br=Br, Bc=Bc).items()}
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype '{dtype}'; known: {', '.join(DTYPES)}")
    if dtype != "fp32":
        raise InputError(f"kernel {kernel} is fp32 only; --dtype {dtype} needs a tensor-core kernel")
    if threads is not None:
        threads = positive_int("threads", threads)
    if pad is not None:
        if isinstance(pad, bool) or not isinstance(pad, int) or pad < 0:
            raise InputError(f"pad must be a non-negative integer, got {pad!r}")
    threads, pad = kernels.tile_defaults(k, sizes["Br"], threads, pad)
    return Config(kernel=kernel, threads=threads, pad=pad, dtype=dtype, **sizes)
