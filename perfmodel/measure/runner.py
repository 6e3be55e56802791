"""``perfmodel measure``: for each configuration, check correctness, then time it; append one CSV row with
provenance as soon as it is measured. A rerun skips configurations already in the file.

``retime_unstable``: a configuration whose recorded timing was disturbed (bench.unstable: its p80/p20 spread) is
measured again; the old row is first appended to ``<name>.superseded.csv``, then replaced in place by the new one
(the file is rewritten whole and renamed over the old, so an interruption leaves one or the other)."""

from __future__ import annotations

import csv
import datetime
import math
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

from perfmodel.errors import InputError
from perfmodel.evaluation import dataset
from perfmodel.hw import calibration
from perfmodel.hw.gpu import GPUSpec
from perfmodel.kernels import get as get_kernel
from perfmodel.kernels.base import TILE_COLUMNS
from perfmodel.measure import bench, build
from perfmodel.measure.grid import Config
from perfmodel.model import engine
from perfmodel.shape import AXES

KEY = ["kernel", *AXES, *TILE_COLUMNS, "splits", "dtype", "causal", "mode", "l2_flush"]
_RESULT = ["median_ms", "p20_ms", "p80_ms", "n_runs", "rel_err", "regs_per_thread", "smem_bytes", "local_bytes",
           "cuda_blocks_per_sm", "gpu_name", "sm_clock_mhz_before", "sm_clock_mhz_after", "sm_clock_max_mhz", "driver",
           "torch", "torch_cuda", "nvcc", "date", "seed", "command"]
_SPIN = ["spin_clock_mhz_before", "spin_clock_mhz_after", "median_cycles"]
COLUMNS = KEY + _RESULT + _SPIN
SKIP_COLUMNS = KEY + ["reason", "detail", "date"]
# files written before grouped heads, Nq != Nk and modes: one length N, Hkv = H, the forward; and before that, before
# the head-start spins measured the clock (bench.Timing), ending at "command"
N_KEY = ["kernel", "B", "H", "N", "d", *TILE_COLUMNS, "dtype", "causal", "l2_flush"]
N_COLUMNS = N_KEY + _RESULT + _SPIN
PRE_SPIN_COLUMNS = N_KEY + _RESULT
# a column a file lacks reads as: (the column it defaults to, or the value)
_KEY_DEFAULTS = {"causal": "0", "dtype": "fp32", "mode": "fwd", "splits": "1", "Hkv": ("H",), "Nq": ("N",),
                 "Nk": ("N",)}


def _cell(row: dict, k: str) -> str:
    v = row.get(k)
    if v not in (None, ""):
        return str(v).strip()
    default = _KEY_DEFAULTS.get(k, "")
    return _cell(row, default[0]) if isinstance(default, tuple) else default


def row_key(row: dict) -> tuple:
    """A row's configuration as the current KEY, from a file of either schema."""
    return tuple(_cell(row, k) for k in KEY)


def legacy_row(row: dict) -> dict:
    """``row`` for a file of the one-length schema (N_KEY): N for Nq = Nk; InputError for a row that schema cannot
    hold (grouped heads, Nq != Nk, a mode other than fwd)."""
    if not dataset.plain_row(row):
        raise InputError("this file has the one-length columns (N, no Hkv, Nq, Nk or mode), which cannot hold grouped "
                         "heads, Nq != Nk or a backward: write these rows to a new file")
    return dict(row, N=_cell(row, "Nq"))


def read_rows(path: Path) -> list[dict]:
    if not path.exists() or path.stat().st_size == 0:
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


# the columns every file perfmodel measure writes begins with (rows, or skipped rows): a header without them is
# another program's CSV, which a rerun must not append to
_HEADER_START = ("kernel", "B", "H")


