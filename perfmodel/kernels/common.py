"""Pieces shared by the loop-nest descriptions: tile bookkeeping and coalescing."""

from __future__ import annotations

import numpy as np


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


# the short names the loop-nest code tallies under -> Counts fields
_WORK_FIELDS = {"fma": "fma", "exp": "exp", "cmp": "cmp", "add": "add", "mul": "mul", "fp32": "warp_fp32",
                "sfu": "warp_sfu", "lds": "warp_lds", "sts": "warp_sts", "ldg": "warp_ldg", "stg": "warp_stg",
                "other": "warp_other", "ld_bytes": "smem_ld_bytes", "st_bytes": "smem_st_bytes",
                "ld_wf": "smem_ld_wavefronts", "st_wf": "smem_st_wavefronts", "sectors": "gld_sectors"}


def work_counts(tally: dict, **rest):
    """Counts from a tally under the short names above, plus the remaining fields given by name."""
    from perfmodel.model.counts import Counts

    return Counts(**{field: tally[short] for short, field in _WORK_FIELDS.items()}, **rest)
