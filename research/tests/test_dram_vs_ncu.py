"""DRAM bytes (perfmodel.model.memory) against Nsight Compute's dram__bytes_read.sum + dram__bytes_write.sum.

The footprint of a launch is its compulsory bytes Q + K + V + O (4 B H N d element bytes); L2 is the H100's 50 MiB.
The rule's constants were fitted (research/scripts/fit_l2_rule.py) on the H100's DRAM sweep (ncu/ncu_dram_{fa1,fa2,
fa2_tc}.csv: 40 launches, footprints 0.25x..8x of L2, many heads of short N and few heads of long N, fa2_tc causal
too) and fa1's band between the sweep's head counts (ncu/band). Held out: the older H100 ncu rows (ncu_fa1, ncu_fa2,
ncu_fa2_tc.csv), the H100's repeated fa1 launches (ncu/repeat), fa2's and fa2_tc's band between the sweep's rows
(ncu/band2) and every H200 row. Where fa1's re-reads turn from hits to misses, identical launches differ by up to
2.4x (ncu/repeat), so there the rule is held to the spread of repeated launches and to mean errors, not to 10% a
row. Below 0.25x of L2 the kernels move 1-5 MB and ncu's write counts carry a few hundred kB of stray write-backs.
"""

import csv
import itertools
from pathlib import Path

import numpy as np
import pytest

from perfmodel.hw import gpu
from perfmodel.model import memory
from util import H100, evaluate

NCU = Path(__file__).resolve().parents[2] / "research" / "data" / "h100" / "ncu"
L2 = 50 * 2 ** 20
KERNELS = ("fa1", "fa2", "fa2_tc")


def footprint(r):
    return 4 * int(r["B"]) * int(r["H"]) * int(r["N"]) * int(r["d"]) * (4 if r.get("dtype", "fp32") == "fp32" else 2)


def rows(path):
    return list(csv.DictReader(open(path)))


def error(kernel, r, spec=None):
    """(predicted / measured - 1) of DRAM read + write bytes, and the prediction (on the H100 unless ``spec``)."""
    tiles = {f: int(r[f]) for f in ("Br", "Bc", "threads", "pad", "warps") if f in r}
    p = evaluate(kernel, int(r["B"]), int(r["H"]), int(r["N"]), int(r["d"]), spec=spec or H100,
                 dtype=r.get("dtype", "fp32"), causal=r.get("causal", "0") == "1", **tiles)
    measured = float(r["dram__bytes_read.sum"]) + float(r["dram__bytes_write.sum"])
    return float(np.asarray(p.traffic.dram_bytes)) / measured - 1, p


SWEEP = {k: rows(NCU / f"ncu_dram_{k}.csv") for k in KERNELS}
OLDER = {k: rows(NCU / f"ncu_{k}.csv") for k in KERNELS}
# the same sweep on the H200 (60 MiB of L2), whose DRAM counters no constant was fitted to
H200 = gpu.resolve("h200")
SPECS = {"h100": H100, "h200": H200}


def ncu_dirs(sub):
    """{GPU: its ncu folder ``sub``} for the H100 and the H200."""
    return {g: NCU.parents[1] / g / "ncu" / sub for g in SPECS}


SWEEP_H200 = {k: rows(ncu_dirs("")["h200"] / f"ncu_dram_{k}.csv") for k in KERNELS}


@pytest.mark.parametrize("kernel", KERNELS)
def test_sweep_spans_the_range_both_ways(kernel):
    rs = SWEEP[kernel]
    assert len(rs) >= 10
    fp = [footprint(r) / L2 for r in rs]
    assert min(fp) <= 0.33 and max(fp) >= 7.5
    heads = lambda r: int(r["B"]) * int(r["H"])
    many_short = [r for r in rs if heads(r) >= 400 and int(r["N"]) <= 512]
    few_long = [r for r in rs if heads(r) <= 32 and int(r["N"]) >= 2048]
    assert many_short and few_long
    # each way reaches beyond L2
    assert max(footprint(r) for r in many_short) > 2 * L2 and max(footprint(r) for r in few_long) > L2
    if kernel == "fa2_tc":
        assert {r["causal"] for r in rs if footprint(r) > L2} == {"0", "1"}


