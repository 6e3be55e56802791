"""The model on the H200's inference and training datasets, by workload (examples/workloads.py): the recorded
figures are what the data gives now, and they hold as regression bounds. The issue's targets (decode MAPE <= 10%,
worst <= 25%; grouped prefill and cross-attention <= 8% fa2_tc, 10% SDPA flash, 12% cuDNN; backward <= 8% fa2_tc,
10% SDPA flash, 12% cuDNN) are asserted where met; docs/known-gaps.md says where they are not."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "workloads.py"


@pytest.fixture(scope="module")
def record():
    spec = importlib.util.spec_from_file_location("workloads", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, mod.compute()


def test_the_record_and_the_packaged_table_are_what_the_data_gives(record):
    mod, now = record
    recorded = json.loads((ROOT / "examples" / "benchmarks" / "workloads.json").read_text())
    assert recorded.keys() == now.keys()
    assert recorded["head_dims"] == json.loads(json.dumps(now["head_dims"]))
    for k, v in now.items():
        if isinstance(v, dict) and "model" in v:
            for part in ("model", "naive"):
                for f, x in v[part].items():
                    assert recorded[k][part][f] == (pytest.approx(x, rel=1e-6) if isinstance(x, float) else x), (k, f)
    from perfmodel.evaluation import advice

    assert json.loads(advice.WORKLOADS.read_text()) == json.loads(json.dumps(mod.packaged(now)))


# (kernel, workload): MAPE, worst; the target where met, else the figure reached with a little slack
BOUNDS = {
    ("fa2_tc", "decode"): (5, 25), ("sdpa-flash", "decode"): (10, 25), ("sdpa-cudnn", "decode"): (7, 25),
    ("fa2_tc", "grouped prefill"): (8, 10), ("sdpa-flash", "grouped prefill"): (10, 12),
    ("sdpa-cudnn", "grouped prefill"): (5, 13.5),
    ("fa2_tc", "cross-attention"): (8.5, 30), ("sdpa-flash", "cross-attention"): (11.5, 45),
    ("sdpa-cudnn", "cross-attention"): (6.5, 15),
    ("fa2_tc", "bwd"): (6.5, 20), ("sdpa-flash", "bwd"): (8, 25), ("sdpa-cudnn", "bwd"): (6, 25),
    ("fa2_tc", "fwd_bwd"): (8, 25), ("sdpa-flash", "fwd_bwd"): (10, 12), ("sdpa-cudnn", "fwd_bwd"): (3.5, 11),
}


@pytest.mark.parametrize("key", sorted(BOUNDS))
def test_each_workload_holds_its_bound(record, key):
    _, now = record
    m = now["/".join(key)]["model"]
    mape, worst = BOUNDS[key]
    assert m["mape"] <= mape and m["max_ape"] <= worst, m


# The SDPA presets by head dim (decode; prefill: plain, grouped and cross): MAPE, worst. The bounds, which
# d 64 and 128 meet (decode 10% and 25%; prefill 10% flash, 12% cuDNN). SDPA flash's d 32 prefill met them once a
# warp's own MUFU and FP32 work overlapped on its path (12.7% -> 7.1%; research/notes/known-gaps-log.md, 2026-12-02)
HEAD_DIM_BOUNDS = {("sdpa-flash", "decode"): (10, 25), ("sdpa-cudnn", "decode"): (10, 25),
                   ("sdpa-flash", "prefill"): (10, 45), ("sdpa-cudnn", "prefill"): (12, 20)}


# The head-dim check set's (d 48, 112, 160, 192, 200, measured after the mechanisms were read off the others): its
# figures as regression bounds, with a little slack (SDPA flash's decode: 9.8% at d 48, two rows, since the
# 2026-12-02 join; 6.7% before)
CHECK_DIMS = {"48", "112", "160", "192", "200"}
CHECK_BOUNDS = {("sdpa-flash", "decode"): (10.5, 12), ("sdpa-flash", "prefill"): (21, 25),
                ("sdpa-cudnn", "decode"): (20, 21), ("sdpa-cudnn", "prefill"): (11, 17)}


@pytest.mark.parametrize("key", sorted(HEAD_DIM_BOUNDS))
def test_each_head_dim_holds_the_bound_of_64_and_128(record, key):
    _, now = record
    kernel, workload = key
    dims = now["head_dims"][kernel]
    assert {"32", "64", "80", "96", "128", "256"} | CHECK_DIMS <= dims.keys()
    for d, ws in dims.items():
        mape, worst = CHECK_BOUNDS[key] if d in CHECK_DIMS else HEAD_DIM_BOUNDS[key]
        assert ws[workload]["mape"] <= mape and ws[workload]["max_ape"] <= worst, (d, ws[workload])


def test_the_backward_ranks_fa2_tc_tiles(record):
    """Issue 60's ranking target: over fa2_tc's held-out backward rows, the model orders each problem's tiles as
    measured (Spearman >= 0.9; its path costs fitted on the training split with a ranking share)."""
    _, now = record
    assert now["fa2_tc/bwd"]["model"]["spearman"] >= 0.9


def test_the_forward_beats_the_naive_roofline_everywhere(record):
    """A KV cache's bytes (and the problem's FLOPs) at the datasheet's peaks miss decode by 63-70% on average: the
    model's mechanisms (few blocks, split-KV, the combine, L2 re-use of a group's K/V) are what close it."""
    _, now = record
    for k, v in now.items():
        if isinstance(v, dict) and "model" in v and k.split("/")[1] not in ("bwd", "fwd_bwd"):
            assert v["model"]["mape"] < v["naive"]["mape"] / 2, k
            assert v["naive"]["mape"] > 45, k
