"""DRAM traffic: the compulsory bytes a kernel moves, the re-reads and re-writes that miss in L2, less the written
bytes still held in L2 when the kernel ends. Pure and vectorised: every argument may be a numpy array.

A kernel states its traffic in pieces (perfmodel.model.counts): first touches (``dram_*_once``), re-use traffic
(``dram_*_reuse``) that reaches DRAM only when the re-used line has left L2, and ``reuse_live_bytes``. The rule
(``RULE``, an ``L2Rule``, read off Nsight Compute on the H100 and fitted there):

1. a re-used line hits while the bytes touched since its last use stay below ``hit_all`` x L2, none beyond
   ``hit_none`` x L2, linearly between; re-use inside a block counts its wave's live heads, re-use across the blocks
   of a head only where a wave boundary cuts the head (``crossings``, on a softer ramp of its own);
2. written lines reach DRAM when they leave L2: what the kernel writes less ``dirty_kept`` x L2 still dirty at its
   end; re-written lines are written back at the re-use miss rate.

Applied to other GPUs in proportion to their L2 (the cross-wave ramp: to their probed shared room). The measurements,
the fit and its statistics: research/notes/l2-rule.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.model.counts import Counts


@dataclass(frozen=True)
class L2Rule:
    """The rule's constants: distances as multiples of the L2 size, the rest shares. See the module docstring."""

    hit_all: float = 0.62         # re-use distance (x L2) below which every re-use hits
    hit_none: float = 0.88        # ... beyond which none does (linear between)
    shared_copy: float = 0.75     # extra occupancy of K/V read by blocks on SMs of both L2 partitions
    wave_fade: float = 0.95       # misses of the k-th wave crossing relative to the first: fade**(k-1)
    dirty_kept: float = 0.125     # written bytes (x L2) still in L2, not written back, when the kernel ends
    writeback_lead: float = 0.1   # re-written lines are written back at the miss rate of (1 + lead) x distance
    clean: float = 0.02           # share of the other re-writes written back although the line stays
    crowd_pace: float = 0.75      # a block among j on its SM runs at j**-crowd_pace of a lone block's speed
    cross_all: float = 0.5        # the hit ramp of re-reads across waves (x L2): all hit below, ...
    cross_none: float = 1.45      # ... none beyond
    # the room L2 gives a line that every block re-reads (x L2) on the H100, where the cross-wave ramp was fitted:
    # its unit (research/scripts/probe_l2_share.py; a GPU's own room is its calibration's l2_shared_bytes)
    shared_room: float = 0.5350235537


RULE = L2Rule()


@dataclass(frozen=True)
class Traffic:
    dram_read_bytes: object
    dram_write_bytes: object
    l2_hit_fraction: object       # of the re-use traffic (reads)
    reuse_distance_bytes: object = 0   # bytes touched between two uses of a re-used line (the rule's distance)

    @property
    def dram_bytes(self):
        return self.dram_read_bytes + self.dram_write_bytes


def hit_fraction(distance_bytes, l2_bytes, rule: L2Rule = RULE, across: bool = False):
    """Share of re-uses that still find their line in L2 when ``distance_bytes`` were touched since the last use
    (``across``: re-reads across waves of a head's blocks, with their own ramp)."""
    x = np.asarray(distance_bytes, dtype=float)
    lo, hi = ((rule.cross_all, rule.cross_none) if across else (rule.hit_all, rule.hit_none))
    lo, hi = lo * l2_bytes, hi * l2_bytes
    return np.clip((hi - x) / (hi - lo), 0.0, 1.0)