@pytest.mark.parametrize("kernel", ("fa2", "fa2_tc"))
def test_dram_bytes_within_10_percent_of_ncu_from_quarter_to_8x_l2(kernel):
    bad, errs = [], []
    for r in SWEEP[kernel]:
        if not 0.25 <= footprint(r) / L2 <= 8:
            continue
        e, _ = error(kernel, r)
        errs.append(e)
        if abs(e) > 0.10:
            bad.append((r["B"], r["H"], r["N"], r["d"], r.get("causal"), f"{e:+.3f}"))
    assert len(errs) >= 10
    assert not bad, bad


def test_fa1_misses_10_percent_only_where_identical_launches_differ():
    """fa1 on the training rows (sweep and band, 0.25x..8x of L2): mean error 5.7%, and every row more than 10% off
    (6 of 35; worst +42% at 192 heads of N = 256) has a mean re-use distance between half of L2 and the end of the
    rule's ramp (0.50-0.74x here), the range where the repeated launches (ncu/repeat, 0.49-0.87x) differ among
    themselves by up to 2.4x."""
    rs = [r for r in SWEEP["fa1"] + BAND["h100"] if 0.25 <= footprint(r) / L2 <= 8]
    res = [error("fa1", r) for r in rs]
    errs = np.array([e for e, _ in res])
    assert len(rs) == 35 and np.abs(errs).mean() <= 0.065 and (np.abs(errs) > 0.10).sum() <= 6
    ramp = lambda p: 0.5 <= float(np.asarray(p.traffic.reuse_distance_bytes)) / H100.l2_bytes <= memory.RULE.hit_none
    assert all(ramp(p) for e, p in res if abs(e) > 0.10)
    assert np.abs(errs).max() <= 0.45


@pytest.mark.parametrize("kernel", KERNELS)
def test_older_ncu_rows_stay_sane(kernel):
    """Held out: within 25% in the 0.25x..8x range (the repeated fa1 configuration: 15% apart between runs),
    within 10% beyond 8x (fa2_tc at 10x and 20x of L2), DRAM reads within 15% below 0.25x (writes there are a few
    hundred kB of noise)."""
    for r in OLDER[kernel]:
        e, p = error(kernel, r)
        x = footprint(r) / L2
        if 0.25 <= x <= 8:
            assert abs(e) <= 0.25, (r["B"], r["H"], r["N"], r["d"], e)
        elif x > 8:
            assert abs(e) <= 0.10, (r["B"], r["H"], r["N"], r["d"], e)
        else:
            reads = float(np.asarray(p.traffic.dram_read_bytes)) / float(r["dram__bytes_read.sum"]) - 1
            assert abs(reads) <= 0.15, (r["B"], r["H"], r["N"], r["d"], reads)


def test_the_old_rule_misses_what_the_sweep_shows():
    """The measurements the rule answers: fa1 re-reads far beyond its compulsory bytes before its live set reaches
    L2's size (128 heads of N=1024 touch 36 MB per K/V tile and read 3.6x the footprint), a head's K/V streamed by
    two waves of blocks is read from DRAM twice when it exceeds the L2 (fa2_tc d=256, N=32768), and a kernel's
    output below ~6.5 MB is not written to DRAM during the kernel."""
    fa1 = {(r["H"], r["N"]): r for r in SWEEP["fa1"]}["128", "1024"]
    assert float(fa1["dram__bytes_read.sum"]) > 3 * footprint(fa1)
    tc = {(r["H"], r["N"], r["d"]): r for r in SWEEP["fa2_tc"]}["1", "32768", "256"]
    assert float(tc["dram__bytes_read.sum"]) > 1.2 * footprint(tc)       # 0.75 compulsory + one more K/V (0.5)
    small = [r for k in KERNELS for r in SWEEP[k] if footprint(r) / 4 < 4e6]
    assert small and all(float(r["dram__bytes_write.sum"]) < 0.1 * footprint(r) / 4 for r in small)


