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

import numpy as np

from perfmodel import banks
from perfmodel.counts import Counts
from perfmodel.errors import InputError
from perfmodel.gpu import GPUSpec
from perfmodel.kernels.common import F32, arr, assemble, cdiv, over_tiles, over_warps, strided_sectors, tiles

NAME = "fa1"
SOURCE = "fa1.cu"
DESCRIPTION = "FlashAttention-1 order (seed 000): grid (B, H), one thread per query row, O/l/m in global memory"
# Instructions beyond the counted arithmetic and memory ones (address arithmetic, loop control, predicates),
# per step of each loop, read off the kernel's SASS for sm_90 (examples/measurements/h100/sass/fa1.sass; the
# 16-way unrolled bodies at 0x2ac0 (Q K^T: 27 per 16 steps), 0x4b40 (P V: 30 per 16), 0x1840 (Q row load:
# 31 per 16), 0x0910 (K/V row load: 10 per 16 elements of K and V), 0x3720 (exp loop: 10 per 4 steps)),
# plus an estimate for the set-up of each outer iteration and each tile.
OTHER_QK_STEP = 27 / 16
OTHER_PV_STEP = 30 / 16
OTHER_QLOAD_STEP = 31 / 16
OTHER_KVLOAD_STEP = 10 / 16
OTHER_EXP_STEP = 10 / 4
OTHER_OUTER_ITER = 48     # half the ~100 static instructions of the outer-loop bodies in the SASS (checked against ncu)
OTHER_TILE = 24               # estimate: per (i, j) step: row index, m/l addresses, branches
FP32_PER_EXP = 3              # __expf: FMUL by log2 e, then MUFU.EX2 between two predicated FMULs (SASS)
# Registers per thread of the compiled kernel: tiles and d are run-time arguments, so one build serves all
# configurations. Value reported by ptxas -v for sm_90 (nvcc 13.0) and by cudaFuncGetAttributes on the H100.
REGS_PER_THREAD = 32


def smem_bytes(d, Br, Bc, pad=None):
    """Qi (Br x d) + Kj, Vj (Bc x d each) + S (Br x Bc), fp32, unpadded."""
    d, Br, Bc = arr(d), arr(Br), arr(Bc)
    return (Br * d + 2 * Bc * d + Br * Bc) * F32


DEFAULT_THREADS = None   # fa1 runs Br threads per block
DEFAULT_PAD = 0          # and has no padding
PADDED = False


def block_threads(Br, threads=None):
    """fa1 runs one thread per query row of the tile."""
    return arr(Br)


def grid_blocks(B, H, N, Br):
    return arr(B) * arr(H)


def _tile_warp(d, Bc):
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
        other = (nc * d * OTHER_QK_STEP + d * nc * OTHER_PV_STEP + nc * (OTHER_EXP_STEP + OTHER_OUTER_ITER)
                 + d * (OTHER_QLOAD_STEP + OTHER_OUTER_ITER) + OTHER_TILE)
        out = dict(lds=lds, sts=sts, ld_wf=ld_wf, st_wf=st_wf, fp32=fp32, sfu=sfu, ldg=ldg, stg=stg,
                   sectors=sectors, other=other,
                   ld_bytes=F32 * a * lds, st_bytes=F32 * a * sts,
                   # thread-level operations, per active lane
                   fma=a * (2 * nc * d + d + 1), exp=a * (nc + 2), cmp=a * (nc + 1),
                   add=a * (2 * nc + 2), mul=a * (nc + 5 + d),
                   # the path of this warp
                   cdot=2 * nc * d, cexp=nc, couter=(nc + 2 * d) * OTHER_OUTER_ITER + OTHER_TILE, conflict=nc * d * (wq - 1) + d * nc * (ws - 1) + d * (wq - 1)
                   + 3 * nc * (ws - 1),
                   cfp32=2 * nc + 9 + 2 * FP32_PER_EXP + 2 * d, csfu=3, cgmem=cdiv(d, 4) + 1 + d)
        return {k: np.where(live, v, 0) for k, v in out.items()}
    return g


def _kv_warp(d):
    """Per-warp counts of loading one K row and one V row per lane (a lanes active)."""
    def g(a):
        live = a > 0
        w = banks.strided(d, a)
        out = dict(ldg=2 * d, sts=2 * d, st_wf=2 * d * w, sectors=2 * d * strided_sectors(a, d * F32),
                   other=2 * d * OTHER_KVLOAD_STEP + OTHER_OUTER_ITER, st_bytes=2 * d * a * F32)
        return {k: np.where(live, v, 0) for k, v in out.items()}
    return g


