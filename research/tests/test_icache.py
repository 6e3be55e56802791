"""The instruction-cache evidence research/notes/known-gaps-log.md cites for flash's ragged causal launches, held to the committed
data: the probe's instruction supply at each code footprint (research/data/h100/probe/icache.json,
research/scripts/probe_icache.py) and the code size and issue rate of flash's causal launches read off their SASS
(research/data/h100/flash_sass, research/scripts/ncu_sdpa_sass.sh via gpu_run.sh's ncu-flash-sass step)."""

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from rutil import ncu_details, ncu_sass

DATA = Path(__file__).resolve().parents[2] / "research" / "data"
H100 = DATA / "h100"


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_probe_finds_two_levels_of_instruction_cache(gpu):
    """One warp per scheduler issues an FFMA a clock while its code fits 32 KiB and 2.4x slower from 40 KiB on.
    Two blocks per SM in two distinct bodies (the SM's hot code twice the body) keep the two-warp pace (2 cycles
    each) up to 2 x 16 KiB, take 4.5 cycles from 2 x 24 to 2 x 60 KiB (a second level holding about 128 KiB, which
    supplies 2 / 4.5 = 0.44 instructions a clock per scheduler), and 7.6 cycles from 2 x 80 KiB (0.26 a clock).
    The H200 (the same SM) measures the same."""
    runs = json.load(open(DATA / gpu / "probe" / "icache.json"))["runs"]

    def cpi(bps, two, kib):
        """Median cycles per instruction of a warp (blocks per SM, two distinct bodies, body KiB)."""
        (r,) = [r for r in runs if (r["blocks_per_sm"], r["two_bodies"], r["body_kib"]) == (bps, two, kib)]
        return r["cpi_median"]

    assert all(cpi(1, False, k) < 1.2 for k in (4, 8, 16, 24, 32))
    assert all(2.3 < cpi(1, False, k) < 2.6 for k in (40, 48, 64, 96, 128))
    assert all(cpi(2, True, k) < 2.2 for k in (4, 8, 16))
    assert all(4.3 < cpi(2, True, k) < 4.8 for k in (24, 32, 48, 56, 60, 64))
    assert all(7.3 < cpi(2, True, k) < 8.0 for k in (80, 96, 128))
    # the same body in both blocks: fetched lines serve both, so the second level costs little
    assert all(cpi(2, False, k) < 2.4 for k in (40, 64, 96))


def test_supply_depends_on_hot_code_not_on_the_number_of_streams():
    """The streams runs (research/data/h100/probe/icache.json, stream_runs): 2 to 8 blocks per SM, each in
    one of 1 to 8 distinct bodies, the instruction supply per scheduler over each SM's span. Up to 32 KiB of hot
    code every scheduler issues about one a clock, however many streams. Beyond it, where every block runs its own
    body, the supply is 0.42-0.44 a clock per scheduler for 2, 4 and 8 streams alike up to 128 KiB (the second
    level), and falls below 0.40 from 192 KiB. Blocks sharing a body share its fetched lines: two blocks a body
    issue about twice that (0.74-0.88). So more streams do not by themselves slow the supply; the hot code does."""
    runs = json.load(open(H100 / "probe" / "icache.json"))["stream_runs"]
    ipc = {(r["blocks_per_sm"], r["streams"], r["body_kib"]): r["ipc_per_scheduler"] for r in runs}
    assert all(v > 0.9 for (b, s, k), v in ipc.items() if s * k <= 32)
    own = [v for (b, s, k), v in ipc.items() if b == s and 32 < s * k <= 128]
    assert len(own) >= 8 and all(0.41 < v < 0.45 for v in own)
    assert all(v < 0.40 for (b, s, k), v in ipc.items() if b == s and s * k >= 192)
    shared = [v for (b, s, k), v in ipc.items() if b == 2 * s and s * k > 32]
    assert shared and all(0.7 < v < 0.9 for v in shared)


@pytest.mark.parametrize("name", ["icache.json", "icache_rerun.json"])
def test_stream_count_does_not_set_the_supply_in_either_run(name):
    """The streams runs were taken twice (the rerun after a refactor of the probe's host code that left its kernels'
    timed bodies unchanged). Their absolute supply differs by up to 12% between runs (0.42-0.44 against 0.48-0.49
    per scheduler a clock from 48 to 128 KiB: the second level's fetch latency need not scale with the SM clock),
    but in each run 2, 4 and 8 streams of one body a block supply alike at equal hot code up to 128 KiB (within 5%
    of their median), and more hot code than that supplies less."""
    runs = json.load(open(H100 / "probe" / name))["stream_runs"]
    own = {(r["streams"], r["body_kib"]): r["ipc_per_scheduler"] for r in runs if r["blocks_per_sm"] == r["streams"]}
    mid = [v for (s, k), v in own.items() if 32 < s * k <= 128]
    assert len({s for (s, k) in own if 32 < s * k <= 128}) == 3
    assert max(mid) < 1.05 * np.median(mid) and min(mid) > 0.95 * np.median(mid)
    assert all(v < 0.93 * np.median(mid) for (s, k), v in own.items() if s * k >= 256)


def flash_launch(tag):
    """(code KiB, executed warp instructions per scheduler-cycle, share of stall samples waiting on an instruction
    fetch) of one profiled flash launch (B32 H16 fp16, research/data/h100/flash_sass)."""
    tarball = H100 / "flash_sass" / "sdpa_sass.tar.gz"
    h, rows = ncu_sass(tarball, tag)
    addr, samples, no_inst = h.index("Address"), h.index("Warp Stall Sampling (All Samples)"), h.index("stall_no_inst")
    body = [r for r in rows if len(r) > no_inst and r[addr].startswith("0x")]
    fetch = sum(int(r[no_inst]) for r in body) / sum(int(r[samples]) for r in body)
    with tarfile.open(tarball) as tar:
        details = ncu_details(io.StringIO(tar.extractfile(f"details_{tag}.csv").read().decode()))
    metric = {r["Metric Name"]: float(r["Metric Value"].replace(",", "")) for r in details
              if r["Metric Value"].replace(",", "").replace(".", "").isdigit()}
    issue = metric["Executed Instructions"] / (metric["SM Active Cycles"] * 132 * 4)
    return len(body) * 16 / 1024, issue, fetch


@pytest.mark.parametrize("d", [64, 128])
def test_ragged_causal_flash_outgrows_the_second_level(d):
    """The ragged causal instantiation (Is_even_MN = false: two unrolled masking steps) carries 116-125 KiB of code,
    the even one 70-84 KiB. The even launches issue at the probe's second-level supply (0.44-0.48 instructions a
    clock per scheduler); the ragged ones below it (0.35-0.39), between it and the L2's 0.26, with far more of their
    stall samples waiting on an instruction fetch."""
    ragged, even = flash_launch(f"ragged_causal_d{d}"), flash_launch(f"even_causal_d{d}")
    assert 110 < ragged[0] < 130 and 65 < even[0] < 90
    assert 0.43 < even[1] < 0.50 and 0.33 < ragged[1] < 0.40
    assert ragged[2] > 0.2 and ragged[2] > 2.5 * even[2]
