"""fa1: FlashAttention-1 loop order, as in seed 000 (one thread per query row, O/l/m in global memory).

The kernel (csrc/fa1.cu), for one block per (batch, head), Br threads:

    for j in K/V tiles (nc = min(Bc, N - j*Bc) valid rows):
        threads load K_j, V_j rows r = tx, tx+Br, ...  (Kj[r*d + x], one element at a time)
        __syncthreads()
        for i in Q tiles (thread tx owns row i*Br + tx, if < N):
            Qi[tx*d + x] <- Q                         # d loads and shared stores, lane stride d words
            m_prev, l_prev <- m, l                    # global
            for y < nc: s = sum_x Qi[tx*d+x]*Kj[y*d+x]; S[tx*Bc+y] = s*scale; row_m = max(row_m, s*scale)
            for y < nc: p = exp(S[tx*Bc+y] - row_m); S[tx*Bc+y] = p; row_l += p
            m_new, l_new, a = l_prev*e^(m_prev-m_new)/l_new, b = e^(row_m-m_new)/l_new
            for x < d:  pv = sum_y S[tx*Bc+y]*Vj[y*d+x]; O[row, x] = a*O[row, x] + b*pv     # global RMW
            m[row], l[row] <- m_new, l_new
        __syncthreads()

Shared-memory wavefronts follow from the lane strides: Qi at stride d words, S at stride Bc, Kj/Vj reads are
broadcasts (every lane reads the same word), Kj/Vj stores at stride d.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from perfmodel.hw import banks
from perfmodel.kernels.base import ArchFacts, Kernel, Tiles, register
from perfmodel.kernels.common import work_counts, F32, arr, cdiv, over_tiles, over_warps, strided_sectors, tiles


FP32_PER_EXP = 3              # __expf: FMUL by log2 e, then MUFU.EX2 between two predicated FMULs (SASS)
# Per architecture: registers per thread (tiles and d are run-time arguments, so one build serves every
# configuration; ptxas -v and cudaFuncGetAttributes agree) and the instructions beyond the counted arithmetic
# and memory ones (address arithmetic, loop control, predicates) per step of each loop, read off the SASS
# (research/data/h100/sass/fa1.sass; the 16-way unrolled bodies at 0x2ac0 (Q K^T: 27 per 16 steps),
# 0x4b40 (P V: 30 per 16), 0x1840 (Q row load: 31 per 16), 0x0910 (K/V row load: 10 per 16 elements of K and
# V), 0x3720 (exp loop: 10 per 4 steps)), plus an estimate for the set-up of each outer iteration and tile.
ARCH = {
    "sm_90": ArchFacts(regs=32, source="ptxas -v, nvcc 13.0, sm_90; research/data/h100/sass/fa1.sass",
                       overheads={
                           "qk_step": 27 / 16, "pv_step": 30 / 16, "qload_step": 31 / 16, "kvload_step": 10 / 16,
                           "exp_step": 10 / 4,
                           # half the ~100 static instructions of the outer-loop bodies (checked against ncu)
                           "outer_iter": 48,
                           "tile": 24,        # estimate: per (i, j) step: row index, m/l addresses, branches
                       }),
    # The same source built for sm_80 and sm_86 (nvcc 13.0 -O3, research/data/sass_sm80_sm86/; loops at
    # sm_80 0x25a0, 0x41f0, 0x1630, 0x0870, 0x2f30 and sm_86 0x2520, 0x4130, 0x15c0, 0x07c0, 0x2e80, in the order
    # above): the same arithmetic and memory instructions, fewer others. The outer-iteration and tile set-up are
    # sm_90's estimates.
    "sm_80": ArchFacts(regs=40, source="ptxas -v and cuobjdump -sass, nvcc 13.0, sm_80 (no sm_80 GPU measured)",
                       overheads={
                           "qk_step": 12 / 16, "pv_step": 23 / 16, "qload_step": 27 / 16, "kvload_step": 10 / 16,
                           "exp_step": 9 / 4, "outer_iter": 48, "tile": 24,
                       }),
    "sm_86": ArchFacts(regs=40, source="ptxas -v and cuobjdump -sass, nvcc 13.0, sm_86 (no sm_86 GPU measured)",
                       overheads={
                           "qk_step": 12 / 16, "pv_step": 22 / 16, "qload_step": 30 / 16, "kvload_step": 10 / 16,
                           "exp_step": 9 / 4, "outer_iter": 48, "tile": 24,
                       }),
}
# sm_89 (Ada): its build is the sm_86 listing, instruction for instruction and at the same addresses
# (research/data/sass_sm89/fa1_sm89.sass; nvcc 13.0 -O3)
ARCH["sm_89"] = dataclasses.replace(ARCH["sm_86"], source="ptxas -v and cuobjdump -sass, nvcc 13.0, sm_89: the sm_86 "
                                                          "build's SASS (no sm_89 GPU measured)")


@dataclass(frozen=True)
class FA1Tiles(Tiles):
    """fa1 runs one thread per query row of the tile (Br threads) and has no padding."""

    @property
    def threads(self):
        return self.Br


def _tile_warp(d, Bc, o):
    """Per-warp counts of one (K/V tile, Q tile) step, as functions of (nc, a): nc valid K/V rows, a lanes."""
    def g(nc, a):
        live = (a > 0) & (nc > 0)
        wq = banks.strided(d, a)           # Qi[tx*d + x]: lane stride d words
        ws = banks.strided(Bc, a)          # S[tx*Bc + y]: lane stride Bc words
        lds = 2 * nc * d + nc + 2 * d * nc  # QK (Qi, Kj), exp loop (S), PV (S, Vj)
        sts = d + nc + nc                   # Qi store, S store, S store after exp
        ld_wf = nc * d * (wq + 1) + nc * ws + d * nc * (ws + 1)
        st_wf = d * wq + 2 * nc * ws
        fp32 = (nc * d + 2 * nc) + ((1 + FP32_PER_EXP + 1) * nc) + (9 + 2 * FP32_PER_EXP) + (d * nc + 2 * d)
        #       QK FFMA, scale, max   exp loop: sub, exp, add           stats       PV FFMA, b*pv, a*O+
        sfu = nc + 3                        # exp per element; two exps and a reciprocal for the stats
        ldg = d + 2 + d                     # Q row, m and l, O row
        stg = d + 2
        sectors = (d * strided_sectors(a, d * F32) + 2 * strided_sectors(a, F32)
                   + d * strided_sectors(a, d * F32))
        other = (nc * d * o["qk_step"] + d * nc * o["pv_step"] + nc * (o["exp_step"] + o["outer_iter"])
                 + d * (o["qload_step"] + o["outer_iter"]) + o["tile"])
        out = dict(lds=lds, sts=sts, ld_wf=ld_wf, st_wf=st_wf, fp32=fp32, sfu=sfu, ldg=ldg, stg=stg,
                   sectors=sectors, other=other,
                   ld_bytes=F32 * a * lds, st_bytes=F32 * a * sts,
                   # thread-level operations, per active lane
                   fma=a * (2 * nc * d + d + 1), exp=a * (nc + 2), cmp=a * (nc + 1),
                   add=a * (2 * nc + 2), mul=a * (nc + 5 + d),
                   # the path of this warp
                   p_dot=2 * nc * d, p_exp=nc, p_outer=(nc + 2 * d) * o["outer_iter"] + o["tile"],
                   p_conflict=nc * d * (wq - 1) + d * nc * (ws - 1) + d * (wq - 1) + 3 * nc * (ws - 1),
                   p_fp32=2 * nc + 9 + 2 * FP32_PER_EXP + 2 * d, p_sfu=3, p_gmem=cdiv(d, 4) + 1 + d)
        return {k: v * live for k, v in out.items()}       # zero where the tile or warp is empty
    return g


def _kv_warp(d, o):
    """Per-warp counts of loading one K row and one V row per lane (a lanes active)."""
    def g(a):
        live = a > 0
        w = banks.strided(d, a)
        out = dict(ldg=2 * d, sts=2 * d, st_wf=2 * d * w, sectors=2 * d * strided_sectors(a, d * F32),
                   other=2 * d * o["kvload_step"] + o["outer_iter"], st_bytes=2 * d * a * F32)
        return {k: v * live for k, v in out.items()}       # zero where the tile or warp is empty
    return g


def _head_counts(N, d, Br, Bc, o):
    """Everything of one (batch, head) block."""
    N, d, Br, Bc = (arr(x) for x in (N, d, Br, Bc))
    tw = _tile_warp(d, Bc, o)
    keys = ["lds", "sts", "ld_wf", "st_wf", "fp32", "sfu", "ldg", "stg", "sectors", "other", "ld_bytes",
            "st_bytes", "fma", "exp", "cmp", "add", "mul"]
    # per block: every (j, i) tile pair, every warp of the Q tile
    blk = over_tiles(N, Br, Bc, lambda nc, nr: over_warps(nr, lambda a: tw(nc, a), keys), keys)
    # the path: the first (fullest) warp of each Q tile
    pkeys = ["p_dot", "p_exp", "p_outer", "p_conflict", "p_fp32", "p_sfu", "p_gmem"]
    path = over_tiles(N, Br, Bc, lambda nc, nr: tw(nc, np.minimum(nr, 32)), pkeys)
    path = {k[2:]: v for k, v in path.items()}
    # K/V loads: per j tile, rows r = tx + k*Br for k < ceil(nc/Br)
    kvw = _kv_warp(d, o)
    kkeys = ["ldg", "sts", "st_wf", "sectors", "other", "st_bytes"]

    def kv_tile(nc):
        K = cdiv(nc, Br)
        last = nc - np.maximum(K - 1, 0) * Br
        full = over_warps(Br, kvw, kkeys)
        part = over_warps(last, kvw, kkeys)
        return {k: np.maximum(K - 1, 0) * full[k] + part[k] for k in kkeys}

    fj, rc = tiles(N, Bc)
    kv_full, kv_part = kv_tile(Bc), kv_tile(rc)
    for key in kkeys:
        blk[key] = blk[key] + fj * kv_full[key] + kv_part[key]
    Tc = cdiv(N, Bc)
    kv_rows_per_thread = fj * cdiv(Bc, Br) + cdiv(rc, Br)

    # global traffic per (b, h): K, V once; Q, O (read and write), l, m once per K/V tile
    nd = N * d * F32
    per_head = nd + nd + 2 * N * F32          # Q, O, l, m: re-read every K/V tile, live between
    return work_counts(
        blk,
        l2_read_bytes=2 * nd + Tc * per_head, l2_write_bytes=Tc * (nd + 2 * N * F32),
        # DRAM: first touches (K, V, and Q/O/l/m), re-reads of Q/O/l/m that miss L2; O, l, m written back
        dram_read_once=2 * nd + per_head, dram_read_reuse=(Tc - 1) * per_head, reuse_live_bytes=per_head,
        dram_write_once=nd + 2 * N * F32, dram_write_reuse=(Tc - 1) * (nd + 2 * N * F32),
        path_dot=path["dot"], path_reduction=0 * N, path_exp=path["exp"], path_outer=path["outer"],
        path_conflict=path["conflict"], path_fp32=path["fp32"], path_sfu=path["sfu"],
        path_gmem=path["gmem"] + kv_rows_per_thread * cdiv(d, 4), path_sync=2 * Tc,
    )


class FA1(Kernel):
    name = "fa1"
    description = "FlashAttention-1 order (seed 000): grid (B, H), one thread per query row, O/l/m in global memory"
    source = "fa1.cu"
    Tiles = FA1Tiles
    arch = ARCH

    def grid_blocks(self, shape, tiles):
        return arr(shape.B) * arr(shape.H)

    def grid_dims(self, shape, tiles):
        return arr(shape.B), arr(shape.H), 1                 # fa1.cu: dim3(B, H)

    def buffer_bytes(self, shape, tiles):
        """l and m, one fp32 value per query row each."""
        return 2 * F32 * np.asarray(shape.heads, float) * arr(shape.N)

    def smem_bytes(self, shape, tiles):
        """Qi (Br x d) + Kj, Vj (Bc x d each) + S (Br x Bc), fp32, unpadded."""
        d, Br, Bc = arr(shape.d), arr(tiles.Br), arr(tiles.Bc)
        return (Br * d + 2 * Bc * d + Br * Bc) * F32

    def head_counts(self, shape, tiles, facts):
        return _head_counts(shape.N, shape.d, tiles.Br, tiles.Bc, facts.overheads)

    def runner(self, torch, ext, shape, tiles):
        from perfmodel.measure.runner import Runner as Base

        class Runner(Base):
            """fa1 keeps O, l and m in global memory between K/V tiles: it reads zeros, zeros and -inf."""

            def __init__(self):
                super().__init__(torch, shape, extra=("l", "m"))

            def setup(self):
                self.O.zero_()
                self.l.zero_()
                self.m.fill_(float("-inf"))

            def launch(self, Q, K, V):
                ext.fa1_forward(Q, K, V, self.O, self.l, self.m, int(tiles.Br), int(tiles.Bc))

            def attributes(self):
                a = ext.fa1_attributes()
                a["cuda_blocks_per_sm"] = ext.fa1_max_blocks_per_sm(int(shape.d), int(tiles.Br), int(tiles.Bc))
                return a

        return Runner()


KERNEL = register(FA1())
