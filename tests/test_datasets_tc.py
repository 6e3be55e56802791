"""The committed tensor-core datasets (fa2_tc, SDPA flash and cuDNN on the H100 and H200): schema, correctness,
provenance and coverage; fa2_tc's counts against Nsight Compute; accuracy regression bounds."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from perfmodel.evaluation import dataset, validate
from perfmodel.hw import gpu as gpu_mod
from perfmodel.kernels import fa2_tc, get
from perfmodel.measure.runner import COLUMNS, PRE_SPIN_COLUMNS
from util import evaluate

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "measurements"
PROVENANCE = ["gpu_name", "sm_clock_mhz_before", "sm_clock_mhz_after", "driver", "torch", "nvcc", "date", "command"]
TOL = {"fp16": 2e-3, "bf16": 1.5e-2}
MIN_ROWS = {("h100", "fa2_tc"): 600, ("h200", "fa2_tc"): 300, ("h100", "sdpa-flash"): 200,
            ("h100", "sdpa-cudnn"): 200, ("h200", "sdpa-flash"): 100, ("h200", "sdpa-cudnn"): 100}
GPU_NAME = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}


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


# the same configurations profiled on each GPU (gpu_run.sh ncu-tc; the H200's with nothing fitted to its counters)
NCU = {g: list(csv.DictReader(open(DATA / g / "ncu" / "ncu_fa2_tc.csv"))) for g in ("h100", "h200")}
NCU_ROWS = [(g, r) for g in sorted(NCU) for r in NCU[g]]


def _ncu_pred(gpu, r):
    return evaluate("fa2_tc", int(r["B"]), int(r["H"]), int(r["N"]), int(r["d"]), spec=gpu_mod.resolve(gpu),
                    dtype=r["dtype"], causal=r["causal"] == "1", Br=int(r["Br"]), Bc=int(r["Bc"]),
                    warps=int(r["warps"]))


@pytest.mark.parametrize("gpu", sorted(NCU))
def test_ncu_set_covers_l2_overflow_and_few_blocks(gpu):
    rs = NCU[gpu]
    assert len(rs) >= 12
    spans = [int(r["B"]) * int(r["H"]) * int(r["N"]) * int(r["d"]) * 2 * 2 for r in rs]     # K + V bytes
    l2 = gpu_mod.resolve(gpu).l2_bytes
    assert max(spans) > 8 * l2 and min(spans) < l2
    assert min(int(r["B"]) * int(r["H"]) * -(-int(r["N"]) // int(r["Br"])) for r in rs) < 132


@pytest.mark.parametrize("gpu,r", NCU_ROWS, ids=lambda x: x if isinstance(x, str) else "-".join(
    x[k] for k in ("B", "H", "N", "d", "causal", "Br", "Bc", "warps")))
def test_fa2_tc_counts_match_nsight_compute(gpu, r):
    """Tensor-pipe instructions, ldmatrix, cp.async, MUFU, shared-load wavefronts and DRAM reads within 10%."""
    p = _ncu_pred(gpu, r)
    c = p.counts
    f = lambda k: float(r[k])
    pairs = {
        "hmma": (c.warp_mma, f("smsp__inst_executed_pipe_tensor_op_hmma.sum")),
        "ldmatrix": (c.warp_ldsm, f("smsp__sass_inst_executed_op_ldsm.sum")),
        "cp.async": (c.warp_ldgsts, f("smsp__sass_inst_executed_op_ldgsts.sum")),
        "mufu": (c.warp_sfu, f("smsp__inst_executed_pipe_xu.sum")),
        # ldmatrix wavefronts (cp.async's shared writes are counted by another unit)
        "shared load wavefronts": (4 * c.warp_ldsm, f("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")),
        "dram read": (p.traffic.dram_read_bytes, f("dram__bytes_read.sum")),
    }
    for what, (model, counter) in pairs.items():
        assert abs(float(np.asarray(model)) - counter) <= 0.10 * counter, (what, float(np.asarray(model)), counter)
    # the swizzle leaves ldmatrix conflict-free: conflicts below 1% of the wavefronts
    assert f("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum") < 0.01 * pairs["shared load wavefronts"][1]


def test_fa2_tc_requested_bytes_match_and_l2_sees_fewer_where_blocks_run_in_step():
    """The bytes fa2_tc's blocks ask of L2 (the model's l2_read_bytes: Q and every K/V tile by cp.async) are what
    the SMs send (global load sectors at L1) within 3% in every profiled launch. L2 itself counts all of them in
    causal launches (blocks start at their own diagonal, so no two walk the same tiles at once), but only 0.49-0.76
    of them in short non-causal ones (at most 32 K/V tiles a block), whose blocks of a head walk the same tiles in
    step; in long non-causal ones (64 or more tiles a block), where those blocks drift apart, 0.96-0.97. The
    shared-read probe shows the same merging (test_l2_share_probe.py): requests that reach a sector at about the
    same time from blocks on the two SMs of a TPC reach L2 as one."""
    for gpu, r in NCU_ROWS:
        c = _ncu_pred(gpu, r).counts
        sent = float(r["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]) * 32
        seen = float(r["lts__t_sectors_srcunit_tex_op_read.sum"]) * 32
        assert abs(float(np.asarray(c.l2_read_bytes)) / sent - 1) <= 0.03, (gpu, r["N"], r["d"])
        tiles = -(-int(r["N"]) // int(r["Bc"]))
        if r["causal"] == "1":
            assert abs(seen / sent - 1) <= 0.01, (gpu, r["N"], r["d"])
        elif tiles <= 32:
            assert 0.45 <= seen / sent <= 0.8, (gpu, r["N"], r["d"], seen / sent)
        else:
            assert tiles >= 64 and 0.95 <= seen / sent <= 0.99, (gpu, r["N"], r["d"], seen / sent)


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
