"""Block dispatch order and the causal timing rules, against what the H100 (and, for the dispatch probe, the H200)
recorded.

Recordings committed under research/data/h100/probe (dispatch.json also under h200/probe):

* dispatch.json (research/scripts/probe_dispatch.py) comes from a spin kernel. Every block recorded its SM and its start
  and end on the global timer, at 1, 2 and 4 blocks per SM.
* fa2_tc_trace.json (research/scripts/trace_fa2_tc.py) comes from fa2_tc itself, built with FA2TC_TRACE. It has the same
  record for each block of 15 problems, causal and not. fa2_tc_trace_late.json (TRACE_SET=late) holds six more:
  the causal launches the model once predicted worst.

No recording is fitted: the window the rule uses is the architecture constant dispatch_window_blocks, read
off the first.
"""
import dataclasses
import functools
import json
from pathlib import Path

import numpy as np
import pytest
from perfmodel import api
from perfmodel.hw import calibration as cal_mod
from perfmodel.kernels import fa2_tc
from perfmodel.model import engine, timing
from rutil import fa2_tc_ptxas

PROBE = Path(__file__).resolve().parents[2] / "research" / "data" / "h100" / "probe"
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


# Registers per thread of the trace build (FA2TC_TRACE), which sets the blocks per SM the traced launches ran at: the
# trace's clock reads and stores shift ptxas's allocation by up to 6 registers an instance, and that moves two traced
# instances across an occupancy step (d = 32 128x64/4w: 167 -> 169, three blocks a SM -> two; d = 64 128x64/8w:
# 130 -> 128, one -> two). The model is set against a trace at the trace's occupancy.
TRACE_REGS = {k: max(v) for k, v in fa2_tc_ptxas(PROBE.parent / "fa2_tc_trace_ptxas.txt").items()}


def _evaluate(B, H, N, d, Br, Bc, warps, causal, cal=CAL, regs=None):
    """The model's prediction of one fp16 fa2_tc launch on the H100 (``regs``: registers a thread, else REGS')."""
    k, shape, t = api.configure("fa2_tc", B, H, N, d, "fp16", causal, gpu=H100, Br=Br, Bc=Bc, warps=warps)
    return engine.evaluate(H100, k, shape, t, cal, regs=regs)


@functools.lru_cache(maxsize=None)
def _blocks_per_sm(B, H, N, d, Br, Bc, warps, regs=None):
    return int(_evaluate(B, H, N, d, Br, Bc, warps, False, regs=regs).blocks_per_sm)


def _kernel_only(B, H, N, d, Br, Bc, warps, causal, cal, regs=None):
    return float(_evaluate(B, H, N, d, Br, Bc, warps, causal, cal, regs).time_s) - cal.launch_overhead_s


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
        regs = TRACE_REGS[(key[3], *key[4:])]
        model = _kernel_only(*key, True, cal, regs) / _kernel_only(*key, False, cal, regs)
        errs[key] = abs(model / traced - 1)
    return errs


# The traced instance the measured kernel runs at three blocks per SM (d = 32, 128x64, 4 warps: 167 registers); its
# trace build (169) ran at two.
THREE_PER_SM = (4, 16, 1024, 32, 128, 64, 4)


def test_trace_records_correct_blocks():
    """Every traced launch was checked against fp32 SDPA first (fp16 inputs: 2e-3 absolute)."""
    runs = _json("fa2_tc_trace.json")["runs"]
    assert len(runs) == 30
    assert all(r["max_abs_err_vs_fp32_sdpa"] < 2e-3 for r in runs)


