"""The L2 re-use probe (research/scripts/probe_l2_reuse.py -> research/data/{h100,h200}/probe/l2_reuse.json, step
probe-l2-reuse; research/notes/known-gaps-log.md): the record is whole, and what it shows about the H200's L2 against the H100's."""
import json
from pathlib import Path

import pytest

from perfmodel.hw import calibration, gpu
from perfmodel.measure.probe import half_miss
from perfmodel.model.memory import RULE

DATA = Path(__file__).resolve().parents[2] / "research" / "data"
MIB = 2 ** 20


def runs(key):
    return json.loads((DATA / key / "probe" / "l2_reuse.json").read_text())["runs"]


def point(key, mode, share):
    """The re-use distance (bytes) at which ``share`` of the re-uses of ``mode`` miss (linear between sizes)."""
    return half_miss(((r["distance_bytes"], r["reuse_miss"]) for r in runs(key) if r["mode"] == mode), share)


@pytest.mark.parametrize("key", ["h100", "h200"])
def test_record_is_whole_and_every_pass_after_the_first_reuses(key):
    rs = runs(key)
    assert len(rs) == 54 and {r["mode"] for r in rs} == {"read", "rewrite", "rewrite_stream"}
    for r in rs:
        assert -0.01 <= r["reuse_miss"] <= 1.03, r          # the first pass's reads and the stream are not re-uses
        if r["distance_bytes"] <= 24 * MIB:
            assert r["reuse_miss"] < 0.01, r                  # far inside L2: every re-use hits
        if r["distance_bytes"] >= 72 * MIB and r["mode"] != "read":
            assert r["reuse_miss"] > 0.98, r


def test_the_h200_keeps_re_used_lines_as_its_larger_l2_and_read_sweep_say():
    """Read only, re-written and beside a stream, the H200's half-miss distance lies 8-11% (3.7-4.7 MiB) beyond the
    H100's, as its effective L2 (the read sweep's) does: 60.6 against 54.8 MB, 11%. So the H200's fa1 rows, which miss
    far less than the H100's rule carried over gives in 1.07-1.6x L2 (research/notes/known-gaps-log.md), are not explained by
    its L2 keeping more re-written lines."""
    l2 = {k: calibration.resolve(gpu.resolve(k)).l2_effective_bytes for k in ("h100", "h200")}
    for mode in ("read", "rewrite", "rewrite_stream"):
        ratio = point("h200", mode, 0.5) / point("h100", mode, 0.5)
        assert ratio == pytest.approx(l2["h200"] / l2["h100"], abs=0.03), mode


def test_the_h100s_re_written_ramp_beside_the_rule_fitted_on_fa1():
    """On the H100 re-written lines miss from 2% at 32 MiB to 96% at 52 MiB (10% at 37 MiB, 90% at 49 MiB); the ramp
    the DRAM rule fitted on fa1's counters runs from 28 to 46 MiB (hit_all and hit_none times the effective L2):
    as steep, about 7 MiB earlier. fa1's distance holds only what the model counts (research/notes/known-gaps-log.md)."""
    l2 = calibration.resolve(gpu.resolve("h100")).l2_effective_bytes
    lo, hi = point("h100", "rewrite", 0.1), point("h100", "rewrite", 0.9)
    assert 35 * MIB < lo < 39 * MIB and 47 * MIB < hi < 51 * MIB
    assert 4 * MIB < lo - RULE.hit_all * l2 < 10 * MIB and 2 * MIB < hi - RULE.hit_none * l2 < 5 * MIB
