"""DRAM bytes (perfmodel.model.memory) against Nsight Compute's dram__bytes_read.sum + dram__bytes_write.sum.

The footprint of a launch is its compulsory bytes Q + K + V + O (4 B H N d element bytes); L2 is the H100's 50 MiB.
The DRAM sweep (examples/measurements/h100/ncu/ncu_dram_{fa1,fa2,fa2_tc}.csv: 40 launches, footprints 0.25x..8x of
L2, many heads of short N and few heads of long N, fa2_tc causal too) is held to 10% on every row; the rule's
constants were fitted on it (scripts/fit_l2_rule.py), so the older ncu rows (ncu_fa1, ncu_fa2, ncu_fa2_tc.csv, not
used by the fit) are the held-out check, with looser bounds: the one older fa1 row in the range, B=8 H=16 N=1024
d=32, is the configuration the sweep measured again (B=1 H=128), and the two runs differ by 15% (4.90 and 5.66 times
the footprint: fa1 there sits on the steep part of the L2 curve); below 0.25x of L2 the kernels move 1-5 MB and
ncu's write counts carry a few hundred kB of stray write-backs.
"""

import csv
import itertools
from pathlib import Path

import numpy as np
import pytest

from perfmodel.model import memory
from util import evaluate

NCU = Path(__file__).resolve().parent.parent / "examples" / "measurements" / "h100" / "ncu"
L2 = 50 * 2 ** 20
KERNELS = ("fa1", "fa2", "fa2_tc")


def footprint(r):
    return 4 * int(r["B"]) * int(r["H"]) * int(r["N"]) * int(r["d"]) * (4 if r.get("dtype", "fp32") == "fp32" else 2)


def rows(path):
    return list(csv.DictReader(open(path)))


def error(kernel, r):
    """(predicted / measured - 1) of DRAM read + write bytes, and the prediction."""
    tiles = {f: int(r[f]) for f in ("Br", "Bc", "threads", "pad", "warps") if f in r}
    p = evaluate(kernel, int(r["B"]), int(r["H"]), int(r["N"]), int(r["d"]), dtype=r.get("dtype", "fp32"),
                 causal=r.get("causal", "0") == "1", **tiles)
    measured = float(r["dram__bytes_read.sum"]) + float(r["dram__bytes_write.sum"])
    return float(np.asarray(p.traffic.dram_bytes)) / measured - 1, p


SWEEP = {k: rows(NCU / f"ncu_dram_{k}.csv") for k in KERNELS}
OLDER = {k: rows(NCU / f"ncu_{k}.csv") for k in KERNELS}


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


@pytest.mark.parametrize("kernel", KERNELS)
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
    for grid, resident, sms in itertools.product([1, 5, 131, 132, 133, 192, 396, 512, 1600], [1, 64, 132, 396],
                                                 [132]):
        R = min(grid, resident)
        phases = memory._wave_phases(np.int64(grid), np.int64(R), sms)
        assert sum(float(s) for s, _ in phases) == pytest.approx(1.0)
        assert all(0 <= int(n) <= R for _, n in phases)


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
