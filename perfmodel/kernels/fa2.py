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

import dataclasses
from dataclasses import dataclass

import numpy as np

from perfmodel.hw import banks
from perfmodel.kernels.base import ArchFacts, Kernel, Tiles, register
from perfmodel.kernels.common import work_counts, F32, WARP, arr, cdiv, over_warps, tiles


FP32_PER_EXP = 3          # __expf: FMUL by log2 e, then MUFU.EX2 between two predicated FMULs (SASS)
# Per architecture: registers per thread (one build serves every tile: run-time arguments) and the
# instructions beyond the counted arithmetic and memory ones, per step of each loop, read off the SASS
# (research/data/h100/sass/fa2.sass): P1 0x21a0 (60 per 16 row-chunks), P2 0x37e0 (23 per 16 steps),
# P3/P5 0x4b70/0x5f20 (12 per 16 steps), P4 0x4700 (16 per 4 chunks), P6 0x6c50 (28 per 16 steps), prologue
# 0x0860 (40 per 16), epilogue 0x7e40 (8 per 16); plus estimates for outer-loop and per-tile set-up.
ARCH = {
    "sm_90": ArchFacts(regs=48, source="ptxas -v, nvcc 13.0, sm_90; research/data/h100/sass/fa2.sass",
                       overheads={
                           "p1_chunk": 60 / 16, "p2_step": 23 / 16, "row_step": 12 / 16, "p4_chunk": 16 / 4,
                           "p6_step": 28 / 16, "prologue": 40 / 16, "epilogue": 8 / 16,
                           # half the ~100 static instructions of the outer-loop bodies (checked against ncu)
                           "outer_iter": 48,
                           "tile": 40,        # estimate: per K/V tile: bounds, five barriers, loop control
                       }),
    # The same source built for sm_80 and sm_86 (nvcc 13.0 -O3, research/data/sass_sm80_sm86/; loops at
    # sm_80 0x2120, 0x3570, 0x46a0/0x58c0, 0x4210, 0x64f0, 0x07b0, 0x7610 and sm_86 0x2090, 0x34e0, 0x4670/0x58e0,
    # 0x41e0, 0x6510, 0x07b0, 0x7690, in the order above): the same arithmetic and memory instructions, fewer
    # others. The outer-iteration and tile set-up are sm_90's estimates.
    "sm_80": ArchFacts(regs=56, source="ptxas -v and cuobjdump -sass, nvcc 13.0, sm_80 (no sm_80 GPU measured)",
                       overheads={
                           "p1_chunk": 50 / 16, "p2_step": 15 / 16, "row_step": 8 / 16, "p4_chunk": 19 / 4,
                           "p6_step": 24 / 16, "prologue": 38 / 16, "epilogue": 8 / 16, "outer_iter": 48, "tile": 40,
                       }),
    "sm_86": ArchFacts(regs=48, source="ptxas -v and cuobjdump -sass, nvcc 13.0, sm_86 (no sm_86 GPU measured)",
                       overheads={
                           "p1_chunk": 50 / 16, "p2_step": 15 / 16, "row_step": 8 / 16, "p4_chunk": 19 / 4,
                           "p6_step": 24 / 16, "prologue": 40 / 16, "epilogue": 8 / 16, "outer_iter": 48, "tile": 40,
                       }),
}
# sm_89 (Ada): its build is the sm_86 listing, instruction for instruction and at the same addresses
# (research/data/sass_sm89/fa2_sm89.sass; nvcc 13.0 -O3)
ARCH["sm_89"] = dataclasses.replace(ARCH["sm_86"], source="ptxas -v and cuobjdump -sass, nvcc 13.0, sm_89: the sm_86 "
                                                          "build's SASS (no sm_89 GPU measured)")


@dataclass(frozen=True)
class FA2Tiles(Tiles):
    """fa2's block is 32 lanes x threads/32 warps; shared rows are padded by ``pad`` words."""

    threads: object = 128
    pad: object = 1


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


