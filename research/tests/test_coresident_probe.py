"""One fa2_tc tile timed at one, two, three or four blocks a SM in the same many-wave grid (research/scripts/probe_coresident.py
-> research/data/h100/probe/coresident.json; research/notes/known-gaps-log.md): the record is whole and checked, the model
sees the same occupancy the launch had, and what the runs show about the model's join holds."""
import functools
import json
from pathlib import Path

import numpy as np
import pytest

from perfmodel.hw import calibration, gpu
from perfmodel.kernels.fa2_tc import PaddedFA2TC as Padded
from perfmodel.model import engine
from perfmodel.shape import AttentionShape

DATA = Path(__file__).resolve().parents[2] / "research" / "data"
GPU_NAME = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}


@functools.lru_cache(maxsize=None)
def load(key):
    """(key of the launch) -> its record with the model's blocks a SM and prediction, on the GPU it ran on."""
    record = json.loads((DATA / key / "probe" / "coresident.json").read_text())
    assert record["provenance"]["gpu_name"] == GPU_NAME[key]
    spec = gpu.resolve(key)
    out = {}
    for r in record["runs"]:
        k = Padded(r["extra_smem"])
        p = engine.evaluate(spec, k, AttentionShape(r["B"], r["H"], r["N"], r["d"], "fp16", r["causal"]),
                            k.Tiles(Br=r["Br"], Bc=r["Bc"], warps=r["warps"]), calibration.resolve(spec))
        key = (r["d"], r["Br"], r["Bc"], r["warps"], r["causal"], r["blocks_per_sm"])
        out[key] = dict(r, model_blocks=int(np.asarray(p.blocks_per_sm)), predicted_ms=float(p.time_s) * 1e3)
    return out


@pytest.fixture(scope="module")
def runs():
    return load("h100")


@pytest.fixture(scope="module")
def runs_h200():
    return load("h200")


@pytest.mark.parametrize("key", sorted(GPU_NAME))
def test_every_launch_was_checked_and_timed_at_the_occupancy_the_model_sees(key):
    runs = load(key)
    assert len(runs) == 30
    for key, r in runs.items():
        assert r["rel_err"] <= 2e-3 and "skipped" not in r, key
        assert r["time_ms"] > 0 and r["p80_ms"] / r["p20_ms"] < 1.15, key
        assert r["model_blocks"] == r["blocks_per_sm"], key          # the model's occupancy rules, extra included
    # the d = 64 64x64/4w tile at four, three, two and one blocks a SM; every other 4-warp tile at two and one
    assert {k[-1] for k in runs if k[:5] == (64, 64, 64, 4, False)} == {1, 2, 3, 4}


def gain(runs, tile, causal, hi, lo=1, of="time_ms"):
    """How much faster ``tile`` runs at ``hi`` blocks a SM than at ``lo`` (measured, or the model's)."""
    return runs[(*tile, causal, lo)][of] / runs[(*tile, causal, hi)][of]


@pytest.mark.parametrize("causal", [False, True])
def test_a_second_block_hides_less_of_the_first_than_the_model_says_at_d128(runs, causal):
    """From one block a SM to two the d = 128 4-warp tiles gain 1.26-1.40x. The model (its join's pipes hold the
    warps beside the path's, its p falls with the rows a scheduler holds of a block) gives 1.28-1.38x, within 0.10 of
    each, 0.11 since a warp's own MUFU and FP32 work overlap on its path (before the list-scheduling residual and its
    refit it gave the non-causal launches up to 0.13 too much, and 0.09-0.17 before the in-step misses waited out what
    their phases leave). The d = 64 64x64/4w tile gains less in
    the model than measured, from one block to two (12% less) and to four (21%): its launch of one block a SM, many
    rounds of it, is 20% fast (13% before the residual's refit, within 2% before the phase-left wait), since the
    misses of its later rounds, which traced rounds show drifting apart (fa2_tc's timing), cost the flat load_miss;
    at two and more blocks it is within 10%."""
    for tile in ((128, 64, 64, 4), (128, 128, 64, 4), (128, 64, 128, 4)):
        measured, model = gain(runs, tile, causal, 2), gain(runs, tile, causal, 2, of="predicted_ms")
        assert 1.2 < measured < 1.42, (tile, measured)
        assert abs(model - measured) < 0.11, (tile, measured, model)
    if not causal:
        for hi in (2, 4):
            measured = gain(runs, (64, 64, 64, 4), causal, hi)
            assert 0.75 < gain(runs, (64, 64, 64, 4), causal, hi, of="predicted_ms") / measured < 0.9


def test_the_model_on_the_forced_occupancies(runs):
    """Nothing fitted to these runs: over the 30 launches the model is off by 4.0% on average (3.7% before the
    2026-12-02 refit), 20% at worst (5.1% and 13% before the list-scheduling residual and its refit; 6.6% and 22%
    before the in-step misses waited out what their phases leave; 9.0% and 33% with a p that grew with the blocks
    alone). One 4-warp block a SM (non-causal)
    holds both ends: up to 13% slow (11% before a warp's own MUFU and FP32 work overlapped on its path, whose refit
    prices a lone block's own MMAs slower), and d = 64 64x64/4w 20% fast (the test above); the 8-warp 128x128 tile,
    one block a SM anyway, within 9% (8.4% non-causal; 7.6% before that refit). Every launch of two or more blocks a
    SM is within 10%."""
    err = {k: r["predicted_ms"] / r["time_ms"] - 1 for k, r in runs.items()}
    assert np.mean(np.abs(list(err.values()))) < 0.045 and max(np.abs(list(err.values()))) < 0.22
    lone = [e for k, e in err.items() if k[-1] == 1 and not k[4] and k[3] == 4]
    assert len(lone) == 6 and max(lone) < 0.14 and sorted(lone)[1] > 0.0
    assert -0.22 < err[(64, 64, 64, 4, False, 1)] < -0.18
    assert abs(err[(128, 128, 128, 8, False, 1)]) < 0.09 and abs(err[(128, 128, 128, 8, True, 1)]) < 0.09
    assert max(abs(e) for k, e in err.items() if k[-1] > 1) < 0.10


def test_the_model_on_the_h200s_forced_occupancies(runs_h200):
    """The same launches on the H200, whose timings nothing is fitted to: 3.0% on average and 22% at worst (4.4% and
    15% before the list-scheduling residual and its refit; 5.7% and 18% before the in-step misses waited out what
    their phases leave; 7.9% and 28% before overlap_rows); one 4-warp block a SM is again the worst case (up to 8%
    slow, and d = 64 64x64/4w 22% fast, as on the H100)."""
    err = {k: r["predicted_ms"] / r["time_ms"] - 1 for k, r in runs_h200.items()}
    assert np.mean(np.abs(list(err.values()))) < 0.04 and max(np.abs(list(err.values()))) < 0.23
    lone = [e for k, e in err.items() if k[-1] == 1 and not k[4] and k[3] == 4]
    assert max(lone) == max(err.values()) and min(lone) == min(err.values())
