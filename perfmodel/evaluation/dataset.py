"""Measurement sets: the one reader of measurement CSVs, for validate, fit, plots and roofline.

A measurement CSV has one row per configuration (written by ``perfmodel measure``): the kernel, the problem (B, H,
Hkv, Nq, Nk, d, dtype, causal, mode), the launch columns (Br, Bc, threads, pad), the timing (median_ms, ...) and its
provenance. Files written before an axis existed read as its default: N for both lengths, Hkv = H, non-causal,
mode fwd. Rows are grouped by (kernel, GPU)
into ``MeasurementSet``s of numpy arrays, validated cell by cell: a malformed cell is a one-line error naming
the file, the line and the column.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfmodel.errors import InputError, read_text
from perfmodel.kernels.base import TILE_COLUMNS
from perfmodel.shape import AXES, DTYPES, MAX_SIZE, MODES, AttentionShape

# the columns of the configuration key of a plain row (forward, Nq = Nk = N, Hkv = H), whose text the training split
# hashes (fit.in_training_split); other rows add Hkv, Nq, Nk and mode (split_key)
KEY = ("kernel", "B", "H", "N", "d") + TILE_COLUMNS
REQUIRED = ("kernel", "B", "H", "d") + TILE_COLUMNS + ("median_ms", "gpu_name")


def problem_keys(cols: dict, dtype, causal, mode=None) -> list:
    """Each row's problem (B, H, Hkv, Nq, Nk, d, dtype, causal, mode) from its columns: rows of one problem differ only
    in their tiles."""
    mode = ["fwd"] * len(dtype) if mode is None else mode
    return list(zip(*(cols[a] for a in AXES), dtype, causal, mode))


def _cells(row: dict):
    """A row's cell as text (blank where absent), and its two lengths (each N where the row gives only N)."""
    cell = lambda k: str(row.get(k) if row.get(k) is not None else "").strip()
    return cell, cell("Nq") or cell("N"), cell("Nk") or cell("N")


def plain_row(row: dict) -> bool:
    """Whether a row is the plain problem the one-length schema holds: the forward, Nq = Nk, Hkv = H, one split."""
    cell, nq, nk = _cells(row)
    return (cell("Hkv") in ("", cell("H"))) and nq == nk and (cell("mode") or "fwd") == "fwd" and (
        cell("splits") in ("", "1"))


def split_key(row: dict) -> str:
    """The text that decides a row's split: the plain row's KEY columns as written; a row of grouped heads, of
    Nq != Nk or of another mode names Hkv, Nq, Nk and mode as well."""
    cell, nq, nk = _cells(row)
    if plain_row(row):
        return ",".join(nq if k == "N" else cell(k) for k in KEY)
    return ",".join([cell("kernel"), cell("B"), cell("H"), cell("Hkv") or cell("H"), nq, nk, cell("d")]
                    + [cell(k) for k in TILE_COLUMNS] + [cell("splits") or "1", cell("mode") or "fwd"])


@dataclass(frozen=True)
class MeasurementSet:
    kernel: str
    gpu_name: str
    rows: list                # the raw rows (dicts), in file order
    cols: dict                # column -> int array (shape axes, tile columns, regs_per_thread or 0)
    dtype: np.ndarray         # str per row
    causal: np.ndarray        # bool per row
    measured_s: np.ndarray
    files: tuple
    mode: np.ndarray = None   # str per row (fwd where a file has no mode column)

    def __post_init__(self):
        if self.mode is None:
            object.__setattr__(self, "mode", np.array(["fwd"] * len(self.rows)))

    def __len__(self) -> int:
        return len(self.rows)

    def select(self, mask) -> "MeasurementSet":
        return self.take(np.flatnonzero(mask))

    def take(self, idx) -> "MeasurementSet":
        """The rows at ``idx``, in that order."""
        return MeasurementSet(self.kernel, self.gpu_name, [self.rows[i] for i in idx],
                              {k: v[idx] for k, v in self.cols.items()}, self.dtype[idx], self.causal[idx],
                              self.measured_s[idx], self.files, self.mode[idx])

    def shapes(self) -> list[tuple]:
        """(dtype, causal, mode) groups present: each evaluates as one vectorised AttentionShape."""
        return sorted(set(zip(self.dtype.tolist(), self.causal.tolist(), self.mode.tolist())))

    def group(self, dtype, causal, mode):
        """The mask of the rows of one ``shapes`` group."""
        return (self.dtype == dtype) & (self.causal == causal) & (self.mode == mode)

    def problems(self) -> list:
        """Each row's problem (problem_keys)."""
        return problem_keys(self.cols, self.dtype, self.causal, self.mode)

    def spin_clock_mhz(self) -> np.ndarray:
        """Per row, the mean SM clock the bench's two spins read around its timed runs (spin_clock_mhz_before and
        _after; they read up to 5% above the maximum clock: research/notes/measurements.md)."""
        return np.array([(float(r["spin_clock_mhz_before"]) + float(r["spin_clock_mhz_after"])) / 2
                         for r in self.rows])

    def shape(self, mask=None) -> AttentionShape:
        m = slice(None) if mask is None else mask
        dt, cz, md = self.dtype[m], self.causal[m], self.mode[m]
        return AttentionShape.from_columns({a: self.cols[a][m] for a in AXES}, dtype=str(dt[0]) if len(dt) else "fp32",
                                           causal=bool(cz[0]) if len(cz) else False,
                                           mode=str(md[0]) if len(md) else "fwd")

    def tile_columns(self, mask=None) -> dict:
        m = slice(None) if mask is None else mask
        return {k: self.cols[k][m] for k in TILE_COLUMNS + ("splits",)}

    def regs(self, mask=None):
        """Registers per thread as measured (None where a row has none)."""
        m = slice(None) if mask is None else mask
        r = self.cols["regs_per_thread"][m]
        return r if (r > 0).all() else None


