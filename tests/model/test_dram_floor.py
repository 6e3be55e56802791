"""No launch moves its DRAM bytes faster than DRAM streams them (timing.dram_floor_s): reads at the read stream's
probed rate, writes at the rate that puts a copy at the copy's."""
from pathlib import Path

import numpy as np
import pytest

from perfmodel import api
from perfmodel.evaluation import dataset
from perfmodel.hw import calibration
from perfmodel.model import timing

DATA = Path(__file__).resolve().parents[2] / "examples" / "measurements" / "h200"


def test_a_copy_at_the_floor_runs_at_the_copy_rate_and_reads_alone_faster():
    cal = calibration.resolve(api.load_gpu("h200"))
    read, write = cal.dram_floor_rates
    assert read == cal.dram_read_bw_bps > cal.dram_bw_bps          # the probe's read stream beats its copy
    copy = timing.dram_floor_s(type("T", (), {"dram_read_bytes": 1e9, "dram_write_bytes": 1e9}), cal)
    assert copy == pytest.approx(2e9 / cal.dram_bw_bps)
    assert write < cal.dram_bw_bps < read


def test_a_gpu_without_a_read_probe_floors_at_its_copy_rate():
    cal = calibration.resolve(api.load_gpu("a100-80gb"))
    assert cal.dram_read_bw_bps == 0
    assert cal.dram_floor_rates == pytest.approx((cal.dram_bw_bps, cal.dram_bw_bps))


@pytest.mark.parametrize("kernel", ["sdpa-cudnn", "sdpa-flash", "fa2_tc"])
@pytest.mark.parametrize("B,Hkv,Nq,Nk,d", [(32, 32, 1, 131072, 128), (64, 8, 1, 8192, 64), (8, 8, 1, 32768, 128),
                                           (1, 32, 16, 131072, 64), (4, 8, 4096, 4096, 128)])
def test_no_prediction_beats_its_dram_floor(kernel, B, Hkv, Nq, Nk, d):
    r = api.predict(gpu="h200", kernel=kernel, B=B, H=32, Hkv=Hkv, Nq=Nq, Nk=Nk, d=d, dtype="bf16")
    p = r.prediction
    floor = timing.dram_floor_s(p.traffic, p.calibration)
    assert r.time_s >= floor * (1 - 1e-6)
    assert r.times_s["dram"] >= floor * (1 - 1e-6)
    assert r.time_s >= float(p.roofline_time_s) * (1 - 1e-6)        # the roofline's memory side is the floor


def test_cudnn_long_one_query_streams_are_dram_bound_at_the_read_rate():
    """B 32, 32 K/V heads, 8k-128k keys at d = 128: the one-query kernel's path prices later rounds' misses at their
    latency, which put it 16% below the measured time, faster than DRAM reads; floored, each row is DRAM-bound and
    within 3% of its measurement."""
    (ms,) = dataset.load([DATA / "sdpa-cudnn.infer.csv"])
    c = ms.cols
    rows = np.flatnonzero((c["Nq"] == 1) & (c["B"] == 32) & (c["Hkv"] == 32) & (c["d"] == 128) & (c["Nk"] >= 8192))
    assert len(rows) >= 5
    for i in rows:
        r = api.predict(gpu="h200", kernel="sdpa-cudnn", B=int(c["B"][i]), H=int(c["H"][i]), Hkv=int(c["Hkv"][i]),
                        Nq=1, Nk=int(c["Nk"][i]), d=128, dtype="bf16")
        assert r.bound == "dram"
        assert r.time_s / ms.measured_s[i] == pytest.approx(1, abs=0.03)