def prepare_output(path: Path, note=None) -> None:
    """Make ``path`` safe to resume before anything is measured. A byte-order mark or a header that is not
    perfmodel's is refused in one line (nothing is written). A half-written last row (an interrupted append: no
    newline, fewer cells than the header) is cut off, with one line to ``note``, so it is neither counted as
    measured nor glued to the next row; a complete last row without a newline gets one."""
    note = note or (lambda m: print(m, file=sys.stderr))
    try:
        if not path.exists() or path.stat().st_size == 0:
            return
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        raise InputError(f"{path} begins with a byte-order mark; perfmodel writes plain UTF-8 CSV: remove the mark "
                         f"or give another --out")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text: give another --out") from None
    lines = text.splitlines(keepends=True)
    content = [i for i, l in enumerate(lines) if l.strip() and not l.startswith("#")]
    header = next(csv.reader([lines[content[0]]])) if content else []
    if not content or tuple(c.strip() for c in header[:3]) != _HEADER_START:
        raise InputError(f"{path} is not a perfmodel measurement CSV (its header is not perfmodel's): give another "
                         f"--out")
    if text.endswith("\n"):
        return
    last = content[-1]
    if last == content[0] or len(next(csv.reader([lines[last]]))) >= len(header):
        with path.open("a", newline="") as f:
            f.write("\r\n")
        return
    keep = len("".join(lines[:last]).encode("utf-8"))
    os.truncate(path, keep)
    note(f"{path}: cut off a half-written last row ({len(data) - keep} bytes, an interrupted write); it is "
         f"measured again")


class Appender:
    """Append rows to a CSV, writing the header for a new file and flushing every row. A file that exists keeps
    its own header (a rerun on a file of PRE_SPIN_COLUMNS appends rows of those columns)."""

    def __init__(self, path: Path, columns: list[str], note=None):
        prepare_output(path, note)
        new = not path.exists() or path.stat().st_size == 0
        if not new:
            with path.open(newline="") as f:
                header = next(csv.reader(line for line in f if not line.startswith("#")), None)
            columns = header or columns
        self.path, self.columns = path, columns
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = path.open("a", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=columns)
        if new:
            self.w.writeheader()
            self.f.flush()

    def add(self, row: dict) -> None:
        if "N" in self.columns and "Nq" not in self.columns:
            row = legacy_row(row)
        self.w.writerow({k: row.get(k, "") for k in self.columns})
        self.f.flush()
        os.fsync(self.f.fileno())

    def close(self):
        self.f.close()


class Clock:
    """The SM clock, through NVML where available, else nvidia-smi."""

    def __init__(self):
        self.nvml = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = pynvml
            self.h = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0))
        except Exception:
            self.nvml = None

    def _query(self, nvml_call, smi_field: str):
        """One reading through NVML, else nvidia-smi; '' when neither answers."""
        try:
            if self.nvml:
                return float(nvml_call())
            out = subprocess.run(["nvidia-smi", f"--query-gpu={smi_field}", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10).stdout
            return float(out.split()[0])
        except Exception:
            return ""

    def sm_mhz(self) -> float | str:
        return self._query(lambda: self.nvml.nvmlDeviceGetClockInfo(self.h, self.nvml.NVML_CLOCK_SM), "clocks.sm")

    def max_mhz(self) -> float | str:
        return self._query(lambda: self.nvml.nvmlDeviceGetMaxClockInfo(self.h, self.nvml.NVML_CLOCK_SM),
                           "clocks.max.sm")

    def driver(self) -> str:
        try:
            if self.nvml:
                v = self.nvml.nvmlSystemGetDriverVersion()
                return v.decode() if isinstance(v, bytes) else str(v)
            return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=10).stdout.strip()
        except Exception:
            return ""


