"""fa2_tc's warp stalls per KV tile, read off Nsight Compute's per-instruction samples
(research/data/h100/tc_sass/, research/scripts/tc_stalls.py): the committed tables are what the script makes of the
committed listings, and the load waits they show (research/notes/known-gaps-log.md: the per-tile load cost is not flat) and where
the three d = 128 tiles spend a tile at many waves (research/notes/known-gaps-log.md: where the Spearman gap sits) hold."""
import functools
import json
from pathlib import Path

import pytest
from rutil import script

ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "research/data/h100/tc_sass"
tc_stalls = script("tc_stalls")


# tarball -> (its committed table, launches): the first session's lone and many-wave launches, and the many-wave
# launches of the second (gpu_run.sh ncu-tc-sass-full), two of which repeat the first's
TABLES = {"tc_sass.tar.gz": ("stalls_per_tile.json", 10), "tc_sass_full.tar.gz": ("stalls_per_tile_full.json", 5)}


@functools.lru_cache(maxsize=None)
def read(tarball):
    return tc_stalls.per_tile(DIR / tarball)


@pytest.fixture(scope="module")
def table():
    return read("tc_sass.tar.gz")


@pytest.fixture(scope="module")
def full():
    return read("tc_sass_full.tar.gz")


@pytest.mark.parametrize("tarball", sorted(TABLES))
def test_committed_table_is_the_scripts_reading_of_the_listings(tarball):
    table = read(tarball)
    name, launches = TABLES[tarball]
    committed = json.loads((DIR / name).read_text())["launches"]
    assert set(committed) == set(table) and len(table) == launches
    for tag, row in table.items():
        assert committed[tag]["config"] == row["config"]
        assert committed[tag]["cycles_per_tile"] == pytest.approx(row["cycles_per_tile"], rel=1e-9)
        assert committed[tag]["stall_cycles_per_tile"] == pytest.approx(row["stall_cycles_per_tile"], rel=1e-9)
        # the reasons split the tile's cycles
        assert sum(row["stall_cycles_per_tile"].values()) == pytest.approx(row["cycles_per_tile"], rel=1e-9)


def test_busiest_sm_walks_every_key_tile_of_a_lone_block():
    c = tc_stalls.config("lone_causal_d128_64x64w4")
    assert (c["B"], c["H"], c["N"], c["d"], c["causal"], c["Br"], c["Bc"], c["warps"]) == (1, 1, 8192, 128, True,
                                                                                            64, 64, 4)
    assert tc_stalls.busiest_sm_tiles(c) == 128                        # 128 blocks on 132 SMs: the last sees all
    full = tc_stalls.config("full_d128_64x64w4")
    assert tc_stalls.busiest_sm_tiles(full) == pytest.approx(32 * 16 * 32 * 32 / 132)


def test_load_waits_are_not_a_flat_cost_per_tile(table):
    """Lone blocks: the 64 x 64 tiles, whose MMA phases are short, wait on their K/V loads 3x longer per tile than
    the 128-wide ones at d = 128 (483 against 125 and 150 cycles), 13x at d = 64; with two blocks per SM the wait
    is a twentieth of the tile."""
    wait = {tag: r["stall_cycles_per_tile"].get("long_sb", 0) for tag, r in table.items()}
    assert wait["lone_d128_64x64w4"] > 3 * max(wait["lone_d128_128x64w4"], wait["lone_d128_128x128w8"])
    assert wait["lone_d64_64x64w4"] > 10 * wait["lone_d64_128x128w4"]
    full = table["full_d128_64x64w4"]
    assert full["stall_cycles_per_tile"]["long_sb"] < 0.06 * full["cycles_per_tile"]


def test_many_wave_launches_repeat_across_sessions(table, full):
    """The two d = 128 many-wave launches profiled in both sessions: the same cycles per tile within 1%, every stall
    reason's share of them within 2 points."""
    for tag in ("full_d128_64x64w4", "full_d128_128x128w8"):
        a, b = table[tag], full[tag]
        assert b["cycles_per_tile"] == pytest.approx(a["cycles_per_tile"], rel=0.01)
        for reason in set(a["stall_cycles_per_tile"]) | set(b["stall_cycles_per_tile"]):
            share = [t["stall_cycles_per_tile"].get(reason, 0) / t["cycles_per_tile"] for t in (a, b)]
            assert abs(share[0] - share[1]) < 0.02, reason


def hmma_share(tag, reason):
    """The share of a launch's warp samples in which an HMMA waits for ``reason``."""
    text = tc_stalls.listings(DIR / "tc_sass_full.tar.gz")[tag]
    return tc_stalls.stalls(text, "HMMA")[reason] / sum(tc_stalls.stalls(text).values())


def test_many_waves_64x64_waits_on_its_ldmatrix_operands_where_128x64_throttles_the_tensor_pipe(full):
    """B32 H16 N2048 d128, two blocks a SM either way: per 128 query rows and 64 keys, 64x64/4w takes 17% more
    cycles than 128x64/4w, and its warps' extra short-scoreboard waits (mostly an HMMA waiting on the ldmatrix that
    feeds it: 23% of its samples, 5% of 128x64/4w's, whose warps feed 3.2 HMMA from each ldmatrix against 2) exceed
    that difference; 128x64/4w's HMMAs wait instead on the tensor pipe itself (10% against 2%)."""
    per128 = lambda tag, x: x * 128 / full[tag]["config"]["Br"]          # per 128 query rows, from per block
    small, big = "full_d128_64x64w4", "full_d128_128x64w4"
    cyc = {t: per128(t, full[t]["cycles_per_tile"]) for t in (small, big)}
    sb = {t: per128(t, full[t]["stall_cycles_per_tile"]["short_sb"]) for t in (small, big)}
    assert 1.1 < cyc[small] / cyc[big] < 1.25
    assert sb[small] - sb[big] > cyc[small] - cyc[big]
    assert hmma_share(small, "short_sb") > 3 * hmma_share(big, "short_sb")
    assert hmma_share(big, "math") > 3 * hmma_share(small, "math")
