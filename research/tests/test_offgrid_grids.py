"""The off-grid sets are whole: every configuration of each set's grid measured or skipped over the time budget
(research/data/{h100,h200}/*.offgridN.skipped.csv), each row checked and timed, no shape shared with another set."""

import csv
from pathlib import Path

import pytest

from perfmodel.measure.runner import N_COLUMNS as COLUMNS   # the one-length schema they were written in
from util import GPU_NAME, PROVENANCE, TOL

ROOT = Path(__file__).resolve().parents[2]
DATA, SKIPPED = ROOT / "examples" / "measurements", ROOT / "research" / "data"     # the rows; the skip lists
KERNELS = ("fa2_tc", "sdpa-flash", "sdpa-cudnn")


def rows(gpu, name, folder=DATA):
    return list(csv.DictReader(open(folder / gpu / name)))



SETS = {"offgrid": {"fp16"}, "offgrid2": {"bf16"}, "offgrid3": {"fp16"}, "offgrid4": {"bf16"},
        "offgrid5": {"fp16", "bf16"}, "offgrid6": {"fp16", "bf16"}}


@pytest.mark.parametrize("gpu", sorted(GPU_NAME))
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", sorted(SETS))
def test_rows_are_checked_timed_and_off_the_committed_grids(gpu, kernel, name):
    rs = rows(gpu, f"{kernel}.{name}.csv")
    skipped = rows(gpu, f"{kernel}.{name}.skipped.csv", SKIPPED)
    assert len(rs) + len(skipped) == (320 if kernel == "fa2_tc" else 64)        # the whole grid, none failed
    assert all(s["reason"] == "budget" for s in skipped)
    assert list(rs[0].keys()) == COLUMNS
    for r in rs:
        assert r["kernel"] == kernel and r["gpu_name"] == GPU_NAME[gpu] and r["dtype"] in SETS[name]
        assert float(r["rel_err"]) <= TOL[r["dtype"]], r      # checked against float64 before timing
        assert all(r[k] for k in PROVENANCE), r
    shape = lambda r: (int(r["B"]), int(r["H"]), int(r["N"]))
    others = [rows(gpu, f"{kernel}.csv")] + [rows(gpu, f"{kernel}.{o}.csv") for o in SETS if o != name]
    for other in others:
        assert not {shape(r) for r in rs} & {shape(r) for r in other}
        assert not {int(r["N"]) for r in rs} & {int(r["N"]) for r in other}
