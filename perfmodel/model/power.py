"""The SM clock a launch runs at under the GPU's power limit: its energy from its counts, the clock that holds the
average power of the bench's timed runs at the limit. Pure and vectorised.

A launch's dynamic energy is the sum of its operations' and bytes' energies (Calibration.power: the power probe's
loads, research/scripts/fit_power.py), each at the probe's reference clock and scaling as (f / ref)^alpha (energy follows
the voltage squared, the voltage the clock). Beside it the GPU draws ``idle_w`` (fitted with the energies: all SMs
resident, the GPU warm). The bench runs each launch between two head-start spins and an L2 flush (``gap_s`` at
``gap_w``), and the limit holds the average over a run and its gap: a short launch between long gaps is not held
back, a long one is. Where the average at the model's clock exceeds ``limit_w``, the clock falls until it does not;
in finding that clock a launch's time scales with 1 / clock (all of it), and model.timing then prices it again there.

The shipped H100 and H200 calibrations hold their probe's block; model.timing applies it to kernels priced from
probes alone, not to those whose fitted path costs hold the clocks of their training timings (the probe's figures:
research/notes/power-model.md). ``gap_s`` 0: launches back to back, as a training loop runs them.
"""

from __future__ import annotations

import numpy as np

from perfmodel.model.counts import Counts

# Calibration.power's fields: name -> what it is
FIELDS = {
    "limit_w": "the board's power limit (nvidia-smi power.limit)",
    "idle_w": "power beside the launch's operations (the fit's intercept: resident, warm)",
    "ref_clock_mhz": "the SM clock the energies below are at",
    "alpha": "an operation's energy scales as (clock / ref_clock)^alpha",
    "mma_nj": "nJ per mma.sync m16n8k16 (random operands)",
    "wgmma_nj": "nJ per warpgroup MMA, per m16n8k16 equivalent",
    "ldsm_nj": "nJ per ldmatrix.x4",
    "sfu_nj": "nJ per MUFU instruction",
    "fp32_nj": "nJ per FP32 warp instruction",
    "l2_pj_per_byte": "pJ per byte through L2",
    "dram_pj_per_byte": "pJ per byte from DRAM, through L2",
    "gap_s": "seconds between two timed runs (the bench's spins and flush)",
    "gap_w": "power over that gap",
}
BISECTIONS = 40


def launch_energy_j(c: Counts, dram_bytes, pw: dict):
    """A launch's dynamic energy at the reference clock, in joules."""
    f = lambda x: np.asarray(x, dtype=float)
    nj = (pw["mma_nj"] * f(c.warp_mma) + pw["wgmma_nj"] * f(c.warp_wgmma) + pw["ldsm_nj"] * f(c.warp_ldsm)
          + pw["sfu_nj"] * f(c.warp_sfu) + pw["fp32_nj"] * f(c.warp_fp32))
    pj = pw["l2_pj_per_byte"] * f(c.l2_bytes) + (pw["dram_pj_per_byte"] - pw["l2_pj_per_byte"]) * f(dram_bytes)
    return nj * 1e-9 + pj * 1e-12


def average_power_w(time_s, energy_j, clock_hz, f_hz, pw: dict):
    """The bench's average power over a run and its gap, for a launch that takes ``time_s`` at ``clock_hz`` (and
    ``energy_j`` at the reference clock), were it to run at ``f_hz``."""
    t = np.asarray(time_s, dtype=float) * np.asarray(clock_hz, dtype=float) / f_hz
    e = np.asarray(energy_j, dtype=float) * (f_hz / (pw["ref_clock_mhz"] * 1e6)) ** pw["alpha"]
    return (pw["idle_w"] * t + e + pw["gap_w"] * pw["gap_s"]) / (t + pw["gap_s"])


def capped_clock(time_s, energy_j, clock_hz, pw: dict):
    """(clock, average power): ``clock_hz`` where the launch's average power stays within the limit there, else the
    clock (by bisection, down to 40% of it) at which it meets the limit."""
    clock = np.asarray(clock_hz, dtype=float) * np.ones(np.shape(time_s))
    limit = pw["limit_w"]
    watts = average_power_w(time_s, energy_j, clock_hz, clock, pw)
    over = watts > limit
    if not np.any(over):
        return clock, watts
    lo, hi = 0.4 * clock, clock.copy()
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        above = average_power_w(time_s, energy_j, clock_hz, mid, pw) > limit
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    f = np.where(over, lo, clock)
    return f, average_power_w(time_s, energy_j, clock_hz, f, pw)
