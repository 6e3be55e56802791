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
import re
from collections import defaultdict
from dataclasses import dataclass
from operator import itemgetter
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


def _columns_text(rows, names) -> dict:
    """Each named column of ``rows`` as text, stripped (blank where absent), and the two lengths Nq and Nk (each N
    where a row gives only N)."""
    def texts(k):
        try:
            cells = list(map(itemgetter(k), rows))      # every row has the column: twice as fast as get
        except KeyError:
            cells = [r.get(k, "") for r in rows]
        try:
            return list(map(str.strip, cells))
        except TypeError:               # a row a caller made, with None or a number in a cell
            return ["" if v is None else str(v).strip() for v in cells]
    cols = {k: texts(k) for k in names}
    for k in ("Nq", "Nk"):
        cols[k] = [own or n for own, n in zip(cols[k], cols["N"])]
    return cols


def _plain(H, Hkv, nq, nk, mode, splits) -> bool:
    return Hkv in ("", H) and nq == nk and (mode or "fwd") == "fwd" and splits in ("", "1")


def plain_row(row: dict) -> bool:
    """Whether a row is the plain problem the one-length schema holds: the forward, Nq = Nk, Hkv = H, one split."""
    c = _columns_text([row], ("H", "Hkv", "N", "Nq", "Nk", "mode", "splits"))
    return _plain(*(c[k][0] for k in ("H", "Hkv", "Nq", "Nk", "mode", "splits")))


def split_keys(rows) -> list[str]:
    """The text that decides each row's split: a plain row's KEY columns as written; a row of grouped heads, of
    Nq != Nk or of another mode names Hkv, Nq, Nk and mode as well. Made a column at a time."""
    c = _columns_text(rows, KEY + ("Hkv", "Nq", "Nk", "mode", "splits"))
    keys = list(map(",".join, zip(*(c[k] for k in ("kernel", "B", "H", "Nq", "d") + TILE_COLUMNS))))
    for i, (H, Hkv, nq, nk, mode, splits) in enumerate(zip(*(c[k] for k in ("H", "Hkv", "Nq", "Nk", "mode",
                                                                            "splits")))):
        if not _plain(H, Hkv, nq, nk, mode, splits):
            keys[i] = ",".join([c[k][i] for k in ("kernel", "B", "H")] + [Hkv or H, nq, nk, c["d"][i]]
                               + [c[k][i] for k in TILE_COLUMNS] + [splits or "1", mode or "fwd"])
    return keys


def split_key(row: dict) -> str:
    """split_keys of one row."""
    return split_keys([row])[0]


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


def _one_of(known, what):
    """A reader of a cell naming one of ``known`` (a dtype, a mode)."""
    def read(v, where):
        if v not in known:
            extra = f" (known: {', '.join(known)})" if what == "mode" else ""
            raise InputError(f"{where}: unknown {what} {v!r}{extra}")
        return v
    return read


def _fast_times(texts):
    try:
        x = np.fromiter(map(float, texts), float, len(texts))
    except (TypeError, ValueError):
        return None
    bad = ~np.isfinite(x) | (x <= 0)
    return np.where(bad, 1.0, x), bad


def _fast_lookup(read):
    """A whole column at once, each distinct cell read once (None where one is refused): a million rows hold a
    few thousand distinct sizes, tiles and names."""
    def fast(texts):
        distinct = list(set(texts))
        try:
            values = np.array([read(t, "") for t in distinct])
        except InputError:
            return None
        code = {t: i for i, t in enumerate(distinct)}
        return values[np.fromiter(map(code.__getitem__, texts), np.intp, len(texts))], np.zeros(len(texts), bool)
    return fast


def _column(texts, read, fast):
    """(values, mask of the refused cells) of a column of cells: ``fast(texts)`` where it reads the column whole,
    else ``read(cell, where)`` cell by cell."""
    got = fast(texts)
    if got is not None:
        return got
    vals, bad = [], np.zeros(len(texts), bool)
    for i, t in enumerate(texts):
        try:
            vals.append(read(t, ""))
        except InputError:
            vals.append(1)
            bad[i] = True
    return np.array(vals), bad


