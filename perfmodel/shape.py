"""The attention problem every kernel solves, and the validation of the numbers that describe it.

``AttentionShape`` is (B, H, Hkv, Nq, Nk, d, dtype, causal, mode): B batches of H query heads, each reading one of
Hkv K/V heads (grouped-query attention: H / Hkv query heads share one), Nq queries against Nk keys of head
dimension d. ``N`` sets both lengths where they are equal. With Nq != Nk, causal masking is aligned bottom-right:
query i sees keys j <= i + Nk - Nq (FlashAttention >= 2.1, PyTorch's ``causal_lower_right``). ``mode`` is the pass
timed: ``fwd``, ``bwd`` or ``fwd_bwd`` (FlashAttention's benchmark convention).

This module is the single source of the problem's axis names: the CLI, the API, sweeps, validation, fitting,
measurement and the CSV schema all take them from here. Tile parameters belong to each kernel.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from perfmodel.errors import InputError

AXES = ("B", "H", "Hkv", "Nq", "Nk", "d")      # the integer axes of a problem
DTYPES = ("fp32", "fp16", "bf16")
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
MODES = ("fwd", "bwd", "fwd_bwd")
# FLOPs of each mode over the forward's (FlashAttention's convention: the backward's five GEMMs against two)
MODE_FLOPS = {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}
LSE_BYTES = 4                                  # the forward's fp32 log-sum-exp per query row, which bwd reads
# Largest value any integer size may take. Keeps every product the model forms (B*H*Nq*Nk*d FLOPs, say) inside
# float64's exact integers and int64; far beyond any GPU's memory.
MAX_SIZE = 2 ** 31 - 1
DEFAULT_SIZES = dict(B=1, H=4, N=512, d=32)      # seed 000's problem: what a command uses for a size not given


def _f(x):
    return np.asarray(x, dtype=float)


def visible_keys(Nq, Nk, causal):
    """Query-key pairs each problem computes, as float: Nq * Nk, or under the bottom-right causal mask, where query i
    sees clip(i + Nk - Nq + 1, 0, Nk) keys and the last sees all Nk, 1 + 2 + ... + Nk less the rows above the
    first that sees any: T(Nk) - T(max(Nk - Nq, 0)), T(n) = n (n + 1) / 2 (vectorised)."""
    Nq, Nk = _f(Nq), _f(Nk)
    if not causal:
        return Nq * Nk
    tri = lambda n: n * (n + 1) / 2
    return tri(Nk) - tri(np.maximum(Nk - Nq, 0))


@dataclass(frozen=True)
class AttentionShape:
    """softmax(Q K^T / sqrt(d)) V for B batches of H query heads over Hkv K/V heads, Nq queries against Nk keys.

    Positional form ``AttentionShape(B, H, N, d, dtype, causal)`` is the square, full-head problem; ``Nq``, ``Nk``
    override N and ``Hkv`` defaults to H. In a vectorised evaluation every size may be a numpy array; dtype, causal
    and mode are one value per shape."""

    B: object
    H: object
    N: object = None
    d: object = None
    dtype: str = "fp32"
    causal: bool = False
    Hkv: object = None
    Nq: object = None
    Nk: object = None
    mode: str = "fwd"

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)
        if self.Nq is None:
            put("Nq", self.N)
        if self.Nk is None:
            put("Nk", self.N)
        if self.N is None:
            put("N", self.Nq)
        if self.Hkv is None:
            put("Hkv", self.H)

    @classmethod
    def from_columns(cls, cols: dict, dtype="fp32", causal=False, mode="fwd") -> "AttentionShape":
        """A shape from columns named as the CLI and CSVs name them: B, H, d, and Hkv (default H), N or Nq and
        Nk (each default N)."""
        N = cols.get("N")
        Nq, Nk = cols.get("Nq", N), cols.get("Nk", N)
        return cls(B=cols["B"], H=cols["H"], N=Nq, d=cols["d"], dtype=dtype, causal=causal,
                   Hkv=cols.get("Hkv", cols["H"]), Nq=Nq, Nk=Nk, mode=mode)

    @property
    def heads(self):
        """Query heads of the launch, B * H."""
        return np.asarray(self.B, dtype=np.int64) * np.asarray(self.H, dtype=np.int64)

    @property
    def kv_heads(self):
        return np.asarray(self.B, dtype=np.int64) * np.asarray(self.Hkv, dtype=np.int64)

    @property
    def group(self):
        """Query heads per K/V head, H / Hkv."""
        return np.asarray(self.H, dtype=np.int64) // np.asarray(self.Hkv, dtype=np.int64)

    @property
    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def square(self):
        """Whether each problem is the plain one: Nq == Nk and as many K/V heads as query heads."""
        return (np.asarray(self.Nq) == np.asarray(self.Nk)) & (np.asarray(self.H) == np.asarray(self.Hkv))

    def forward_flops(self):
        """Matrix FLOPs of the forward (QK^T and PV: 4 d per visible query-key pair per head), exact for causal
        masks of any Nq, Nk."""
        return 4.0 * _f(self.heads) * _f(self.d) * visible_keys(self.Nq, self.Nk, self.causal)

    def useful_flops(self):
        """The mode's FLOPs by FlashAttention's convention: the forward's, 2.5x for bwd, 3.5x for fwd_bwd."""
        return MODE_FLOPS[self.mode] * self.forward_flops()

    def tensor_bytes(self):
        """Bytes of the tensors the mode reads and writes: Q, O (query heads) and K, V (K/V heads) for fwd; the
        backward reads Q, K, V, O, dO and the forward's LSE and writes dQ, dK, dV."""
        e, d = self.element_bytes, _f(self.d)
        q = _f(self.heads) * _f(self.Nq) * d * e          # Q, O, dO or dQ
        kv = _f(self.kv_heads) * _f(self.Nk) * d * e       # K, V, dK or dV
        fwd = 2 * q + 2 * kv
        bwd = 4 * q + 4 * kv + _f(self.heads) * _f(self.Nq) * LSE_BYTES
        return {"fwd": fwd, "bwd": bwd, "fwd_bwd": fwd + bwd}[self.mode]

    def with_mode(self, mode: str) -> "AttentionShape":
        return dataclasses.replace(self, mode=mode)

    def as_dict(self) -> dict:
        return {"B": self.B, "H": self.H, "Hkv": self.Hkv, "Nq": self.Nq, "Nk": self.Nk, "d": self.d,
                "dtype": self.dtype, "causal": self.causal, "mode": self.mode}


