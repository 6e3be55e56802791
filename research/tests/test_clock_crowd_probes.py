"""Three runs that answer questions the clocked fa2_tc data left open (research/notes/known-gaps-log.md): the spin clock against the
GPU's own timer (research/scripts/probe_clock.py -> probe/clock.json), tile waits from L2 and DRAM against the SMs loading
(research/scripts/probe_crowd.py -> probe/crowd.json), and lone fa2_tc launches with and without the L2 flush
(research/data/grids/lone-crowd.yaml -> lone-crowd/)."""
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from perfmodel.evaluation import dataset

H100 = Path(__file__).resolve().parents[2] / "research" / "data" / "h100"


@pytest.fixture(scope="module")
def clock():
    return json.loads((H100 / "probe" / "clock.json").read_text())


def test_the_bench_estimate_is_the_in_kernel_clock(clock):
    """The bench's estimate (cycles over event time less the gap) and the spin's own (cycles over the GPU's
    nanosecond timer read in the kernel) agree: the event pair and its gap do not make the readings."""
    rel = [abs(s["event_mhz"] / s["kernel_mhz"] - 1) for s in clock["spins"] if s["event_mhz"]]
    assert len(rel) >= 200 and np.median(rel) < 0.002


def test_readings_above_the_maximum_come_beside_the_heavy_launch(clock):
    """Beside no launch or a light one every in-kernel reading stays at or below 1980 MHz; beside a full d = 128
    grid, most read above it (clock64 advances faster than the GPU's timer): the clock counter, not the bench."""
    by = defaultdict(list)
    for s in clock["spins"]:
        by[s["beside"]].append(s["kernel_mhz"])
    assert max(by["none"] + by["light"]) <= 1981
    assert np.mean(np.array(by["heavy"]) > 1990) > 0.5


@pytest.fixture(scope="module")
def crowd():
    runs = json.loads((H100 / "probe" / "crowd.json").read_text())["runs"]
    return {(r["source"], r["tile_bytes"], r["threads"], r["shared"], r["spin"], r["blocks"]): r["sm_cycles_per_iter"]
            for r in runs}


def test_dram_tiles_wait_longer_than_l2_tiles(crowd):
    for (source, tile, threads, shared, spin, blocks), c in crowd.items():
        if source == "dram" and spin == 0:
            assert c > 1.4 * crowd[("l2", tile, threads, shared, spin, blocks)]


def test_only_distinct_dram_tiles_wait_longer_as_more_sms_load(crowd):
    """Blocks that share their tiles wait as one block does, from L2 or DRAM; blocks loading their own tiles from
    DRAM wait 30-50% longer at 132 SMs than alone, and from L2 at most 10% longer."""
    for tile in (8192, 16384):
        for threads in (128, 256):
            grow = lambda source, shared: (crowd[(source, tile, threads, shared, 0, 132)]    # noqa: E731
                                           / crowd[(source, tile, threads, shared, 0, 1)])
            assert grow("dram", False) > 1.25 and grow("l2", False) < 1.12
            assert abs(grow("dram", True) - 1) < 0.08 and abs(grow("l2", True) - 1) < 0.03


def _per_tile(path):
    (ms,) = dataset.load([path])
    c = ms.cols
    out = {}
    for i in range(len(ms)):
        key = tuple(int(c[k][i]) for k in ("d", "Br", "Bc", "N", "H"))
        out[key] = (ms.measured_s[i] - 3.5e-6) / np.ceil(c["N"][i] / c["Bc"][i])
    return out


def test_lone_tiles_grow_with_the_heads_only_when_the_l2_is_flushed():
    """Lone fa2_tc blocks at 64 x 64: with the L2 flushed before each run (as every dataset is timed) each tile
    takes 16-19% longer at 8 heads (128 SMs) than at one; without the flush every launch is faster and the growth
    falls under 6%: the first touch of the heads' tiles in DRAM, not the L2 or the SMs."""
    flush = _per_tile(H100 / "lone-crowd" / "fa2_tc.flush.csv")
    kept = _per_tile(H100 / "lone-crowd" / "fa2_tc.noflush.csv")
    assert flush.keys() == kept.keys()
    assert all(kept[k] < flush[k] for k in flush)
    for d in (64, 128):
        one, eight = (d, 64, 64, 1000, 1), (d, 64, 64, 1000, 8)
        assert flush[eight] / flush[one] > 1.12 and kept[eight] / kept[one] < 1.06