def test_causal_rules_match_traced_fa2_tc_launches():
    """The causal launch over its non-causal twin, the model at the trace build's blocks per SM (TRACE_REGS): within
    6% on average of fa2_tc's 15 traced launches of one, two and four blocks per SM and 10% at worst (5.8% and 9.2%;
    4.9% and 15.2% before the list-scheduling residual and its refit, which lifted the ratios of one-round launches,
    where the residual does not act, by 1-5 points: their non-causal twins got faster under the refitted costs).
    Before the model was set at the trace's occupancy, the d = 32 launch (THREE_PER_SM, below) was 18.5% off and
    d = 64 128x64/8w (B8 H8 N333, traced at two blocks a SM, measured kernel one) 13.4%. Round-robin dispatch
    without the window scores better on these launches (4.0% against 5.8%; before the residual 4.5% against 4.9%):
    the window stays because the dispatch probe measures it (the test above), and this test holds the two within
    1.5x of each other."""
    errs = _ratio_errors(CAL)
    assert len(errs) == 15
    errs = np.array(list(errs.values()))
    assert errs.mean() <= 0.06 and errs.max() <= 0.10, errs
    no_window = _ratio_errors(dataclasses.replace(CAL, dispatch_window=0))
    assert errs.mean() <= 1.5 * np.mean(list(no_window.values()))


def test_the_trace_build_runs_the_d32_tile_at_two_blocks_per_sm():
    """The measured kernel's d = 32 128x64/4w instance holds 167 registers a thread, three blocks per SM; its trace
    build holds 169 (ptxas, fa2_tc_trace_ptxas.txt), two: 264 blocks start together in every traced rep of that
    launch, not 396. Set at three, the model's causal/non-causal ratio was 18.5% off the trace's (read then as three
    blocks running as fast as one); at two, within 1% before the list-scheduling residual and 7.4% since (the model's
    ratio low: its causal launch's last heavy block now starts earlier)."""
    assert fa2_tc.REGS[(32, 128, 64, 4)] == 167 and TRACE_REGS[(32, 128, 64, 4)] == 169
    assert _blocks_per_sm(*THREE_PER_SM) == 3 and _blocks_per_sm(*THREE_PER_SM, regs=169) == 2
    run = next(r for r in _json("fa2_tc_trace.json")["runs"] if (r["B"], r["H"], r["N"], r["d"]) == THREE_PER_SM[:4])
    assert all(sum(t < 1000 for t in rep["start_ns"]) == 2 * H100.sm_count for rep in run["reps"])
    assert _ratio_errors(CAL)[THREE_PER_SM] <= 0.09


def test_trace_of_late_heavy_blocks_records_correct_blocks():
    runs = _json("fa2_tc_trace_late.json")["runs"]
    assert len(runs) == 12
    assert all(r["max_abs_err_vs_fp32_sdpa"] < 2e-3 for r in runs)


def test_causal_rules_match_the_late_heavy_block_traces():
    """The second trace (TRACE_SET=late): the six causal launches the model once predicted worst (17-23% fast),
    whose heaviest blocks start after the first round, share their SM with two others, or (N = 128) find no tile
    in L2. The causal/non-causal ratio within 9.5% on average and 19% at worst: 9.2% and 18.9% (7.6% and 17% before
    the list-scheduling residual and its refit; 5.3% and 10.5% before the in-step misses waited out what their
    phases leave: B8 H16 N333 d128's non-causal launch, 5% slow before, is now right and its ratio 19% high; 14.5%
    and 18.3% before the miss count and the late-block rule)."""
    errs = np.array(list(_ratio_errors(CAL, "fa2_tc_trace_late.json").values()))
    assert len(errs) == 6
    assert errs.mean() <= 0.095 and errs.max() <= 0.19, errs


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


def _traced_launches():
    """(run, rep, starts in us, ends in us, slots) of every traced fa2_tc launch with more blocks than slots; the
    slots are the blocks that start within 1 us of the first."""
    for name in ("fa2_tc_trace.json", "fa2_tc_trace_late.json"):
        for run in _json(name)["runs"]:
            for rep in run["reps"]:
                start, end = np.array(rep["start_ns"]) / 1e3, np.array(rep["end_ns"]) / 1e3
                slots = int((start < 1.0).sum())
                if len(start) > slots:
                    yield run, rep, start, end, slots


