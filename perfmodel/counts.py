"""Counts: what a kernel launch does, per pipe and per memory level. Pure data, numpy-vectorised.

Thread-level operation counts (what FLOP figures use) are kept apart from warp-level instruction counts (what
pipes and issue slots see: a half-empty warp still costs a full warp instruction).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Counts:
    # --- thread-level arithmetic (operations by active threads) -----------------------------------------
    fma: np.ndarray          # fused multiply-adds (2 FLOPs each)
    exp: np.ndarray          # exponentials (__expf: MUFU.EX2 after an FMUL by log2 e)
    cmp: np.ndarray          # max / compare
    add: np.ndarray          # adds and subtracts
    mul: np.ndarray          # multiplies, divides and reciprocals
    # --- warp-level instructions (issued warp instructions, any number of active lanes) ------------------
    warp_fp32: np.ndarray    # FFMA, FADD, FMUL, FMNMX on the FP32 pipe
    warp_sfu: np.ndarray     # MUFU (ex2, rcp)
    warp_lds: np.ndarray     # shared loads
    warp_sts: np.ndarray     # shared stores
    warp_ldg: np.ndarray     # global loads
    warp_stg: np.ndarray     # global stores
    warp_other: np.ndarray   # integer / loop-control instructions (estimate: one per inner-loop iteration)
    # --- shared memory ---------------------------------------------------------------------------------
    smem_ld_bytes: np.ndarray
    smem_st_bytes: np.ndarray
    smem_ld_wavefronts: np.ndarray
    smem_st_wavefronts: np.ndarray
    # --- global memory -----------------------------------------------------------------------------------
    gld_sectors: np.ndarray  # 32-B sectors the global loads ask of L1 (coalescing)
    l2_read_bytes: np.ndarray   # L1 -> L2 read traffic
    l2_write_bytes: np.ndarray  # stores reaching L2
    dram_read_bytes: np.ndarray
    dram_write_bytes: np.ndarray
    # --- launch shape --------------------------------------------------------------------------------------
    grid_blocks: np.ndarray
    threads_per_block: np.ndarray
    smem_bytes_per_block: np.ndarray
    regs_per_thread: np.ndarray
    # --- latency chain: one block's critical path, through its slowest warp (see timing.py) --------------
    chain_dot: np.ndarray          # dot-product steps (two LDS and a dependent FFMA) on the path
    chain_red: np.ndarray          # reduction steps (one LDS and a dependent FMNMX/FADD) on the path
    chain_exp: np.ndarray          # exp steps (LDS, FADD, __expf, STS) on the path
    chain_outer: np.ndarray        # set-up instructions of outer-loop iterations on the path
    chain_conflict_wf: np.ndarray  # shared wavefronts beyond one per instruction on the path (replays)
    chain_fp32: np.ndarray         # other FP32 instructions on the path
    chain_sfu: np.ndarray          # other MUFU instructions on the path
    chain_gmem: np.ndarray         # global-memory round trips on the path
    chain_syncs: np.ndarray        # __syncthreads on the path

    PATH_FEATURES = ("chain_dot", "chain_red", "chain_exp", "chain_outer", "chain_conflict_wf", "chain_fp32",
                     "chain_sfu", "chain_gmem", "chain_syncs")

    @property
    def flops(self) -> np.ndarray:
        """FLOPs as commonly counted: FMA = 2, every other arithmetic operation = 1."""
        return 2 * self.fma + self.exp + self.cmp + self.add + self.mul

    @property
    def smem_wavefronts(self) -> np.ndarray:
        return self.smem_ld_wavefronts + self.smem_st_wavefronts

    @property
    def smem_bytes(self) -> np.ndarray:
        return self.smem_ld_bytes + self.smem_st_bytes

    @property
    def smem_ideal_wavefronts(self) -> np.ndarray:
        """Wavefronts without bank conflicts: one per 32-bit warp instruction."""
        return self.warp_lds + self.warp_sts

    @property
    def bank_conflicts(self) -> np.ndarray:
        """Excess wavefronts over one per instruction (what ncu reports as bank conflicts)."""
        return self.smem_wavefronts - self.smem_ideal_wavefronts

    @property
    def l2_bytes(self) -> np.ndarray:
        return self.l2_read_bytes + self.l2_write_bytes

    @property
    def dram_bytes(self) -> np.ndarray:
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def warp_instructions(self) -> np.ndarray:
        return (self.warp_fp32 + self.warp_sfu + self.warp_lds + self.warp_sts + self.warp_ldg
                + self.warp_stg + self.warp_other)

    @property
    def shape(self) -> tuple[int, ...]:
        return np.broadcast_shapes(*(np.shape(getattr(self, f.name)) for f in dataclasses.fields(self)))

    def to_dict(self) -> dict:
        return {f.name: np.asarray(getattr(self, f.name)).tolist() for f in dataclasses.fields(self)}