def _columns(rows: list) -> tuple:
    """(cols, dtype, causal, mode, median seconds) of one group's rows, read a column at a time. The first bad
    cell, in the order a reader going row by row would meet it, is a one-line InputError naming its file, line
    and column."""
    n = len(rows)
    where = lambda i, c: f"{rows[i]['_file']}, line {rows[i]['_line']}, column {c}"
    checks = []                 # per check, in a row's order: (first refused row, or n; raises that row's error)

    def check(bad, fail):
        hit = np.flatnonzero(bad)
        checks.append((int(hit[0]) if hit.size else n, fail))

    def column(texts, read, fast, name=lambda i, c: c, c=""):
        vals, bad = _column(texts, read, fast)
        check(bad, lambda i: read(texts[i], where(i, name(i, c))))
        return vals

    def ints(texts, c, lo=1, name=lambda i, c: c):
        read = lambda v, w: _int(v, w, lo)
        return column(texts, read, _fast_lookup(read), name, c).astype(np.int64)

    cols = {c: ints(list(map(itemgetter(c), rows)), c, lo=0 if c == "pad" else 1) for c in ("B", "H", "d")
            + TILE_COLUMNS}
    for c, default in (("Nq", "N"), ("Nk", "N"), ("Hkv", "H")):
        texts = [r.get(c) or r.get(default) or "" for r in rows]

        def neither(i, c=c, default=default):
            raise InputError(f"{where(i, c)}: the row gives neither {c} nor {default}")
        check([t == "" for t in texts], neither)
        cols[c] = ints(texts, c, name=lambda i, c, default=default: c if rows[i].get(c) else default)
    cols["splits"] = ints([r.get("splits") or "1" for r in rows], "splits")
    H, Hkv = cols["H"], cols["Hkv"]

    def heads(i):
        raise InputError(f"{where(i, 'Hkv')}: H={H[i]} is not a multiple of Hkv={Hkv[i]}")
    check(H % Hkv != 0, heads)
    cols["regs_per_thread"] = ints([r.get("regs_per_thread") or "0" for r in rows], "regs_per_thread", lo=0)
    strings = {"dtype": (_one_of(DTYPES, "dtype"), "fp32"), "causal": (_bool, ""), "mode": (_one_of(MODES, "mode"),
                                                                                              "fwd")}
    got = {}
    for c, (read, default) in strings.items():
        texts = [r.get(c, "") if c == "causal" else (r.get(c) or default).strip() for r in rows]
        got[c] = column(texts, read, _fast_lookup(read), c=c)
    ms = column(list(map(itemgetter("median_ms"), rows)), _time_ms, _fast_times, c="median_ms")
    first, fail = min(checks, key=lambda x: x[0])           # min keeps the earliest check of a row
    if first < n:
        fail(first)
    cols["N"] = cols["Nq"]            # the one length of square rows, as the files before Nq and Nk name it
    return cols, got["dtype"].astype(str), got["causal"].astype(bool), got["mode"].astype(str), ms * 1e-3


def read_rows(path: Path) -> tuple[list[dict], list[str]] | None:
    """The rows and columns of one CSV; None for a skip list (``.skipped.csv``: configurations not measured)."""
    text = read_text(path, "measurement file")
    if "#" in text:                     # comment lines are dropped (a file without '#' is read as it is)
        text = "".join([l for l in text.splitlines(keepends=True) if not l.startswith("#")])
    reader = csv.reader(io.StringIO(text))
    fields = next(reader, [])
    missing = [c for c in REQUIRED if c not in fields]
    if not missing and "N" not in fields and not {"Nq", "Nk"} <= set(fields):
        missing = ["N"]
    if missing and "reason" in fields:
        return None
    if missing:
        raise InputError(f"{path}: not a measurement CSV (missing column '{missing[0]}')")
    rows, name = [], str(path)
    for i, cells in enumerate((c for c in reader if c), start=2):        # blank lines skipped, as csv.DictReader
        if len(cells) != len(fields):
            raise InputError(f"{path}, line {i}: the row has {'more' if len(cells) > len(fields) else 'fewer'} "
                             f"cells than the header")
        r = dict(zip(fields, cells))
        r["_file"], r["_line"] = name, i
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
        cols, dtype, causal, mode, ms = _columns(rows)
        out.append(MeasurementSet(kernel, gpu_name, rows, cols, dtype, causal, ms,
                                  tuple(sorted({r["_file"] for r in rows})), mode))
    return out
