"""The phase traces of fa2_tc (research/scripts/trace_fa2_tc.py TRACE_SET=phase -> research/data/h100/probe/
fa2_tc_trace_phase.json, read by research/scripts/trace_phases.py; research/notes/known-gaps-log.md): the record is whole and checked, and
what it shows about where a block's cycles go and how co-resident blocks split their SM holds."""
import json

import numpy as np
import pytest

from perfmodel.kernels import fa2_tc
from rutil import script

trace_phases = script("trace_phases")


@pytest.fixture(scope="module")
def runs():
    return trace_phases.compute()


def test_the_record_is_whole_checked_and_its_phases_lie_inside_each_block():
    record = json.loads(trace_phases.TRACE.read_text())
    assert record["provenance"]["gpu_name"] == "NVIDIA H100 80GB HBM3"
    traced = {trace_phases.key(r) for r in record["runs"]}
    assert traced == set(fa2_tc.INSTANCES)
    for r in record["runs"]:
        assert r["max_abs_err_vs_fp32_sdpa"] < 2e-3, r
        rep = r["reps"][-1]
        blocks = len(rep["smid"])
        assert blocks in (trace_phases.SMS * r["blocks_per_sm"], 2 * trace_phases.SMS * r["blocks_per_sm"])
        for i in range(blocks):
            phases = sum(rep[p][i] for p in trace_phases.PHASES)
            assert 0 < phases <= rep["total_cycles"][i], (trace_phases.key(r), i)


def test_a_lone_block_hardly_waits_for_its_loads(runs):
    """With K/V in L2 (no flush between the launches) a lone block waits for its K and V tiles 0.5-9.6% of its
    cycles a tile: its time is in its two compute phases."""
    lone = {k: ph for (k, n), ph in runs.items() if n == 1}
    assert len(lone) == len(fa2_tc.INSTANCES)
    for k, ph in lone.items():
        waits = ph["wait_k_cycles"][0] + ph["wait_v_cycles"][0]
        assert waits < 0.10 * ph["tile"][0], k


def test_two_blocks_at_d128_and_above_share_evenly_in_antiphase(runs):
    """At two blocks a SM every d >= 128 tile's blocks take the same cycles a tile within 1.5%, the older spending
    more in S (QK^T and the softmax) and the younger more in PV: one block's softmax runs beside the other's PV."""
    pairs = {k: ph for (k, n), ph in runs.items() if n == 2 and k[0] >= 128}
    assert len(pairs) == 7
    for k, ph in pairs.items():
        older, younger = ph["tile"]
        assert abs(younger / older - 1) < 0.015, k
        assert ph["s_cycles"][0] > ph["s_cycles"][1] and ph["pv_cycles"][0] < ph["pv_cycles"][1], k