def test_wave_crossings_match_an_enumeration_of_the_dispatch_order():
    """Re-reads across a head's blocks happen where the dispatch order (head after head, ``resident`` blocks per
    wave) cuts a head between two waves; memory.traffic counts those cuts in closed form."""
    from perfmodel.model.counts import Counts
    for heads, bph, resident in itertools.product([1, 2, 3, 7, 24], [1, 2, 5, 128, 264, 300], [1, 8, 132, 264]):
        G = heads * bph
        R = min(G, resident)
        cuts = sum(len({p // R for p in range(h * bph, (h + 1) * bph)}) - 1 for h in range(heads))
        # one byte per pass, every crossing a full miss, no fade: the re-read bytes are the crossings
        c = Counts(dram_read_once=0.0, dram_read_reuse=float(heads * max(bph - 1, 1)), reuse_live_bytes=1e12)
        rule = memory.L2Rule(wave_fade=1.0)
        t = memory.traffic(c, heads, G, resident, 1, 1.0, rule)
        got = float(np.asarray(t.dram_read_bytes)) if bph > 1 else 0.0
        assert got == pytest.approx(cuts), (heads, bph, resident)


def test_wave_phases_share_all_the_work():
    for grid, resident, sms, pace in itertools.product([1, 5, 131, 132, 133, 192, 396, 512, 1600], [1, 64, 132, 396],
                                                       [132], [0.0, 0.75, 1.0]):
        R = min(grid, resident)
        phases = memory._wave_phases(np.int64(grid), np.int64(R), sms, pace)
        assert sum(float(s) for s, _ in phases) == pytest.approx(1.0)
        assert all(float(s) >= 0 and 0 <= float(n) <= R * max(1, R // sms + 1) for s, n in phases)


def test_wave_phases_by_pace():
    """Co-resident blocks that do not slow each other (pace 0) all see every live block's loop; blocks that share
    their SM (pace 1) see k x SMs on an SM of k blocks, and the fuller SMs finish alone. 192 blocks on 132 SMs: 72
    SMs of one block, 60 of two."""
    flat = memory._wave_phases(np.int64(192), np.int64(192), 132, 0.0)
    assert sum(float(s) for s, n in flat if float(n) == 192) == pytest.approx(1.0)
    shared = {float(n): float(s) for s, n in memory._wave_phases(np.int64(192), np.int64(192), 132, 1.0) if s > 0}
    assert shared == pytest.approx({132.0: 72 / 192, 264.0: 60 / 192, 120.0: 60 / 192})


def test_dram_bytes_lie_between_the_first_touches_and_every_reuse_missing():
    """Reads lie between the first touches and every re-read missing, writes below every write reaching DRAM; a
    small live set re-uses everything from L2, one far beyond L2 nothing."""
    heads = np.array([1, 4, 16, 64, 128, 192, 256, 396, 512, 1024, 1600])
    for kernel, (N, d), tiles, dt in (("fa1", (1024, 32), dict(Br=64, Bc=64), "fp32"),
                                      ("fa1", (256, 64), dict(Br=64, Bc=64), "fp32"),
                                      ("fa2", (16384, 64), dict(Br=64, Bc=64, threads=128, pad=1), "fp32"),
                                      ("fa2_tc", (32768, 256), dict(Br=64, Bc=64, warps=4), "fp16"),
                                      ("fa2_tc", (16384, 128), dict(Br=128, Bc=64, warps=4), "fp16")):
        p = evaluate(kernel, 1, heads, N, d, dtype=dt, **tiles)
        c, t = p.counts, p.traffic
        ro, rr = np.asarray(c.dram_read_once, float), np.asarray(c.dram_read_reuse, float)
        reads, writes = np.asarray(t.dram_read_bytes, float), np.asarray(t.dram_write_bytes, float)
        assert np.all(reads >= ro * (1 - 1e-12)) and np.all(reads <= (ro + rr) * (1 + 1e-12)), kernel
        assert np.all(writes >= 0)
        assert np.all(writes <= np.asarray(c.dram_write_once + c.dram_write_reuse, float) * (1 + 1e-12)), kernel
    small = evaluate("fa1", 1, 16, 1024, 32, Br=64, Bc=64).traffic           # 4.5 MB live
    assert float(small.l2_hit_fraction) == 1.0
    p = evaluate("fa1", 1, 512, 1024, 32, Br=64, Bc=64)                      # 145 MB live
    assert float(p.traffic.l2_hit_fraction) == 0.0
    assert float(p.traffic.dram_read_bytes) == pytest.approx(float(p.counts.dram_read_once + p.counts.dram_read_reuse))


def h200_errors(kernel):
    """(footprint / the H200's L2, predicted / measured - 1) of each H200 sweep row."""
    return [(footprint(r) / H200.l2_bytes, error(kernel, r, H200)[0]) for r in SWEEP_H200[kernel]]


@pytest.mark.parametrize("kernel", ("fa2", "fa2_tc"))
def test_h200_dram_bytes_within_10_percent_of_ncu_from_quarter_to_6x_l2(kernel):
    """Held out on a second GPU: the H100's sweep run on the H200 spans 0.21x to 6.7x of its larger L2. Every
    launch within 10%. A single head of N = 32768, d = 256 (its blocks span two waves) reads its K/V twice in full
    on both GPUs; while the cross-wave ramp scaled with the device's L2 it gave the H200 75% of a second read
    (-11%). It scales with the room L2 gives lines every block re-reads (the shared-read probe: 1.09x the H100's,
    not 1.2x), which puts that launch at -6.4%."""
    errs = [e for x, e in h200_errors(kernel) if 0.25 <= x <= 8]
    assert len(errs) >= 10
    assert max(abs(e) for e in errs) <= 0.10


BAND_DIR = ncu_dirs("band")
BAND = {g: rows(d / "ncu_dram_fa1.csv") for g, d in BAND_DIR.items()}


def band_errors(g):
    return np.array([error("fa1", r, SPECS[g])[0] for r in BAND[g]])


def test_fa1_band_rows_are_the_grid_and_carry_provenance():
    """The band set (research/data/grids/ncu-dram-fa1-band.yaml, research/scripts/gpu_run.sh ncu-dram-band): 21 fa1 launches a
    GPU at head counts between the sweep's, 0.96-2.2x of the H100's L2, with the command and the machine beside."""
    for g in ("h100", "h200"):
        shapes = {(int(r["N"]), int(r["d"])) for r in BAND[g]}
        assert len(BAND[g]) == 21 and shapes == {(256, 64), (1024, 32), (2048, 64)}
        fp = [footprint(r) / L2 for r in BAND[g]]
        assert 0.9 <= min(fp) and max(fp) <= 2.3
        env = (BAND_DIR[g] / "env.txt").read_text()
        assert "ncu-dram-band" in env and "driver" in env


def test_h200_fa1_held_out():
    """fa1 on the H200, nothing fitted to it (the rule scales with the device's L2: 60 MiB against the H100's
    50 MiB). Its sweep: 12 of 14 launches within 10%; the two outside (-39%, -64%) sit where a few per cent of the
    re-reads already miss before the ramp starts. Its band: 10 of 21 within 10%, mean 10.3%, worst 30%."""
    sweep = np.array([e for x, e in h200_errors("fa1") if 0.25 <= x <= 8])
    band = band_errors("h200")
    assert len(sweep) == 14 and (np.abs(sweep) <= 0.10).sum() >= 12 and np.abs(sweep).max() <= 0.70
    assert (np.abs(band) <= 0.10).sum() >= 10 and np.abs(band).mean() <= 0.11 and np.abs(band).max() <= 0.35


REPEAT_DIR = ncu_dirs("repeat")
REPEAT = {g: [r for run in ("run1", "run2") for r in rows(d / run / "ncu_dram_fa1.csv")] for g, d in REPEAT_DIR.items()}


def launches_by_config(g):
    """{(N, heads): [measured DRAM bytes of its six launches]} and the prediction of each."""
    by, pred = {}, {}
    for r in REPEAT[g]:
        key = (int(r["N"]), int(r["B"]) * int(r["H"]))
        e, _ = error("fa1", r, SPECS[g])
        m = float(r["dram__bytes_read.sum"]) + float(r["dram__bytes_write.sum"])
        by.setdefault(key, []).append(m)
        pred[key] = m * (1 + e)
    return by, pred


def test_repeated_fa1_launches_carry_provenance_and_differ_in_the_ramp():
    """The repeats (research/data/grids/ncu-dram-fa1-repeat.yaml, research/scripts/gpu_run.sh ncu-dram-repeat, run twice): nine
    fa1 configurations a GPU, each launched as B x H = 1 x h, 2 x h/2 and 4 x h/4 in each of two processes. Where a
    few large heads re-read near L2's size, identical launches differ by up to 2.4x on the H100 (28 heads of
    N = 2048: 97-237 MB) and 1.8x on the H200; many small heads (N = 256) stay within 8%."""
    for g in ("h100", "h200"):
        env = (REPEAT_DIR[g] / "run1" / "env.txt").read_text()
        assert "ncu-dram-repeat" in env and "driver" in env
        by, _ = launches_by_config(g)
        assert len(by) == 9 and all(len(v) == 6 for v in by.values())
        spread = {k: max(v) / min(v) - 1 for k, v in by.items()}
        assert max(spread.values()) >= 0.7, (g, spread)
        assert all(s <= 0.10 for (N, _), s in spread.items() if N == 256), (g, spread)


def test_repeated_fa1_launches_held_out_within_their_spread():
    """Held out (the repeats are fitted on neither GPU): the prediction lies within 10% of the range of a
    configuration's six launches in 8 of 9 configurations on the H100 (the rule before this data and the device-L2
    scaling: 7) and 7 of 9 on the H200 (before: 2)."""
    for g, need in (("h100", 8), ("h200", 7)):
        by, pred = launches_by_config(g)
        inside = [0.9 * min(v) <= pred[k] <= 1.1 * max(v) for k, v in by.items()]
        assert sum(inside) >= need, (g, inside)


BAND2_DIR = ncu_dirs("band2")


def test_fa2_and_fa2_tc_between_the_sweeps_rows_held_out():
    """fa2 and fa2_tc between the sweep's head counts and shapes (research/data/grids/ncu-dram-fa2{,_tc}-band.yaml,
    research/scripts/gpu_run.sh ncu-dram-band2; 0.64-7.7x of L2, nothing fitted to them), where a head's blocks span waves
    and its K/V re-reads can miss: all 27 H100 launches within 10% (mean 1.6%, worst 8.8%; before the cross-wave
    ramp 25, worst -15% at 8 heads of N = 32768, d = 128, which reads 1.67x its compulsory bytes) and all 27 on the
    H200 (mean 2.6%, worst 8.7%; before 26, worst +12%)."""
    for g, need, mean, worst in (("h100", 27, 0.02, 0.10), ("h200", 27, 0.03, 0.10)):
        env = (BAND2_DIR[g] / "env.txt").read_text()
        assert "ncu-dram-band2" in env and "driver" in env
        errs = np.array([error(k, r, SPECS[g])[0] for k in ("fa2", "fa2_tc")
                         for r in rows(BAND2_DIR[g] / f"ncu_dram_{k}.csv")])
        assert len(errs) == 27
        assert (np.abs(errs) <= 0.10).sum() >= need and np.abs(errs).mean() <= mean and np.abs(errs).max() <= worst


REPEAT_TC = {g: [rows(ncu_dirs("repeat-tc")[g] / run / "ncu_dram_fa2_tc.csv") for run in ("run1", "run2")] for g in SPECS}


def test_fa2_tc_cross_wave_rereads_repeat_and_are_held_out():
    """fa2_tc's long-N launches, where a head's K/V is re-read across waves (research/data/grids/ncu-dram-fa2_tc-repeat.yaml,
    research/scripts/gpu_run.sh ncu-dram-repeat-tc; B x H split three ways, two processes): unlike fa1's near L2's size,
    identical launches move the same bytes (within 3.5% of one another, most within 1%), so the rule is held to each
    row. They re-read up to 1.16 times a head's K/V per wave crossing (8 heads of N = 32768, d = 128: 1.47x their
    compulsory bytes), which no geometric fade of the crossings allowed (the committed fade of 0.85 put that launch
    14% low); the cross-wave ramp (memory.L2Rule.cross_*), fitted on the training split, holds all 34 H100 rows and,
    in units of the room each GPU's L2 gives widely shared lines (the shared-read probe), all 34 H200 rows within
    10% (32 while it scaled with the device's L2: the single head of N = 32768, d = 256, at -11%)."""
    from collections import defaultdict

    for g, need in (("h100", 34), ("h200", 34)):
        env = (ncu_dirs("repeat-tc")[g] / "env.txt").read_text()
        assert "ncu-dram-repeat-tc" in env and "580." in env and "date:" in env
        by_config, errs = defaultdict(list), []
        for run in REPEAT_TC[g]:
            assert len(run) == 17
            for r in run:
                e, _ = error("fa2_tc", r, SPECS[g])
                errs.append(e)
                key = (int(r["B"]) * int(r["H"]), r["N"], r["d"])
                by_config[key].append(float(r["dram__bytes_read.sum"]) + float(r["dram__bytes_write.sum"]))
        spread = [max(v) / min(v) - 1 for v in by_config.values()]
        assert len(by_config) == 7 and max(spread) < 0.04
        errs = np.abs(errs)
        assert (errs <= 0.10).sum() >= need and errs.max() <= 0.10
