"""The streaming probe (research/scripts/probe_l2_stream.py -> research/data/{h100,h200}/probe/l2_stream.json, step
probe-l2-stream; research/notes/known-gaps-log.md): the rate at which cp.async.cg fills shared memory from L2 and DRAM with
nothing else running, against the calibrations' bandwidths."""
import json
import sys
from pathlib import Path

import pytest

from perfmodel.hw import calibration, gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "research" / "scripts"))

import probe_l2_stream  # noqa: E402


def runs(key):
    rec = json.loads((ROOT / "research" / "data" / key / "probe" / "l2_stream.json").read_text())
    assert rec["provenance"]["gpu_name"].startswith("NVIDIA H") and "probe_l2_stream.py" in rec["provenance"]["command"]
    return rec["runs"]


@pytest.mark.parametrize("key", ["h100", "h200"])
def test_record_is_whole(key):
    rs = runs(key)
    spec = gpu.resolve(key)
    want = probe_l2_stream.configs(spec.sm_count, spec.l2_bytes, 233472)
    assert [{k: r[k] for k in want[0]} for r in rs] == want
    assert all(r["seconds"] > 1e-4 for r in rs)


@pytest.mark.parametrize("key", ["h100", "h200"])
def test_cp_async_reads_l2_at_half_the_calibrated_bandwidth_unless_requests_merge(key):
    """Blocks each streaming their own lines from L2 reach 7.2-8.8 TB/s (28-34 bytes a clock an SM) once two tiles
    are in flight or two blocks share an SM, whatever the stages: under half the calibration's l2_bw_bps, whose
    read kernel hits L1 (16.8 and 17.6 TB/s). Two blocks walking one slice in step on a TPC's two SMs get 1.4-1.9x
    that in requested bytes at two or more blocks an SM and three or more stages: requests L2 sees once, served to
    both. DRAM streams at the calibration's copy bandwidth (within 7%)."""
    cal = calibration.resolve(gpu.resolve(key))
    rate = {(r["source"], r["blocks_per_sm"], r["stages"], r["group"]): r["requested_tbps"] * 1e12 for r in runs(key)}
    own = [v for (src, b, s, g), v in rate.items() if src == "l2" and g == 1 and (b > 1 or s > 2)]
    assert all(7.0e12 <= v <= 9.0e12 for v in own)
    assert max(own) < 0.55 * cal.l2_bw_bps
    for (src, b, s, g), v in rate.items():
        if src == "l2" and g == 2 and b > 1 and s > 2:
            assert 1.4 <= v / rate[(src, b, s, 1)] <= 2.0
    dram = [v for (src, b, _, _), v in rate.items() if src == "dram" and b == 4]
    assert all(v == pytest.approx(cal.dram_bw_bps, rel=0.07) for v in dram)