def reference(torch, Q, K, V, causal: bool = False, max_bytes: int = 1 << 31):
    """softmax(Q K^T / sqrt(d)) V in float64: Q (B, H, Nq, d), K and V (B, Hkv, Nk, d), each K/V head serving H / Hkv
    query heads; causal masks keys beyond i + Nk - Nq for query i (bottom-right), and a query that sees no key
    gives 0 (FlashAttention's convention). A few heads at a time."""
    B, H, Nq, d = Q.shape
    Hkv, Nk = K.shape[1], K.shape[2]
    g = H // Hkv
    q = Q.reshape(B * H, Nq, d)
    k, v = (x.reshape(B * Hkv, Nk, d) for x in (K, V))
    out = torch.empty((B * H, Nq, d), dtype=torch.float64, device=Q.device)
    # heads a step: its scores, and its K and V in float64, within max_bytes
    step = max(1, max_bytes // (Nq * Nk * 8 + 2 * Nk * d * 8))
    mask = None
    if causal:
        i = torch.arange(Nq, device=Q.device)[:, None]
        j = torch.arange(Nk, device=Q.device)[None, :]
        mask = j > i + (Nk - Nq)
    for s in range(0, B * H, step):
        e = min(B * H, s + step)
        kv = torch.arange(s, e, device=Q.device) // g          # the K/V head of each query head (B-major)
        S = torch.matmul(q[s:e].double(), k[kv].double().transpose(1, 2)) / math.sqrt(d)
        if mask is not None:
            S.masked_fill_(mask, float("-inf"))
        P = torch.nan_to_num(torch.softmax(S, dim=-1), nan=0.0)     # rows that see no key: 0
        out[s:e] = torch.matmul(P, v[kv].double())
        del S, P
    return out.reshape(B, H, Nq, d)


# relative Frobenius error against the float64 reference a correct kernel stays under, per element type
TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1.5e-2}


class Runner:
    """Buffers and checks for a kernel with Q, K, V and O of shape (B, H, N, d) in the shape's dtype. A kernel's
    module subclasses it and supplies ``launch`` and ``attributes`` (and ``setup`` if its contract needs one;
    ``timed_launch`` if what is timed differs from what is checked). O lives in a buffer with a NaN guard region
    behind it: a write past the end is caught."""

    def __init__(self, torch, shape, extra: tuple = ()):
        self.torch, self.shape = torch, shape
        self.tolerance = TOLERANCE[shape.dtype]
        B, H, Nq, d = (int(x) for x in (shape.B, shape.H, shape.Nq, shape.d))
        numel = B * H * Nq * d
        self.guard = 1024
        self.Obuf = torch.empty(numel + self.guard, dtype=self.torch_dtype(), device="cuda")
        self.O = self.Obuf[:numel].view(B, H, Nq, d)
        self.extra = {}
        for name in extra:                         # per-row statistics some kernels keep in global memory
            setattr(self, name, torch.empty(B * H * Nq, dtype=torch.float32, device="cuda"))
            self.extra[name] = getattr(self, name)

    def torch_dtype(self):
        return {"fp32": self.torch.float32, "fp16": self.torch.float16, "bf16": self.torch.bfloat16}[self.shape.dtype]

    def inputs(self, seed: int):
        g = self.torch.Generator(device="cuda").manual_seed(seed)
        s = self.shape
        q = tuple(int(x) for x in (s.B, s.H, s.Nq, s.d))
        kv = tuple(int(x) for x in (s.B, s.Hkv, s.Nk, s.d))
        return tuple(self.torch.randn(shp, generator=g, device="cuda", dtype=self.torch_dtype()) for shp in (q, kv, kv))

    def poison(self):
        self.Obuf.fill_(float("nan"))
        for t in self.extra.values():
            t.fill_(float("nan"))

    def setup(self):
        """What the kernel's contract needs before a launch (nothing, unless a kernel says otherwise)."""

    def launch(self, Q, K, V):
        raise NotImplementedError

    def timed_launch(self, Q, K, V):
        """What the timing runs: the checked launch, unless a kernel's check needs more (a copy into O, say)."""
        self.launch(Q, K, V)

    def attributes(self) -> dict:
        raise NotImplementedError

    def guard_intact(self) -> bool:
        return bool(self.torch.isnan(self.Obuf[-self.guard:]).all().item())