def test_blocks_after_the_first_round_start_as_slots_free():
    """List scheduling: in all 110 traced launches (and reps) with more blocks than slots, the k-th block to start
    after the first round starts 0.10-0.35 us after the k-th block to end, and the first round holds the blocks
    per SM the model's occupancy gives for the trace build's registers on every SM."""
    seen = 0
    for run, rep, start, end, slots in _traced_launches():
        tile = (run["d"], run["Br"], run["Bc"], run["warps"])
        assert slots == _blocks_per_sm(run["B"], run["H"], run["N"], *tile, regs=TRACE_REGS[tile]) * H100.sm_count
        gap = np.sort(start)[slots:] - np.sort(end)[:len(start) - slots]
        assert 0 < gap.min() and gap.max() < 0.5, (run["B"], run["H"], run["N"], gap.min(), gap.max())
        seen += 1
    assert seen == 110


def test_a_late_block_starts_before_the_slots_have_served_the_blocks_before_it():
    """So a block dispatched after the first round starts when the slots have served the blocks before it less what
    the blocks still in service have left (no slot idles while blocks wait, beyond each dispatch's 0.1-0.35 us:
    within 3%). In the 11 traced causal launches whose last head's heaviest block is dispatched after the first
    round, that residual is 0.63-1.06 times a renewal process's mean residual per slot, E[d^2] / (2 E[d]) over the
    durations d of the blocks before it (the median of five reps; mean 0.87): 0.6-1.0 round of a mean block. The
    model's start for that block (timing, "the last-dispatched heaviest block") counts the blocks' work at a full
    round's pace less that mean share of the residual (timing.LIST_RESIDUAL, held to this test's mean)."""
    ratios = []
    for run, rep, start, end, slots in _traced_launches():
        hb = -(-run["N"] // run["Br"])
        q = len(start) - hb                               # the last head's heaviest block (heaviest first)
        if not run["causal"] or q < slots:
            continue
        dur, before = end - start, np.arange(len(start)) < q
        residual = np.sum(np.maximum(end[before] - start[q], 0))
        # (each dispatch leaves its slot idle 0.10-0.35 us: the test above)
        assert abs(dur[before].sum() - residual - slots * start[q]) < 0.03 * slots * start[q]
        ratios.append(residual / slots / (np.mean(dur[before] ** 2) / 2 / np.mean(dur[before])))
    assert len(ratios) == 11 * 5
    med = np.median(np.reshape(ratios, (11, 5)), axis=1)
    assert 0.6 < med.min() and med.max() < 1.1 and 0.8 < med.mean() < 0.9, med
    assert timing.LIST_RESIDUAL == pytest.approx(med.mean(), abs=0.01)


def test_block_times_is_the_recorded_format():
    """The probe scripts' per-block record: SMs as given, times in ns from the earliest start (every recorded
    launch starts at 0)."""
    from common import block_times

    assert block_times([3, 1], [105, 100], [200, 150]) == {"smid": [3, 1], "start_ns": [5, 0], "end_ns": [100, 50]}
    rep = _json("dispatch.json")["runs"][0]["reps"][0]
    assert block_times(rep["smid"], rep["start_ns"], rep["end_ns"]) == rep


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_probe_shared_memory_sets_the_blocks_per_sm(gpu):
    """common.smem_for_blocks_per_sm gives the shared memory each recorded dispatch launch asked for, and the
    runtime put that many blocks on an SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor, recorded)."""
    import common

    smem_sm = 228 * 1024                   # sm_90: shared memory per SM (cudaDeviceProp.sharedMemPerMultiprocessor)
    for r in json.load(open(Path(__file__).resolve().parents[2] / "research" / "data" / gpu / "probe"
                            / "dispatch.json"))["runs"]:
        bps = int(next(w for w in r["label"].split() if w.startswith("bps"))[3:])
        assert common.smem_for_blocks_per_sm(smem_sm, bps) == r["smem_bytes"]
        assert r["blocks_per_sm"] == bps
