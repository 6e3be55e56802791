"""From counts to time: rounds of resident blocks, per-resource throughput, the latency path, L2 and DRAM.

Per SM, blocks run in rounds of at most ``blocks_per_sm``; the busiest SM takes ceil(grid / SMs) blocks. A round
costs the p-norm join of each SM resource's cycles (SM_RESOURCES: the pipes, issue, shared memory) and one block's
latency path (the path features of Counts at their fitted costs, with the L2 misses it waits on). Blocks of uneven
work (causal) cannot finish before the heaviest; the chip-wide rows (CHIP_RESOURCES: L2, DRAM) join the SM time
the same way; each launch adds its launch cost, cold start and first-round burst. Cycles become seconds at the SM
clock (the tensor clock for MMA launches), lowered where a calibration's power block caps a kernel priced from
probes alone (model.power).
Adding a resource is one row here (and the calibration field that prices it).

The mechanism in full, and the measurements behind it: research/notes/timing-model.md.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from perfmodel.hw.calibration import Calibration
from perfmodel.hw.gpu import GPUSpec
from perfmodel.model import power
from perfmodel.model.counts import PATH_FEATURES, Counts, block_work_at


@dataclass(frozen=True)
class SMResource:
    name: str
    work: Callable[[Counts], object]                     # units per launch
    cycles: Callable[[GPUSpec, Calibration], float]      # cycles per unit
    per_subpartition: bool                               # served only by sub-partitions that have warps


@dataclass(frozen=True)
class ChipResource:
    name: str
    work: Callable[[Counts, object, Calibration], object]    # bytes per launch, from counts and the DRAM traffic
    rate: Callable[[Calibration], float]                     # bytes per second


def _red_priced(cal: Calibration) -> bool:
    """Whether fp32 reductions into L2 have a rate of their own (the probe's, `perfmodel probe` step 5c); where
    unmeasured they are priced as plain stores on the L2 row."""
    return cal.l2_red_bps > 0


SM_RESOURCES = (
    SMResource("tensor", lambda c: c.warp_mma, lambda g, cal: cal.mma_cycles, True),
    SMResource("wgmma", lambda c: c.warp_wgmma, lambda g, cal: cal.wgmma_cycles, True),
    SMResource("fp32", lambda c: c.warp_fp32, lambda g, cal: g.warp_size / cal.fp32_lanes_per_clk, True),
    SMResource("sfu", lambda c: c.warp_sfu, lambda g, cal: g.warp_size / cal.sfu_lanes_per_clk, True),
    SMResource("issue", lambda c: c.warp_instructions, lambda g, cal: 1 / g.schedulers_per_sm, True),
    # issue slots that instruction fetch adds (fetch_instructions: set in predict, which has the grid); they join
    # the issue slots as one part
    SMResource("fetch", lambda c: 0 * c.warp_instructions, lambda g, cal: 1 / g.schedulers_per_sm, True),
    SMResource("smem", lambda c: c.smem_wavefronts, lambda g, cal: 1 / cal.smem_wavefronts_per_clk, False),
    # one-stage tile copies (Counts.stage_*), in cycles (set by _at_clock, which has the clock): what a serial group
    # naming it places beside the GEMMs
    SMResource("stage", lambda c: 0 * c.stage_loads, lambda g, cal: 1.0, False),
    SMResource("tail", lambda c: c.tail_cycles, lambda g, cal: 1.0, False),     # Counts.tail_cycles
)
CHIP_RESOURCES = (
    ChipResource("l2", lambda c, mem, cal: c.l2_bytes - (c.l2_red_bytes if _red_priced(cal) else 0),
                 lambda cal: cal.l2_bw_bps),
    # L2 applies a reduction's adds at a rate of its own, about a fifth of its read bandwidth on the H200
    ChipResource("red", lambda c, mem, cal: c.l2_red_bytes if _red_priced(cal) else 0 * c.l2_red_bytes,
                 lambda cal: cal.l2_red_bps or 1.0),
    ChipResource("dram", lambda c, mem, cal: mem.dram_bytes, lambda cal: cal.dram_bw_bps),
)
RESOURCES = tuple(r.name for r in SM_RESOURCES) + ("latency",) + tuple(r.name for r in CHIP_RESOURCES)
# What the blocks in service still hold when a block dispatched after the first round starts, over a renewal
# process's mean residual per slot: the mean of the traced causal launches (research/notes/timing-model.md)
LIST_RESIDUAL = 0.87


@dataclass(frozen=True)
class Timing:
    time_s: np.ndarray
    times_s: dict            # resource -> seconds it alone would need (whole kernel)
    bound: np.ndarray        # name of the largest
    clock_hz: object = None  # the SM clock it runs at (below the model's clock where the power limit holds it)
    power_w: object = None   # the bench's average power over its runs (None: no power model for this GPU)


def _pnorm(parts, p):
    """(sum x^p)^(1/p), computed relative to the largest part, in float32."""
    parts = [np.asarray(x, dtype=np.float32) for x in parts]
    top = functools.reduce(np.maximum, parts)
    safe = np.where(top > 0, top, np.float32(1))
    acc = None
    for x in parts:
        term = np.power(x / safe, np.asarray(p, dtype=np.float32))
        acc = term if acc is None else acc + term
    inv = (1.0 / np.asarray(p, dtype=float)).astype(np.float32)          # p: a number, or one per configuration
    return np.where(top > 0, safe * np.power(acc, inv), np.float32(0)).astype(float)


def step_bytes(c: Counts, grid, blocks_per_sm, sm_count: int):
    """(own, K/V) bytes a round's resident blocks fetch when they start together (Counts.burst_*): each block's own,
    and each group of ``burst_sharers`` blocks' first K/V tiles once."""
    first = np.minimum(np.asarray(grid, dtype=float), np.asarray(blocks_per_sm, dtype=float) * sm_count)
    sharers = np.maximum(np.minimum(np.asarray(c.burst_sharers, dtype=float), first), 1)
    return (first * np.asarray(c.burst_own_bytes, dtype=float),
            np.ceil(first / sharers) * np.asarray(c.burst_kv_bytes, dtype=float))


def burst_bytes(c: Counts, grid, blocks_per_sm, sm_count: int):
    """Bytes the first round's blocks fetch before their first compute: their step_bytes, at most the launch's
    first-touch reads."""
    own, kv = step_bytes(c, grid, blocks_per_sm, sm_count)
    return np.minimum(own + kv, np.asarray(c.dram_read_once, dtype=float))


def dram_floor_s(mem, cal: Calibration):
    """The least time a launch's DRAM traffic takes: its reads at the read stream's rate, its writes at the rate
    that puts a copy at the copy's (Calibration.dram_floor_rates)."""
    read, write = cal.dram_floor_rates
    return (np.asarray(mem.dram_read_bytes, dtype=float) / read
            + np.asarray(mem.dram_write_bytes, dtype=float) / write)


def add(a: Timing, b: Timing) -> Timing:
    """Two kernels of one call, one after the other: their times add, resource by resource; the bound is the
    first's (the larger kernel's, where a companion is small)."""
    return Timing(time_s=a.time_s + b.time_s, times_s={k: a.times_s[k] + b.times_s[k] for k in a.times_s},
                  bound=a.bound, clock_hz=a.clock_hz, power_w=a.power_w)


def once_supply(table: dict, once_kib, loop_kib):
    """Warp instructions per scheduler per clock that once-run code of ``once_kib`` gets beside a main loop of
    ``loop_kib`` (Calibration.fetch_once_ipc, the probe's layout runs), bilinear in both, held at the table's edges."""
    once_axis = np.asarray(table["once_kib"], dtype=float)
    loop_axis = np.asarray(table["loop_kib"], dtype=float)
    ipc = np.asarray(table["ipc"], dtype=float)
    by_loop = np.stack([np.interp(once_kib, once_axis, row) for row in ipc])     # [loops, ...]
    lo = np.clip(np.searchsorted(loop_axis, loop_kib, side="right") - 1, 0, len(loop_axis) - 1)
    hi = np.minimum(lo + 1, len(loop_axis) - 1)
    span = np.where(hi > lo, loop_axis[hi] - loop_axis[lo], 1.0)
    w = np.clip((np.asarray(loop_kib, dtype=float) - loop_axis[lo]) / span, 0, 1)
    pick = lambda k: np.take_along_axis(by_loop, np.broadcast_to(k, np.shape(by_loop[0]))[None], 0)[0]
    return (1 - w) * pick(lo) + w * pick(hi)


def fetch_instructions(c: Counts, cal: Calibration, grid, slots):
    """Issue slots (warp instructions' worth) that instruction fetch adds to a launch: its once-run code issues at
    the probe's supply for that code beside that loop instead of the loop's own rate, when blocks of uneven work
    (causal) sit at different points of the code. The first round's blocks start together and fetch in step (the
    probe's uniform runs lose at most 3% up to 80 KiB of once-run code): only blocks dispatched after it pay. Zero
    where the kernel's layout (``Counts.code_once_kib``) or the GPU's supply table is unknown."""
    once = np.asarray(c.code_once_kib, dtype=float)
    if not cal.fetch_once_ipc or not np.any(once > 0):
        return 0.0
    loop = np.asarray(c.code_loop_kib, dtype=float)
    r = once_supply(cal.fetch_once_ipc, once, loop)
    r_loop = once_supply(cal.fetch_once_ipc, 0 * once, loop)
    extra = np.maximum(1 / r - 1 / r_loop, 0)
    later = np.maximum(np.asarray(grid, dtype=float) - slots, 0) / np.maximum(np.asarray(grid, dtype=float), 1)
    uneven = np.asarray(c.block_spread, dtype=float) > 1
    return np.where(uneven & (once > 0), np.asarray(c.warp_once, dtype=float) * extra * later, 0.0)


def others_work(t: dict, warps, path_pipes: tuple, gpu: GPUSpec) -> dict:
    """The SM resources' cycles ``t`` of ``warps`` co-resident warps less the path warp's own work on the
    ``path_pipes``, which its latency path already holds: it is one of the warps on its sub-partition (a resource
    served per sub-partition) or one of those on the SM (shared memory). Other resources are unchanged."""
    f32 = np.float32
    warps = np.asarray(warps, dtype=f32)
    mates = {True: np.maximum(warps / f32(gpu.schedulers_per_sm), f32(1)), False: np.maximum(warps, f32(1))}
    sub = {res.name: res.per_subpartition for res in SM_RESOURCES if res.name in path_pipes}
    return {k: (v * (f32(1) - f32(1) / mates[sub[k]]) if k in sub else v) for k, v in t.items()}


def own_on_path(own: dict, own_join: float):
    """Cycles a warp's own work on its path_pipes (``own``: resource -> cycles) adds to its path: the pipes' times
    add, but with ``own_join`` > 0 (Kernel.own_join) its MUFU and FP32 work join by that p-norm. FP32 instructions
    that wait on nothing issue in the gaps MUFU.EX2's eight-cycle interval leaves: three more a score around each
    exponential cost fa2_tc 6% of its time at 128 x 128 tiles, where adding them priced 22% (joined, 19%: the rest
    lies in how every warp's issue slots join the path; research/data/h200/noftz; research/notes/known-gaps-log.md,
    2026-12-02)."""
    if own_join and "sfu" in own and "fp32" in own:
        rest = sum(v for k, v in own.items() if k not in ("sfu", "fp32"))
        return rest + _pnorm([own["sfu"], own["fp32"]], own_join)
    return sum(own.values())


def path_cycles(c: Counts, costs: dict):
    """One block's latency path in cycles."""
    return sum(c.path(f) * costs[f] for f in PATH_FEATURES)


@dataclass
class _Launch:
    """What every step of ``predict`` shares: the launch's rounds, its SM resources' work per block, and how a
    kernel joins them (float32 arrays, one entry per configuration)."""
    c: Counts
    gpu: GPUSpec
    cal: Calibration
    costs: dict                  # the fitted path costs (Calibration.path_costs)
    clock: np.ndarray            # the SM clock before any power cap
    grid: np.ndarray
    bpsm: np.ndarray
    bpsm_safe: np.ndarray
    warps_per_block: np.ndarray
    full_rounds: np.ndarray
    last: np.ndarray             # blocks in the last, partial round
    r_full: np.ndarray           # blocks in a full round
    per_block: list              # (work per block, cycles per unit, SMResource)
    path_pipes: tuple
    pipe_p: float
    own_join: float              # how a warp's own MUFU and FP32 work join on its path (own_on_path)
    p_rows: object               # the p's factor by the rows a scheduler holds, or None
    probed: bool                 # priced from probes alone, no fitted path costs (_setup)
    read_bps: float              # what a step's DRAM reads stream at (_setup)
    groups: list                 # serial groups: each a list of alternatives of (resource, share) pairs
    path_serial: bool            # a group names "latency"
    smem_serial: object          # Counts.smem_serial, or None


def _setup(c, grid_blocks, threads, blocks_per_sm, gpu, cal, fit_key, serial, path_pipes, pipe_p,
           own_join=0.0) -> _Launch:
    """The rounds of resident blocks, the SM clock, and the work each SM resource does per block."""
    f32 = np.float32
    # the SM clock: a launch whose warps issue tensor-core MMAs runs at the GPU's tensor clock (GPUSpec.
    # tensor_clock_hz), every other at the boost clock
    tensor = (np.asarray(c.warp_mma) > 0) | (np.asarray(c.warp_wgmma) > 0)
    clock = np.where(tensor, gpu.tensor_clock_hz, gpu.clock_hz).astype(f32)
    grid = np.asarray(grid_blocks, dtype=f32)
    bpsm = np.asarray(blocks_per_sm).astype(f32)
    bpsm_safe = np.maximum(bpsm, 1)
    warps_per_block = np.ceil(np.asarray(threads, dtype=f32) / gpu.warp_size)
    per_sm = np.ceil(grid / gpu.sm_count)                      # blocks on the busiest SM
    full_rounds = np.floor(per_sm / bpsm_safe)
    last = per_sm - full_rounds * bpsm_safe                    # blocks in the last, partial round
    r_full = np.minimum(bpsm_safe, per_sm)

    g = np.maximum(grid, 1)
    fetch = fetch_instructions(c, cal, grid, gpu.sm_count * np.maximum(bpsm, 1))     # issue slots fetch adds
    costs = cal.path_costs(fit_key)
    per_block = [(((r.work(c) + (fetch if r.name == "fetch" else 0)) / g).astype(f32), f32(r.cycles(gpu, cal)), r)
                 for r in SM_RESOURCES]
    # the p falls with the query rows each scheduler holds of one block (``overlap_rows``, a kernel's fit; the
    # co-residence probe)
    rows = np.asarray(c.sched_rows, dtype=f32)
    p_rows = (np.where(rows > 0, np.power(np.maximum(rows, f32(1)) / f32(16), -f32(costs["overlap_rows"])), f32(1))
              if costs["overlap_rows"] and np.any(rows > 0) else None)
    groups = [_alternatives(g) for g in serial]
    # A kernel whose path costs were fitted to timings keeps what they were fitted under: the clocks those timings
    # ran at (no power limit) and DRAM reads at the copy's rate. Refitted under either, fa2_tc's ranking of tiles fell
    # below its target (research/notes/known-gaps-log.md, the power model and 2026-12-02). A kernel priced from
    # probes alone takes both: its steps' reads stream at the read stream's rate (Calibration.dram_floor_rates).
    probed = not cal.fitted(fit_key)
    read_bps = cal.dram_floor_rates[0] if probed else cal.dram_bw_bps
    s = _Launch(c=c, gpu=gpu, cal=cal, costs=costs, clock=clock, grid=grid, bpsm=bpsm, bpsm_safe=bpsm_safe,
                warps_per_block=warps_per_block, full_rounds=full_rounds, last=last, r_full=r_full,
                per_block=per_block, path_pipes=path_pipes, pipe_p=pipe_p, own_join=own_join, p_rows=p_rows,
                probed=probed, read_bps=read_bps, groups=groups,
                path_serial=any(n == "latency" for g in groups for a in g for n, _ in a),
                smem_serial=(np.asarray(c.smem_serial, dtype=f32) if np.any(np.asarray(c.smem_serial) > 0) else None))
    return _at_clock(s, clock)


def _at_clock(s: _Launch, clock) -> _Launch:
    """The launch at SM clock ``clock``, with its one-stage tile copies (Counts.stage_*) per block in cycles there:
    each its L2 round trip, then its bytes at the SM's share of the L2 bandwidth (their cycles grow with the clock)."""
    f32 = np.float32
    c, gpu, cal = s.c, s.gpu, s.cal
    cycles = (np.asarray(c.stage_loads, dtype=f32) * f32(s.costs["load"])
              + np.asarray(c.stage_bytes, dtype=f32) * np.asarray(clock, dtype=f32) * f32(gpu.sm_count / cal.l2_bw_bps))
    stage = (cycles / np.maximum(s.grid, 1)).astype(f32)
    per_block = [(stage, cyc, r) if r.name == "stage" else (w, cyc, r) for w, cyc, r in s.per_block]
    return dataclasses.replace(s, clock=clock, per_block=per_block)


def _alternatives(group):
    """A serial group as its alternatives, each a list of (resource, share) whose times add: ``("max", A, B, ...)``
    costs the longest of A, B, ... (the work of two warpgroups that take turns); any other group is its one
    alternative."""
    alts = group[1:] if group and group[0] == "max" else (group,)
    return [[(m, 1.0) if isinstance(m, str) else m for m in a] for a in alts]


def _thr_cycles(s: _Launch, r):
    """Cycles each SM resource needs for r concurrent blocks."""
    gpu = s.gpu
    warps = r * s.warps_per_block
    used = np.maximum(np.minimum(warps, gpu.schedulers_per_sm), 1) / gpu.schedulers_per_sm
    per_used = r / used
    return {res.name: (per_used if res.per_subpartition else r) * work * cyc for work, cyc, res in s.per_block}


def _joined(s: _Launch, t):
    """The SM resources' cycles ``t`` with a kernel's serial groups summed."""
    f32 = np.float32
    parts = dict(t)
    parts["issue"] = parts["issue"] + parts.pop("fetch")     # fetch stalls take issue slots
    for alts in s.groups:          # resources a kernel runs one after another: their times add
        # a share below 1: that part of the resource's time lies in the chain, the rest overlaps it (the largest
        # share any alternative takes)
        share = {}
        for n, w in (item for a in alts for item in a):
            share[n] = max(share.get(n, 0.0), w)
        chain = functools.reduce(np.maximum, [sum(parts[n] * f32(w) for n, w in a) for a in alts])
        rest = {n: parts.pop(n) * f32(1 - w) for n, w in share.items()}
        parts["+".join(share)] = chain
        parts.update({n: rest[n] for n, w in share.items() if w < 1})
    if s.smem_serial is not None:  # Counts.smem_serial: that share of shared memory's time adds to the MMAs'
        lead = next((k for k in parts if "tensor" in k.split("+")), None)
        if lead is not None:
            parts[lead] = parts[lead] + parts["smem"] * s.smem_serial
            parts["smem"] = parts["smem"] * (f32(1) - s.smem_serial)
    return list(parts.values())


def _join(s: _Launch, t, path, r):
    """Cycles of ``r`` co-resident blocks whose SM resources need ``t`` together, each waiting ``path``."""
    t = others_work(t, r * s.warps_per_block, s.path_pipes, s.gpu)
    parts = _joined(s, {**t, "latency": path} if s.path_serial else t)
    if s.pipe_p:
        parts = [_pnorm(parts, s.pipe_p)]
    p = s.costs["overlap"]       # the calibration's, unless a kernel's fit holds its own
    if s.p_rows is not None:
        p = p * s.p_rows
    return _pnorm(parts if s.path_serial else [*parts, path], p)


@dataclass
class _Paths:
    """One block's latency path (cycles) in the first round and in later ones."""
    lat: np.ndarray              # the first round's
    lat_later: np.ndarray        # a later round's
    dram_on_path: np.ndarray     # DRAM cycles the first round's path already holds (the DRAM row leaves them out)
    t_full: dict                 # a full round's SM resources' cycles


def _paths(s: _Launch) -> _Paths:
    """The block's path: its path features at their costs, its own work on the path pipes, and its L2 misses (in
    step with every resident block's in the first round; found in L2 or at the flat cost in later rounds)."""
    f32 = np.float32
    c, gpu, cal, costs, clock = s.c, s.gpu, s.cal, s.costs, s.clock
    # the path without its loads; a warp's own work on the path_pipes lies on it too (it waits on it), at
    # ``own_path`` times the SM's rate (a kernel's fit: 1 is every sub-partition serving the one warp;
    # schedulers_per_sm, its own sub-partition alone), joined as own_on_path says
    lat0 = np.asarray(path_cycles(c, {**costs, "load": 0.0, "load_miss": 0.0}), dtype=f32)
    own = {res.name: work / s.warps_per_block * cyc * f32(costs["own_path"] if res.per_subpartition else 1)
           for work, cyc, res in s.per_block if res.name in s.path_pipes}
    lat0 = (lat0 + own_on_path(own, s.own_join)).astype(f32)
    # an in-step miss (every resident block issues the load together) costs at least its step's bytes (K or V:
    # half of a step's K/V bytes) at the DRAM bandwidth
    own_bytes, kv_bytes = (np.asarray(b, dtype=f32) for b in step_bytes(c, s.grid, s.bpsm_safe, gpu.sm_count))

    def dram_cycles(nbytes):
        return (nbytes / f32(s.read_bps) * clock).astype(f32)

    step_cycles = dram_cycles(kv_bytes / 2)
    in_step_cost = np.maximum(f32(costs["load_miss"]), step_cycles)

    # Later rounds: a miss of the first round may be found in L2, fetched by head-mates dispatched in an earlier
    # round (Counts.later_miss_share of those still miss): hb / (2 slots) of a round's blocks share a head with the
    # round before when a head is shorter than a round, all but slots / (2 hb) when longer; every earlier head-mate
    # of an uneven (causal) block has started. Later rounds drift apart (research/notes/timing-model.md), so their
    # misses cost the flat load_miss.
    hb = np.maximum(np.asarray(c.head_blocks, dtype=f32), 1)
    slots = gpu.sm_count * s.bpsm_safe
    spread = np.asarray(c.block_spread, dtype=f32)
    even = spread <= 1
    found = np.where(even, np.where(hb <= slots, hb / (2 * slots), 1 - slots / (2 * hb)), f32(1))
    later_hits = c.path_load_miss * found * (1 - np.asarray(c.later_miss_share, dtype=f32))
    later_misses = c.path_load_miss - later_hits
    # a later round of even blocks also fetches their own Q tiles with their first K tile, at the DRAM bandwidth
    # with every resident block's (the first round's is the burst)
    share = later_misses / np.maximum(np.asarray(c.path_load_miss, dtype=f32), 1)
    first_k = share * f32(costs["load_miss"])
    prologue = np.maximum(dram_cycles(own_bytes) + share * step_cycles, first_k) - first_k
    t_full = _thr_cycles(s, s.r_full)
    in_step_wait = _in_step_wait(s, lat0, own, step_cycles, in_step_cost, t_full)

    def block_path(hits, misses, in_step):
        """One block's path with ``hits`` loads found in L2 and ``misses`` not, ``in_step`` of them in step."""
        return (lat0 + hits * f32(costs["load"]) + (misses - in_step) * f32(costs["load_miss"])
                + in_step * in_step_wait).astype(f32)

    # the first round: its first tile's K and V are the burst (priced once per launch); the rest of its misses walk
    # in step
    in_step = np.maximum(np.asarray(c.path_load_miss, dtype=f32) - 2, 0)
    lat = block_path(c.path_load, c.path_load_miss, in_step)
    # an in-step miss bound by its step's DRAM time holds that time on the first round's path already: the DRAM
    # row leaves it out, as it does the burst (a decode step streaming its KV cache)
    dram_on_path = in_step * np.where(step_cycles > f32(costs["load_miss"]), step_cycles, f32(0))
    lat_later = (block_path(c.path_load + later_hits, later_misses, 0 * later_misses)
                 + np.where(even, prologue, 0)).astype(f32)
    return _Paths(lat=lat, lat_later=lat_later, dram_on_path=dram_on_path, t_full=t_full)


def _in_step_wait(s: _Launch, lat0, own, step_cycles, in_step_cost, t_full):
    """What an in-step miss inside the loop costs the block. Issued one phase before the block waits on it
    (Counts.load_steps), it waits what that phase leaves of the longer of the miss's latency (``miss_latency``, a
    kernel's fit) and its step's DRAM time, and at least the flat in-step cost (the copy's issue, the wait and the
    barrier). A phase lasts its share of the block's tile at the pace of a full round: one load's phase holds one
    GEMM (``gemm_phase_share`` of the warp's own tensor and shared-memory work a step) and a barrier, the other's
    the rest of the step (or its own GEMM alone: Counts.softmax_overlaps_load). Without a fitted latency, or for a
    kernel whose loads overlap no phase, the flat cost."""
    f32 = np.float32
    c, costs = s.c, s.costs
    steps = np.asarray(c.load_steps, dtype=f32)
    if not (costs["miss_latency"] > 0 and np.any(steps > 0)):
        return in_step_cost
    per = np.maximum(steps, 1)
    gemm = (np.asarray(c.gemm_phase_share, dtype=f32) * (own.get("tensor", 0) + own.get("smem", 0)) / per
            + f32(costs["sync"]))
    g_frac = np.clip(gemm / np.maximum(lat0 / per, 1), 0, 1)
    tile = _join(s, t_full, lat0, s.r_full) / per
    latency = f32(costs["miss_latency"])
    other = np.where(np.asarray(c.softmax_overlaps_load, dtype=bool), 1 - g_frac, g_frac)
    arrival = np.maximum(latency, step_cycles)
    left = sum(np.maximum(f32(costs["load_miss"]), arrival - tile * part) for part in (other, g_frac)) / 2
    return np.where(steps > 0, left, in_step_cost).astype(f32)


def _round_cycles(s: _Launch, r, path, t=None):
    """(cycles, each SM resource's cycles) of a round of ``r`` blocks whose path is ``path``; zero where r is 0."""
    f32 = np.float32
    t = _thr_cycles(s, r) if t is None else t
    active = r > 0
    total = _join(s, t, path, r)
    return np.where(active, total, f32(0)), {k: np.where(active, v, f32(0)) for k, v in t.items()}


def _sm_cycles(s: _Launch, pa: _Paths):
    """The busiest SM's cycles over all rounds, and each SM resource's cycles over all rounds."""
    f32 = np.float32
    c, gpu, costs = s.c, s.gpu, s.costs
    full_rounds, last, r_full = s.full_rounds, s.last, s.r_full
    tf, parts_f = _round_cycles(s, r_full, pa.lat, pa.t_full)
    # (a kernel whose later rounds pay what the first does, fa1's and fa2's, needs no second round evaluation)
    tf_later = _round_cycles(s, r_full, pa.lat_later, pa.t_full)[0] if np.any(pa.lat_later != pa.lat) else tf
    tl, parts_l = _round_cycles(s, last, np.where(full_rounds > 0, pa.lat_later, pa.lat))
    sm_cycles = np.where(full_rounds > 0, tf + (full_rounds - 1) * tf_later, 0) + tl
    # the age-ordered tail (``age_tail``, a kernel's fit; research/notes/tensorcore.md): where a round's blocks split their
    # SM in the schedulers' age order (Counts.age_split_warps), the youngest finishes alone after the others; in
    # a launch of many rounds only the last round's youngest extends the launch, by ``age_tail`` of that round
    spread = np.asarray(c.block_spread, dtype=f32)
    even = spread <= 1
    age_w = np.asarray(c.age_split_warps, dtype=f32)
    if costs["age_tail"] and np.any(age_w > 0):
        final_r = np.where(last > 0, last, r_full)
        aged = even & (age_w > 0) & (final_r >= 2) & (final_r * s.warps_per_block / gpu.schedulers_per_sm >= age_w)
        final = np.where(last > 0, tl, np.where(full_rounds > 1, tf_later, tf))
        sm_cycles = sm_cycles + np.where(aged, f32(costs["age_tail"]) * final, f32(0))
    if np.any(spread > 1):
        sm_cycles = _uneven_bound(s, sm_cycles, pa.lat, tf, parts_f)
    # no launch ends before its busiest SM resource has served its work (the p-norm, whose path may price a warp's
    # own work faster than its sub-partition serves it, can fall below that)
    busy = {k: full_rounds * parts_f[k] + parts_l[k] for k in parts_f}      # each SM resource's cycles, all rounds
    sm_cycles = np.maximum(sm_cycles, functools.reduce(np.maximum, busy.values()))
    return sm_cycles, busy


def _uneven_bound(s: _Launch, sm_cycles, lat, tf, parts_f):
    """The busiest SM's cycles where blocks are of uneven work (causal): the even rounds spread the work evenly
    over the SMs; two bounds add what that misses. Blocks are dispatched in order, block j of a round to SM j mod
    SMs, each head's blocks one after another with work changing by ``block_step`` (of the mean) per block."""
    f32 = np.float32
    c, gpu, cal, costs, grid, r_full = s.c, s.gpu, s.cal, s.costs, s.grid, s.r_full
    hb = np.maximum(np.asarray(c.head_blocks, dtype=f32), 1)
    slots = gpu.sm_count * s.bpsm_safe
    spread = np.asarray(c.block_spread, dtype=f32)
    s_ = np.maximum(spread, 1)
    step = np.asarray(c.block_step, dtype=f32)
    # (1) the SM holding the first heavy block carries its first round's blocks to the end: their work at the
    # pace its full round sets, joined with the heavy block's own path (whose global round trips, its prologue, do
    # not grow with its work). Its SM-mates: the block in slot q lies within q * (SMs +- window) of it (each GPC
    # takes its next blocks in its own order: the dispatch probe), so the worst SM holds the heaviest block of that
    # window in each slot.
    sm0 = np.where(step < 0, f32(0), np.mod(hb - 1, gpu.sm_count))
    work = np.where(r_full > 0, block_work_at(s_, hb, step, sm0), f32(0))
    win = int(round(cal.dispatch_window))
    for q in range(1, int(np.max(r_full))):
        mate = np.zeros_like(sm_cycles)
        for delta in range(-q * win, q * win + 1):
            j = sm0 + q * gpu.sm_count + delta
            mate = np.maximum(mate, np.where((j > sm0) & (j < grid), block_work_at(s_, hb, step, j), f32(0)))
        work = work + np.where(q < r_full, mate, f32(0))
    fixed = np.asarray(c.path_gmem * costs["gmem"], dtype=f32)
    heavy_path = (lat - fixed) * s_ + fixed
    share = work / np.maximum(r_full, 1)
    heavy_sm = _join(s, {k: v * share for k, v in parts_f.items()}, heavy_path, r_full)
    # (2) the last-dispatched heaviest block starts when the work queued before it has been served (at once if it
    # gets a slot in the first round), then runs at a lone block's pace: the schedulers favour the oldest warps.
    heads = grid / hb
    queue = np.where(step < 0, (heads - 1) * hb, grid - 1)
    after = np.where(step < 0, (heads - 1) / heads, 1 - s_ / grid)
    # list scheduling: it starts as a slot frees once the blocks before it are dispatched, when the slots have
    # served their work less what the blocks still in service hold: per slot, LIST_RESIDUAL times a renewal
    # process's mean residual E[d^2] / (2 E[d]), d a block's duration (its work's share of a full round's time;
    # linear in the block's place in its head: E[w^2] = 1 + step^2 (hb^2 - 1) / 12 of the mean work's square)
    residual = f32(LIST_RESIDUAL) * tf * (1 + step ** 2 * (hb ** 2 - 1) / 12) / 2
    start = np.where(queue >= slots, np.maximum(after * sm_cycles - residual, 0), f32(0))
    # when the first round's slots free up fast enough to dispatch it (queue - slots + 1 <= slots frees), it
    # starts as the k-th lightest first-round block ends, k = queue - slots + 1 (k_th): that block's work at the
    # pace of a full round. The first round holds F = slots // hb blocks of each position in a head, and one more
    # of the first slots % hb positions; positions are walked lightest first.
    k_th = queue - slots + 1
    first_round = (queue >= slots) & (k_th <= slots)
    if np.any(first_round & (spread > 1)):
        F, R = np.floor(slots / hb), np.mod(slots, hb)
        kth = np.full(np.shape(sm_cycles), np.inf, dtype=f32)
        seen = np.zeros_like(kth)
        for i in range(int(np.max(np.where(first_round, hb, 1)))):
            pos = np.where(step < 0, hb - 1 - i, f32(i))          # the i-th lightest position of a head
            seen = seen + np.where(i < hb, F + (pos < R), f32(0))
            kth = np.where(np.isinf(kth) & (seen >= k_th), block_work_at(s_, hb, step, pos), kth)
        start = np.where(first_round & np.isfinite(kth), np.minimum(start, kth * tf), start)
    lone = _join(s, {k: v * s_ for k, v in _thr_cycles(s, f32(1)).items()}, heavy_path, f32(1))
    # dispatched longest first, the blocks that start after the first round are the longest of their heads and
    # land beside one another: such a block runs one full round's work at the full round's pace beside its mates,
    # then the rest alone. Dispatched shortest first (SDPA flash), the last block keeps the lone pace.
    run = np.where((queue >= slots) & (step < 0), tf + (s_ - 1) / s_ * lone, lone)
    return np.where(spread > 1, np.maximum(sm_cycles, np.maximum(heavy_sm, start + run)), sm_cycles)


def _seconds(s: _Launch, clock, sm_cycles, busy, pa: _Paths, chip, burst, cold):
    """(seconds, each resource's seconds) at the SM clock ``clock``: the SM's cycles joined with the chip-wide
    resources' times (which do not depend on it), plus what every launch adds: the empty kernel's event time per
    kernel and, once, the first global round trip after the timing's L2 flush with the first round's burst at the
    DRAM bandwidth (nothing overlaps them), and the queued operations."""
    c, cal = s.c, s.cal
    sm_time = sm_cycles / clock
    times = {k: v / clock for k, v in busy.items()}
    times["latency"] = (pa.lat + np.maximum(s.full_rounds + (s.last > 0) - 1, 0) * pa.lat_later) / clock
    times.update(chip)
    cold_s = cal.cold_start_cycles / np.asarray(clock, dtype=float) if cold else 0.0
    per_launch = (cal.launch_overhead_s * np.asarray(c.launches, dtype=float) + cold_s
                  + burst / s.read_bps + cal.queued_op_s * np.asarray(c.queued_ops, dtype=float))
    return _pnorm([sm_time] + [times[r.name] for r in CHIP_RESOURCES], cal.overlap_p) + per_launch, times


def _bound(times: dict, shape):
    """The name of the resource with the largest time, per configuration (the first in RESOURCES on a tie)."""
    best = np.zeros(shape, dtype=np.int8)
    top = np.broadcast_to(times[RESOURCES[0]], shape)
    for i, k in enumerate(RESOURCES[1:], start=1):
        bigger = times[k] > top
        best = np.where(bigger, np.int8(i), best)
        top = np.where(bigger, times[k], top)
    return np.asarray(RESOURCES)[best]


def predict(c: Counts, mem, grid_blocks, threads, blocks_per_sm, gpu: GPUSpec, cal: Calibration,
            fit_key: str, serial: tuple = (), path_pipes: tuple = (), pipe_p: float = 0.0, cold: bool = True,
            queued: bool = False, own_join: float = 0.0) -> Timing:
    """Seconds for each launch. Computed in float32 (7 significant digits, far below the model's own error),
    which keeps a million-configuration sweep near a second. ``mem``: the DRAM traffic (model.memory);
    ``fit_key``: whose fitted path costs apply (Kernel.fit_key); ``pipe_p`` > 0: the pipes join one another by
    this p-norm before they join the path (Kernel.pipe_p); ``cold=False``: a kernel queued behind another in the
    same call, which finds its inputs in L2 (no cold start); ``queued``: its kernels (Counts.queued_ops and
    Counts.launches of them) each take at least what the probe's smallest queued kernel adds
    (Calibration.queued_kernel_s); ``own_join``: how a warp's own MUFU and FP32 work join on its path
    (Kernel.own_join; own_on_path)."""
    s = _setup(c, grid_blocks, threads, blocks_per_sm, gpu, cal, fit_key, serial, path_pipes, pipe_p, own_join)
    # the chip-wide resources; the DRAM row leaves out the burst and the DRAM time already on the path
    burst = burst_bytes(c, s.grid, s.bpsm_safe, gpu.sm_count)
    chip0 = {res.name: np.asarray(res.work(c, mem, cal) / res.rate(cal), dtype=np.float32)
             for res in CHIP_RESOURCES}

    def priced(s):
        pa = _paths(s)
        sm_cycles, busy = _sm_cycles(s, pa)
        chip = dict(chip0, dram=np.maximum(chip0["dram"] - burst / s.read_bps - pa.dram_on_path / s.clock,
                                           0).astype(np.float32))
        return _seconds(s, s.clock, sm_cycles, busy, pa, chip, burst, cold)

    clock = s.clock
    total, times = priced(s)
    # the power limit (model.power): a launch whose bench runs would average more than the limit at this clock runs
    # at the clock that meets it, priced again there (the cycles its path waits on DRAM fall with the clock); only a
    # kernel priced from probes alone (_setup: s.probed)
    clock_run, watts = clock.astype(float), None
    if cal.power and s.probed:
        clock_run, watts = power.capped_clock(total, power.launch_energy_j(c, mem.dram_bytes, cal.power), clock,
                                              cal.power)
        if np.any(clock_run < clock):
            total, times = priced(_at_clock(s, clock_run.astype(np.float32)))
    # no launch moves its DRAM bytes faster than DRAM streams them: a launch whose path holds its DRAM waits (a
    # decode step's in-step misses) prices later rounds' misses at their latency, which can undercut it
    floor = dram_floor_s(mem, cal)
    total = np.maximum(total, floor.astype(np.asarray(total).dtype))
    times["dram"] = np.maximum(times["dram"], floor.astype(np.asarray(times["dram"]).dtype))
    if queued:
        kernels = np.asarray(c.queued_ops, dtype=float) + np.asarray(c.launches, dtype=float)
        total = np.maximum(total, kernels * cal.queued_kernel_s).astype(np.float32)
    bound = _bound(times, np.shape(total))
    total = np.where(s.bpsm > 0, total, np.inf)
    return Timing(time_s=total, times_s={k: times[k] for k in RESOURCES}, bound=bound, clock_hz=clock_run,
                  power_w=watts)