def reference_grads(torch, Q, K, V, dO, causal: bool):
    """(dQ, dK, dV) in float64 of softmax(Q K^T / sqrt(d)) V for one batch and one K/V head: Q and dO (G, Nq, d) of
    its G query heads, K and V (Nk, d); causal bottom-right, rows that see no key give zero output and gradient.
    FlashAttention-2's backward by hand (seed 004): P from S, dV = sum P^T dO, dP = dO V^T, dS = P (dP - D) with
    D = rowsum(dO O), dQ = dS K / sqrt(d), dK = sum dS^T Q / sqrt(d); one query head at a time."""
    G, Nq, d = Q.shape
    Nk = K.shape[0]
    k, v = K.double(), V.double()
    scale = 1 / math.sqrt(d)
    mask = None
    if causal:
        i = torch.arange(Nq, device=Q.device)[:, None]
        mask = torch.arange(Nk, device=Q.device)[None, :] > i + (Nk - Nq)
    dQ = torch.empty((G, Nq, d), dtype=torch.float64, device=Q.device)
    dK = torch.zeros((Nk, d), dtype=torch.float64, device=Q.device)
    dV = torch.zeros_like(dK)
    for h in range(G):
        q, do = Q[h].double(), dO[h].double()
        S = (q @ k.T) * scale
        if mask is not None:
            S.masked_fill_(mask, float("-inf"))
        P = torch.nan_to_num(torch.softmax(S, dim=-1), nan=0.0)
        del S
        O = P @ v
        dV += P.T @ do
        dS = P * ((do @ v.T) - (do * O).sum(-1, keepdim=True))
        del P
        dQ[h] = (dS @ k) * scale
        dK += (dS.T @ q) * scale
        del dS
    return dQ, dK, dV