def _j_tile(d, Br, Bc, T, pad, o):
    """Per-block counts of one K/V tile step with nc valid rows (vectorised over nc)."""
    W = arr(T) // WARP
    dp, bcp = arr(d) + arr(pad), arr(Bc) + arr(pad)
    dch, _ = _chunks(d)

    def f(nc):
        live = nc > 0
        nch, a0 = _chunks(nc)
        # P1: K and V rows, 2-D, conflict-free consecutive words
        p1 = dict(ldg=2 * nc * dch, sts=2 * nc * dch, st_wf=2 * nc * dch, st_bytes=2 * nc * d * F32,
                  sectors=2 * nc * cdiv(d * F32, 32), other=nc * dch * o["p1_chunk"] + o["tile"])
        # P2: S = Q K^T; Qs broadcast, Ks at lane stride dp
        kwf = _sum_chunks(nc, lambda a: np.where(a > 0, banks.strided(dp, a), 0))
        p2 = dict(lds=Br * nch * 2 * d, ld_wf=Br * d * (nch + kwf), fp32=Br * nch * (d + 1),
                  sts=Br * nch, st_wf=Br * nch, ld_bytes=Br * F32 * d * (nc + nc), st_bytes=Br * nc * F32,
                  other=Br * nch * (d * o["p2_step"] + o["outer_iter"]), fma=Br * nc * d, mul=Br * nc)
        # P3 and P5: one thread per row, Ss at lane stride bcp
        swf = lambda a: np.where(a > 0, banks.strided(bcp, a), 0)
        rw = _row_threads(Br, T, lambda a: (a > 0).astype(np.int64))      # row-warps
        rwf = _row_threads(Br, T, swf)
        p3 = dict(lds=rw * (1 + nc), ld_wf=rw + nc * rwf, fp32=rw * (nc + 1 + FP32_PER_EXP), sfu=rw, sts=2 * rw,
                  st_wf=2 * rw, ld_bytes=Br * (1 + nc) * F32, st_bytes=2 * Br * F32,
                  other=rw * (nc * o["row_step"] + o["outer_iter"]),
                  cmp=Br * nc, add=Br, exp=Br)
        p5 = dict(lds=rw * (nc + 2), ld_wf=nc * rwf + 2 * rw, fp32=rw * (nc + 1), sts=rw, st_wf=rw,
                  ld_bytes=Br * (nc + 2) * F32, st_bytes=Br * F32,
                  other=rw * (nc * o["row_step"] + o["outer_iter"]), add=Br * nc, fma=Br)
        # P4: exp, 2-D, consecutive words; m[r] read once per row and warp
        p4 = dict(lds=Br * (1 + nch), ld_wf=Br * (1 + nch), fp32=Br * nch * (1 + FP32_PER_EXP), sfu=Br * nch,
                  sts=Br * nch, st_wf=Br * nch, ld_bytes=Br * (WARP + nc) * F32, st_bytes=Br * nc * F32,
                  other=Br * (nch * o["p4_chunk"] + o["outer_iter"]),
                  add=Br * nc, exp=Br * nc)
        # P6: O = alpha*O + P V; Ss broadcast, Vs and Os consecutive
        p6 = dict(lds=Br * (1 + dch * (2 * nc + 1)), ld_wf=Br * (1 + dch * (2 * nc + 1)),
                  fp32=Br * dch * (nc + 1), sts=Br * dch, st_wf=Br * dch,
                  ld_bytes=Br * F32 * (WARP + d * (2 * nc + 1)), st_bytes=Br * d * F32,
                  other=Br * dch * (nc * o["p6_step"] + o["outer_iter"]),
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
            p_dot=rows2d * nch * d + rows2d * dch * nc,                  # P2, P6
            p_reduction=2 * rows1d * nc,                                       # P3, P5
            p_exp=rows2d * nch + rows1d,                                 # P4, and the rescale factor in P3
            p_outer=(rows2d * (2 * nch + dch) + 2 * rows1d + cdiv(nc, W)) * o["outer_iter"] + o["tile"],
            p_conflict=rows2d * nch * d * (banks.strided(dp, a0) - 1)
            + 2 * rows1d * nc * (banks.strided(bcp, a_row) - 1),
            p_fp32=rows2d * nch + rows1d + rows2d * dch,                 # scale, l update, alpha * O
            p_sfu=0 * nc,
            p_gmem=cdiv(nc, W) * dch,                                    # P1 rows of this warp
        )
        return {k: v * live for k, v in out.items()}       # zero where the tile or warp is empty
    return f