def test_at_small_d_the_youngest_block_is_the_slowest(runs):
    """At d <= 64 the youngest of an SM's blocks is slower than the oldest: by 9.6-23% at two blocks a SM for the
    tiles of 128 rows and Bc >= 64 (two row tiles a warp, or eight warps), and by 8.5-22% at three or more blocks
    for every d <= 64 tile traced there; two blocks of the one-row-tile 4-warp tiles and of 128x32 stay within
    2.5%. The model lets a round's blocks end together (model.timing)."""
    small = {(k, n): ph["tile"][-1] / ph["tile"][0] for (k, n), ph in runs.items() if k[0] <= 64 and n > 1}
    for (k, n), ratio in small.items():
        d, Br, Bc, warps = k
        if n >= 3:
            assert ratio > 1.08, (k, n)
        elif Bc >= 64 and (Br // warps == 32 or warps == 8):
            assert ratio > 1.09, (k, n)
        else:
            assert ratio < 1.025, (k, n)
    assert sum(n >= 3 for _, n in small) == 5          # four instances, one of them at three and at four


@pytest.fixture(scope="module")
def cold():
    return trace_phases.cold_vs_model()


def test_the_flushed_record_holds_the_same_launches_checked(cold):
    warm = json.loads(trace_phases.TRACE.read_text())["runs"]
    flushed = json.loads(trace_phases.COLD.read_text())["runs"]
    assert [(r["H"], trace_phases.key(r), r["blocks_per_sm"]) for r in flushed] == \
        [(r["H"], trace_phases.key(r), r["blocks_per_sm"]) for r in warm]
    assert all(r["l2_flushed"] and r["max_abs_err_vs_fp32_sdpa"] < 2e-3 for r in flushed)
    assert len(cold) == 42 and all({"one", "two"} <= set(o) for o in cold.values())


def test_flushed_a_later_round_costs_what_the_first_does_and_the_model_holds_both_together(cold):
    """After an L2 flush the second round of a launch adds 0.83-1.04 of the first round's span (median 0.98): its
    heads' K/V come from DRAM as the first round's did. The model prices the two-round launches within 3.9% on
    average (41 of 42 within 10%, the worst 10.4%), but splits them wrongly: its second round is 8.8% cheaper than
    measured on average (up to 33%), its first dearer (the span holds none of the ~4.3 us of launch overhead and
    cold start the model adds)."""
    ratio = np.array([o["round"] / o["one"] for o in cold.values()])
    assert ratio.min() > 0.8 and np.median(ratio) > 0.95
    two = np.array([o["model_two"] / o["two"] - 1 for o in cold.values()])
    # (since the refit for bandwidth-bound misses: 4.1% on average, 3 of 42 beyond 10%)
    assert np.abs(two).mean() < 0.045 and (np.abs(two) > 0.10).sum() <= 3 and np.abs(two).max() < 0.12
    later = np.array([o["model_round"] / o["round"] - 1 for o in cold.values()])
    assert later.mean() < -0.05


trace_short = script("trace_short")


def test_the_short_walk_record_is_whole_checked_and_flushed():
    record = json.loads(trace_short.TRACE.read_text())
    assert record["provenance"]["gpu_name"] == "NVIDIA H100 80GB HBM3"
    traced = {trace_short.key(r)[:5] for r in record["runs"]}
    assert traced == set(script("trace_fa2_tc").SHORT)
    for r in record["runs"]:
        assert r["l2_flushed"] and r["max_abs_err_vs_fp32_sdpa"] < 2e-3, r
        rep = r["reps"][-1]
        for i in range(len(rep["smid"])):
            assert 0 < sum(rep[p][i] for p in trace_short.PHASES) <= rep["total_cycles"][i]


def test_the_n333_picks_turn_on_the_build_not_on_what_lies_outside_the_blocks():
    """The N = 333 picks that miss by more than 5% (research/notes/known-gaps-log.md). Timed interleaved in one run, the measured
    build reproduces the timed grid's order at one block a SM (64x64/4w 2-6% slower than 128x128/4w, as the grid's
    fp16 rows), while the trace build of the same source (clock reads in its loop) orders the two the other way. Inside
    one build both launches hold 3.7-4.4 us beyond their blocks' span, 64x64/4w's no more than 128x128/4w's (+0.1 us
    at B1, -0.7 us at B2): the order is the compiled loop's, not a cost outside the blocks."""
    runs = trace_short.compute()
    for B in (1, 2):
        big, small = runs[(B, 8, 333, 64, False, 128, 128, 4)], runs[(B, 8, 333, 64, False, 64, 64, 4)]
        assert small["measured_build_us"] > big["measured_build_us"] and small["timed_us"]["fp16"] > big["timed_us"]["fp16"]
        assert small["trace_build_us"] < big["trace_build_us"] and small["span_us"] < big["span_us"]
        outside = [v["trace_build_us"] - v["span_us"] for v in (big, small)]
        assert all(3.5 <= o <= 4.5 for o in outside) and outside[1] <= outside[0] + 0.2, outside
    for v in runs.values():            # the measured build, interleaved, is the timed grid's launch (within 6%)
        assert abs(v["measured_build_us"] / v["timed_us"]["fp16"] - 1) <= 0.06, v
