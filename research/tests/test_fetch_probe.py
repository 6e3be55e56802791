"""Instruction fetch against what was measured: the probe's supply of once-run code (examples/measurements/h100/
probe/icache_layout.json, layout_runs; gpus/arch/sm_90.yaml fetch_once_ipc), flash's code layout read off its SASS
(research/data/h100/flash_sass, research/scripts/flash_layout.py; SDPAFlash.CODE_KIB), and the once-run
instructions the model counts against Nsight Compute's (tests/model/test_fetch.py: where the term applies)."""

import json
from pathlib import Path

import numpy as np
import pytest
from common import once_supply
from rutil import script
from util import evaluate

from perfmodel.hw import arch
from perfmodel.kernels import get

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "research" / "data"
LAYOUT = json.load(open(DATA / "h100" / "probe" / "icache_layout.json"))["layout_runs"]
FLASH_SASS = DATA / "h100" / "flash_sass" / "sdpa_sass.tar.gz"


def _layouts(tar=FLASH_SASS):
    return script("flash_layout").layouts(tar)


def test_arch_table_is_the_probes_reduction():
    """gpus/arch/sm_90.yaml's fetch_once_ipc is once_supply of the committed layout runs (causal, 2 blocks/SM)."""
    assert arch.table("sm_90", "fetch_once_ipc") == once_supply(LAYOUT)
    assert arch.table("sm_80", "fetch_once_ipc") is None


def test_h200_measures_the_same_supply():
    """The same probe on the H200 (research/data/h200/probe/icache_layout.json), the same SM: its once-run
    supply is within 6% of the H100's table everywhere (what the H200 predictions use, taken from sm_90.yaml)."""
    h200 = once_supply(json.load(open(DATA / "h200" / "probe" / "icache_layout.json"))["layout_runs"])
    table = arch.table("sm_90", "fetch_once_ipc")
    assert h200["once_kib"] == table["once_kib"] and h200["loop_kib"] == table["loop_kib"]
    assert np.allclose(h200["ipc"], table["ipc"], rtol=0.06)


def test_probe_blocks_out_of_step_lose_the_supply_and_blocks_in_step_keep_it():
    """Two blocks per SM passing through once-run code at different points (their loop passes differ, as in a
    causal grid) get under half the loop's rate from 64 KiB of it on, less beside the larger loop; the same code
    with every block making equal passes keeps at least 0.85 up to 80 KiB: why the term applies to uneven grids
    only. One block per SM streams once-run code at about a quarter of an instruction a clock at any size."""
    causal, uniform = once_supply(LAYOUT), once_supply(LAYOUT, pattern="uniform")
    once = causal["once_kib"]
    for row16, row24 in [causal["ipc"]]:
        assert all(r < 0.5 for k, r in zip(once, row16) if k >= 64)
        assert all(a > b for k, a, b in zip(once, row16, row24) if k >= 16)     # the larger loop loses more
    for row in uniform["ipc"]:
        assert all(r > 0.85 for k, r in zip(once, row) if k <= 80)
    (one,) = once_supply(LAYOUT, blocks_per_sm=1)["ipc"]
    assert all(0.18 < r < 0.27 for k, r in zip(once, one) if k > 0)


@pytest.mark.parametrize("tar", [FLASH_SASS, DATA / "h100" / "flash_sass_bf16" / "sdpa_sass.tar.gz"],
                         ids=["fp16", "bf16"])
def test_flash_code_table_is_read_off_the_committed_listings(tar):
    """SDPAFlash.CODE_KIB: (once by every warp, once by some, loop body) of each causal instantiation, as
    research/scripts/flash_layout.py reads the ncu listings, fp16 and bf16 alike: the ragged one carries twice the once-run
    code."""
    lay = _layouts(tar)
    table = get("sdpa-flash").CODE_KIB
    for (d, even), (a, s, loop) in table.items():
        got = lay[f"{'even' if even else 'ragged'}_causal_d{d}"]
        assert (got["once_all"], got["once_some"], got["loop"]) == pytest.approx((a, s, loop), abs=0.01)
    assert sum(table[(64, False)][:2]) > 2 * sum(table[(64, True)][:2])


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("N", [1000, 1024])
def test_once_run_instructions_match_ncu(d, N):
    """The model's once-run instructions per warp (each block: the code all warps run once, and the last masking
    step where it has as many key tiles) against what Nsight Compute executed once per warp, within 1%."""
    p = evaluate("sdpa-flash", 32, 16, N, d, dtype="fp16", causal=True, Br=128, Bc=128 if d == 64 else 64, warps=4)
    per_warp = float(p.counts.warp_once) / (float(p.launch.grid_blocks) * 4)
    ncu = _layouts()[f"{'even' if N == 1024 else 'ragged'}_causal_d{d}"]["once_instructions_per_warp"]
    assert per_warp == pytest.approx(ncu, rel=0.01)
