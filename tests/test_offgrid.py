"""The off-grid check (examples/offgrid_tc.py -> examples/benchmarks/offgrid_tc.json): fa2_tc, SDPA flash and cuDNN
timed on the H100 and the H200 at shapes no committed grid holds, every row held out. The rows are whole and
checked, truly off the grids, and the model's accuracy on them holds as a regression bound. The second set
(*.offgrid2.csv) stayed unscored until one model change, the tensor clock, was judged on it (README); it is held
the same way since. The third (*.offgrid3.csv) is only checked here, not scored: it waits for the next model change
to be judged on it once, by the rule the README states."""
import csv
import json
from pathlib import Path

import pytest

from perfmodel.measure.runner import COLUMNS
from test_datasets_tc import GPU_NAME, PROVENANCE, TOL
from util import assert_same_record, script

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "examples" / "measurements"
KERNELS = ("fa2_tc", "sdpa-flash", "sdpa-cudnn")


def rows(gpu, name):
    return list(csv.DictReader(open(DATA / gpu / name)))


SETS = {"offgrid": "fp16", "offgrid2": "bf16", "offgrid3": "fp16"}


@pytest.mark.parametrize("gpu", sorted(GPU_NAME))
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", sorted(SETS))
def test_rows_are_checked_timed_and_off_the_committed_grids(gpu, kernel, name):
    rs = rows(gpu, f"{kernel}.{name}.csv")
    skipped = rows(gpu, f"{kernel}.{name}.skipped.csv")
    assert len(rs) + len(skipped) == (320 if kernel == "fa2_tc" else 64)        # the whole grid, none failed
    assert all(s["reason"] == "budget" for s in skipped)
    assert list(rs[0].keys()) == COLUMNS
    for r in rs:
        assert r["kernel"] == kernel and r["gpu_name"] == GPU_NAME[gpu] and r["dtype"] == SETS[name]
        assert float(r["rel_err"]) <= TOL[r["dtype"]], r      # checked against float64 before timing
        assert all(r[k] for k in PROVENANCE), r
    shape = lambda r: (int(r["B"]), int(r["H"]), int(r["N"]))
    others = [rows(gpu, f"{kernel}.csv")] + [rows(gpu, f"{kernel}.{o}.csv") for o in SETS if o != name]
    for other in others:
        assert not {shape(r) for r in rs} & {shape(r) for r in other}
        assert not {int(r["N"]) for r in rs} & {int(r["N"]) for r in other}


@pytest.fixture(scope="module")
def record():
    return script("offgrid_tc", "examples").compute()


def test_recorded_benchmark_is_what_the_data_gives(record):
    assert_same_record(json.loads((ROOT / "examples" / "benchmarks" / "offgrid_tc.json").read_text()), record)


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_model_holds_off_the_grids(record, gpu):
    """Off the grids the model keeps its targets (README: fa2_tc 3.9% / 4.3%, SDPA flash 5.6% / 5.8%, worst rows
    20-21%; cuDNN 9.8% / 9.1%, worst 32% / 31%, since the tensor clock: 6.7% / 7.0% before). Its tile ranking does
    not reach 0.95 here either (0.940 / 0.933), and its pick is within 5% of the measured best in 94% / 90% of the
    63 problems: the committed grid's 99% overstates the advice."""
    tc = record[f"fa2_tc/{gpu}"]
    assert tc["n"] == 312 and tc["problems"] == 63
    assert tc["mape"] <= 4.5 and tc["max_ape"] <= 22 and tc["spearman"] >= 0.93
    assert tc["within_5_percent"] >= 0.9 and tc["worst_pick_slowdown"] <= 0.16
    assert record[f"sdpa-flash/{gpu}"]["mape"] <= 6 and record[f"sdpa-flash/{gpu}"]["max_ape"] <= 22
    assert record[f"sdpa-cudnn/{gpu}"]["mape"] <= 10.5 and record[f"sdpa-cudnn/{gpu}"]["max_ape"] <= 33


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_second_set_scored_once_for_the_tensor_clock(record, gpu):
    """The sealed second set, scored once to judge the tensor clock (README; before -> after: fa2_tc 4.39% -> 4.34%
    (H200 4.46% -> 4.40%), Spearman 0.929 -> 0.931 (0.928 -> 0.931), picks within 5% 95.3% -> 96.9% (96.9% ->
    98.4%); SDPA flash 6.16% -> 6.13% (5.95% -> 5.93%), worst 25.1% (25.2%); cuDNN 7.98% -> 14.6% (7.60% -> 13.2%)).
    Held as regression bounds since."""
    tc = record[f"offgrid2/fa2_tc/{gpu}"]
    assert tc["n"] == 320 and tc["problems"] == 64
    assert tc["mape"] <= 4.5 and tc["max_ape"] <= 36 and tc["spearman"] >= 0.925
    assert tc["within_5_percent"] >= 0.96 and tc["worst_pick_slowdown"] <= 0.12
    flash, cudnn = record[f"offgrid2/sdpa-flash/{gpu}"], record[f"offgrid2/sdpa-cudnn/{gpu}"]
    assert flash["mape"] <= 6.5 and flash["max_ape"] <= 26
    assert cudnn["mape"] <= 15 and cudnn["max_ape"] <= 35


def test_fa2_tc_beside_pytorch_in_the_same_run(record):
    """Timed in the same run: fa2_tc's fastest tile beats SDPA flash's FlashAttention-2 by 12% at the median (up to
    42%, and ties it at worst), and trails cuDNN's Hopper kernel by 1.4x at the median."""
    for gpu in ("h100", "h200"):
        flash, cudnn = (record[f"fa2_tc_beside_sdpa/{gpu}"][k] for k in ("sdpa-flash", "sdpa-cudnn"))
        assert flash["ratio_median"] < 0.9 and flash["ratio_max"] < 1.01
        assert 1.3 < cudnn["ratio_median"] < 1.5 and cudnn["ratio_min"] > 1.0
