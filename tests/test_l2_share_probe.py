"""The shared-read probe (scripts/probe_l2_share.py -> examples/measurements/{h100,h200}/probe/l2_share.json, step
probe-l2-share; docs/known-gaps.md): the record is whole, what it shows about lines many blocks re-read, and that
the calibrations and the DRAM rule's unit hold its figures."""
import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from perfmodel.hw import calibration, gpu
from perfmodel.model.memory import RULE

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import probe_l2_share  # noqa: E402

MIB = 2 ** 20


def record(key):
    return json.loads((ROOT / "examples" / "measurements" / key / "probe" / "l2_share.json").read_text())


def half_points(key):
    """(mode, group, SM set) -> the buffer bytes at which half the re-reads miss."""
    by = defaultdict(list)
    for r in record(key)["runs"]:
        by[(r["mode"], r["group"], r["sms"])].append((r["buffer_bytes"], r["reread_miss"]))
    return {k: probe_l2_share.half_miss(xs) for k, xs in by.items()}


@pytest.mark.parametrize("key", ["h100", "h200"])
def test_record_is_whole_and_carries_provenance(key):
    rec = record(key)
    assert len(rec["runs"]) == len(probe_l2_share.configs(132)) == 110
    p = rec["provenance"]
    assert p["gpu_name"].startswith("NVIDIA H") and "probe_l2_share.py" in p["command"] and p["date"]
    for r in rec["runs"]:
        assert -0.01 <= r["reread_miss"] <= 1.02, r
        if r["buffer_bytes"] <= 16 * MIB:
            assert r["reread_miss"] < 0.01, r             # far inside L2: every re-read hits
        if r["buffer_bytes"] >= 64 * MIB:
            assert r["reread_miss"] > 0.98, r


@pytest.mark.parametrize("key", ["h100", "h200"])
def test_room_falls_with_the_readers_of_a_line_not_with_where_they_sit(key):
    """The more blocks re-read a line, the sooner its re-reads miss: half of them at 41.5 MiB with one reader on
    the H100, 27.1 MiB with every block (48.1 and 29.4 on the H200). Which SMs the readers sit on does not matter:
    64 blocks on the first 16 SM ids, or on either half of the ids, miss as all 528 do, to a per cent."""
    h = half_points(key)
    groups = [h[("group", g, "all")] for g in (1, 2, 8, 32, 132, 528)]
    assert all(a >= b for a, b in zip(groups, groups[1:]))
    assert groups[0] / groups[-1] > 1.45
    for (mode, _, sms), v in h.items():
        if mode == "smset":
            assert v == pytest.approx(h[("group", 528, "all")], rel=0.01), sms


def test_calibrations_and_the_rules_unit_hold_the_probe():
    """Each calibration's l2_shared_bytes is its probe's shared room; the rule's unit (shared_room) is the H100's,
    as a share of its L2, so the H100's DRAM predictions are what they were when the ramp scaled with L2."""
    for key in ("h100", "h200"):
        cal = calibration.resolve(gpu.resolve(key))
        assert cal.l2_shared_bytes == pytest.approx(probe_l2_share.shared_room(record(key)), rel=1e-9)
    h100 = gpu.resolve("h100")
    assert calibration.resolve(h100).l2_shared_bytes / h100.l2_bytes == pytest.approx(RULE.shared_room, rel=1e-6)
    # the H200's widely shared lines get 1.09x the H100's room, where its L2 is 1.2x the H100's
    ratio = calibration.resolve(gpu.resolve("h200")).l2_shared_bytes / calibration.resolve(h100).l2_shared_bytes
    assert 1.05 < ratio < 1.12


def test_an_unprobed_gpu_keeps_the_device_scaled_ramp():
    """Without a probe (l2_shared_bytes 0), the cross-wave ramp scales with the device's L2 as before."""
    from perfmodel.model import memory
    from perfmodel.model.counts import Counts

    c = Counts(dram_read_once=4e7, dram_read_reuse=3.2e9, dram_write_once=1e7, dram_write_reuse=0.0,
               reuse_live_bytes=3.2e7)
    l2 = 60 * MIB                                               # a distance inside the ramp
    a = memory.traffic(c, 1, 512, 2, 108, l2)
    b = memory.traffic(c, 1, 512, 2, 108, l2, l2_shared_bytes=RULE.shared_room * l2)
    c_ = memory.traffic(c, 1, 512, 2, 108, l2, l2_shared_bytes=0.8 * RULE.shared_room * l2)
    assert float(a.dram_bytes) == pytest.approx(float(b.dram_bytes), rel=1e-9)
    assert float(c_.dram_bytes) > float(a.dram_bytes)          # less room for shared lines: more re-reads miss
