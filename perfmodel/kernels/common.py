"""Pieces shared by the loop-nest descriptions: tile bookkeeping, coalescing, L2 reuse."""

from __future__ import annotations

import numpy as np

from perfmodel.counts import Counts

F32 = 4          # bytes per fp32 element
SECTOR = 32      # bytes per L2 sector
WARP = 32


def arr(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def cdiv(a, b):
    return -(-arr(a) // arr(b))


def tiles(N, T):
    """(number of full tiles, size of the last partial tile or 0) of a length-N loop in steps of T."""
    N, T = arr(N), arr(T)
    return N // T, N % T


def over_tiles(N, Br, Bc, f, keys):
    """Sum of f(nc, nr)[k] over all (K/V tile, Q tile) pairs: full tiles and the partial ones at the edges.

    f returns a dict and must give 0 where nc == 0 or nr == 0 is passed (no such tile)."""
    fj, rc = tiles(N, Bc)
    fi, rr = tiles(N, Br)
    a, b, c, e = f(arr(Bc), arr(Br)), f(arr(Bc), rr), f(rc, arr(Br)), f(rc, rr)
    return {k: fj * fi * a[k] + fj * b[k] + fi * c[k] + e[k] for k in keys}


def over_warps(n_threads, g, keys):
    """Sum of g(active_lanes)[k] over the warps of n_threads consecutive threads (the last warp partial)."""
    n = arr(n_threads)
    full, part = g(np.full_like(n, WARP)), g(n % WARP)
    return {k: (n // WARP) * full[k] + part[k] for k in keys}


def strided_sectors(active_lanes, stride_bytes):
    """32-B sectors a warp touches when lane t reads 4 bytes at t*stride_bytes (aligned rows)."""
    a, s = arr(active_lanes), arr(stride_bytes)
    return np.where(s >= SECTOR, a, cdiv(a * np.maximum(s, F32), SECTOR))


def l2_hit_fraction(footprint_bytes, l2_bytes):
    """Share of re-reads that still find their line in L2 when the live working set is footprint_bytes.

    An approximation: everything hits while the set fits; beyond that, hits fall as capacity / footprint
    (lines survive in proportion to the share of the set the cache can hold)."""
    f = np.maximum(np.asarray(footprint_bytes, dtype=float), 1.0)
    return np.minimum(1.0, l2_bytes / f)



# Per-head quantities that scale with the number of heads (B*H); the rest of Counts is per block or per launch.
EXTENSIVE = ("fma", "exp", "cmp", "add", "mul", "warp_fp32", "warp_sfu", "warp_lds", "warp_sts", "warp_ldg",
             "warp_stg", "warp_other", "smem_ld_bytes", "smem_st_bytes", "smem_ld_wavefronts",
             "smem_st_wavefronts", "gld_sectors", "l2_read_bytes", "l2_write_bytes")


def assemble(gpu, B, H, head: dict, regs, l2_bytes=None) -> Counts:
    """Counts of a launch over B*H heads from one head's counts (``head_counts`` of a kernel module).

    ``head`` holds the EXTENSIVE fields per head, the chain_* fields per block, the launch shape (threads,
    smem, blocks_per_head) and the DRAM pieces: bytes read/written on first touch (``dram_read_once``,
    ``dram_write_once``), the re-reads/re-writes that reach DRAM only on an L2 miss (``dram_reread``,
    ``dram_rewrite``) and the bytes a head keeps live between re-reads (``live_bytes``). Only this step
    depends on B and H, so a sweep evaluates ``head_counts`` on the distinct shapes alone.
    """
    from perfmodel.occupancy import blocks_per_sm

    BH = arr(B) * arr(H)
    bph = head["blocks_per_head"]
    grid = BH * bph
    resident = np.minimum(grid, blocks_per_sm(gpu, head["threads"], regs, head["smem"]) * gpu.sm_count)
    live_heads = np.minimum(BH, cdiv(resident, bph) + (bph > 1))
    miss = 1.0 - l2_hit_fraction(live_heads * head["live_bytes"], gpu.l2_bytes if l2_bytes is None else l2_bytes)
    fields = {k: BH * head[k] for k in EXTENSIVE}
    fields.update({k: head[k] for k in Counts.PATH_FEATURES})
    return Counts(
        **fields,
        dram_read_bytes=BH * (head["dram_read_once"] + head["dram_reread"] * miss),
        dram_write_bytes=BH * (head["dram_write_once"] + head["dram_rewrite"] * miss),
        grid_blocks=grid, threads_per_block=head["threads"], smem_bytes_per_block=head["smem"],
        regs_per_thread=arr(regs),
    )
