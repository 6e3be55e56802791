"""Block dispatch order and the causal timing rules, against what the H100 (and, for the dispatch probe, the H200)
recorded.

Recordings committed under examples/measurements/h100/probe (dispatch.json also under h200/probe):

* dispatch.json (scripts/probe_dispatch.py) comes from a spin kernel. Every block recorded its SM and its start
  and end on the global timer, at 1, 2 and 4 blocks per SM.
* fa2_tc_trace.json (scripts/trace_fa2_tc.py) comes from fa2_tc itself, built with FA2TC_TRACE. It has the same
  record for each block of 15 problems, causal and not. fa2_tc_trace_late.json (TRACE_SET=late) holds six more:
  the causal launches the model once predicted worst.

No recording is fitted: the window the rule uses is the architecture constant dispatch_window_blocks, read
off the first.
"""
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from perfmodel import api
from perfmodel.hw import calibration as cal_mod
from perfmodel.model import engine

PROBE = Path(__file__).resolve().parents[1] / "examples" / "measurements" / "h100" / "probe"
H100 = api.load_gpu("h100")
CAL = cal_mod.resolve(H100)


def _json(name, gpu="h100"):
    return json.loads((PROBE.parents[1] / gpu / "probe" / name).read_text())


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_co_resident_blocks_lie_within_the_dispatch_window(gpu):
    """In a launch that fits in one round, block j's SM-mates sit within q * (SMs +- window) of it in slot q.
    This holds on at least 90% of SMs in every such launch. The rest (8 SMs: one GPC's last TPCs) take their
    blocks late. The window is sm_90's, read off the H100: the H200's recording holds it too."""
    d = _json("dispatch.json", gpu)
    sms, win = d["sm_count"], CAL.dispatch_window
    checked = 0
    for run in d["runs"]:
        grid, bps = len(run["work"]), run["blocks_per_sm"]
        if not sms < grid <= sms * bps:
            continue
        for rep in run["reps"]:
            smid = np.array(rep["smid"])
            inside = total = 0
            for sm in np.unique(smid):
                blocks = np.sort(np.flatnonzero(smid == sm))
                for q, b in enumerate(blocks[1:], start=1):
                    total += 1
                    inside += abs(b - blocks[0] - q * sms) <= q * win
            assert inside >= 0.9 * total, (run["label"], inside, total)
            checked += 1
    assert checked >= 20


def test_round_robin_without_a_window_is_refuted():
    """The old rule (block j + q * SMs beside block j, exactly) holds on under half of the SMs. A window of 0
    could not pass the test above."""
    d = _json("dispatch.json")
    sms = d["sm_count"]
    run = next(r for r in d["runs"] if r["label"] == "uniform bps2 grid256")
    smid = np.array(run["reps"][0]["smid"])
    pairs = [np.flatnonzero(smid == sm) for sm in np.unique(smid) if np.sum(smid == sm) == 2]
    assert len(pairs) == 256 - sms
    assert sum(b - a == sms for a, b in pairs) < 0.5 * len(pairs)


def _kernel_only(B, H, N, d, Br, Bc, warps, causal, cal):
    k, shape, t = api.configure("fa2_tc", B, H, N, d, "fp16", causal, gpu=H100, Br=Br, Bc=Bc, warps=warps)
    return float(engine.evaluate(H100, k, shape, t, cal).time_s) - cal.launch_overhead_s


def _ratio_errors(cal, name="fa2_tc_trace.json"):
    """Model causal/non-causal time ratio over the traced one (first block start to last block end), per traced
    problem (B, H, N, d, Br, Bc, warps)."""
    runs = {}
    for r in _json(name)["runs"]:
        key = (r["B"], r["H"], r["N"], r["d"], r["Br"], r["Bc"], r["warps"])
        runs.setdefault(key, {})[r["causal"]] = np.median([max(x["end_ns"]) for x in r["reps"]])
    errs = {}
    for key, span in runs.items():
        traced = span[True] / span[False]
        model = _kernel_only(*key, True, cal) / _kernel_only(*key, False, cal)
        errs[key] = abs(model / traced - 1)
    return errs


# The one traced instance that holds three blocks per SM (d = 32, 128x64, 4 warps: 167 registers). Its rounds are
# not the causal rules' to get right: three blocks run as fast as one there (traced, non-causal: 20.8 us for the
# first round of three, 20.1 us for a lone block after it), which the latency/pipe join prices at 27 us (README,
# Known gaps: occupancy).
THREE_PER_SM = (4, 16, 1024, 32, 128, 64, 4)


def test_trace_records_correct_blocks():
    """Every traced launch was checked against fp32 SDPA first (fp16 inputs: 2e-3 absolute)."""
    runs = _json("fa2_tc_trace.json")["runs"]
    assert len(runs) == 30
    assert all(r["max_abs_err_vs_fp32_sdpa"] < 2e-3 for r in runs)


def test_causal_rules_match_traced_fa2_tc_launches():
    """The causal launch over its non-causal twin: within 6.5% on average of fa2_tc's traced launches of one, two and
    four blocks per SM and 20% at worst (6.0%; 4.3% before the in-step misses waited out what their phases leave,
    which made the non-causal launches of a few rounds 1-4% faster against their causal twins). Round-robin
    dispatch without the window now scores as well on these launches (5.5% against 6.0%; it was off by more before:
    4.8% against 4.3% since the join's pipes hold only the other warps' work, 8.3% against 4.3% when first
    written): the window stays because the dispatch probe measures it (the test above), and this test holds the
    two within 10% of each other."""
    errs = _ratio_errors(CAL)
    assert len(errs) == 15
    errs = np.array([e for k, e in errs.items() if k != THREE_PER_SM])
    assert errs.mean() <= 0.065 and errs.max() <= 0.20, errs
    no_window = _ratio_errors(dataclasses.replace(CAL, dispatch_window=0))
    assert errs.mean() <= 1.1 * np.mean([e for k, e in no_window.items() if k != THREE_PER_SM])