def positive_int(name: str, value, lo: int = 1) -> int:
    """An integer >= lo and <= MAX_SIZE from an int, an integral float or its exact decimal text ('64', '64.0',
    '1e3'); InputError otherwise, '6_4' and '64.000000000000001' included."""
    from decimal import Decimal, InvalidOperation

    if isinstance(value, (list, tuple, range)) or (isinstance(value, np.ndarray) and value.ndim > 0):
        n = value.size if isinstance(value, np.ndarray) else len(value)
        raise InputError(f"{name} must be one integer, got {n} value{'s' * (n != 1)} (perfmodel.sweep takes lists)")
    shown = lambda x: x if len(x) <= 60 else x[:57] + "..."        # a message stays one readable line
    bad = InputError(f"{name} must be an integer, got {shown(repr(value))}")
    if isinstance(value, (bool, np.bool_)):
        raise bad
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value) or not float(value).is_integer():
            raise bad
        value = int(value)
    elif not isinstance(value, (int, np.integer)):
        text = str(value).strip()
        if "_" in text or not text:
            raise bad
        try:
            exact = Decimal(text)
        except (InvalidOperation, ValueError):
            raise bad from None
        if not exact.is_finite() or exact != exact.to_integral_value():
            raise bad
        if abs(exact) > 2 * MAX_SIZE:
            raise InputError(f"{name} = {shown(text)} is too large (at most {MAX_SIZE})")
        value = int(exact)
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


def parse_mode(mode) -> str:
    m = str(mode).strip().lower().replace("-", "_").replace("+", "_")
    if m not in MODES:
        raise InputError(f"unknown mode '{mode}'; known: {', '.join(MODES)}")
    return m


def parse_causal(causal) -> bool:
    """True or False (or 1 / 0); anything else, a string such as "no" included, is an error, not a truth value."""
    if isinstance(causal, (bool, np.bool_)) or (isinstance(causal, (int, np.integer)) and causal in (0, 1)):
        return bool(causal)
    raise InputError(f"causal must be True or False, got {causal!r}")


def check_heads(H, Hkv) -> None:
    """H must be a multiple of Hkv (each K/V head serves H / Hkv query heads); vectorised."""
    bad = np.asarray(H) % np.asarray(Hkv) != 0
    if np.any(bad):
        h, kv = (int(np.broadcast_to(x, bad.shape)[bad].ravel()[0]) for x in (H, Hkv))
        raise InputError(f"H={h} query heads cannot share Hkv={kv} K/V heads: H must be a multiple of Hkv")


def given_axes(given) -> tuple:
    """The problem axes a sweep or grid varies, given the names the user set: B, H, Hkv where given (else Hkv = H
    in each cell), N where neither Nq nor Nk is given (one axis for both lengths) else Nq and Nk, and d."""
    given = set(given)
    return (("B", "H") + (("Hkv",) if "Hkv" in given else ())
            + (("Nq", "Nk") if given & {"Nq", "Nk"} else ("N",)) + ("d",))


def lengths(N=None, Nq=None, Nk=None) -> tuple:
    """(Nq, Nk) from the user's N, Nq and Nk: N sets both, Nq and Nk override it; one of them must be given."""
    Nq = N if Nq is None else Nq
    Nk = N if Nk is None else Nk
    if Nq is None or Nk is None:
        raise InputError("give the sequence length: --N, or both --Nq (queries) and --Nk (keys)")
    return Nq, Nk


def make_shape(B, H, N=None, d=None, dtype="fp32", causal=False, Hkv=None, Nq=None, Nk=None,
               mode="fwd") -> AttentionShape:
    """A validated scalar shape (each size checked under the name the user gave it)."""
    if N is not None:
        N = positive_int("N", N)
    Nq, Nk = lengths(N, Nq, Nk)
    if d is None:
        raise InputError("give the head dimension d")
    sizes = {n: positive_int(n, v) for n, v in dict(B=B, H=H, Nq=Nq, Nk=Nk, d=d).items()}
    sizes["Hkv"] = sizes["H"] if Hkv is None else positive_int("Hkv", Hkv)
    check_heads(sizes["H"], sizes["Hkv"])
    return AttentionShape(B=sizes["B"], H=sizes["H"], N=sizes["Nq"], d=sizes["d"], dtype=parse_dtype(dtype),
                          causal=parse_causal(causal), Hkv=sizes["Hkv"], Nq=sizes["Nq"], Nk=sizes["Nk"],
                          mode=parse_mode(mode))
