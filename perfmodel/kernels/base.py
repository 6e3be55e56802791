"""The kernel interface: what every kernel model provides, so that nothing outside this package names a kernel.

A kernel is one module holding a ``Kernel`` subclass and its ``Tiles`` type, registered with ``register``:

* identity: ``name``, ``description``, ``source`` (its CUDA file in csrc/), ``dtypes``, ``causal`` support;
* ``Tiles``: a frozen dataclass of the kernel's tile parameters, with defaults; it maps onto the launch columns
  every measurement CSV has (Br, Bc, threads, pad), and back;
* the launch shape: ``grid_blocks`` (and ``grid_dims``, the grid as launched), threads (from the tiles),
  ``smem_bytes``, registers (per-architecture data), ``buffer_bytes`` (device memory beyond Q, K, V and O);
* ``fits``/``why_not``: vectorised fit test and a derived one-line reason;
* ``head_counts``: pure counts of one (batch, head) -- no GPU spec, no calibration -- assembled over B*H by
  ``counts``;
* ``arch``: per-architecture facts (registers, SASS-derived instruction overheads) keyed by ``sm_XY``; an
  architecture without its own falls back to the nearest one, and the prediction says so;
* measurement: ``runner`` returns an object that allocates buffers, launches the bundled kernel, and states the
  correctness tolerance (see perfmodel.measure.runner).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from perfmodel.errors import InputError
from perfmodel.hw.arch import closest
from perfmodel.model.counts import Counts
from perfmodel.shape import AttentionShape, DTYPES, positive_int

TILE_COLUMNS = ("Br", "Bc", "threads", "pad")   # launch columns of every measurement row
GRID_X_MAX, GRID_YZ_MAX = 2 ** 31 - 1, 65535     # CUDA's grid limits (compute capability 3.0 and newer)


@dataclass(frozen=True)
class Tiles:
    """Base of the per-kernel tile types. Subclasses list their own fields; ``columns`` maps them onto
    TILE_COLUMNS (derived columns, such as fa1's threads = Br, computed)."""

    Br: object
    Bc: object

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @property
    def threads(self):
        raise NotImplementedError

    @property
    def pad(self):
        return 0 * np.asarray(self.Br)

    def columns(self) -> dict:
        return {"Br": self.Br, "Bc": self.Bc, "threads": self.threads, "pad": self.pad}

    @classmethod
    def from_columns(cls, cols: dict) -> "Tiles":
        """The tiles of a measurement row (or arrays of rows) from its launch columns."""
        return cls(**{k: cols[k] for k in cls.fields()})


@dataclass(frozen=True)
class Launch:
    grid_blocks: object
    threads: object
    smem_bytes: object
    regs: object


@dataclass(frozen=True)
class Companion:
    """A kernel a launch runs after its own in the same call (split-KV's combine): its counts and launch shape.
    Its blocks are timed like any launch's; it is queued behind the first kernel (the first's Counts.queued_ops
    prices its launch) and finds its inputs in L2 (no cold start of its own). ``key``: whose path costs it uses
    (a key with no fit: the probe's). ``before``: the call runs it ahead of the main kernel (a backward's
    preprocess), which only orders the launches a prediction shows."""

    counts: object
    launch: Launch
    key: str
    before: bool = False


@dataclass(frozen=True)
class ArchFacts:
    """What the compiled kernel looks like on one architecture: registers per thread and the instructions per
    loop step beyond the counted ones (read off that architecture's SASS)."""

    regs: int
    overheads: dict = field(default_factory=dict)
    source: str = ""
    # a kernel compiled as several instances (fa2_tc's tiles): each one's registers, and the spill loads and stores
    # in its loop, where ptxas and the SASS give them; ``regs`` stands for an instance outside the table
    instance_regs: dict = field(default_factory=dict)
    instance_spills: dict = field(default_factory=dict)
    # each instance's warp instructions read off its listing (fa2_tc's CODE): (tile, causal, ragged, last, once)
    instance_code: dict = field(default_factory=dict)


class Kernel(ABC):
    name: str = ""
    description: str = ""
    source: str = ""                       # CUDA file in perfmodel/kernels/csrc/
    dtypes: tuple[str, ...] = ("fp32",)
    causal: bool = False
    gqa: bool = False                      # runs grouped K/V heads (H a multiple of Hkv > 1 query heads a K/V head)
    cross: bool = False                    # runs Nq != Nk (causal aligned bottom-right)
    modes: tuple[str, ...] = ("fwd",)      # passes it runs: fwd, bwd (fwd_bwd: both)
    Tiles: type = Tiles
    arch: dict = {}                        # "sm_90" -> ArchFacts
    serial: tuple = ()                     # groups of timing resources whose times add (model/timing.py)
    serial_bwd: tuple | None = None        # the backward's, where its loop joins them otherwise (None: serial)
    path_pipes: tuple = ()                 # resources whose work a warp waits on itself: on its path (timing.py)
    pipe_p: float = 0.0                    # > 0: the pipes join one another by this p-norm first (timing.py)
    own_join: float = 0.0                  # > 0: a forward warp's own MUFU and FP32 work join on its path by this
                                           # p-norm; 0: they add (timing.own_on_path)
    fit_features: tuple = ("dot", "reduction", "exp", "outer", "gmem", "sync")   # path costs `fit` may fit
    fit_after: tuple = ()                  # FIT_PARAMS `fit` fits next, alone, the costs above held (fit.fit_path)
    path_costs_from: str | None = None     # use another kernel's fitted path costs (same loop forms)
    external: bool = False                 # a library's kernel: nothing may be fitted to its timings

    # --- tiles ----------------------------------------------------------------------------------------
    def make_tiles(self, shape: AttentionShape | None = None, gpu=None, **given) -> Tiles:
        """Validated scalar tiles from user values (None = the kernel's default). Naming a parameter the
        kernel does not have is an error, not silently ignored."""
        names = self.Tiles.fields()
        extra = [k for k, v in given.items() if v is not None and k not in names]
        if extra:
            raise InputError(f"kernel {self.name} has no tile parameter '{extra[0]}' (its tiles: "
                             f"{', '.join(names)})")
        defaults = self.default_tiles(shape, gpu)
        vals = {}
        for k in names:
            v = given.get(k)
            if v is None:
                if getattr(defaults, k, None) is None:
                    raise InputError(f"kernel {self.name} needs --{k}")
                v = getattr(defaults, k)
            vals[k] = positive_int(k, v, lo=self.tile_minimum(k))
        return self.Tiles(**vals)

    def default_tiles(self, shape: AttentionShape | None = None, gpu=None) -> Tiles:
        """The default tiles: the seed's 32 x 32 and the Tiles type's own defaults."""
        return self.Tiles(**{"Br": 32, "Bc": 32})

    def forward_tiles(self, shape: AttentionShape, tiles: Tiles, gpu=None) -> Tiles:
        """The tiles the forward of a forward-plus-backward call runs, ``tiles`` being the backward's: the forward's
        default tiles."""
        return self.default_tiles(shape.with_mode("fwd"), gpu)

    def library_tiles(self, shape: AttentionShape, gpu) -> Tiles:
        """An external kernel's own tiles for every problem of a vectorised shape (a library picks its tiles; its
        measured rows are predicted with these). Bundled kernels run the tiles they are given."""
        raise NotImplementedError(f"{self.name} runs the tiles it is given")

    def tile_minimum(self, name: str) -> int:
        return 1

    def sweep_values(self, name: str) -> list | None:
        """The values a sweep tries for a tile field the user did not give (None: the default alone)."""
        return [16, 32, 64, 128] if name in ("Br", "Bc") else None

    # --- problem support ------------------------------------------------------------------------------
    def lacks(self, shape: AttentionShape) -> str | None:
        """What this kernel lacks to run ``shape`` (any of its problems, when vectorised), in words, or None. It
        reads the declarations: ``dtypes``, ``causal``, ``gqa`` (grouped K/V heads), ``cross`` (Nq != Nk) and
        ``modes``."""
        if shape.dtype not in self.dtypes:
            return f"runs {'/'.join(self.dtypes)} only, not {shape.dtype}"
        if shape.causal and not self.causal:
            return "has no causal variant"
        if not self.gqa and np.any(np.asarray(shape.Hkv) != np.asarray(shape.H)):
            return "does not run grouped K/V heads (Hkv < H)"
        if not self.cross and np.any(np.asarray(shape.Nq) != np.asarray(shape.Nk)):
            return "does not run different query and key lengths (Nq != Nk)"
        if any(m not in self.modes for m in (("fwd", "bwd") if shape.mode == "fwd_bwd" else (shape.mode,))):
            return f"does not run mode {shape.mode} (it runs {', '.join(self.modes)})"
        return None

    def check_shape(self, shape: AttentionShape) -> None:
        """One line naming what this kernel lacks for ``shape`` and the kernels that have it."""
        if shape.dtype not in DTYPES:
            raise InputError(f"unknown dtype '{shape.dtype}'; known: {', '.join(DTYPES)}")
        lack = self.lacks(shape)
        if lack:
            # where the dtype is not what is missing, a kernel of another dtype still runs the workload
            as_theirs = lambda k: (shape if shape.dtype not in self.dtypes or shape.dtype in k.dtypes
                                   else dataclasses.replace(shape, dtype=k.dtypes[0]))
            others = [k.name for k in REGISTRY.values() if k is not self and k.lacks(as_theirs(k)) is None]
            raise InputError(f"kernel {self.name} {lack}; "
                             + (f"kernels that do: {', '.join(others)}" if others else "no kernel here does yet"))

    # --- launch shape -----------------------------------------------------------------------------------
    @abstractmethod
    def grid_blocks(self, shape: AttentionShape, tiles: Tiles): ...

    @abstractmethod
    def smem_bytes(self, shape: AttentionShape, tiles: Tiles): ...

    def grid_dims(self, shape: AttentionShape, tiles: Tiles) -> tuple:
        """The grid as launched, (x, y, z): CUDA allows x up to 2**31 - 1 blocks and y and z up to 65535."""
        return self.grid_blocks(shape, tiles), 1, 1

    def buffer_bytes(self, shape: AttentionShape, tiles: Tiles):
        """Device memory the launch needs beyond the problem's tensors (row statistics, split partials); none here."""
        return 0 * np.asarray(shape.Nq, np.int64)

    def device_bytes(self, shape: AttentionShape, tiles: Tiles):
        """Device memory the call's tensors take: Q, K, V and O (the backward's: also dO, LSE, dQ, dK and dV), and
        the kernel's own buffers."""
        held = shape if shape.mode == "fwd" else shape.with_mode("bwd")
        return held.tensor_bytes() + np.asarray(self.buffer_bytes(shape, tiles), dtype=float)

    def fit_key_for(self, mode: str) -> str:
        """Whose fitted path costs a pass uses: the forward's fit_key, or for a backward "<fit_key>:bwd" (its own
        loop forms; the probe's costs until a fit on backward rows exists)."""
        return self.fit_key if mode == "fwd" else f"{self.fit_key}:{mode}"

    @property
    def fit_key(self) -> str:
        """Whose fitted path costs this kernel uses (its own, or those of the kernel whose loop forms it shares)."""
        return self.path_costs_from or self.name

    def companions(self, shape: AttentionShape, tiles: Tiles, facts: ArchFacts) -> tuple:
        """Kernels the call runs after this one (``Companion``s); none for most kernels."""
        return ()

    def resolve(self, gpu, shape: AttentionShape, tiles: Tiles) -> Tiles:
        """The tiles the launch really uses on this GPU. Bundled kernels run what they are given; a library
        kernel (PyTorch's) picks its own from the problem and the GPU, and overrides this."""
        return tiles

    def resolution_note(self, given: Tiles, used: Tiles) -> str | None:
        """A line for a single prediction where ``resolve`` ran other tiles than ``given``; None for most."""
        return None

    def facts(self, arch: str) -> tuple[ArchFacts, str | None]:
        """(facts, None) for an architecture with its own data, else (the nearest one's, a note saying so)."""
        if arch in self.arch:
            return self.arch[arch], None
        near = closest(arch, sorted(self.arch))
        return self.arch[near], (f"{self.name}: registers and per-step instruction overheads read off {near} "
                                 f"SASS; {arch} is assumed to compile alike")

    def launch(self, shape: AttentionShape, tiles: Tiles, arch: str, regs=None) -> Launch:
        facts, _ = self.facts(arch)
        return Launch(grid_blocks=self.grid_blocks(shape, tiles), threads=np.asarray(tiles.threads, np.int64),
                      smem_bytes=self.smem_bytes(shape, tiles),
                      regs=np.asarray(facts.regs if regs is None else regs, np.int64))

    # --- fit --------------------------------------------------------------------------------------------
    def limits(self, gpu, shape: AttentionShape, tiles: Tiles) -> list[tuple[object, str]]:
        """(ok array, reason) pairs every launch must meet: the kernel's own (``constraints``: what it needs of the
        GPU and the problem, its compiled tiles) first, then the GPU's launch limits."""
        threads = np.asarray(tiles.threads)
        smem = self.smem_bytes(shape, tiles)
        regs = self.facts(gpu.sm)[0].regs
        gx, gy, gz = (np.asarray(g, dtype=float) for g in self.grid_dims(shape, tiles))
        H, Hkv, Nq, Nk = (np.asarray(x) for x in (shape.H, shape.Hkv, shape.Nq, shape.Nk))
        support = [(H % Hkv == 0, "H={H} query heads cannot share Hkv={Hkv} K/V heads (H must be a multiple)")]
        if not self.gqa:
            support.append((Hkv == H, "does not run grouped K/V heads (Hkv < H)"))
        if not self.cross:
            support.append((Nq == Nk, "does not run different query and key lengths (Nq != Nk)"))
        return support + self.constraints(gpu, shape, tiles) + [
            (self.device_bytes(shape, tiles) <= gpu.dram_bytes,
             f"the problem's tensors (Q, K, V, O and the kernel's buffers) take {{mem}}; {gpu.name} has "
             f"{gpu.dram_bytes / 2**30:.0f} GiB"),
            ((gx <= GRID_X_MAX) & (gy <= GRID_YZ_MAX) & (gz <= GRID_YZ_MAX),
             f"the launch's grid {{grid}} (x, y, z) exceeds CUDA's limits: x up to {GRID_X_MAX}, y and z up to "
             f"{GRID_YZ_MAX}"),
            (threads <= gpu.max_threads_per_block,
             f"{{threads}} threads per block; {gpu.name} allows at most {gpu.max_threads_per_block}"),
            (threads * regs <= gpu.regs_per_block,
             f"{{threads}} threads x {regs} registers exceed the {gpu.regs_per_block} "
             f"registers a block may hold on {gpu.name}"),
            (smem <= gpu.smem_per_block_optin_bytes,
             f"tile {{tiles}} needs {{smem}} B of shared memory per block; {gpu.name} allows at most "
             f"{gpu.smem_per_block_optin_bytes} B"),
        ]

    def constraints(self, gpu, shape: AttentionShape, tiles: Tiles) -> list[tuple[object, str]]:
        return []

    @staticmethod
    def tensor_core_limits(gpu, shape: AttentionShape, max_d: int = 256) -> list[tuple[object, str]]:
        """What every fp16/bf16 tensor-core kernel here needs: mma.sync (sm_80 or newer) and its head dims."""
        d = np.asarray(shape.d)
        has_mma = bool(gpu.tensor_flops(shape.dtype)) and gpu.capability >= (8, 0)
        return [(np.asarray(has_mma), f"needs fp16/bf16 tensor cores with mma.sync (sm_80 or newer); {gpu.name} is "
                                      f"{gpu.sm}"),
                ((d % 8 == 0) & (d <= max_d), f"head dimension d={{d}} must be a multiple of 8, at most {max_d}")]

    def fits(self, gpu, shape: AttentionShape, tiles: Tiles):
        ok = True
        for cond, _ in self.limits(gpu, shape, tiles):
            ok = ok & np.asarray(cond)
        return ok

    def why_not(self, gpu, shape: AttentionShape, tiles: Tiles) -> str | None:
        """For scalar inputs: the first limit the configuration breaks, as one line, or None."""
        broken = self.first_broken(gpu, shape, tiles)
        return broken[1] if broken else None

    def first_broken(self, gpu, shape: AttentionShape, tiles: Tiles) -> tuple[int, str] | None:
        """For scalar inputs: (its place in ``limits``, the line why_not gives) of the first limit the configuration
        breaks, or None. The kernel's own limits come first, the GPU's launch limits (memory, grid, threads,
        registers, shared memory) after them."""
        for i, (cond, reason) in enumerate(self.limits(gpu, shape, tiles)):
            if not bool(np.all(cond)):
                desc = ", ".join(f"{k}={getattr(tiles, k)}" for k in self.Tiles.fields())
                grid = " x ".join(str(int(np.asarray(g))) for g in self.grid_dims(shape, tiles))
                gib = float(np.asarray(self.device_bytes(shape, tiles))) / 2**30
                mem = f"{gib:,.1f} GiB" if gib < 1e6 else f"{gib:.3g} GiB"
                return i, f"{self.name}: " + reason.format(threads=int(np.asarray(tiles.threads)),
                                                           H=shape.H, Hkv=shape.Hkv,
                                                           tiles=desc + f", d={shape.d}", d=shape.d,
                                                           smem=int(np.asarray(self.smem_bytes(shape, tiles))),
                                                           grid=grid, mem=mem)
        return None

    # --- counts -------------------------------------------------------------------------------------------
    @abstractmethod
    def head_counts(self, shape: AttentionShape, tiles: Tiles, facts: ArchFacts) -> Counts:
        """Counts of one (batch, head): its blocks' work (extensive fields), one block's path (path_*), and
        the DRAM pieces of that head."""

    def counts(self, shape: AttentionShape, tiles: Tiles, facts: ArchFacts) -> Counts:
        """Counts of the whole launch: the head's work times B*H; the path and the burst (per block) and the live
        bytes (per head) as they are."""
        head = self.head_counts(shape, tiles, facts)
        BH = shape.heads
        per_launch = {f.name: BH * getattr(head, f.name) for f in dataclasses.fields(Counts)
                      if not f.name.startswith("path_") and f.name not in Counts.UNSCALED + Counts.RATIOS}
        return dataclasses.replace(head, **per_launch)

    # --- measurement --------------------------------------------------------------------------------------
    def runner(self, torch, ext, shape: AttentionShape, tiles: Tiles):
        raise InputError(f"kernel {self.name} cannot be measured here")


REGISTRY: dict[str, Kernel] = {}


def register(kernel: Kernel) -> Kernel:
    if not kernel.name or kernel.name in REGISTRY:
        raise ValueError(f"kernel name '{kernel.name}' is empty or taken")
    REGISTRY[kernel.name] = kernel
    return kernel


def get(name: str) -> Kernel:
    try:
        return REGISTRY[str(name)]
    except KeyError:
        import difflib

        near = difflib.get_close_matches(str(name).strip().lower().replace("_", "-"), list(REGISTRY), n=1,
                                         cutoff=0.85)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise InputError(f"unknown kernel '{name}'; known: {', '.join(REGISTRY)}{hint}") from None
