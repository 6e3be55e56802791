"""From counts to time: rounds of resident blocks, per-resource throughput, the latency path, L2 and DRAM.

Per SM, blocks run in rounds of at most ``blocks_per_sm``; the busiest SM takes ceil(grid / SMs) blocks. A round
costs the p-norm join of each SM resource's cycles (SM_RESOURCES: the pipes, issue, shared memory) and one block's
latency path (the path features of Counts at their fitted costs, with the L2 misses it waits on). Blocks of uneven
work (causal) cannot finish before the heaviest; the chip-wide rows (CHIP_RESOURCES: L2, DRAM) join the SM time
the same way; each launch adds its launch cost, cold start and first-round burst. Cycles become seconds at the SM
clock (the tensor clock for MMA launches), lowered where a calibration's power block caps it (model.power).
Adding a resource is one row here (and the calibration field that prices it).

The mechanism in full, and the measurements behind it: research/notes/timing-model.md.
"""

from __future__ import annotations

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
    work: Callable[[Counts, object], object]             # bytes per launch, from counts and the DRAM traffic
    rate: Callable[[Calibration], float]                 # bytes per second


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
)
CHIP_RESOURCES = (
    ChipResource("l2", lambda c, mem: c.l2_bytes, lambda cal: cal.l2_bw_bps),
    ChipResource("dram", lambda c, mem: mem.dram_bytes, lambda cal: cal.dram_bw_bps),
)
RESOURCES = tuple(r.name for r in SM_RESOURCES) + ("latency",) + tuple(r.name for r in CHIP_RESOURCES)
# What the blocks in service still hold when a block dispatched after the first round starts, over a renewal
# process's mean residual per slot: 0.63-1.06 in the 11 traced causal launches, mean 0.87 (probe/fa2_tc_trace*.json;
# research/tests/test_dispatch.py)
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


def path_cycles(c: Counts, costs: dict):
    """One block's latency path in cycles."""
    return sum(c.path(f) * costs[f] for f in PATH_FEATURES)


