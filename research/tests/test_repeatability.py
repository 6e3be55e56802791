"""The fa2_tc H100 grid timed twice (research/scripts/repeatability.py): the recorded benchmark is what the two committed
runs give, and the model, fitted on the first run's training split, holds on the second run's held-out rows, which
nothing was fitted to."""
import json
from pathlib import Path

import pytest

from rutil import script

from util import assert_same_record

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def recomputed():
    return script("repeatability").compute()


def test_recorded_benchmark_is_what_the_runs_give(recomputed):
    assert_same_record(json.loads((ROOT / "research" / "data" / "benchmarks" / "repeatability_fa2_tc.json").read_text()),
                       recomputed)
    assert recomputed["rows_in_both"] >= 2000


def test_two_runs_of_one_kernel_agree_to_two_percent(recomputed):
    for runs in (recomputed, recomputed["unclocked"]):
        diff = runs["second_over_first"]
        assert diff["mean_abs_pct"] < 2.5 and abs(diff["bias_pct"]) < 1.0


def test_the_clocked_runs_agree_better_than_the_unclocked_ones(recomputed):
    """The ground truth timed with each run's clock measured, back to back, repeats to well under 1% (median) and
    ranks tiles as its repeat does to 0.97 or more: the project's Spearman target of 0.95 lies within what it can
    show, which the earlier runs' 0.945 did not."""
    now, before = recomputed["second_over_first"], recomputed["unclocked"]["second_over_first"]
    assert now["median_abs_pct"] < 0.6 < before["median_abs_pct"]
    assert recomputed["second_run_as_model"]["spearman"] >= 0.97 > recomputed["unclocked"]["second_run_as_model"]["spearman"]


def test_model_holds_on_the_second_run(recomputed):
    first, second = recomputed["model_held_out"]["first"], recomputed["model_held_out"]["second"]
    assert second["mape"] <= 6.0 and abs(second["mape"] - first["mape"]) < 1.0
    # the model ranks tiles worse than a second run does
    assert second["spearman"] < recomputed["second_run_as_model"]["spearman"]


@pytest.mark.parametrize("pair", ["h100/sdpa-flash", "h100/sdpa-cudnn", "h200/sdpa-flash", "h200/sdpa-cudnn"])
def test_library_kernels_repeat_and_the_model_scores_alike_on_both_runs(recomputed, pair):
    """PyTorch's flash and cuDNN kernels, timed twice with the clocks measured: the runs agree to 0.5% (median), no
    bias between them, and the model (nothing fitted to them) scores within 0.2 points alike on both."""
    p = recomputed["sdpa"][pair]
    assert p["rows_in_all"] >= 380
    assert p["second_over_first"]["median_abs_pct"] < 0.5 and abs(p["second_over_first"]["bias_pct"]) < 0.5
    assert abs(p["model_mape"]["first"] - p["model_mape"]["second"]) < 0.2
