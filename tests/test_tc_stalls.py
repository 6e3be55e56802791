"""fa2_tc's warp stalls per KV tile, read off Nsight Compute's per-instruction samples
(examples/measurements/h100/tc_sass/, scripts/tc_stalls.py): the committed table is what the script makes of the
committed listings, and the load waits it shows (README Known gaps: the per-tile load cost is not flat) hold."""
import json
from pathlib import Path

import pytest
from util import script

ROOT = Path(__file__).resolve().parents[1]
DIR = ROOT / "examples/measurements/h100/tc_sass"
tc_stalls = script("tc_stalls")


@pytest.fixture(scope="module")
def table():
    return tc_stalls.per_tile(DIR / "tc_sass.tar.gz")


def test_committed_table_is_the_scripts_reading_of_the_listings(table):
    committed = json.loads((DIR / "stalls_per_tile.json").read_text())["launches"]
    assert set(committed) == set(table) and len(table) == 10
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