def head_counts(gpu: GPUSpec, N, d, Br, Bc, threads=None, pad=None) -> dict:
    """Everything of one (batch, head) block; see common.assemble for the keys."""
    N, d, Br, Bc = (arr(x) for x in (N, d, Br, Bc))
    tw = _tile_warp(d, Bc)
    keys = ["lds", "sts", "ld_wf", "st_wf", "fp32", "sfu", "ldg", "stg", "sectors", "other", "ld_bytes",
            "st_bytes", "fma", "exp", "cmp", "add", "mul"]
    # per block: every (j, i) tile pair, every warp of the Q tile
    blk = over_tiles(N, Br, Bc, lambda nc, nr: over_warps(nr, lambda a: tw(nc, a), keys), keys)
    # the path: the first (fullest) warp of each Q tile
    pkeys = ["cdot", "cexp", "couter", "conflict", "cfp32", "csfu", "cgmem"]
    path = over_tiles(N, Br, Bc, lambda nc, nr: tw(nc, np.minimum(nr, 32)), pkeys)
    # K/V loads: per j tile, rows r = tx + k*Br for k < ceil(nc/Br)
    kvw = _kv_warp(d)
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
    return {
        "fma": blk["fma"], "exp": blk["exp"], "cmp": blk["cmp"], "add": blk["add"], "mul": blk["mul"],
        "warp_fp32": blk["fp32"], "warp_sfu": blk["sfu"], "warp_lds": blk["lds"], "warp_sts": blk["sts"],
        "warp_ldg": blk["ldg"], "warp_stg": blk["stg"], "warp_other": blk["other"],
        "smem_ld_bytes": blk["ld_bytes"], "smem_st_bytes": blk["st_bytes"],
        "smem_ld_wavefronts": blk["ld_wf"], "smem_st_wavefronts": blk["st_wf"], "gld_sectors": blk["sectors"],
        "l2_read_bytes": 2 * nd + Tc * per_head, "l2_write_bytes": Tc * (nd + 2 * N * F32),
        # DRAM: first touches (K, V, and Q/O/l/m), re-reads of Q/O/l/m on an L2 miss; O, l, m written back
        "dram_read_once": 2 * nd + per_head, "dram_reread": (Tc - 1) * per_head, "live_bytes": per_head,
        "dram_write_once": nd + 2 * N * F32, "dram_rewrite": (Tc - 1) * (nd + 2 * N * F32),
        "blocks_per_head": np.ones_like(N), "threads": Br, "smem": smem_bytes(d, Br, Bc),
        "chain_dot": path["cdot"], "chain_red": 0 * N, "chain_exp": path["cexp"], "chain_outer": path["couter"],
        "chain_conflict_wf": path["conflict"], "chain_fp32": path["cfp32"], "chain_sfu": path["csfu"],
        "chain_gmem": path["cgmem"] + kv_rows_per_thread * cdiv(d, 4), "chain_syncs": 2 * Tc,
    }


def counts(gpu: GPUSpec, B, H, N, d, Br, Bc, threads=None, pad=None, regs=None, l2_bytes=None) -> Counts:
    regs = REGS_PER_THREAD if regs is None else regs
    return assemble(gpu, B, H, head_counts(gpu, N, d, Br, Bc), regs, l2_bytes)


def check(gpu: GPUSpec, B, H, N, d, Br, Bc, threads=None, pad=None) -> None:
    """Raise InputError for a configuration this kernel cannot run on this GPU."""
    if Br > gpu.max_threads_per_block:
        raise InputError(f"fa1 runs Br = {Br} threads per block; {gpu.name} allows at most "
                         f"{gpu.max_threads_per_block}")
    need = int(smem_bytes(d, Br, Bc))
    if need > gpu.smem_per_block_optin_bytes:
        raise InputError(f"fa1 tile Br={Br}, Bc={Bc}, d={d} needs {need} B of shared memory per block; "
                         f"{gpu.name} allows at most {gpu.smem_per_block_optin_bytes} B")


def fits(gpu: GPUSpec, d, Br, Bc, threads=None, pad=None):
    return (arr(Br) <= gpu.max_threads_per_block) & (smem_bytes(d, Br, Bc) <= gpu.smem_per_block_optin_bytes)
