"""The committed tensor-core datasets (fa2_tc, SDPA flash and cuDNN on the H100 and H200): schema, correctness,
provenance and coverage; accuracy regression bounds."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from perfmodel.evaluation import dataset, validate
from perfmodel.kernels import fa2_tc
from perfmodel.measure.runner import N_COLUMNS as COLUMNS, PRE_SPIN_COLUMNS
from util import GPU_NAME, PROVENANCE, TOL

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "examples" / "measurements"
MIN_ROWS = {("h100", "fa2_tc"): 600, ("h200", "fa2_tc"): 300, ("h100", "sdpa-flash"): 200,
            ("h100", "sdpa-cudnn"): 200, ("h200", "sdpa-flash"): 100, ("h200", "sdpa-cudnn"): 100}


def rows(gpu, kernel):
    return list(csv.DictReader(open(DATA / gpu / f"{kernel}.csv")))


@pytest.mark.parametrize("gpu,kernel", sorted(MIN_ROWS))
def test_schema_correctness_provenance_and_coverage(gpu, kernel):
    rs = rows(gpu, kernel)
    assert len(rs) >= MIN_ROWS[(gpu, kernel)]
    assert list(rs[0].keys()) in (COLUMNS, PRE_SPIN_COLUMNS)
    for r in rs:
        assert r["kernel"] == kernel and r["gpu_name"] == GPU_NAME[gpu]
        assert float(r["rel_err"]) <= TOL[r["dtype"]], r          # checked against float64 before timing
        assert all(r[k] for k in PROVENANCE), r
        assert float(r["p20_ms"]) <= float(r["median_ms"]) <= float(r["p80_ms"])
    assert {r["dtype"] for r in rs} == {"fp16", "bf16"} and {r["causal"] for r in rs} == {"0", "1"}
    assert {"64", "128"} <= {r["d"] for r in rs}
    n = {int(r["N"]) for r in rs}
    bh = {int(r["B"]) * int(r["H"]) for r in rs}
    if kernel == "fa2_tc":
        assert min(n) == 128 and max(n) == 16384 and any(x & (x - 1) for x in n)     # not only powers of two
        assert min(bh) == 1 and max(bh) == 512
        measured = {(int(r["d"]), int(r["Br"]), int(r["Bc"]), int(r["threads"]) // 32) for r in rs}
        assert measured == set(fa2_tc.INSTANCES)                                       # every instance
        assert all(int(r["regs_per_thread"]) > 0 for r in rs)
    else:
        assert min(n) <= 512 and max(n) == 16384 and min(bh) <= 8 and max(bh) >= 512


ACCURACY = json.loads((ROOT / "examples" / "accuracy.json").read_text())


@pytest.mark.parametrize("key", sorted(ACCURACY.get("tensor_core", {})))
def test_tensor_core_accuracy_does_not_regress(key):
    rec = ACCURACY["tensor_core"][key]
    kernel, gpu = key.split("/")
    ms = [m for m in dataset.load([DATA / gpu.split("-")[0] / f"{kernel}.csv"])]
    s = validate.evaluate(ms, split=rec["split"])[0].summary()
    assert s["n"] == rec["n"]
    assert s["mape"] <= rec["mape"] * (1 + 1e-4) and s["max_ape"] <= rec["max_ape"] * (1 + 1e-4)
    if rec.get("spearman") is not None:
        assert s["spearman"] >= rec["spearman"] - 1e-4


@pytest.mark.parametrize("kernel", ["fa2_tc", "sdpa-flash", "sdpa-cudnn"])
def test_plain_roofline_column_bounds_every_measured_row_from_below(kernel):
    """validate reports a plain roofline beside the model: FLOPs at the datasheet's dense tensor peak, DRAM bytes
    at the bandwidth. No measured launch beats it, and it is far from the measurements (what the model is for)."""
    ev = validate.evaluate(dataset.load([DATA / "h100" / f"{kernel}.csv"]), split="all")[0]
    assert np.all(ev.roofline_s > 0) and np.all(ev.roofline_s < ev.measured_s)
    s = ev.summary()
    assert s["roofline_mape"] > 2 * s["mape"]


# the accuracy targets of the tensor-core issue (README "Accuracy"): MAPE and worst row, held out, per kernel
TARGETS = {"fa2_tc": (8.0, 25.0), "sdpa-flash": (10.0, 25.0), "sdpa-cudnn": (15.0, None)}


@pytest.mark.parametrize("gpu_dir", ["h100", "h200"])
@pytest.mark.parametrize("kernel", sorted(TARGETS))
def test_tensor_core_targets_hold(kernel, gpu_dir):
    """validate on the committed data meets the targets: fa2_tc on its held-out rows (H100) or every row (H200,
    nothing fitted there), the SDPA kernels on every row (nothing fitted to them)."""
    ms = dataset.load([DATA / gpu_dir / f"{kernel}.csv"])
    split = "test" if (kernel, gpu_dir) == ("fa2_tc", "h100") else "all"
    s = validate.evaluate(ms, split=split)[0].summary()
    mape, worst = TARGETS[kernel]
    assert s["mape"] <= mape and (worst is None or s["max_ape"] <= worst), s
    if kernel == "fa2_tc":
        # Spearman over tiles at fixed problem: 0.950 (H100, held out) and 0.960 (H200) since the age-ordered tail
        # (0.944 and 0.956 before it)
        assert s["spearman"] >= 0.95, s


def test_speed_benchmark_beside_pytorch_is_checked_and_clocked():
    """examples/benchmarks/fa2_tc_vs_sdpa.json (research/scripts/fa2_tc_bench.py bench): every shape's fa2_tc tile, SDPA flash
    and cuDNN passed their float64 check before timing, were timed as perfmodel measure times (L2 flushed, the clock
    read around each run) and interleaved; the README's ratio table is read off it (d = 64: fa2_tc 1.11-1.20x
    flash's throughput; d = 128, N >= 4096: 0.94-1.05x)."""
    bench = json.loads((ROOT / "examples" / "benchmarks" / "fa2_tc_vs_sdpa.json").read_text())
    assert bench["method"]["l2_flush"] is True and bench["provenance"]["gpu_name"] == GPU_NAME["h100"]
    rows = bench["rows"]
    assert len(rows) == 40
    for r in rows:
        for name in ("fa2_tc", "sdpa_flash", "sdpa_cudnn"):
            assert r[f"{name}_rel_err"] <= TOL[r["dtype"]] and r[f"{name}_ms"] > 0
            assert all(1000 < c < 2100 for c in r[f"{name}_clock_mhz"])
    ratio = lambda d, big: [r["ratio_to_flash"] for r in rows if r["d"] == d and (r["N"] >= 4096 or not big)]
    assert 1.1 < min(ratio(64, False)) and max(ratio(64, False)) < 1.21
    assert 0.93 < min(ratio(128, True)) and max(ratio(128, True)) < 1.06
