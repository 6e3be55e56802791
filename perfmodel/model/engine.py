"""The one place where shape, tiles, kernel, GPU and calibration meet. Every command goes through ``evaluate``.

    shape + tiles --kernel--> launch shape, Counts (pure) --occupancy--> blocks per SM (once)
        --memory--> DRAM traffic with L2 reuse --timing--> per-resource times, bound --> Prediction

Pure and vectorised: every argument may be a numpy array (broadcast together).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from perfmodel.hw import occupancy
from perfmodel.hw.calibration import Calibration
from perfmodel.hw.ceilings import Ceilings, ceilings
from perfmodel.hw.gpu import GPUSpec
from perfmodel.kernels.base import Kernel, Launch, Tiles
from perfmodel.model import memory, timing
from perfmodel.model.counts import Counts
from perfmodel.shape import AttentionShape


@dataclass(frozen=True)
class LaunchTime:
    """One kernel launch of a call: its name (the kernel's, or 'kernel:stage'), launch shape, counts, blocks per
    SM and its own Timing (time and bound)."""

    name: str
    launch: Launch
    counts: Counts
    blocks_per_sm: np.ndarray
    timing: timing.Timing

    @property
    def time_s(self):
        return self.timing.time_s


@dataclass(frozen=True)
class Prediction:
    kernel: str
    gpu: GPUSpec
    calibration: Calibration
    shape: AttentionShape
    tiles: Tiles
    counts: Counts               # the main kernel's (fwd_bwd: the forward's and the backward's main kernels added)
    launch: Launch               # the main kernel's launch shape (fwd_bwd: the forward's)
    blocks_per_sm: np.ndarray
    waves: np.ndarray
    warps_per_sm: np.ndarray
    traffic: memory.Traffic
    timing: timing.Timing        # the whole call's: the launches' times added
    ceilings: Ceilings
    roofline_time_s: np.ndarray
    launches: tuple = ()         # LaunchTime of each kernel the call runs, in order; their times add to time_s
    path_costs: str = "spec"     # where the latency-path costs come from: 'fitted' (training split), 'probe', 'spec'
    constants: str = ""          # where all the constants come from, in words (calibration.describe)
    notes: tuple = ()

    @property
    def time_s(self):
        return self.timing.time_s

    @property
    def bound(self):
        return self.timing.bound


def evaluate(gpu: GPUSpec, kernel: Kernel, shape: AttentionShape, tiles: Tiles, cal: Calibration,
             regs=None) -> Prediction:
    """Predict every configuration of (shape, tiles), which broadcast together. No fit check: callers that
    need one ask ``kernel.fits`` / ``kernel.why_not`` (a sweep keeps the non-fitting cells and masks them).
    A forward-plus-backward call is its forward's launches (at the tiles ``Kernel.forward_tiles`` gives), then its
    backward's (at ``tiles``)."""
    if shape.mode == "fwd_bwd":
        fwd = evaluate(gpu, kernel, shape.with_mode("fwd"), kernel.forward_tiles(shape, tiles, gpu), cal)
        bwd = evaluate(gpu, kernel, shape.with_mode("bwd"), tiles, cal, regs)
        return dataclasses.replace(
            fwd, shape=shape, counts=fwd.counts + bwd.counts, launches=fwd.launches + bwd.launches,
            traffic=memory.Traffic(*(a + b for a, b in zip(dataclasses.astuple(fwd.traffic)[:2],
                                                           dataclasses.astuple(bwd.traffic)[:2])),
                                   l2_hit_fraction=fwd.traffic.l2_hit_fraction),
            timing=timing.add(bwd.timing, fwd.timing),          # the bound: the backward's, the longer pass
            roofline_time_s=fwd.roofline_time_s + bwd.roofline_time_s,
            notes=tuple(dict.fromkeys(fwd.notes + bwd.notes)))
    facts, note = kernel.facts(gpu.sm)
    given, tiles = tiles, kernel.resolve(gpu, shape, tiles)
    notes = tuple(n for n in (note, kernel.resolution_note(given, tiles)) if n)
    launch = kernel.launch(shape, tiles, gpu.sm, regs=regs)
    c = kernel.counts(shape, tiles, facts)

    def timed(counts, ln: Launch, key, **kw):
        """(blocks per SM, DRAM traffic, Timing) of one kernel's launch."""
        b = occupancy.blocks_per_sm(gpu, ln.threads, ln.regs, ln.smem_bytes)
        # the unit of re-use is a K/V head: the blocks of all its query heads read it (B * H heads without grouping)
        m = memory.traffic(counts, shape.kv_heads, ln.grid_blocks, b, gpu.sm_count, gpu.l2_bytes,
                           l2_shared_bytes=cal.l2_shared_bytes)
        return b, m, timing.predict(counts, m, ln.grid_blocks, ln.threads, b, gpu, cal, key, **kw)

    key = kernel.fit_key_for(shape.mode)
    serial = kernel.serial if shape.mode == "fwd" or kernel.serial_bwd is None else kernel.serial_bwd
    bpsm, mem, t = timed(c, launch, key, serial=serial, path_pipes=kernel.path_pipes, pipe_p=kernel.pipe_p,
                         own_join=kernel.own_join if shape.mode == "fwd" else 0.0)
    main_launch = LaunchTime(kernel.name + ("" if shape.mode == "fwd" else f":{shape.mode}"), launch, c, bpsm, t)
    before, after = [], []
    for comp in kernel.companions(shape, tiles, facts):      # the call's other kernels (split-KV's combine, say)
        cb, _, tc = timed(comp.counts, comp.launch, comp.key, cold=False, queued=True)
        t = timing.add(t, tc)
        (before if comp.before else after).append(LaunchTime(comp.key, comp.launch, comp.counts, cb, tc))
    launches = before + [main_launch] + after
    ceil = ceilings(gpu, cal)
    # the roofline's memory side is the DRAM floor every prediction keeps to (reads at the read stream's rate)
    roof = np.maximum(c.flops / ceil.compute_flops(shape.dtype), timing.dram_floor_s(mem, cal))
    grid = np.asarray(launch.grid_blocks)
    warps_per_block = -(-np.asarray(launch.threads) // gpu.warp_size)
    return Prediction(
        kernel=kernel.name, gpu=gpu, calibration=cal, shape=shape, tiles=tiles, counts=c, launch=launch,
        blocks_per_sm=bpsm, waves=occupancy.waves(gpu, grid, bpsm),
        warps_per_sm=np.minimum(bpsm, np.ceil(grid / gpu.sm_count)) * warps_per_block,
        traffic=mem, timing=t, ceilings=ceil, roofline_time_s=roof, launches=tuple(launches),
        path_costs=cal.path_basis(key),
        constants=cal.describe(key, kernel.name), notes=notes)
