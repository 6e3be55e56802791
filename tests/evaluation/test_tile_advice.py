"""Tile advice: the model's pick and its runner-up (`sweep --best`), scored against the measured fa2_tc problems
(examples/tile_advice.py -> examples/benchmarks/tile_advice_fa2_tc.json)."""
import json
from pathlib import Path

import numpy as np
import pytest

from perfmodel.evaluation import sweep, validate
from perfmodel.hw import calibration, gpu
from perfmodel.kernels import get
from util import assert_same_record, script

ROOT = Path(__file__).resolve().parents[2]


def test_shortlist_of_one_is_the_pick_and_of_two_keeps_the_faster():
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 2           # "c" has two tiles: not a tile choice, left out
    ranked = np.array([1.0, 2.0, 3.0, 3.0, 1.0, 2.0, 1.0, 2.0])
    truth = np.array([1.1, 1.0, 2.0, 1.0, 1.5, 1.2, 1.0, 1.0])
    hits, slow = validate.best_picks(groups, ranked, truth)
    assert hits == 0 and slow == pytest.approx([0.1, 0.5])
    hits2, slow2, sizes = validate.shortlist_picks(groups, ranked, truth, 2)
    assert hits2 == 1 and slow2 == pytest.approx([0.0, 0.2]) and list(sizes) == [3, 3]
    hits3, slow3, _ = validate.shortlist_picks(groups, ranked, truth, 3)
    assert hits3 == 2 and not slow3.any()


def test_runner_up_is_each_problems_second_fastest_fitting_tile():
    spec = gpu.resolve("h100")
    res = sweep.run(spec, get("fa2_tc"), calibration.resolve(spec),
                    {"B": [1, 4], "H": [16], "N": [1024, 8192], "d": [64, 128]}, dtype="fp16")
    best, second = res.best(), res.runners_up()
    assert len(best) == len(second) == 8
    for (p, t, _), (q, t2) in zip(best, second):
        assert all(q[a] == p[a] for a in res.shape_axes) and q != p
        cell = res.time_s[tuple(res.values[a].index(p[a]) for a in res.shape_axes)]
        times = np.sort(cell[np.isfinite(cell)])
        assert (t, t2) == pytest.approx((times[0], times[1]))


def test_runner_up_is_none_where_one_tile_fits():
    spec = gpu.resolve("h100")
    res = sweep.run(spec, get("fa1"), calibration.resolve(spec), {"B": [1], "H": [4], "N": [512], "d": [32], "Br": [32], "Bc": [32]})
    assert res.runners_up() == [None]


@pytest.fixture(scope="module")
def advice():
    return script("tile_advice", "examples").compute()


def test_recorded_benchmark_is_what_the_data_gives(advice):
    assert_same_record(json.loads((ROOT / "examples" / "benchmarks" / "tile_advice_fa2_tc.json").read_text()), advice)


@pytest.mark.parametrize("gpu_dir", ["h100", "h200"])
def test_advice_holds(advice, gpu_dir):
    """The issue's goal for the pick (the measured best in 80% of problems) holds; within 5% in every problem does
    not yet (98.7% / 98.4%, research/notes/known-gaps-log.md), but the short-list of the pick and the runner-up reaches it, far
    above what two tiles drawn at random give (most problems have three measured tiles)."""
    a = advice[gpu_dir]
    assert a["share"] >= 0.90 and a["within_5_percent"] >= 0.98 and a["slowdown_of_predicted_best_worst"] <= 0.13
    two = a["top_two"]
    assert two["within_5_percent"] == 1.0 and two["slowdown_worst"] <= 0.02
    assert two["holds_measured_best"] >= 0.99 > 0.7 > two["random_pair_holds_best"]


def test_pick_best_shares_by_margin_pool_the_measured_problems_and_hold_on_the_sixth_set(advice):
    """fa2_tc's shares by margin (what `sweep --best` prints beside the margin; perfmodel/evaluation/pick_best.json,
    package data) pool the H100's and the H200's grids and off-grid sets 1-5; each of the three lies within 0.2 of
    them in every bin, and so does the sixth off-grid set, which they were not taken from (its bins below 2% hold 7
    problems each). The pick is right least often where the margin is small: half the time below 1%, every time at
    10% or more. (Taken from the H100's grid alone, as they were until 2026-12-02, the shares of its bins of 24-36
    problems moved by up to 0.2 with one refit, and the off-grid sets' 1-2% bin, 0.60, lay 0.32 below the H100's.)"""
    from perfmodel.evaluation import advice as adv

    table = adv.pick_table("fa2_tc")
    assert [tuple(x) for x in advice["pooled_pick_best_by_margin"]] == list(table)
    assert json.loads(adv.PICKS.read_text())["kernels"]["fa2_tc"] == advice["pooled_pick_best_by_margin"]
    assert advice["margin_edges"] == list(adv.MARGIN_EDGES) and len(table) == len(adv.MARGIN_EDGES) + 1
    for other in (advice["h100"]["pick_best_by_margin"], advice["h200"]["pick_best_by_margin"],
                  advice["offgrid_1_5_pick_best_by_margin"]):
        for (share, n), (ref, _) in zip(other, table):
            assert n >= 18 and abs(share - ref) <= 0.2 + 1e-9
    for share, ref in zip((s for s, _ in advice["offgrid6_pick_best_by_margin"]), (s for s, _ in table)):
        assert abs(share - ref) <= 0.2 + 1e-9
    shares = [s for s, _ in table]
    assert shares == sorted(shares) and shares[0] < 0.55 and shares[-1] >= 0.99
    assert adv.pick_best(get("fa2_tc"), 0.004) == table[0] and adv.pick_best(get("fa2_tc"), 0.3) == table[-1]
    assert adv.pick_best(get("fa1"), 0.3) is None