def test_causal_rules_at_three_blocks_per_sm():
    """The instance with three blocks per SM (its registers: fa2_tc.REGS) within the others' 20% bound: 18.5%
    since the in-step misses wait out what their phases leave, 18.8% since the join's pipes hold only the other
    warps' work, 20.2% with the join's p falling with a scheduler's rows of a block (overlap_rows), 19.9% before
    it, 20.5% before the clocked timings' fit (this test was a strict xfail then). The gap behind it is not
    mended: three blocks per SM run as fast as one (the comment on THREE_PER_SM)."""
    assert int(engine.evaluate(H100, *api.configure("fa2_tc", *THREE_PER_SM[:4], "fp16", False, gpu=H100,
                                                     Br=128, Bc=64, warps=4), CAL).blocks_per_sm) == 3
    assert _ratio_errors(CAL)[THREE_PER_SM] <= 0.20


def test_trace_of_late_heavy_blocks_records_correct_blocks():
    runs = _json("fa2_tc_trace_late.json")["runs"]
    assert len(runs) == 12
    assert all(r["max_abs_err_vs_fp32_sdpa"] < 2e-3 for r in runs)


def test_causal_rules_match_the_late_heavy_block_traces():
    """The second trace (TRACE_SET=late): the six causal launches the model once predicted worst (17-23% fast),
    whose heaviest blocks start after the first round, share their SM with two others, or (N = 128) find no tile
    in L2. The causal/non-causal ratio within 8% on average and 18% at worst: 7.6% and 17% (5.3% and 10.5% before
    the in-step misses waited out what their phases leave: B8 H16 N333 d128's non-causal launch, 5% slow before, is
    now right and its ratio 17% high; 14.5% and 18.3% before the miss count and the late-block rule)."""
    errs = np.array(list(_ratio_errors(CAL, "fa2_tc_trace_late.json").values()))
    assert len(errs) == 6
    assert errs.mean() <= 0.08 and errs.max() <= 0.18, errs


def test_late_heavy_blocks_share_their_sm():
    """In the traced B1 H16 N3000 d64 128x128 causal launch (2 blocks per SM, 24 Q tiles a head, heaviest first),
    the last heads' heaviest blocks start after the first round and run beside blocks of like work: in every rep
    the last block to end was dispatched after the first round, and the longest block runs over 1.1 times as long
    as the last head's heaviest block (360) did in the rep where its mate left early and it ran mostly alone."""
    run = next(r for r in _json("fa2_tc_trace_late.json")["runs"]
               if (r["B"], r["H"], r["N"], r["d"], r["causal"]) == (1, 16, 3000, 64, True))
    for rep in run["reps"]:
        start, end = np.array(rep["start_ns"]) / 1e3, np.array(rep["end_ns"]) / 1e3
        last = int(np.argmax(end))
        assert start[last] > 25 and last >= 264             # dispatched after the first round of 2 x 132 slots
    longest = [max(e - s for s, e in zip(rep["start_ns"], rep["end_ns"])) / 1e3 for rep in run["reps"]]
    lone = [(rep["end_ns"][360] - rep["start_ns"][360]) / 1e3 for rep in run["reps"]]
    assert np.median(longest) > 1.1 * np.min(lone)


def test_one_round_causal_pairs_heavy_blocks():
    """B2 H16 N1000 d128 at 128x64 with 4 warps: 256 blocks in one round of 2 per SM, 8 blocks a head. An SM
    whose mate is 128 blocks on holds two of the heaviest blocks, so the causal launch takes as long as the
    non-causal one (traced: 50.1 against 50.6 us; without the window the model said 0.78 of it)."""
    c = _kernel_only(2, 16, 1000, 128, 128, 64, 4, True, CAL)
    n = _kernel_only(2, 16, 1000, 128, 128, 64, 4, False, CAL)
    assert c / n > 0.9


def test_block_times_is_the_recorded_format():
    """The probe scripts' per-block record: SMs as given, times in ns from the earliest start (every recorded
    launch starts at 0)."""
    from perfmodel.measure.probe import block_times

    assert block_times([3, 1], [105, 100], [200, 150]) == {"smid": [3, 1], "start_ns": [5, 0], "end_ns": [100, 50]}
    rep = _json("dispatch.json")["runs"][0]["reps"][0]
    assert block_times(rep["smid"], rep["start_ns"], rep["end_ns"]) == rep


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_probe_shared_memory_sets_the_blocks_per_sm(gpu):
    """probe.smem_for_blocks_per_sm gives the shared memory each recorded dispatch launch asked for, and the
    runtime put that many blocks on an SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor, recorded)."""
    from perfmodel.measure import probe

    smem_sm = 228 * 1024                   # sm_90: shared memory per SM (cudaDeviceProp.sharedMemPerMultiprocessor)
    for r in json.load(open(Path(__file__).resolve().parent.parent / "examples" / "measurements" / gpu / "probe"
                            / "dispatch.json"))["runs"]:
        bps = int(next(w for w in r["label"].split() if w.startswith("bps"))[3:])
        assert probe.smem_for_blocks_per_sm(smem_sm, bps) == r["smem_bytes"]
        assert r["blocks_per_sm"] == bps
