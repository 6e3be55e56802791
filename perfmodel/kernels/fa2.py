"""fa2: FlashAttention-2 loop order after seed 001 (one block per Q tile, O kept on chip, padded tiles).

The kernel (csrc/fa2.cu): grid (ceil(N/Br), B*H), block (32, W) = ``threads`` threads; tx = lane, ty = warp.
Shared tiles are padded: rows of Q, K, V, O have dp = d + pad words, rows of S have bcp = Bc + pad words.

    Qs[r][x] <- Q (rows r < nr, zeros beyond), Os <- 0, m <- -inf, l <- 0           rows r = ty, ty+W, ...
    for j in K/V tiles (nc valid rows):
      P1  Ks[c][x], Vs[c][x] <- K, V       for c = ty (step W) < nc, x = tx (step 32) < d
      P2  Ss[r][c] = scale * sum_x Qs[r][x]*Ks[c][x]     r = ty (step W) < Br, c = tx (step 32) < nc
      P3  one thread per row (r = tid, step T): mx = max(m[r], Ss[r][:nc]); al[r] = e^(m[r]-mx); m[r] = mx
      P4  Ss[r][c] = e^(Ss[r][c] - m[r])                 2-D, as P2
      P5  one thread per row: l[r] = l[r]*al[r] + sum_c Ss[r][c]
      P6  Os[r][x] = al[r]*Os[r][x] + sum_c Ss[r][c]*Vs[c][x]      r = ty (step W), x = tx (step 32) < d
      (__syncthreads after P1, P2, P3, P4 and P6)
    O[r][x] = Os[r][x] / l[r] for r < nr

Lanes of a warp walk consecutive words except in P2 (Ks[c][x]: lane stride dp) and P3/P5 (Ss[r][c]: lane
stride bcp), where padding decides the bank conflicts; Qs[r][x] in P2 and Ss[r][c] in P6 are broadcasts.
"""

from __future__ import annotations

import numpy as np

from perfmodel import banks
from perfmodel.counts import Counts
from perfmodel.errors import InputError
from perfmodel.gpu import GPUSpec
from perfmodel.kernels.common import F32, WARP, arr, assemble, cdiv, over_warps, tiles

NAME = "fa2"
SOURCE = "fa2.cu"
DESCRIPTION = "FlashAttention-2 order (seed 001): one block per (Q tile, b, h), 2-D block, O on chip, padded tiles"
# Instructions beyond the counted arithmetic and memory ones, per step of each loop, read off the kernel's SASS
# for sm_90 (examples/measurements/h100/sass/fa2.sass): P1 0x21a0 (60 per 16 row-chunks), P2 0x37e0 (23 per 16
# steps), P3/P5 0x4b70/0x5f20 (12 per 16 steps), P4 0x4700 (16 per 4 chunks), P6 0x6c50 (28 per 16 steps),
# prologue 0x0860 (40 per 16), epilogue 0x7e40 (8 per 16); plus estimates for outer-loop and per-tile set-up.
OTHER_P1 = 60 / 16
OTHER_P2_STEP = 23 / 16
OTHER_ROW_STEP = 12 / 16
OTHER_P4_CHUNK = 16 / 4
OTHER_P6_STEP = 28 / 16
OTHER_PROLOGUE = 40 / 16
OTHER_EPILOGUE = 8 / 16
OTHER_OUTER_ITER = 48     # half the ~100 static instructions of the outer-loop bodies in the SASS (checked against ncu)
OTHER_TILE = 40           # estimate: per K/V tile: bounds, five barriers, loop control
FP32_PER_EXP = 3          # __expf: FMUL by log2 e, then MUFU.EX2 between two predicated FMULs (SASS)
REGS_PER_THREAD = 48     # ptxas for sm_90 (nvcc 13.0); one build serves every tile (run-time arguments)
DEFAULT_THREADS = 128
DEFAULT_PAD = 1
PADDED = True