def predict(c: Counts, mem, grid_blocks, threads, blocks_per_sm, gpu: GPUSpec, cal: Calibration,
            fit_key: str, serial: tuple = (), path_pipes: tuple = (), pipe_p: float = 0.0, cold: bool = True) -> Timing:
    """Seconds for each launch. Computed in float32 (7 significant digits, far below the model's own error),
    which keeps a million-configuration sweep near a second. ``mem``: the DRAM traffic (model.memory);
    ``fit_key``: whose fitted path costs apply (Kernel.fit_key); ``pipe_p`` > 0: the pipes join one another by
    this p-norm before they join the path (Kernel.pipe_p); ``cold=False``: a kernel queued behind another in the
    same call, which finds its inputs in L2 (no cold start)."""
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
    per_block = [(((r.work(c) + (fetch if r.name == "fetch" else 0)) / g).astype(f32), f32(r.cycles(gpu, cal)), r)
                 for r in SM_RESOURCES]

    def thr_cycles(r):
        """Cycles each SM resource needs for r concurrent blocks."""
        warps = r * warps_per_block
        used = np.maximum(np.minimum(warps, gpu.schedulers_per_sm), 1) / gpu.schedulers_per_sm
        per_used = r / used
        return {res.name: (per_used if res.per_subpartition else r) * work * cyc for work, cyc, res in per_block}

    costs = cal.path_costs(fit_key)
    # the path without its loads; a warp's own work on the path_pipes lies on it too (it waits on it)
    lat0 = np.asarray(path_cycles(c, {**costs, "load": 0.0, "load_miss": 0.0}), dtype=f32)
    # (at ``own_path`` times the SM's rate, a kernel's fit: 1 would be every sub-partition serving the one warp;
    # schedulers_per_sm, its own sub-partition alone with none of that work overlapping the warp's other work)
    own = {res.name: work / warps_per_block * cyc * f32(costs["own_path"] if res.per_subpartition else 1)
           for work, cyc, res in per_block if res.name in path_pipes}
    lat0 = (lat0 + sum(own.values())).astype(f32)
    # A load that every resident block issues together and that misses L2 cannot complete before DRAM has delivered
    # the distinct tiles of all of them: such an in-step miss costs at least that step's bytes at the DRAM bandwidth
    # (K or V: half of a step's K/V bytes).
    own_bytes, kv_bytes = (np.asarray(b, dtype=f32) for b in step_bytes(c, grid, bpsm_safe, gpu.sm_count))

    def dram_cycles(nbytes):
        return (nbytes / f32(cal.dram_bw_bps) * clock).astype(f32)

    step_cycles = dram_cycles(kv_bytes / 2)
    in_step_cost = np.maximum(f32(costs["load_miss"]), step_cycles)

    p_sm = costs["overlap"]                      # the calibration's, unless a kernel's fit holds its own
    # The p falls with the query rows each scheduler holds of one block (``overlap_rows``, a kernel's fit): the
    # co-residence probe (probe/coresident.json) finds one 4-warp block of 64 rows needing a higher p than one of
    # 128 rows or of 8 warps, whatever the blocks beside it
    rows = np.asarray(c.sched_rows, dtype=f32)
    p_rows = (np.where(rows > 0, np.power(np.maximum(rows, f32(1)) / f32(16), -f32(costs["overlap_rows"])), f32(1))
              if costs["overlap_rows"] and np.any(rows > 0) else None)

    # serial groups as (resource, share) pairs; a group naming "latency" holds the block's path
    groups = [[(m, 1.0) if isinstance(m, str) else m for m in g] for g in serial]
    path_serial = any(n == "latency" for g in groups for n, _ in g)

    smem_serial = (np.asarray(c.smem_serial, dtype=f32) if np.any(np.asarray(c.smem_serial) > 0) else None)

    def _joined(t):
        """The SM resources' cycles ``t`` with a kernel's serial groups summed."""
        parts = dict(t)
        parts["issue"] = parts["issue"] + parts.pop("fetch")     # fetch stalls take issue slots
        for items in groups:           # resources a kernel runs one after another: their times add
            # a share below 1: that part of the resource's time lies in the chain, the rest overlaps it
            chain = sum(parts[n] * f32(w) for n, w in items)
            rest = {n: parts.pop(n) * f32(1 - w) for n, w in items}
            parts["+".join(n for n, _ in items)] = chain
            parts.update({n: rest[n] for n, w in items if w < 1})
        if smem_serial is not None:    # Counts.smem_serial: that share of shared memory's time adds to the MMAs'
            lead = next((k for k in parts if "tensor" in k.split("+")), None)
            if lead is not None:
                parts[lead] = parts[lead] + parts["smem"] * smem_serial
                parts["smem"] = parts["smem"] * (f32(1) - smem_serial)
        return list(parts.values())

    def join(t, path, r):
        """Cycles of ``r`` co-resident blocks whose SM resources need ``t`` together, each waiting ``path``."""
        t = others_work(t, r * warps_per_block, path_pipes, gpu)
        parts = _joined({**t, "latency": path} if path_serial else t)
        if pipe_p:
            parts = [_pnorm(parts, pipe_p)]
        p = p_sm
        if p_rows is not None:
            p = p * p_rows
        return _pnorm(parts if path_serial else [*parts, path], p)

    # The blocks of later rounds: the loads that miss in the first round may be found in L2, fetched by blocks of
    # their head dispatched before them (Counts.later_miss_share of those still miss). Only a block whose head began
    # in an earlier round finds anything. A round of ``slots`` consecutive blocks shares one head with the round
    # before it: hb / (2 slots) of its blocks on average when a head is shorter than a round, all but slots / (2 hb)
    # when longer. Blocks of uneven work (causal) end, and so start, one at a time: the head-mates dispatched before
    # a block have started. Later rounds of even work do not walk in step either: traced (probe/fa2_tc_trace.json),
    # the starts of a non-causal launch's second and later rounds spread over 0.6-5.5 us between their 10th and
    # 90th percentiles (1,200-11,000 cycles, against a miss's latency of about 1,100), growing round by round. So
    # their misses cost the flat load_miss: a tile a head-mate fetched moments before, in flight or in L2.
    hb = np.maximum(np.asarray(c.head_blocks, dtype=f32), 1)
    slots = gpu.sm_count * bpsm_safe
    spread = np.asarray(c.block_spread, dtype=f32)
    even = spread <= 1
    found = np.where(even, np.where(hb <= slots, hb / (2 * slots), 1 - slots / (2 * hb)), f32(1))
    later_hits = c.path_load_miss * found * (1 - np.asarray(c.later_miss_share, dtype=f32))
    later_misses = c.path_load_miss - later_hits
    # a round of even blocks also fetches their own Q tiles (never shared) with their first K tile, at the DRAM
    # bandwidth with every resident block's (the first round's is the burst). Kept although later rounds drift
    # apart (below): refitted without it, the training rows score 3.97% against 3.65%
    share = later_misses / np.maximum(np.asarray(c.path_load_miss, dtype=f32), 1)
    first_k = share * f32(costs["load_miss"])
    prologue = np.maximum(dram_cycles(own_bytes) + share * step_cycles, first_k) - first_k
    # An in-step miss inside the loop (every block of a head asks DRAM for the tile together) is issued one phase
    # before the block waits on it (Counts.load_steps: fa2_tc's V before QK^T and the softmax, its next K before PV):
    # the block waits the part of the miss's latency (``miss_latency``, a kernel's fit) that the phase leaves, and at
    # least the in-step cost above (``load_miss``: the copy's issue, the wait and the barrier behind it; or the
    # step's DRAM time). A phase lasts its share of the block's tile at the pace of the round (the tile time of
    # ``r_full`` blocks without their loads): beside other blocks the phases stretch and the latency hides. One
    # load's phase holds one GEMM alone (``gemm_phase_share`` of the warp's own tensor and shared-memory work a step)
    # and one barrier; the other load's, the rest of the step (or the other GEMM alone: Counts.softmax_overlaps_load).
    # The other misses (a block's first tiles, whose wait
    # the prologue's round trip and the burst hold, and a causal block's diagonal tiles) keep the flat cost, as does
    # every miss without a fitted latency or of a kernel whose loads overlap no phase.
    t_full = thr_cycles(r_full)                  # a full round's SM resources (the rounds below share them)
    steps = np.asarray(c.load_steps, dtype=f32)
    in_step_wait = in_step_cost
    if costs["miss_latency"] > 0 and np.any(steps > 0):
        per = np.maximum(steps, 1)
        gemm = (np.asarray(c.gemm_phase_share, dtype=f32) * (own.get("tensor", 0) + own.get("smem", 0)) / per
                + f32(costs["sync"]))
        g_frac = np.clip(gemm / np.maximum(lat0 / per, 1), 0, 1)
        tile = join(t_full, lat0, r_full) / per
        latency = f32(costs["miss_latency"])
        # the other load's phase: the rest of the step, or its own GEMM alone where the softmax overlaps no load
        other = np.where(np.asarray(c.softmax_overlaps_load, dtype=bool), 1 - g_frac, g_frac)
        # a miss's tile arrives after the longer of its latency and its step's DRAM time (every resident block's
        # tile at the DRAM bandwidth: a decode step streaming its KV cache is bound by it); issued a phase before
        # the block waits on it, it waits what the phase leaves of that, and at least the flat in-step cost (the
        # copy's issue, the wait and the barrier)
        arrival = np.maximum(latency, step_cycles)
        left = sum(np.maximum(f32(costs["load_miss"]), arrival - tile * part) for part in (other, g_frac)) / 2
        in_step_wait = np.where(steps > 0, left, in_step_cost).astype(f32)

    def block_path(hits, misses, in_step):
        """One block's path with ``hits`` loads found in L2 and ``misses`` not, ``in_step`` of them in step."""
        return (lat0 + hits * f32(costs["load"]) + (misses - in_step) * f32(costs["load_miss"])
                + in_step * in_step_wait).astype(f32)

    # the first round: its first tile's K and V are the burst (priced once per launch, below); the rest of its
    # misses walk in step
    in_step = np.maximum(np.asarray(c.path_load_miss, dtype=f32) - 2, 0)
    lat = block_path(c.path_load, c.path_load_miss, in_step)
    # where an in-step miss waits for DRAM to deliver every resident block's tile (its step's bytes at the DRAM
    # bandwidth, above the miss's latency), that DRAM time lies on the first round's path already: the DRAM row
    # below leaves it out, as it does the burst (a decode step streaming its KV cache is such a launch)
    dram_on_path = in_step * np.where(step_cycles > f32(costs["load_miss"]), step_cycles, f32(0))
    lat_later = (block_path(c.path_load + later_hits, later_misses, 0 * later_misses)
                 + np.where(even, prologue, 0)).astype(f32)

    def round_cycles(r, path=lat, t=None):
        t = thr_cycles(r) if t is None else t
        active = r > 0
        total = join(t, path, r)
        return np.where(active, total, f32(0)), {k: np.where(active, v, f32(0)) for k, v in t.items()}

    tf, parts_f = round_cycles(r_full, t=t_full)
    # (a kernel whose later rounds pay what the first does, fa1's and fa2's, needs no second round evaluation)
    tf_later = round_cycles(r_full, lat_later, t_full)[0] if np.any(lat_later != lat) else tf
    tl, parts_l = round_cycles(last, np.where(full_rounds > 0, lat_later, lat))
    sm_cycles = np.where(full_rounds > 0, tf + (full_rounds - 1) * tf_later, 0) + tl
    # The age-ordered tail (a kernel's fit ``age_tail``: fa2_tc's, fitted after its path costs; docs/tensorcore.md):
    # where a round's blocks split their SM in the schedulers' age order (Counts.age_split_warps), the oldest runs
    # nearly as if alone and the youngest gets what it leaves, then finishes alone: in one round the SM's last block
    # ends 3-8% after their mean end (traced, fa2_tc_trace_fair.json). In a launch of many rounds the next round's
    # blocks fill the slots the old ones free, so only the last round's youngest block extends the launch, by
    # ``age_tail`` of that round. Blocks of uneven work (causal) are priced by the bounds below.
    age_w = np.asarray(c.age_split_warps, dtype=f32)
    if costs["age_tail"] and np.any(age_w > 0):
        final_r = np.where(last > 0, last, r_full)
        aged = even & (age_w > 0) & (final_r >= 2) & (final_r * warps_per_block / gpu.schedulers_per_sm >= age_w)
        final = np.where(last > 0, tl, np.where(full_rounds > 1, tf_later, tf))
        sm_cycles = sm_cycles + np.where(aged, f32(costs["age_tail"]) * final, f32(0))
    # uneven blocks (causal): the rounds above spread the launch's work evenly over the SMs; two bounds add what
    # that misses. Blocks are dispatched in order, block j of a round to SM j mod SMs, each head's blocks one after
    # another with work changing by ``block_step`` (of the mean) per block.
    if np.any(spread > 1):
        s = np.maximum(spread, 1)
        step = np.asarray(c.block_step, dtype=f32)
        # (1) the SM holding the first heavy block carries its first round's blocks to the end: their work at the
        # pace its full round sets, joined with the heavy block's own path. The block's global round trips (its
        # prologue) do not grow with its work.
        # Its SM-mates: the block in slot q lies within q * (SMs +- window) of it, not at q * SMs exactly (each GPC
        # takes its next blocks in its own order: the dispatch probe), so the worst SM holds the heaviest block of
        # that window in each slot.
        sm0 = np.where(step < 0, f32(0), np.mod(hb - 1, gpu.sm_count))
        work = np.where(r_full > 0, block_work_at(s, hb, step, sm0), f32(0))
        win = int(round(cal.dispatch_window))
        for q in range(1, int(np.max(r_full))):
            mate = np.zeros_like(sm_cycles)
            for delta in range(-q * win, q * win + 1):
                j = sm0 + q * gpu.sm_count + delta
                mate = np.maximum(mate, np.where((j > sm0) & (j < grid), block_work_at(s, hb, step, j), f32(0)))
            work = work + np.where(q < r_full, mate, f32(0))
        fixed = np.asarray(c.path_gmem * costs["gmem"], dtype=f32)
        heavy_path = (lat - fixed) * s + fixed
        share = work / np.maximum(r_full, 1)
        heavy_sm = join({k: v * share for k, v in parts_f.items()}, heavy_path, r_full)
        # (2) the last-dispatched heaviest block starts when the work queued before it has been served (at once if
        # it gets a slot in the first round), then runs at a lone block's pace: the schedulers favour the oldest
        # warps, so a block holding most of its SM's remaining work is hardly slowed by lighter ones beside it.
        heads = grid / hb
        queue = np.where(step < 0, (heads - 1) * hb, grid - 1)
        after = np.where(step < 0, (heads - 1) / heads, 1 - s / grid)
        # List scheduling: it starts as a slot frees once the blocks before it are dispatched, when the slots have
        # served their work less what the blocks still in service hold: per slot, LIST_RESIDUAL times a renewal
        # process's mean residual E[d^2] / (2 E[d]), d a block's duration (its work's share of a full round's time;
        # linear in the block's place in its head: E[w^2] = 1 + step^2 (hb^2 - 1) / 12 of the mean work's square)
        residual = f32(LIST_RESIDUAL) * tf * (1 + step ** 2 * (hb ** 2 - 1) / 12) / 2
        start = np.where(queue >= slots, np.maximum(after * sm_cycles - residual, 0), f32(0))
        # When the first round's slots free up fast enough to dispatch it (queue - slots + 1 <= slots frees), it
        # starts as the k-th lightest first-round block ends, k = queue - slots + 1 (k_th): that block's work at the
        # pace of a full round. The first round holds F = slots // hb blocks of each position in a head, and one
        # more of the first slots % hb positions; positions are walked lightest first.
        k_th = queue - slots + 1
        first_round = (queue >= slots) & (k_th <= slots)
        if np.any(first_round & (spread > 1)):
            F, R = np.floor(slots / hb), np.mod(slots, hb)
            kth = np.full(np.shape(sm_cycles), np.inf, dtype=f32)
            seen = np.zeros_like(kth)
            for i in range(int(np.max(np.where(first_round, hb, 1)))):
                pos = np.where(step < 0, hb - 1 - i, f32(i))          # the i-th lightest position of a head
                seen = seen + np.where(i < hb, F + (pos < R), f32(0))
                kth = np.where(np.isinf(kth) & (seen >= k_th), block_work_at(s, hb, step, pos), kth)
            start = np.where(first_round & np.isfinite(kth), np.minimum(start, kth * tf), start)
        lone = join({k: v * s for k, v in thr_cycles(f32(1)).items()}, heavy_path, f32(1))
        # Dispatched longest first, the blocks that start after the first round are the longest of their heads, and
        # they land beside one another: traced (fa2_tc_trace_late.json), the last heads' heaviest blocks share their
        # SMs with blocks of like work for most of their run. Such a block runs one full round's work at the full
        # round's pace beside its mates (of mean work), then the rest of its work alone. Dispatched shortest first
        # (SDPA flash), the last block keeps the lone pace.
        run = np.where((queue >= slots) & (step < 0), tf + (s - 1) / s * lone, lone)
        sm_cycles = np.where(spread > 1, np.maximum(sm_cycles, np.maximum(heavy_sm, start + run)), sm_cycles)
    # No launch ends before its busiest SM resource has served its work (the p-norm, whose path may price a warp's
    # own work faster than its sub-partition serves it, can fall below that: it did on an unprobed A100's tensor pipe
    # while GPUs of other architectures joined at the probe's generic p, before calibration.carried_fits carried the
    # fitted one; added, it changed no prediction of the H100's and H200's measured rows. It holds the RTX 3090's
    # FlashAttention-2 launches, whose tensor pipe is slow beside its other resources, to that pipe's time)
    busy = {k: full_rounds * parts_f[k] + parts_l[k] for k in parts_f}      # each SM resource's cycles, all rounds
    sm_cycles = np.maximum(sm_cycles, functools.reduce(np.maximum, busy.values()))
    burst = burst_bytes(c, grid, bpsm_safe, gpu.sm_count)
    launches = np.asarray(c.launches, dtype=float)
    chip = {res.name: np.asarray(res.work(c, mem) / res.rate(cal), dtype=f32) for res in CHIP_RESOURCES}
    chip["dram"] = np.maximum(chip["dram"] - burst / cal.dram_bw_bps - dram_on_path / clock, 0).astype(f32)

    def at(clock):
        """(seconds, each resource's seconds) of the cycles above at the SM clock ``clock`` (the chip-wide
        resources' times do not depend on it)."""
        sm_time = sm_cycles / clock
        times = {k: v / clock for k, v in busy.items()}
        times["latency"] = (lat + np.maximum(full_rounds + (last > 0) - 1, 0) * lat_later) / clock
        times.update(chip)
        # what every launch adds: the empty kernel's event time per kernel, and once the first global round trip
        # after the timing's L2 flush, which every block of the first round waits out together (nothing overlaps
        # it), with the bytes that round's blocks fetch before they compute (their burst), at the DRAM bandwidth
        cold_s = cal.cold_start_cycles / np.asarray(clock, dtype=float) if cold else 0.0
        per_launch = (cal.launch_overhead_s * launches + cold_s
                      + burst / cal.dram_bw_bps + cal.queued_op_s * np.asarray(c.queued_ops, dtype=float))
        return _pnorm([sm_time] + [times[r.name] for r in CHIP_RESOURCES], cal.overlap_p) + per_launch, times

    total, times = at(clock)
    # the power limit (model.power): a launch whose bench runs would average more than the limit at this clock runs
    # at the clock that meets it; its cycles are the same (those of DRAM waits, priced at this clock, too)
    clock_run, watts = clock.astype(float), None
    if cal.power:
        clock_run, watts = power.capped_clock(total, power.launch_energy_j(c, mem.dram_bytes, cal.power), clock,
                                              cal.power)
        if np.any(clock_run < clock):
            total, times = at(clock_run.astype(f32))
    best = np.zeros(np.shape(total), dtype=np.int8)
    top = np.broadcast_to(times[RESOURCES[0]], np.shape(total))
    for i, k in enumerate(RESOURCES[1:], start=1):
        bigger = times[k] > top
        best = np.where(bigger, np.int8(i), best)
        top = np.where(bigger, times[k], top)
    bound = np.asarray(RESOURCES)[best]
    total = np.where(bpsm > 0, total, np.inf)
    return Timing(time_s=total, times_s={k: times[k] for k in RESOURCES}, bound=bound, clock_hz=clock_run,
                  power_w=watts)
