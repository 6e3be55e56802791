"""DRAM traffic: the compulsory bytes a kernel moves plus the re-reads (and re-writes) that miss in L2.

A kernel states its traffic in pieces (perfmodel.model.counts): first touches, and re-use traffic that stays in
L2 while the data each head keeps live fits. How much fits is a property of the GPU and of the launch: the heads
live at once are those of the blocks resident on the whole chip (occupancy times SMs, at most the grid).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.kernels.common import cdiv
from perfmodel.model.counts import Counts


@dataclass(frozen=True)
class Traffic:
    dram_read_bytes: object
    dram_write_bytes: object
    l2_hit_fraction: object     # of the re-use traffic

    @property
    def dram_bytes(self):
        return self.dram_read_bytes + self.dram_write_bytes


def l2_hit_fraction(footprint_bytes, l2_bytes):
    """Share of re-reads that still find their line in L2 when the live working set is footprint_bytes.

    An approximation: everything hits while the set fits; beyond that, hits fall as capacity / footprint
    (lines survive in proportion to the share of the set the cache can hold)."""
    f = np.maximum(np.asarray(footprint_bytes, dtype=float), 1.0)
    return np.minimum(1.0, l2_bytes / f)


def traffic(c: Counts, heads, grid_blocks, blocks_per_sm, sm_count: int, l2_bytes: float) -> Traffic:
    """DRAM bytes of a launch whose blocks are spread over ``heads`` heads, with ``l2_bytes`` of L2 that holds
    re-used data (the calibration's effective size)."""
    BH = np.asarray(heads, dtype=np.int64)
    grid = np.asarray(grid_blocks, dtype=np.int64)
    bph = grid // np.maximum(BH, 1)                       # blocks per head
    resident = np.minimum(grid, np.asarray(blocks_per_sm) * sm_count)
    live_heads = np.minimum(BH, cdiv(resident, bph) + (bph > 1))
    hit = l2_hit_fraction(live_heads * c.reuse_live_bytes, l2_bytes)
    miss = 1.0 - hit
    return Traffic(dram_read_bytes=c.dram_read_once + c.dram_read_reuse * miss,
                   dram_write_bytes=c.dram_write_once + c.dram_write_reuse * miss, l2_hit_fraction=hit)
