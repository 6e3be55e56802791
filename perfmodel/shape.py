"""The attention problem every kernel solves, and the validation of the numbers that describe it.

``AttentionShape`` (B, H, N, d, dtype, causal) is the single source of the problem's axis names: the CLI, sweeps,
validation, fitting, measurement, reports and the CSV schema all take them from here. Tile parameters belong to
each kernel (``perfmodel.kernels``), not to the problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.errors import InputError

AXES = ("B", "H", "N", "d")                  # the integer axes of a problem
DTYPES = ("fp32", "fp16", "bf16")
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
# Largest value any integer size may take. Keeps every product the model forms (B*H*N*N*d FLOPs, say) inside
# float64's exact integers and int64; far beyond any GPU's memory.
MAX_SIZE = 2 ** 31 - 1
DEFAULT_SIZES = dict(B=1, H=4, N=512, d=32)      # seed 000's problem: what a command uses for a size not given


@dataclass(frozen=True)
class AttentionShape:
    """softmax(Q K^T / sqrt(d)) V for B batches of H heads, N queries and keys, head dimension d.

    In a vectorised evaluation B, H, N and d may be numpy arrays that broadcast together."""

    B: object
    H: object
    N: object
    d: object
    dtype: str = "fp32"
    causal: bool = False

    @property
    def heads(self):
        return np.asarray(self.B, dtype=np.int64) * np.asarray(self.H, dtype=np.int64)

    @property
    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def useful_flops(self):
        """Matrix FLOPs of the attention itself (QK^T and PV: 4 N^2 d per head), halved when causal; the
        convention of the FlashAttention papers, independent of how a kernel tiles the work."""
        N, d = (np.asarray(x, dtype=float) for x in (self.N, self.d))
        full = 4.0 * self.heads * N * N * d
        return full / 2 if self.causal else full

    def as_dict(self) -> dict:
        return {"B": self.B, "H": self.H, "N": self.N, "d": self.d, "dtype": self.dtype, "causal": self.causal}


def positive_int(name: str, value, lo: int = 1) -> int:
    """An integer >= lo and <= MAX_SIZE from an int, an integral float or its text; InputError otherwise."""
    if isinstance(value, bool):
        raise InputError(f"{name} must be an integer, got {value!r}")
    if not isinstance(value, (int, np.integer)):
        text = str(value).strip()
        try:
            value = int(text)
        except ValueError:
            try:
                f = float(text)
            except ValueError:
                raise InputError(f"{name} must be an integer, got {value!r}") from None
            if not np.isfinite(f) or not f.is_integer():
                raise InputError(f"{name} must be an integer, got {value!r}")
            value = int(f)
    value = int(value)
    if value < lo:
        raise InputError(f"{name} must be {'positive' if lo == 1 else f'>= {lo}'}, got {value}")
    if value > MAX_SIZE:
        raise InputError(f"{name} = {value} is too large (at most {MAX_SIZE})")
    return value


def parse_dtype(dtype) -> str:
    d = str(dtype).strip().lower()
    if d not in DTYPES:
        raise InputError(f"unknown dtype '{dtype}'; known: {', '.join(DTYPES)}")
    return d


def parse_causal(causal) -> bool:
    """True or False (or 1 / 0); anything else, a string such as "no" included, is an error, not a truth value."""
    if isinstance(causal, (bool, np.bool_)) or (isinstance(causal, (int, np.integer)) and causal in (0, 1)):
        return bool(causal)
    raise InputError(f"causal must be True or False, got {causal!r}")


def make_shape(B, H, N, d, dtype="fp32", causal=False) -> AttentionShape:
    """A validated scalar shape."""
    sizes = {n: positive_int(n, v) for n, v in dict(B=B, H=H, N=N, d=d).items()}
    return AttentionShape(**sizes, dtype=parse_dtype(dtype), causal=parse_causal(causal))