class GradRunner:
    """Buffers and checks of a backward (mode bwd) or a forward plus backward (fwd_bwd): Q, dO (B, H, Nq, d) and K, V
    (B, Hkv, Nk, d) in the shape's dtype; the gradients dQ, dK and dV, each with a NaN guard region behind it.
    ``inputs`` also runs the forward the backward needs (O and the log-sum-exp, untimed: ``forward``); ``backward``
    writes the gradients; the timing runs ``backward``, or the forward and the backward for fwd_bwd. A kernel's
    module subclasses it and supplies ``forward``, ``backward`` (and ``forward_backward`` where the two share
    state) and ``attributes``."""

    def __init__(self, torch, shape):
        self.torch, self.shape = torch, shape
        B, H, Hkv, Nq, Nk, d = (int(getattr(shape, a)) for a in AXES)
        self.dims = (B, H, Hkv, Nq, Nk, d)
        # the backward's error grows slowly with its sums' lengths (independent roundings): the forward's
        # tolerance times (L / 1024) ** 0.25 above 1024, L the longest reduction (Nk for dQ, G Nq for dK and dV)
        L = max(Nk, (H // Hkv) * Nq)
        self.tolerance = TOLERANCE[shape.dtype] * max(1.0, L / 1024) ** 0.25
        self.guard = 1024
        dt = self.torch_dtype()
        self.bufs = {}
        for name, shp in (("dQ", (B, H, Nq, d)), ("dK", (B, Hkv, Nk, d)), ("dV", (B, Hkv, Nk, d))):
            n = math.prod(shp)
            buf = torch.empty(n + self.guard, dtype=dt, device="cuda")
            self.bufs[name] = buf
            setattr(self, name, buf[:n].view(shp))

    def torch_dtype(self):
        return {"fp32": self.torch.float32, "fp16": self.torch.float16, "bf16": self.torch.bfloat16}[self.shape.dtype]

    def inputs(self, seed: int):
        """Fresh Q, K, V and dO, and the forward's O and LSE from them."""
        g = self.torch.Generator(device="cuda").manual_seed(seed)
        B, H, Hkv, Nq, Nk, d = self.dims
        rnd = lambda *shp: self.torch.randn(shp, generator=g, device="cuda", dtype=self.torch_dtype())
        Q, K, V = rnd(B, H, Nq, d), rnd(B, Hkv, Nk, d), rnd(B, Hkv, Nk, d)
        self.dO = rnd(B, H, Nq, d)
        self.forward(Q, K, V)
        return Q, K, V

    def reference_forward(self, Q, K, V):
        """O (input dtype) and LSE (fp32, natural log, of the scaled scores) from torch in float32."""
        torch = self.torch
        B, H, Hkv, Nq, Nk, d = self.dims
        k, v = (x.float().repeat_interleave(H // Hkv, dim=1) for x in (K, V))
        S = torch.matmul(Q.float(), k.transpose(-1, -2)) / math.sqrt(d)
        if self.shape.causal:
            i = torch.arange(Nq, device=Q.device)[:, None]
            S.masked_fill_(torch.arange(Nk, device=Q.device)[None, :] > i + (Nk - Nq), float("-inf"))
        self.LSE = torch.logsumexp(S, dim=-1).contiguous()
        self.O = torch.matmul(torch.nan_to_num(torch.softmax(S, dim=-1), nan=0.0), v).to(Q.dtype).contiguous()
        del S

    def forward(self, Q, K, V):
        self.reference_forward(Q, K, V)

    def backward(self, Q, K, V):
        raise NotImplementedError

    def forward_backward(self, Q, K, V):
        self.forward(Q, K, V)
        self.backward(Q, K, V)

    def setup(self):
        """What a launch needs before it (nothing, unless a kernel says otherwise)."""

    def launch(self, Q, K, V):
        self.backward(Q, K, V)

    def timed_launch(self, Q, K, V):
        (self.backward if self.shape.mode == "bwd" else self.forward_backward)(Q, K, V)

    def poison(self):
        for b in self.bufs.values():
            b.fill_(float("nan"))

    def guard_intact(self) -> bool:
        return all(bool(self.torch.isnan(b[-self.guard:]).all().item()) for b in self.bufs.values())

    def attributes(self) -> dict:
        raise NotImplementedError

    def check(self, seed: int) -> float:
        """The largest relative error of dQ, dK and dV against float64 on fresh inputs after poisoning them: over
        the first and the last K/V head (each with its query heads); inf where an element was left unwritten."""
        torch = self.torch
        Q, K, V = launch_poisoned(torch, self, seed, "a gradient")
        if any(bool(torch.isnan(getattr(self, n)).any().item()) for n in ("dQ", "dK", "dV")):
            return float("inf")
        B, H, Hkv, Nq, Nk, d = self.dims
        G = H // Hkv
        worst = 0.0
        for b, kv in sorted({(0, 0), (B - 1, Hkv - 1)}):
            hs = slice(kv * G, (kv + 1) * G)
            ref = reference_grads(torch, Q[b, hs], K[b, kv], V[b, kv], self.dO[b, hs], bool(self.shape.causal))
            for got, want in zip((self.dQ[b, hs], self.dK[b, kv], self.dV[b, kv]), ref):
                norm = torch.linalg.vector_norm(want)
                e = float((torch.linalg.vector_norm(got.double() - want) / norm).item()) if norm > 0 else 0.0
                worst = max(worst, e if math.isfinite(e) else float("inf"))
        return worst


def launch_poisoned(torch, runner, seed: int, what: str):
    """Fresh inputs, the outputs poisoned (NaN), one checked launch; InputError if it wrote past ``what``'s end."""
    Q, K, V = runner.inputs(seed)
    runner.poison()
    runner.setup()
    runner.launch(Q, K, V)
    torch.cuda.synchronize()
    if not runner.guard_intact():
        raise InputError(f"the kernel wrote past the end of {what}")
    return Q, K, V


REFERENCE_FLOPS = 2e11      # above this, the float64 reference is computed for a sample of heads (all are checked
                            # for unwritten elements)


def check_correct(torch, runner, seed: int) -> float:
    """Relative error ||O - ref|| / ||ref|| on fresh random inputs, after poisoning the output. Every element of O
    must be written (no NaN left) and the guard behind it intact; for problems above REFERENCE_FLOPS the float64
    reference covers the first and last head and 6 random ones. A backward's runner checks its gradients itself
    (GradRunner.check)."""
    if isinstance(runner, GradRunner):
        return runner.check(seed)
    Q, K, V = launch_poisoned(torch, runner, seed, "its output")
    if bool(torch.isnan(runner.O).any().item()):
        return float("inf")                      # an element was not written (or is NaN)
    B, H, Nq, d = Q.shape
    Hkv, Nk = K.shape[1], K.shape[2]
    O = runner.O
    if 4.0 * B * H * Nq * Nk * d > REFERENCE_FLOPS and B * H > 8:
        g = np.random.default_rng(seed)
        heads = sorted({0, B * H - 1, *g.choice(B * H, 6, replace=False).tolist()})
        kv = [h // (H // Hkv) for h in heads]
        Q, O = (t.reshape(B * H, 1, Nq, d)[heads] for t in (Q, O))
        K, V = (t.reshape(B * Hkv, 1, Nk, d)[kv] for t in (K, V))
    ref = reference(torch, Q, K, V, causal=bool(runner.shape.causal))
    err = torch.linalg.vector_norm(O.double() - ref) / torch.linalg.vector_norm(ref)
    e = float(err.item())
    return e if math.isfinite(e) else float("inf")


def replace_row(path: Path, key: tuple, new: dict) -> None:
    """Rewrite ``path`` with the row of ``key`` replaced by ``new``, every other line (comments, other rows) as it
    was, and a user's own columns of the old row kept; written to a temporary file of a unique name beside it and
    renamed over it (perfmodel.io.write_atomic)."""
    import io

    from perfmodel.io import write_atomic

    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    content = [i for i, l in enumerate(lines) if l.strip() and not l.startswith("#")]
    columns = next(csv.reader([lines[content[0]]])) if content else COLUMNS
    for i in content[1:]:
        old = dict(zip(columns, next(csv.reader([lines[i]]))))
        if row_key(old) != key:
            continue
        row = dict(old, **{k: v for k, v in new.items() if k in columns})
        if "N" in columns and "Nq" not in columns:
            row = legacy_row(dict(old, **new))
        buf = io.StringIO()
        csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore").writerow({k: row.get(k, "") for k in columns})
        lines[i] = buf.getvalue()
    write_atomic(path, "".join(lines), "measurement file")


def measure(configs: list[Config], out: Path, spec: GPUSpec | None, flush: bool = True, budget_ms: float = 200.0,
            min_runs: int = 10, progress=None, command: str | None = None, verbose: bool = False, target_s: float = 0.25,
            retime_unstable: bool = False) -> dict:
    """Measure every configuration not yet in ``out`` (and, with ``retime_unstable``, again those whose recorded
    timing was disturbed). Returns a summary (measured, retimed, skipped, failed)."""
    skipped_path = out.with_suffix(".skipped.csv")
    prepare_output(out)                  # before the rows are read: a half-written last row is not measured
    prepare_output(skipped_path)
    torch = build.require_torch()
    tool = build.check_toolchain(torch)
    ext = build.load(verbose=verbose)
    device_name = torch.cuda.get_device_name()
    props = torch.cuda.get_device_properties(0)
    clock = Clock()
    existing = {row_key(r): r for r in read_rows(out)}
    redo = {k for k, r in existing.items() if bench.unstable(r["p20_ms"], r["p80_ms"])} if retime_unstable else set()
    skipped_done = {row_key(r) for r in read_rows(skipped_path)}
    rows = Appender(out, COLUMNS)
    skips = Appender(skipped_path, SKIP_COLUMNS)
    bencher = bench.Bencher(torch, flush=flush)
    cal = calibration.resolve(spec) if spec else None
    command = command or " ".join(["perfmodel"] + [shlex.quote(a) for a in sys.argv[1:]])
    summary = {"measured": 0, "retimed": 0, "already": 0, "skipped": 0, "failed": 0}
    now = lambda: datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rng = np.random.default_rng()
    try:
        for i, cfg in enumerate(configs):
            key = dict(cfg.key(), l2_flush=int(flush))
            k = row_key({a: str(v) for a, v in key.items()})
            if (k in existing and k not in redo) or k in skipped_done:
                summary["already"] += 1
                if progress:
                    progress(i + 1, len(configs), cfg)
                continue
            kern = get_kernel(cfg.kernel)
            smem = int(kern.smem_bytes(cfg.shape, cfg.tiles))
            threads = int(cfg.tiles.threads)
            reason = detail = None
            why = kern.why_not(spec, cfg.shape, cfg.tiles) if spec is not None else None
            if smem > props.shared_memory_per_block_optin or threads > 1024 or why:
                reason, detail = "no-fit", why or f"{smem} B shared, {threads} threads"
            elif spec is not None and budget_ms > 0:
                pred_ms = float(engine.evaluate(spec, kern, cfg.shape, cfg.tiles, cal).time_s) * 1e3
                if pred_ms > budget_ms:
                    reason, detail = "budget", f"predicted {pred_ms:.1f} ms > {budget_ms:g} ms"
            if reason is None:
                try:
                    runner = kern.runner(torch, ext, cfg.shape, cfg.tiles)
                    seed = int(rng.integers(1 << 31))
                    err = check_correct(torch, runner, seed)
                    if not err <= runner.tolerance:
                        reason, detail = "wrong", f"relative error {err:.3g} > {runner.tolerance:g}"
                except torch.cuda.OutOfMemoryError:
                    reason, detail = "oom", "out of GPU memory"
                    torch.cuda.empty_cache()
                except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
                    # a configuration the library or the kernel refuses (no backend for it, say): recorded as skipped
                    # with its reason, and the run goes on
                    reason, detail = "error", f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"
            if reason is not None:
                skips.add(dict(key, reason=reason, detail=detail, date=now()))
                summary["failed" if reason in ("wrong", "oom", "error") else "skipped"] += 1
                if progress:
                    progress(i + 1, len(configs), cfg)
                continue
            Q, K, V = runner.inputs(seed + 1)
            attrs = runner.attributes()
            runner.setup()
            runner.timed_launch(Q, K, V)    # warm the clocks before the first reading
            torch.cuda.synchronize()
            before = clock.sm_mhz()
            t = bencher.run(lambda: runner.timed_launch(Q, K, V), setup=runner.setup, min_runs=min_runs,
                            target_s=target_s)
            after = clock.sm_mhz()
            row = dict(key, median_ms=f"{t.median_ms:.6g}", p20_ms=f"{t.p20_ms:.6g}", p80_ms=f"{t.p80_ms:.6g}",
                       n_runs=t.n_runs, rel_err=f"{err:.3g}", regs_per_thread=attrs["regs_per_thread"],
                       smem_bytes=smem, local_bytes=attrs["local_bytes"],
                       cuda_blocks_per_sm=attrs["cuda_blocks_per_sm"], gpu_name=device_name,
                       sm_clock_mhz_before=before, sm_clock_mhz_after=after, sm_clock_max_mhz=clock.max_mhz(),
                       driver=clock.driver(), torch=str(torch.__version__), torch_cuda=tool["torch_cuda"],
                       nvcc=tool["nvcc"], date=now(), seed=seed, command=command,
                       spin_clock_mhz_before=f"{t.clock_before_mhz:.1f}", spin_clock_mhz_after=f"{t.clock_after_mhz:.1f}",
                       median_cycles=f"{t.median_cycles:.6g}")
            if k in redo:                       # keep the disturbed row, then swap the new one in
                old = Appender(out.with_suffix(".superseded.csv"), COLUMNS)
                old.add(existing[k])
                old.close()
                rows.close()
                replace_row(out, k, row)
                rows = Appender(out, COLUMNS)
                redo.discard(k)
                summary["retimed"] += 1
            else:
                rows.add(row)
                summary["measured"] += 1
            del Q, K, V, runner
            if progress:
                progress(i + 1, len(configs), cfg)
    finally:
        rows.close()
        skips.close()
    summary["host"] = platform.node()
    return summary
