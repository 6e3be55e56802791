"""Counts: what a kernel launch does, per pipe, per memory level and on one block's latency path. Pure data.

Thread-level operation counts (what FLOP figures use) are kept apart from warp-level instruction counts (what
pipes and issue slots see: a half-empty warp still costs a full warp instruction). Every field defaults to 0,
so a kernel fills only what it does; Counts add (two phases of a kernel) and scale (a phase repeated).

DRAM traffic is not a count of the kernel alone: how much of a re-read reaches DRAM depends on the GPU's L2
(perfmodel.model.memory). The kernel states it in pieces: bytes read and written on first touch (``*_once``),
re-reads and re-writes that stay in L2 while the data a head keeps live (``reuse_live_bytes``, per head) fits
(``*_reuse``).

The latency path is one block's critical path through its slowest warp, as a count of steps of each form
(``path_<feature>``). The feature names in PATH_FEATURES are the one name of each form, shared by the
calibration (cycles per step) and ``perfmodel fit``.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass

import numpy as np

# feature -> what one step is
PATH_FEATURES = {
    "dot": "a dot-product step: two shared loads and a dependent FFMA",
    "reduction": "a reduction step: one shared load and a dependent FMNMX/FADD",
    "exp": "an exp step: shared load, FADD, __expf, shared store",
    "outer": "a set-up instruction of an outer-loop iteration",
    "conflict": "a shared wavefront beyond one per instruction (bank-conflict replay)",
    "fp32": "another dependent FP32 instruction",
    "sfu": "another dependent MUFU instruction",
    "gmem": "a global-memory round trip",
    "load": "a tile's global load that a block waits on in its loop (single-buffered K or V), found in L2",
    "load_miss": "such a load that misses L2: the head's blocks ask for the tile together, before any has it",
    "sync": "a __syncthreads",
    "mma": "a dependent tensor-core step (mma.sync m16n8k16)",
    "wgmma": "a warpgroup's wait on a group of dependent warpgroup MMAs it issued (wait_group), beyond their pipe time",
    "shfl": "a dependent warp shuffle",
    "local": "a register reloaded from local memory (a spill) before its use: an L1 access",
    "cycle": "a cycle of a closed kernel's path that none of the forms above counts, read off a profile of it",
}


@dataclass(frozen=True)
class Counts:
    # --- thread-level arithmetic (operations by active threads) -----------------------------------------
    fma: object = 0          # fused multiply-adds (2 FLOPs each)
    exp: object = 0          # exponentials
    cmp: object = 0          # max / compare
    add: object = 0          # adds and subtracts
    mul: object = 0          # multiplies, divides and reciprocals
    tensor_fma: object = 0   # multiply-adds done by tensor cores (m16n8k16: 2048 each)
    # --- warp-level instructions (issued warp instructions, any number of active lanes) ------------------
    warp_fp32: object = 0    # FFMA, FADD, FMUL, FMNMX on the FP32 pipe
    warp_sfu: object = 0     # MUFU (ex2, rcp)
    warp_lds: object = 0     # shared loads
    warp_sts: object = 0     # shared stores
    warp_ldg: object = 0     # global loads
    warp_stg: object = 0     # global stores
    warp_other: object = 0   # integer / address / loop-control instructions
    warp_mma: object = 0     # mma.sync m16n8k16 (tensor pipe)
    warp_wgmma: object = 0   # warpgroup MMAs (Hopper wgmma), in m16n8k16 equivalents (4096 FLOPs each)
    warp_ldsm: object = 0    # ldmatrix .x4 (512 B from shared memory, 4 wavefronts when conflict-free)
    warp_ldgsts: object = 0  # cp.async 16-byte copies, one per lane (512 B into shared memory per warp)
    warp_shfl: object = 0    # warp shuffles
    # of all those, the instructions each warp issues from code it passes through once (a prologue, unrolled
    # masking steps, an epilogue), when the kernel's code layout is known; code_* say how large that code and the
    # main loop's body are (timing: instruction fetch)
    warp_once: object = 0
    # --- shared memory ---------------------------------------------------------------------------------
    smem_ld_bytes: object = 0
    smem_st_bytes: object = 0
    smem_ld_wavefronts: object = 0
    smem_st_wavefronts: object = 0
    # --- global memory -----------------------------------------------------------------------------------
    gld_sectors: object = 0     # 32-B sectors the global loads ask of L1 (coalescing)
    l2_read_bytes: object = 0   # L1 -> L2 read traffic
    l2_write_bytes: object = 0  # stores reaching L2
    l2_red_bytes: object = 0    # of those, the bytes fp32 reductions add in L2 (a backward's dQ atomics)
    dram_read_once: object = 0
    dram_read_reuse: object = 0
    dram_write_once: object = 0
    dram_write_reuse: object = 0
    reuse_live_bytes: object = 0  # per head: what must stay in L2 for the *_reuse traffic to hit
    # --- work balance ------------------------------------------------------------------------------------
    block_spread: object = 0    # the heaviest block's work over the mean block's (causal grids); 0 or 1: uniform
    head_blocks: object = 1     # blocks of one head, dispatched one after another (heads follow each other)
    block_step: object = 0      # change of a block's work from one dispatched block of a head to the next, over
                                # the mean block's (< 0: each head's heaviest block first; > 0: its lightest first)
    launches: object = 1        # kernels the launch runs one after another (a split-KV pass and its combine: 2)
    queued_ops: object = 0      # other GPU operations a call queues beside its kernels (cuDNN's memset)
    code_once_kib: object = 0   # KiB of code the blocks pass through once (warp_once's), 0: layout unknown
    code_loop_kib: object = 0   # KiB of the main loop's body
    # --- first-round burst (per block) ---------------------------------------------------------------------
    # what a block fetches from global memory before its first compute: its own tiles (Q) and its first K/V tiles,
    # which ``burst_sharers`` blocks of a head ask for together. After the timing's L2 flush the first round's
    # blocks fetch these from DRAM at once, and nothing computes until they arrive (timing: the burst)
    burst_own_bytes: object = 0
    burst_kv_bytes: object = 0
    burst_sharers: object = 1
    # --- one-stage tile copies ----------------------------------------------------------------------------
    # tiles a block copies into a buffer it holds one of (a single pipeline stage): each copy waits until the
    # block's GEMMs have released the tile before it, and the next GEMM waits on it; ``stage_bytes`` their bytes,
    # ``stage_loads`` their number (timing: the SM resource "stage", each copy's L2 latency and its bytes at the
    # SM's share of the L2 bandwidth, which a kernel's serial groups place against its GEMMs)
    stage_bytes: object = 0
    stage_loads: object = 0
    # SM cycles a block spends after its loop, on no pipe the model counts, before its next work can start (a
    # persistent kernel's work-tile epilogue); a kernel's serial groups add them to its chain (timing: "tail")
    tail_cycles: object = 0
    # --- latency path (per block) --------------------------------------------------------------------------
    path_dot: object = 0
    path_reduction: object = 0
    path_exp: object = 0
    path_outer: object = 0
    path_conflict: object = 0
    path_fp32: object = 0
    path_sfu: object = 0
    path_gmem: object = 0
    path_load: object = 0
    path_load_miss: object = 0
    path_sync: object = 0
    path_mma: object = 0
    path_wgmma: object = 0
    path_shfl: object = 0
    path_local: object = 0
    path_cycle: object = 0
    # the share of path_load_miss that still misses for blocks dispatched after the first round (1: as in the first);
    # the rest are found in L2, fetched by a block of the same head dispatched before them, where their head began in
    # an earlier round (timing: later rounds)
    later_miss_share: object = 1
    # query rows each warp scheduler holds of one block (Br / min(warps, 4)): the join's p falls with them where a
    # kernel's fit says so (Calibration FIT_PARAMS "overlap_rows"); 0: not used
    sched_rows: object = 0
    # the loop steps a block's path walks whose two tile loads are each issued one phase before the block waits on
    # them; 0: no load overlaps a phase (timing: a load that misses L2 then costs its flat load_miss).
    # ``gemm_phase_share``: the share of the warp's own tensor and shared-memory work a step in the phase that holds
    # one GEMM alone (half: fa2_tc's PV, which its next K load overlaps; FlashAttention-2's QK^T, which its V load
    # overlaps); the other load's phase holds the rest of the step (the other GEMM and the softmax).
    # ``softmax_overlaps_load``: 1 as the sources order it, the softmax in one load's phase; 0: in neither, each
    # load's phase its GEMM alone, as fa2_tc's compiled loop has it (research/scripts/sass_phases.py; not shipped: docs/
    # known-gaps.md, research/scripts/try_fa2_tc_form.py)
    load_steps: object = 0
    gemm_phase_share: object = 0
    softmax_overlaps_load: object = 1
    # the warps a scheduler must hold (of the last round's blocks, two or more of them) before co-resident blocks
    # stop sharing their SM evenly and split it in the schedulers' age order, the youngest ending last (timing: the
    # age-ordered tail, a kernel's fit ``age_tail``); 0: they share it evenly
    age_split_warps: object = 0
    # the share of the shared-memory pipe's time that adds to the tensor pipe's instead of overlapping it: warps
    # that hold no registers to load the next MMA fragments ahead wait on each ldmatrix before their MMAs, and the
    # block's warps walk the same GEMM phase together (timing: the tensor pipe's part of the join); 0: they overlap
    smem_serial: object = 0

    # fields that describe the launch's blocks, not amounts: they neither add (the larger holds) nor scale
    RATIOS = ("block_spread", "head_blocks", "block_step", "launches", "queued_ops", "burst_sharers",
              "later_miss_share", "sched_rows", "code_once_kib", "code_loop_kib", "load_steps", "gemm_phase_share",
              "softmax_overlaps_load", "age_split_warps", "smem_serial")
    # amounts per head or per block: a launch's counts keep them as one head's (Kernel.counts)
    UNSCALED = ("reuse_live_bytes", "burst_own_bytes", "burst_kv_bytes")

    # ---------------------------------------------------------------------------------------------------
    def __add__(self, other: "Counts") -> "Counts":
        join = {name: np.maximum for name in self.RATIOS}
        return Counts(**{f.name: join.get(f.name, operator.add)(getattr(self, f.name), getattr(other, f.name))
                         for f in dataclasses.fields(self)})

    def scaled(self, factor) -> "Counts":
        return Counts(**{f.name: getattr(self, f.name) * (1 if f.name in self.RATIOS else factor)
                         for f in dataclasses.fields(self)})

    def where(self, mask, other: "Counts") -> "Counts":
        """Per configuration, this one's fields where ``mask`` holds and ``other``'s elsewhere (a preset that runs
        one of two kernels by problem)."""
        return Counts(**{f.name: np.where(mask, getattr(self, f.name), getattr(other, f.name))
                         for f in dataclasses.fields(self)})

    def block_work(self, k):
        """The work of a head's k-th dispatched block over the mean block's (block_work_at on these fields)."""
        return block_work_at(self.block_spread, self.head_blocks, self.block_step, k)

    def path(self, feature: str):
        return getattr(self, "path_" + feature)

    @property
    def flops(self):
        """FLOPs as executed and commonly counted: FMA = 2 (tensor-core ones too), every other operation = 1."""
        return 2 * (self.fma + self.tensor_fma) + self.exp + self.cmp + self.add + self.mul

    @property
    def smem_wavefronts(self):
        return self.smem_ld_wavefronts + self.smem_st_wavefronts

    @property
    def smem_bytes(self):
        return self.smem_ld_bytes + self.smem_st_bytes

    @property
    def smem_ideal_wavefronts(self):
        """Wavefronts without bank conflicts: one per 32-bit warp instruction, four per 512-byte one."""
        return self.warp_lds + self.warp_sts + 4 * (self.warp_ldsm + self.warp_ldgsts)

    @property
    def bank_conflicts(self):
        """Excess wavefronts over one per instruction (what ncu reports as bank conflicts)."""
        return self.smem_wavefronts - self.smem_ideal_wavefronts

    @property
    def l2_bytes(self):
        return self.l2_read_bytes + self.l2_write_bytes

    @property
    def warp_instructions(self):
        return (self.warp_fp32 + self.warp_sfu + self.warp_lds + self.warp_sts + self.warp_ldg
                + self.warp_stg + self.warp_other + self.warp_mma + self.warp_ldsm + self.warp_ldgsts
                + self.warp_wgmma / 16
                + self.warp_shfl)

    def to_dict(self) -> dict:
        return {f.name: np.asarray(getattr(self, f.name)).tolist() for f in dataclasses.fields(self)}


def block_work_at(spread, head_blocks, step, k):
    """The work of a head's k-th dispatched block over the mean block's: the heaviest (``spread``) first when
    ``step`` < 0, last otherwise, changing by ``step`` per block; in the inputs' precision."""
    s, hb = np.maximum(spread, 1), np.maximum(head_blocks, 1)
    first = np.where(step < 0, s, s - step * (hb - 1))
    return first + step * np.mod(k, hb)
