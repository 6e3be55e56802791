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
from perfmodel.kernels.common import F32, arr, cdiv, l2_hit_fraction, over_tiles, over_warps, strided_sectors, tiles
from perfmodel.occupancy import blocks_per_sm

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


def counts(gpu: GPUSpec, B, H, N, d, Br, Bc, threads=None, pad=None, regs=None, l2_bytes=None) -> Counts:
    B, H, N, d, Br, Bc = (arr(x) for x in (B, H, N, d, Br, Bc))
    regs = arr(REGS_PER_THREAD if regs is None else regs)
    BH = B * H
    tw = _tile_warp(d, Bc)
    keys = ["lds", "sts", "ld_wf", "st_wf", "fp32", "sfu", "ldg", "stg", "sectors", "other", "ld_bytes",
            "st_bytes", "fma", "exp", "cmp", "add", "mul"]
    # per block: every (j, i) tile pair, every warp of the Q tile
    blk = {k: over_tiles(N, Br, Bc, lambda nc, nr, k=k: over_warps(nr, lambda a: tw(nc, a)[k])) for k in keys}
    # the path: the first (fullest) warp of each Q tile
    path = {k: over_tiles(N, Br, Bc, lambda nc, nr, k=k: tw(nc, np.minimum(nr, 32))[k])
            for k in ["cdot", "cexp", "couter", "conflict", "cfp32", "csfu", "cgmem"]}
    # K/V loads: per j tile, rows r = tx + k*Br for k < ceil(nc/Br)
    kvw = _kv_warp(d)

    def kv_tile(nc, key):
        K = cdiv(nc, Br)
        last = nc - np.maximum(K - 1, 0) * Br
        return np.maximum(K - 1, 0) * over_warps(Br, lambda a: kvw(a)[key]) + over_warps(last, lambda a: kvw(a)[key])

    fj, rc = tiles(N, Bc)
    for key in ["ldg", "sts", "st_wf", "sectors", "other", "st_bytes"]:
        blk[key] = blk[key] + fj * kv_tile(Bc, key) + kv_tile(rc, key)
    Tc = cdiv(N, Bc)
    kv_rows_per_thread = fj * cdiv(Bc, Br) + cdiv(rc, Br)
    path["cgmem"] = path["cgmem"] + kv_rows_per_thread * cdiv(d, 4)

    # global traffic per (b, h): K, V once; Q, O (read and write), l, m once per K/V tile
    nd = N * d * F32
    l2_read = 2 * nd + Tc * (nd + nd + 2 * N * F32)
    l2_write = Tc * (nd + 2 * N * F32)
    # DRAM: first touches, plus re-reads of Q/O/l/m that miss in L2 when the live heads do not fit
    resident = np.minimum(BH, blocks_per_sm(gpu, Br, regs, smem_bytes(d, Br, Bc)) * gpu.sm_count)
    per_head = nd + nd + 2 * N * F32
    miss = 1.0 - l2_hit_fraction(resident * per_head, gpu.l2_bytes if l2_bytes is None else l2_bytes)
    dram_read = 2 * nd + per_head + (Tc - 1) * per_head * miss
    dram_write = (nd + 2 * N * F32) * (1 + (Tc - 1) * miss)           # O, l, m

    z = np.zeros(np.broadcast_shapes(*(np.shape(x) for x in (B, H, N, d, Br, Bc))))
    return Counts(
        fma=BH * blk["fma"] + z, exp=BH * blk["exp"] + z, cmp=BH * blk["cmp"] + z,
        add=BH * blk["add"] + z, mul=BH * blk["mul"] + z,
        warp_fp32=BH * blk["fp32"] + z, warp_sfu=BH * blk["sfu"] + z, warp_lds=BH * blk["lds"] + z,
        warp_sts=BH * blk["sts"] + z, warp_ldg=BH * blk["ldg"] + z, warp_stg=BH * blk["stg"] + z,
        warp_other=BH * blk["other"] + z,
        smem_ld_bytes=BH * blk["ld_bytes"] + z, smem_st_bytes=BH * blk["st_bytes"] + z,
        smem_ld_wavefronts=BH * blk["ld_wf"] + z, smem_st_wavefronts=BH * blk["st_wf"] + z,
        gld_sectors=BH * blk["sectors"] + z,
        l2_read_bytes=BH * l2_read + z, l2_write_bytes=BH * l2_write + z,
        dram_read_bytes=BH * dram_read + z, dram_write_bytes=BH * dram_write + z,
        grid_blocks=BH + z, threads_per_block=Br + z, smem_bytes_per_block=smem_bytes(d, Br, Bc) + z,
        regs_per_thread=regs + z,
        chain_dot=path["cdot"] + z, chain_red=z, chain_exp=path["cexp"] + z, chain_outer=path["couter"] + z,
        chain_conflict_wf=path["conflict"] + z, chain_fp32=path["cfp32"] + z,
        chain_sfu=path["csfu"] + z, chain_gmem=path["cgmem"] + z, chain_syncs=2 * Tc + z,
    )


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