def _int(v, where, lo=0) -> int:
    import re

    t = str(v).strip()
    try:
        if not re.fullmatch(r"[+-]?[0-9]{1,30}", t):        # int() takes '6_4' and non-ASCII digits
            raise ValueError(t)
        x = int(t)
    except ValueError:
        raise InputError(f"{where}: not an integer: {v!r}") from None
    if x < lo or x > MAX_SIZE:
        raise InputError(f"{where}: {x} is out of range")
    return x


def _time_ms(v, where) -> float:
    try:
        x = float(str(v).strip())
    except ValueError:
        raise InputError(f"{where}: not a number: {v!r}") from None
    if not math.isfinite(x) or x <= 0:
        raise InputError(f"{where}: a time must be finite and positive, got {v!r}")
    return x


def _bool(v, where) -> bool:
    s = str(v).strip().lower()
    if s in ("", "0", "false", "no"):
        return False
    if s in ("1", "true", "yes"):
        return True
    raise InputError(f"{where}: not a boolean: {v!r}")


def read_rows(path: Path) -> tuple[list[dict], list[str]] | None:
    """The rows and columns of one CSV; None for a skip list (``.skipped.csv``: configurations not measured)."""
    text = read_text(path, "measurement file")
    reader = csv.DictReader(io.StringIO("".join(l for l in text.splitlines(keepends=True) if not l.startswith("#"))))
    fields = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in fields]
    if not missing and "N" not in fields and not {"Nq", "Nk"} <= set(fields):
        missing = ["N"]
    if missing and "reason" in fields:
        return None
    if missing:
        raise InputError(f"{path}: not a measurement CSV (missing column '{missing[0]}')")
    rows = []
    for i, r in enumerate(reader, start=2):
        if None in r or any(v is None for v in r.values()):
            raise InputError(f"{path}, line {i}: the row has {'more' if None in r else 'fewer'} cells than the header")
        r["_file"], r["_line"] = str(path), i
        rows.append(r)
    return rows, fields


def load(paths, note=None) -> list[MeasurementSet]:
    """Every row of the given CSVs, grouped by (kernel, GPU name), validated."""
    from perfmodel import kernels

    groups: dict[tuple, list] = defaultdict(list)
    for p in paths:
        got = read_rows(Path(p))
        if got is None:
            if note:
                note(f"{p}: a list of skipped configurations, not measurements; passed over")
            continue
        for r in got[0]:
            groups[(r["kernel"], r["gpu_name"])].append(r)
    if not groups:
        raise InputError("no measurement rows in the given files")
    out = []
    for (kernel, gpu_name), rows in sorted(groups.items()):
        kernels.get(kernel)                                 # an unknown kernel is an error here
        cols = {c: np.empty(len(rows), np.int64) for c in AXES + TILE_COLUMNS + ("splits", "regs_per_thread")}
        dtype, causal, mode, ms = [], [], [], np.empty(len(rows))
        for i, r in enumerate(rows):
            where = lambda c: f"{r['_file']}, line {r['_line']}, column {c}"
            given = lambda c: r.get(c) not in (None, "")
            for c in ("B", "H", "d") + TILE_COLUMNS:
                cols[c][i] = _int(r[c], where(c), lo=0 if c == "pad" else 1)
            for c, default in (("Nq", "N"), ("Nk", "N"), ("Hkv", "H")):
                src = c if given(c) else default
                if not given(src):
                    raise InputError(f"{where(c)}: the row gives neither {c} nor {default}")
                cols[c][i] = _int(r[src], where(src), lo=1)
            cols["splits"][i] = _int(r["splits"], where("splits"), lo=1) if given("splits") else 1
            if cols["H"][i] % cols["Hkv"][i]:
                raise InputError(f"{where('Hkv')}: H={cols['H'][i]} is not a multiple of Hkv={cols['Hkv'][i]}")
            cols["regs_per_thread"][i] = _int(r["regs_per_thread"], where("regs_per_thread"), 0) \
                if r.get("regs_per_thread") not in (None, "") else 0
            dt = (r.get("dtype") or "fp32").strip()
            if dt not in DTYPES:
                raise InputError(f"{where('dtype')}: unknown dtype {dt!r}")
            dtype.append(dt)
            causal.append(_bool(r.get("causal", ""), where("causal")))
            md = (r.get("mode") or "fwd").strip()
            if md not in MODES:
                raise InputError(f"{where('mode')}: unknown mode {md!r} (known: {', '.join(MODES)})")
            mode.append(md)
            ms[i] = _time_ms(r["median_ms"], where("median_ms"))
        cols["N"] = cols["Nq"]            # the one length of square rows, as the files before Nq and Nk name it
        out.append(MeasurementSet(kernel, gpu_name, rows, cols, np.array(dtype), np.array(causal, bool),
                                  ms * 1e-3, tuple(sorted({r["_file"] for r in rows})), np.array(mode)))
    return out