def _wave_phases(grid, resident, sm_count, pace: float):
    """(work share, distance in live sets) of the phases of a grid of equal one-block heads dispatched in waves of
    ``resident`` blocks (the full waves, then the last partial one). In a wave of n blocks on S SMs, S - m SMs hold
    k = n // S blocks and m hold k + 1; a block on an SM of j blocks runs at ``j**-pace`` of a lone block's speed
    (pace 0: co-resident blocks do not slow each other; 1: they share the SM's throughput). A head's re-use
    distance is what every live head touches while it goes once round its own loop, so the heads on fuller SMs
    see the longer distance; once the k-block SMs are done, the (k+1)-block ones finish alone."""
    S = sm_count
    g = np.maximum(grid, 1).astype(float)
    nf, r = grid // resident, grid % resident
    v = lambda j: np.maximum(j, 1).astype(float) ** -pace
    out = []
    for waves, n in ((nf, resident), (1, r)):
        k, m = n // S, n % S
        vk, vk1 = v(k), v(k + 1)
        rate = (S - m) * k * vk + m * (k + 1) * vk1           # live sets touched per lone-block loop
        done = np.where(k > 0, vk1 / vk, 0.0)                  # share of its work a fuller SM's block has done
        out += [(waves * (S - m) * k / g, rate / vk),
                (waves * m * (k + 1) * done / g, rate / vk1),
                (waves * m * (k + 1) * (1 - done) / g, m * (k + 1))]
    return out


def traffic(c: Counts, heads, grid_blocks, blocks_per_sm, sm_count: int, l2_bytes: float,
            rule: L2Rule = RULE, l2_shared_bytes: float | None = None) -> Traffic:
    """DRAM bytes of a launch of ``grid_blocks`` blocks over ``heads`` heads (dispatched head after head),
    ``blocks_per_sm`` resident per SM, with ``l2_bytes`` of L2 (the device's size) of which ``l2_shared_bytes``
    hold half the re-reads of lines every block reads (the shared-read probe; None or 0, unmeasured:
    ``rule.shared_room`` of L2)."""
    BH = np.maximum(np.asarray(heads, dtype=np.int64), 1)
    G = np.maximum(np.asarray(grid_blocks, dtype=np.int64), 1)
    bph = np.maximum(G // BH, 1)                                   # blocks per head
    R = np.maximum(np.minimum(G, np.asarray(blocks_per_sm, dtype=np.int64) * sm_count), 1)   # resident blocks
    f = lambda x: np.asarray(x, dtype=float)
    ro, rr, wo, wr = f(c.dram_read_once), f(c.dram_read_reuse), f(c.dram_write_once), f(c.dram_write_reuse)
    live = f(c.reuse_live_bytes)                                   # per head
    # per head: re-use periods, and what streams past the live data in one (written re-used lines are live)
    passes = rr / BH / np.maximum(live, 1.0)
    periods = np.where(bph > 1, bph, passes + 1)
    streamed = np.maximum(ro + wo - np.where(wr > 0, wo, 0.0), 0.0) / BH - live
    other = np.maximum(streamed, 0.0) / periods
    miss = lambda d: 1.0 - hit_fraction(d, l2_bytes, rule)

    # re-use inside a block: the blocks live in each phase, each touching live + other per period
    per_head = live + other
    read_in = write_in = d_in = 0.0
    for share, n in _wave_phases(G, R, sm_count, rule.crowd_pace):
        read_in = read_in + share * miss(n * per_head)
        write_in = write_in + share * miss(n * per_head * (1 + rule.writeback_lead))
        d_in = d_in + share * n * per_head
    # re-use across the blocks of a head: misses where a head is cut between two waves
    live_heads = np.minimum(BH, (R - 1) / bph + 1)
    d_across = live_heads * live * (1 + rule.shared_copy) + R * other
    l2_across = l2_shared_bytes / rule.shared_room if l2_shared_bytes else l2_bytes
    read_across = 1.0 - hit_fraction(d_across, l2_across, rule, across=True)
    cut_heads = (BH - 1) // (R // np.gcd(R, bph))                 # heads starting exactly on a wave boundary
    crossings = np.where(G > R, (G - 1) // R - cut_heads, 0)
    q = rule.wave_fade
    faded = (1 - q ** crossings) / (1 - q) if q < 1 else crossings
    per_pass = rr / BH / np.maximum(bph - 1, 1)

    inside = bph == 1
    reread = np.where(inside, rr * read_in, faded * per_pass * read_across)
    wmiss = np.where(inside, write_in, read_across)
    kept = rule.dirty_kept * l2_bytes
    writes = np.maximum(wo - kept, 0.0) + wr * (wmiss + (1 - wmiss) * rule.clean)
    return Traffic(dram_read_bytes=ro + reread, dram_write_bytes=writes,
                   l2_hit_fraction=1.0 - np.where(inside, read_in, read_across),
                   reuse_distance_bytes=np.where(inside, d_in, d_across))
