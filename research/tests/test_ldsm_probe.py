"""The ldmatrix probe (research/scripts/probe_ldsm.py -> research/data/h100/probe/ldsm.json): shared-memory
wavefronts per clock that ldmatrix.x4 delivers on the H100, with loads whose addresses no compiler can prove equal
(each comes from its chain's previous value, or from a hash of the step). It settles the rate the model prices
(Calibration.smem_wavefronts_per_clk, 1 a clock: 128 B) after the fill probe lost loads (research/tests/test_fill_probe.py)."""
import json
from pathlib import Path

import pytest

from perfmodel.hw import calibration, gpu

RUNS = json.loads((Path(__file__).resolve().parents[2] / "research" / "data" / "h100" / "probe"
                   / "ldsm.json").read_text())["runs"]
BY = {(r["same"], r["trans"], r["warps"], r["chains"]): r["wavefronts_per_clk"] for r in RUNS}


def test_ldmatrix_saturates_at_the_rate_the_model_prices():
    """32 warps of 8 chains reach 0.98 wavefronts a clock, and nothing passes 1.02: the calibration's rate."""
    assert max(BY.values()) < 1.02
    assert BY[(False, False, 32, 8)] > 0.95
    assert calibration.resolve(gpu.resolve("h100")).smem_wavefronts_per_clk == pytest.approx(BY[(False, False, 32, 8)],
                                                                                           rel=0.03)


def test_transposed_loads_and_identical_requests_cost_the_same():
    """.trans costs what a plain load does; and warps that all read the same rows at the same step (as
    FlashAttention-2's warps read each K/V fragment) are served no faster: identical requests are not merged."""
    for (same, trans, warps, chains), rate in BY.items():
        assert rate == pytest.approx(BY[(same, False, warps, chains)], rel=0.01)
        assert rate <= 1.01 * BY[(False, trans, warps, chains)]
    assert BY[(True, False, 32, 8)] == pytest.approx(BY[(False, False, 32, 8)], rel=0.01)


def test_fewer_warps_cannot_fill_the_banks():
    """At 16 warps the rate stays near 0.75 (as the pipe-mix probe's 0.78): one warp's loads wait on one another's
    latency, so the banks' rate needs many warps' loads in flight."""
    assert 0.6 < BY[(False, False, 16, 8)] < 0.85 and BY[(False, False, 4, 8)] < 0.3