def smem_bytes(d, Br, Bc, pad=DEFAULT_PAD):
    """Qs, Os (Br x dp) + Ks, Vs (Bc x dp) + Ss (Br x bcp) + m, l, alpha (Br each), fp32."""
    d, Br, Bc, pad = arr(d), arr(Br), arr(Bc), arr(pad)
    dp, bcp = d + pad, Bc + pad
    return (2 * Br * dp + 2 * Bc * dp + Br * bcp + 3 * Br) * F32


def block_threads(Br, threads=DEFAULT_THREADS):
    return arr(threads)


def grid_blocks(B, H, N, Br):
    return arr(B) * arr(H) * cdiv(N, Br)


def _chunks(n):
    """(number of 32-lane column chunks, lanes in the first chunk) for a loop x = tx (step 32) < n."""
    n = arr(n)
    return cdiv(n, WARP), np.minimum(n, WARP)


def _sum_chunks(n, g):
    """Sum of g(active lanes) over the column chunks of a loop x = tx (step 32) < n."""
    n = arr(n)
    return (n // WARP) * g(np.full_like(n, WARP)) + g(n % WARP)


def _row_threads(R, T, g):
    """Sum of g(active lanes) over warps of a loop r = tid (step T) < R (one thread per row)."""
    R, T = arr(R), arr(T)
    one = lambda a: {"v": g(a)}
    return (R // T) * over_warps(T, one, ["v"])["v"] + over_warps(R % T, one, ["v"])["v"]


def _j_tile(d, Br, Bc, T, pad):
    """Per-block counts of one K/V tile step with nc valid rows (vectorised over nc)."""
    W = arr(T) // WARP
    dp, bcp = arr(d) + arr(pad), arr(Bc) + arr(pad)
    dch, _ = _chunks(d)

    def f(nc):
        live = nc > 0
        nch, a0 = _chunks(nc)
        # P1: K and V rows, 2-D, conflict-free consecutive words
        p1 = dict(ldg=2 * nc * dch, sts=2 * nc * dch, st_wf=2 * nc * dch, st_bytes=2 * nc * d * F32,
                  sectors=2 * nc * cdiv(d * F32, 32), other=nc * dch * OTHER_P1 + OTHER_TILE)
        # P2: S = Q K^T; Qs broadcast, Ks at lane stride dp
        kwf = _sum_chunks(nc, lambda a: np.where(a > 0, banks.strided(dp, a), 0))
        p2 = dict(lds=Br * nch * 2 * d, ld_wf=Br * d * (nch + kwf), fp32=Br * nch * (d + 1),
                  sts=Br * nch, st_wf=Br * nch, ld_bytes=Br * F32 * d * (nc + nc), st_bytes=Br * nc * F32,
                  other=Br * nch * (d * OTHER_P2_STEP + OTHER_OUTER_ITER), fma=Br * nc * d, mul=Br * nc)
        # P3 and P5: one thread per row, Ss at lane stride bcp
        swf = lambda a: np.where(a > 0, banks.strided(bcp, a), 0)
        rw = _row_threads(Br, T, lambda a: (a > 0).astype(np.int64))      # row-warps
        rwf = _row_threads(Br, T, swf)
        p3 = dict(lds=rw * (1 + nc), ld_wf=rw + nc * rwf, fp32=rw * (nc + 1 + FP32_PER_EXP), sfu=rw, sts=2 * rw,
                  st_wf=2 * rw, ld_bytes=Br * (1 + nc) * F32, st_bytes=2 * Br * F32,
                  other=rw * (nc * OTHER_ROW_STEP + OTHER_OUTER_ITER),
                  cmp=Br * nc, add=Br, exp=Br)
        p5 = dict(lds=rw * (nc + 2), ld_wf=nc * rwf + 2 * rw, fp32=rw * (nc + 1), sts=rw, st_wf=rw,
                  ld_bytes=Br * (nc + 2) * F32, st_bytes=Br * F32,
                  other=rw * (nc * OTHER_ROW_STEP + OTHER_OUTER_ITER), add=Br * nc, fma=Br)
        # P4: exp, 2-D, consecutive words; m[r] read once per row and warp
        p4 = dict(lds=Br * (1 + nch), ld_wf=Br * (1 + nch), fp32=Br * nch * (1 + FP32_PER_EXP), sfu=Br * nch,
                  sts=Br * nch, st_wf=Br * nch, ld_bytes=Br * (WARP + nc) * F32, st_bytes=Br * nc * F32,
                  other=Br * (nch * OTHER_P4_CHUNK + OTHER_OUTER_ITER),
                  add=Br * nc, exp=Br * nc)
        # P6: O = alpha*O + P V; Ss broadcast, Vs and Os consecutive
        p6 = dict(lds=Br * (1 + dch * (2 * nc + 1)), ld_wf=Br * (1 + dch * (2 * nc + 1)),
                  fp32=Br * dch * (nc + 1), sts=Br * dch, st_wf=Br * dch,
                  ld_bytes=Br * F32 * (WARP + d * (2 * nc + 1)), st_bytes=Br * d * F32,
                  other=Br * dch * (nc * OTHER_P6_STEP + OTHER_OUTER_ITER),
                  fma=Br * d * (nc + 1))
        out: dict = {}
        for part in (p1, p2, p3, p4, p5, p6):
            for k, v in part.items():
                out[k] = out.get(k, 0) + v
        # the path of warp 0 (rows 0, W, 2W, ... in 2-D phases; the first T rows in row phases)
        rows2d = cdiv(Br, W)
        rows1d = cdiv(Br, T)
        a_row = np.minimum(Br, WARP)
        out.update(
            c_dot=rows2d * nch * d + rows2d * dch * nc,                  # P2, P6
            c_red=2 * rows1d * nc,                                       # P3, P5
            c_exp=rows2d * nch + rows1d,                                 # P4, and the rescale factor in P3
            c_outer=(rows2d * (2 * nch + dch) + 2 * rows1d + cdiv(nc, W)) * OTHER_OUTER_ITER + OTHER_TILE,
            c_conflict=rows2d * nch * d * (banks.strided(dp, a0) - 1)
            + 2 * rows1d * nc * (banks.strided(bcp, a_row) - 1),
            c_fp32=rows2d * nch + rows1d + rows2d * dch,                 # scale, l update, alpha * O
            c_sfu=0 * nc,
            c_gmem=cdiv(nc, W) * dch,                                    # P1 rows of this warp
        )
        return {k: np.where(live, v, 0) for k, v in out.items()}
    return f


def head_counts(gpu: GPUSpec, N, d, Br, Bc, threads=DEFAULT_THREADS, pad=DEFAULT_PAD) -> dict:
    """Everything of one (batch, head): its ceil(N/Br) blocks; see common.assemble for the keys."""
    N, d, Br, Bc, T, pad = (arr(x) for x in (N, d, Br, Bc, threads, pad))
    Tr = cdiv(N, Br)
    fj, rc = tiles(N, Bc)
    jt = _j_tile(d, Br, Bc, T, pad)
    full, part = jt(arr(Bc) + 0 * N), jt(rc)
    per_block = {k: fj * full[k] + part[k] for k in full}          # every Q-tile block loops over all of K/V
    W = T // WARP
    dch = cdiv(d, WARP)
    rw = _row_threads(Br, T, lambda a: (a > 0).astype(np.int64))
    # prologue (Q tile in, O zeroed, m and l set) and epilogue (O out for the valid rows), over the head
    h = {k: Tr * v for k, v in per_block.items()}
    valid_rows = N                                                    # rows written, over all Q tiles
    h["ldg"] = h["ldg"] + Tr * Br * dch
    h["sts"] = h["sts"] + Tr * (2 * Br * dch + 2 * rw)
    h["st_wf"] = h["st_wf"] + Tr * (2 * Br * dch + 2 * rw)
    h["st_bytes"] = h["st_bytes"] + Tr * (2 * Br * d + 2 * Br) * F32
    h["sectors"] = h["sectors"] + N * cdiv(d * F32, 32)
    h["lds"] = h["lds"] + valid_rows * (1 + dch)
    h["ld_wf"] = h["ld_wf"] + valid_rows * (1 + dch)
    h["ld_bytes"] = h["ld_bytes"] + valid_rows * (WARP + d) * F32    # l[r] read by all 32 lanes
    h["sfu"] = h["sfu"] + valid_rows
    h["fp32"] = h["fp32"] + valid_rows * (1 + dch)
    h["stg"] = valid_rows * dch
    h["mul"] = h["mul"] + valid_rows * (WARP + d)                    # 1/l[r] on every lane, then O * (1/l)
    h["other"] = h["other"] + Tr * Br * dch * OTHER_PROLOGUE + valid_rows * dch * OTHER_EPILOGUE
    path = {k: fj * full[k] + part[k]
            for k in ("c_dot", "c_red", "c_exp", "c_outer", "c_conflict", "c_fp32", "c_sfu", "c_gmem")}
    nd = N * d * F32
    zero = 0 * N
    return {
        "fma": h["fma"], "exp": h["exp"], "cmp": h["cmp"], "add": h["add"], "mul": h["mul"],
        "warp_fp32": h["fp32"], "warp_sfu": h["sfu"], "warp_lds": h["lds"], "warp_sts": h["sts"],
        "warp_ldg": h["ldg"], "warp_stg": h["stg"], "warp_other": h["other"],
        "smem_ld_bytes": h["ld_bytes"], "smem_st_bytes": h["st_bytes"],
        "smem_ld_wavefronts": h["ld_wf"], "smem_st_wavefronts": h["st_wf"], "gld_sectors": h["sectors"],
        # Q read and O written once; every Q-tile block reads all of K and V
        "l2_read_bytes": nd + Tr * 2 * nd, "l2_write_bytes": nd,
        # DRAM: Q, K, V on first touch; K and V again for later Q tiles of a head when they left L2
        "dram_read_once": 3 * nd, "dram_reread": (Tr - 1) * 2 * nd, "live_bytes": 2 * nd,
        "dram_write_once": nd, "dram_rewrite": zero,
        "blocks_per_head": Tr, "threads": T, "smem": smem_bytes(d, Br, Bc, pad),
        "chain_dot": path["c_dot"], "chain_red": path["c_red"], "chain_exp": path["c_exp"],
        "chain_outer": path["c_outer"], "chain_conflict_wf": path["c_conflict"],
        "chain_fp32": path["c_fp32"] + 2, "chain_sfu": path["c_sfu"] + 1,
        "chain_gmem": path["c_gmem"] + cdiv(Br, W) * dch + 1, "chain_syncs": 5 * (fj + (rc > 0)) + 1,
    }


def counts(gpu: GPUSpec, B, H, N, d, Br, Bc, threads=DEFAULT_THREADS, pad=DEFAULT_PAD, regs=None,
           l2_bytes=None) -> Counts:
    regs = REGS_PER_THREAD if regs is None else regs
    return assemble(gpu, B, H, head_counts(gpu, N, d, Br, Bc, threads, pad), regs, l2_bytes)


def check(gpu: GPUSpec, B, H, N, d, Br, Bc, threads=DEFAULT_THREADS, pad=DEFAULT_PAD) -> None:
    if threads % gpu.warp_size:
        raise InputError(f"fa2 needs threads to be a multiple of {gpu.warp_size}, got {threads}")
    if threads > gpu.max_threads_per_block:
        raise InputError(f"fa2 with {threads} threads per block; {gpu.name} allows at most "
                         f"{gpu.max_threads_per_block}")
    if pad < 0:
        raise InputError(f"pad must be >= 0, got {pad}")
    need = int(smem_bytes(d, Br, Bc, pad))
    if need > gpu.smem_per_block_optin_bytes:
        raise InputError(f"fa2 tile Br={Br}, Bc={Bc}, d={d}, pad={pad} needs {need} B of shared memory per "
                         f"block; {gpu.name} allows at most {gpu.smem_per_block_optin_bytes} B")


def fits(gpu: GPUSpec, d, Br, Bc, threads=DEFAULT_THREADS, pad=DEFAULT_PAD):
    return ((arr(threads) <= gpu.max_threads_per_block) & (arr(threads) % gpu.warp_size == 0)
            & (smem_bytes(d, Br, Bc, pad) <= gpu.smem_per_block_optin_bytes))
