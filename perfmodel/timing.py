"""From counts to time: occupancy, waves, per-pipe throughput, the latency path, L2 and DRAM.

Per SM, blocks run in rounds of at most ``blocks_per_sm``; the busiest SM takes ceil(grid / SMs) blocks.
A round of r blocks costs

    throughput: the most loaded resource of the SM: FP32 and MUFU lanes (usable only on the SM sub-partitions
                that have warps: min(warps, 4) / 4), issue slots, shared-memory wavefronts;
    latency:    one block's critical path (its slowest warp): dot-product, reduction and exp steps, conflict
                replays, outer-loop set-up, FP32 and MUFU latencies, global round trips and barriers
                (the path features of Counts, each times its cost in cycles);

joined by a p-norm, (thr^p + lat^p)^(1/p): with few warps the path dominates, with many the pipes do, and in
between both count. The chip-wide L2 and DRAM times join the same way. Constants come from the spec and the
calibration: the probe's microbenchmarks, and for a kernel whose loop forms no microbenchmark covers, path
costs that ``perfmodel fit`` fitted on a declared training split (perfmodel/fit.py). Nothing else is fitted.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from perfmodel.calibration import Calibration
from perfmodel.counts import Counts
from perfmodel.gpu import GPUSpec
from perfmodel.occupancy import blocks_per_sm, waves

RESOURCES = ("fp32", "sfu", "issue", "smem", "latency", "l2", "dram")


@dataclass(frozen=True)
class Timing:
    time_s: np.ndarray
    times_s: dict            # resource -> seconds it alone would need (whole kernel)
    bound: np.ndarray        # name of the largest
    blocks_per_sm: np.ndarray
    waves: np.ndarray
    warps_per_sm: np.ndarray


def _pnorm(parts, p):
    """(sum x^p)^(1/p), computed relative to the largest part, in float32."""
    parts = [np.asarray(x, dtype=np.float32) for x in parts]
    top = functools.reduce(np.maximum, parts)
    safe = np.where(top > 0, top, np.float32(1))
    acc = None
    for x in parts:
        term = np.power(x / safe, np.float32(p))
        acc = term if acc is None else acc + term
    return np.where(top > 0, safe * np.power(acc, np.float32(1.0 / p)), np.float32(0)).astype(float)


def predict(c: Counts, gpu: GPUSpec, cal: Calibration, kernel: str) -> Timing:
    """Seconds for each launch. Computed in float32 (7 significant digits, far below the model's own error),
    which keeps a million-configuration sweep near a second."""
    f32 = np.float32
    grid = np.asarray(c.grid_blocks, dtype=f32)
    bpsm = blocks_per_sm(gpu, c.threads_per_block, c.regs_per_thread, c.smem_bytes_per_block).astype(f32)
    bpsm_safe = np.maximum(bpsm, 1)
    warps_per_block = np.ceil(np.asarray(c.threads_per_block, dtype=f32) / gpu.warp_size)
    per_sm = np.ceil(grid / gpu.sm_count)                      # blocks on the busiest SM
    full_rounds = np.floor(per_sm / bpsm_safe)
    last = per_sm - full_rounds * bpsm_safe                    # blocks in the last, partial round
    r_full = np.minimum(bpsm_safe, per_sm)

    # per-block work (averages over the grid)
    g = np.maximum(grid, 1)
    fp32 = (c.warp_fp32 / g).astype(f32)
    sfu = (c.warp_sfu / g).astype(f32)
    instr = (c.warp_instructions / g).astype(f32)
    wf = (c.smem_wavefronts / g).astype(f32)

    def thr_cycles(r):
        """Cycles the SM's pipes need for r concurrent blocks."""
        warps = r * warps_per_block
        used = np.maximum(np.minimum(warps, gpu.schedulers_per_sm), 1) / gpu.schedulers_per_sm
        lanes = gpu.warp_size
        per_used = r / used
        return {
            "fp32": per_used * fp32 * f32(lanes / cal.fp32_lanes_per_clk),
            "sfu": per_used * sfu * f32(lanes / cal.sfu_lanes_per_clk),
            "issue": per_used * instr * f32(1 / gpu.schedulers_per_sm),
            "smem": r * wf * f32(1 / cal.smem_wavefronts_per_clk),
        }

    costs = cal.path_costs(kernel)
    lat = np.asarray(sum(getattr(c, f) * costs[f] for f in Counts.PATH_FEATURES), dtype=f32)

    def round_cycles(r):
        t = thr_cycles(r)
        active = r > 0
        total = _pnorm([*t.values(), lat], cal.overlap_p)
        return np.where(active, total, f32(0)), {k: np.where(active, v, f32(0)) for k, v in t.items()}

    tf, parts_f = round_cycles(r_full)
    tl, parts_l = round_cycles(last)
    sm_cycles = full_rounds * tf + tl
    clock = f32(gpu.clock_hz)
    sm_time = sm_cycles / clock
    times = {k: (full_rounds * parts_f[k] + parts_l[k]) / clock for k in parts_f}
    times["latency"] = (full_rounds + (last > 0)) * lat / clock
    times["l2"] = (c.l2_bytes / cal.l2_bw_bps).astype(f32)
    times["dram"] = (c.dram_bytes / cal.dram_bw_bps).astype(f32)
    total = _pnorm([sm_time, times["l2"], times["dram"]], cal.overlap_p) + cal.launch_overhead_s
    best = np.zeros(np.shape(total), dtype=np.int8)
    top = np.broadcast_to(times[RESOURCES[0]], np.shape(total))
    for i, k in enumerate(RESOURCES[1:], start=1):
        bigger = times[k] > top
        best = np.where(bigger, np.int8(i), best)
        top = np.where(bigger, times[k], top)
    bound = np.asarray(RESOURCES)[best]
    total = np.where(bpsm > 0, total, np.inf)
    return Timing(time_s=total, times_s={k: times[k] for k in RESOURCES}, bound=bound, blocks_per_sm=bpsm,
                  waves=waves(gpu, grid, bpsm), warps_per_sm=np.minimum(bpsm, per_sm) * warps_per_block)