def _head_counts(N, d, Br, Bc, threads, pad, o):
    """Everything of one (batch, head): its ceil(N/Br) blocks."""
    N, d, Br, Bc, T, pad = (arr(x) for x in (N, d, Br, Bc, threads, pad))
    Tr = cdiv(N, Br)
    fj, rc = tiles(N, Bc)
    jt = _j_tile(d, Br, Bc, T, pad, o)
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
    h["other"] = h["other"] + Tr * Br * dch * o["prologue"] + valid_rows * dch * o["epilogue"]
    path = {k[2:]: fj * full[k] + part[k] for k in full if k.startswith("p_")}
    nd = N * d * F32
    zero = 0 * N
    return work_counts(
        h,
        # Q read and O written once; every Q-tile block reads all of K and V
        l2_read_bytes=nd + Tr * 2 * nd, l2_write_bytes=nd,
        # DRAM: Q, K, V on first touch; K and V again for later Q tiles of a head when they left L2
        dram_read_once=3 * nd, dram_read_reuse=(Tr - 1) * 2 * nd, reuse_live_bytes=2 * nd,
        dram_write_once=nd, dram_write_reuse=zero,
        path_dot=path["dot"], path_reduction=path["reduction"], path_exp=path["exp"], path_outer=path["outer"],
        path_conflict=path["conflict"], path_fp32=path["fp32"] + 2, path_sfu=path["sfu"] + 1,
        path_gmem=path["gmem"] + cdiv(Br, W) * dch + 1, path_sync=5 * (fj + (rc > 0)) + 1,
    )


def smem_bytes(d, Br, Bc, pad):
    """Qs, Os (Br x dp) + Ks, Vs (Bc x dp) + Ss (Br x bcp) + m, l, alpha (Br each), fp32."""
    d, Br, Bc, pad = arr(d), arr(Br), arr(Bc), arr(pad)
    dp, bcp = d + pad, Bc + pad
    return (2 * Br * dp + 2 * Bc * dp + Br * bcp + 3 * Br) * F32


class FA2(Kernel):
    name = "fa2"
    description = "FlashAttention-2 order (seed 001): one block per (Q tile, b, h), 2-D block, O on chip, padded tiles"
    source = "fa2.cu"
    Tiles = FA2Tiles
    arch = ARCH

    def tile_minimum(self, name):
        return 0 if name == "pad" else 1

    def grid_blocks(self, shape, tiles):
        return arr(shape.B) * arr(shape.H) * cdiv(shape.N, tiles.Br)

    def grid_dims(self, shape, tiles):
        return cdiv(shape.N, tiles.Br), arr(shape.B) * arr(shape.H), 1      # fa2.cu: (Q tiles, B * H)

    def smem_bytes(self, shape, tiles):
        return smem_bytes(shape.d, tiles.Br, tiles.Bc, tiles.pad)

    def constraints(self, gpu, shape, tiles):
        return [(arr(tiles.threads) % gpu.warp_size == 0,
                 f"threads must be a multiple of {gpu.warp_size}, got {{threads}}")]

    def head_counts(self, shape, tiles, facts):
        return _head_counts(shape.N, shape.d, tiles.Br, tiles.Bc, tiles.threads, tiles.pad, facts.overheads)

    def runner(self, torch, ext, shape, tiles):
        from perfmodel.measure.runner import Runner as Base

        class Runner(Base):
            def launch(self, Q, K, V):
                ext.fa2_forward(Q, K, V, self.O, int(tiles.Br), int(tiles.Bc), int(tiles.threads), int(tiles.pad))

            def attributes(self):
                a = ext.fa2_attributes()
                a["cuda_blocks_per_sm"] = ext.fa2_max_blocks_per_sm(int(shape.d), int(tiles.Br), int(tiles.Bc),
                                                                    int(tiles.threads), int(tiles.pad))
                return a

        return Runner(torch, shape)


KERNEL = register(FA2())
