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


def over_tiles(N, Br, Bc, f):
    """Sum of f(nc, nr) over all (K/V tile, Q tile) pairs: full tiles and the partial ones at the edges.

    f must return 0 where nc == 0 or nr == 0 is passed (no such tile)."""
    fj, rc = tiles(N, Bc)
    fi, rr = tiles(N, Br)
    return fj * fi * f(arr(Bc), arr(Br)) + fj * f(arr(Bc), rr) + fi * f(rc, arr(Br)) + f(rc, rr)


def over_warps(n_threads, g):
    """Sum of g(active_lanes) over the warps of n_threads consecutive threads (the last warp partial)."""
    n = arr(n_threads)
    return (n // WARP) * g(np.full_like(n, WARP)) + g(n % WARP)


def strided_sectors(active_lanes, stride_bytes):
    """32-B sectors a warp touches when lane t reads 4 bytes at t*stride_bytes (aligned rows)."""
    a, s = arr(active_lanes), arr(stride_bytes)
    return np.where(s >= SECTOR, a, cdiv(a * np.maximum(s, F32), SECTOR))


def contiguous_sectors(n_bytes):
    """Sectors of a contiguous, sector-aligned run of n_bytes."""
    return cdiv(n_bytes, SECTOR)


def l2_hit_fraction(footprint_bytes, l2_bytes):
    """Share of re-reads that still find their line in L2 when the live working set is footprint_bytes.

    An approximation: everything hits while the set fits; beyond that, hits fall as capacity / footprint
    (lines survive in proportion to the share of the set the cache can hold)."""
    f = np.maximum(np.asarray(footprint_bytes, dtype=float), 1.0)
    return np.minimum(1.0, l2_bytes / f)


def zeros_like_counts(shape) -> dict:
    return {name: np.zeros(shape) for name in Counts.__dataclass_fields__}
