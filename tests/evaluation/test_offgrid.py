"""The off-grid check (examples/offgrid_tc.py -> examples/benchmarks/offgrid_tc.json): fa2_tc, SDPA flash and cuDNN
timed on the H100 and the H200 at shapes no committed grid holds, every row held out. The rows are whole and checked,
truly off the grids, and the model's accuracy on them holds as a regression bound. The second set (*.offgrid2.csv)
stayed unscored until one model change, the tensor clock, was judged on it (research/notes/tensorcore.md); the third
(*.offgrid3.csv) until the next, the list-scheduling residual, was judged on it by a rule set before. Both are held
the same way since. The fourth (*.offgrid4.csv) is checked here; of it only cuDNN's rows are scored, once to judge
the wgmma group waits on cuDNN's chain (research/notes/tensorcore.md), and held since; its fa2_tc and SDPA flash rows were
scored once, to judge a fit for the ranking that was not shipped (research/notes/known-gaps-log.md), and are held as bounds since.
The fifth (*.offgrid5.csv, fp16 and bf16) was left unscored until the age-ordered tail was judged on it, once, by a
rule stated before (research/notes/tensorcore.md), and is held the same way since. The sixth (*.offgrid6.csv, fp16 and bf16,
timed 2026-11-23 after the fifth was spent) judged a forward warp's own MUFU and FP32 work overlapping on its path
(2026-12-02), once, by a rule stated before (research/notes/known-gaps-log.md), and is held the same way since. The
seventh (*.offgrid7.csv: the H200 alone, timed 2026-12-02 once the sixth was spent; research/tests/
test_offgrid_grids.py checks it is whole) is not read here: sealed for the next change to the model of fa2_tc, SDPA
flash or cuDNN, to be judged on it once by a rule stated first."""
import json
from pathlib import Path

import pytest

from perfmodel.evaluation import dataset, validate
from util import assert_same_record, script

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "examples" / "measurements"
KERNELS = ("fa2_tc", "sdpa-flash", "sdpa-cudnn")


@pytest.fixture(scope="module")
def record():
    return script("offgrid_tc", "examples").compute()


def test_recorded_benchmark_is_what_the_data_gives(record):
    assert_same_record(json.loads((ROOT / "examples" / "benchmarks" / "offgrid_tc.json").read_text()), record)


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_model_holds_off_the_grids(record, gpu):
    """Off the grids the model keeps its targets (README: fa2_tc 3.0% / 3.1%, worst 15%; SDPA flash 4.9% / 5.0%,
    worst 16% / 14%; cuDNN 5.1% / 5.6%, worst 13% / 15%; 8.0% / 7.5%, worst 21% / 19% before the wgmma group
    waits). Its tile ranking reaches 0.95 here (0.950 / 0.952; 0.950 / 0.949 before the age-ordered tail), and its
    pick is within 5% of the measured best in 97% / 98% of the 63 problems (95% before; worst 7.3% / 6.9%).
    Before the tensor clock and the list-scheduling residual: fa2_tc 3.9% / 4.3%, Spearman 0.935 / 0.930, picks within
    5% 94% / 90%, worst 11% / 16%. Since a bandwidth-bound in-step miss's DRAM time overlaps its phase (decode; the
    path costs refitted): fa2_tc 3.0% / 3.2%, Spearman 0.945 / 0.947; SDPA flash 5.7% / 5.5%."""
    tc = record[f"fa2_tc/{gpu}"]
    assert tc["n"] == 312 and tc["problems"] == 63
    assert tc["mape"] <= 3.5 and tc["max_ape"] <= 16.5 and tc["spearman"] >= 0.94
    assert tc["within_5_percent"] >= 0.94 and tc["worst_pick_slowdown"] <= 0.08
    assert record[f"sdpa-flash/{gpu}"]["mape"] <= 5.8 and record[f"sdpa-flash/{gpu}"]["max_ape"] <= 17
    assert record[f"sdpa-cudnn/{gpu}"]["mape"] <= 5.0 and record[f"sdpa-cudnn/{gpu}"]["max_ape"] <= 15


def held(record, name, gpu, tc, flash, cudnn):
    """A later off-grid set's scores (320 fa2_tc rows over 64 problems) within their bounds: fa2_tc's (MAPE, worst,
    least Spearman, least share of picks within 5%, worst pick), SDPA flash's and cuDNN's (MAPE, worst)."""
    t = record[f"{name}/fa2_tc/{gpu}"]
    assert t["n"] == 320 and t["problems"] == 64
    assert t["mape"] <= tc[0] and t["max_ape"] <= tc[1] and t["spearman"] >= tc[2]
    assert t["within_5_percent"] >= tc[3] and t["worst_pick_slowdown"] <= tc[4]
    for kernel, (mape, worst) in (("sdpa-flash", flash), ("sdpa-cudnn", cudnn)):
        r = record[f"{name}/{kernel}/{gpu}"]
        assert r["mape"] <= mape and r["max_ape"] <= worst, (kernel, r)


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_second_set_scored_once_for_the_tensor_clock(record, gpu):
    """The sealed second set, scored once to judge the tensor clock (research/notes/tensorcore.md; before -> after: fa2_tc 4.39%
    -> 4.34% (H200 4.46% -> 4.40%), Spearman 0.929 -> 0.931 (0.928 -> 0.931), picks within 5% 95.3% -> 96.9% (96.9%
    -> 98.4%); SDPA flash 6.16% -> 6.13% (5.95% -> 5.93%), worst 25.1% (25.2%); cuDNN 7.98% -> 14.6% (7.60% ->
    13.2%)). Since the list-scheduling residual: fa2_tc 3.2% / 3.1% (worst 26% / 25%), Spearman 0.942 / 0.939, picks
    within 5% 100% / 97% (worst 4.4% / 5.8%); SDPA flash 5.4% / 5.1% (worst 17% / 18%); cuDNN 12.4% / 11.2%, and
    since the wgmma group waits 6.3% / 6.0% (worst 16% / 15%)."""
    held(record, "offgrid2", gpu, tc=(3.5, 27, 0.93, 0.96, 0.12), flash=(6.1, 21.5), cudnn=(4.6, 18))


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_third_set_scored_once_for_the_list_scheduling_residual(record, gpu):
    """The sealed third set, scored once to judge the list-scheduling residual by the rule research/notes/tensorcore.md set first
    (before -> after: fa2_tc 4.28% -> 3.27% (H200 4.46% -> 3.26%), Spearman 0.931 -> 0.961 (0.941 -> 0.963), picks
    within 5% 92.2% -> 98.4% (95.3% -> 100%), worst pick 15.6% -> 6.4% (11.8% -> 4.6%); SDPA flash 5.13% -> 3.90%
    (5.10% -> 3.81%); cuDNN 14.7% -> 12.4% (14.1% -> 11.8%), and since the wgmma group waits 6.0% / 5.8% (worst 14% /
    13%)). Held as regression bounds since; since a bandwidth-bound in-step miss's DRAM time overlaps its phase:
    Spearman 0.948 / 0.947, worst pick 4.7% / 11.8%, SDPA flash 4.4% / 4.3%."""
    held(record, "offgrid3", gpu, tc=(3.5, 19, 0.945, 0.96, 0.12), flash=(4.6, 15.5), cudnn=(4.8, 16))


@pytest.mark.parametrize("gpu, before, bound", [("h100", 14.54, (7.2, 16)), ("h200", 13.45, (6.3, 15))])
def test_the_fourth_sets_cudnn_rows_scored_once_for_the_wgmma_group_waits(gpu, before, bound):
    """The sealed fourth set's cuDNN rows, scored once to judge the wgmma group waits on cuDNN's chain by the rule
    research/notes/tensorcore.md set first (kept if their MAPE fell on both GPUs and no fa2_tc or SDPA flash prediction moved):
    14.5% -> 6.6% on the H100 (worst 24% -> 15%), 13.5% -> 5.7% on the H200 (23% -> 14%). Held as regression bounds
    since; the set's fa2_tc and SDPA flash rows stay unscored."""
    (ms,) = dataset.load([DATA / gpu / "sdpa-cudnn.offgrid4.csv"])
    (ev,) = validate.evaluate([ms], split="all")
    assert ev.n == 64
    assert ev.ape.mean() < before and ev.ape.mean() <= bound[0] and ev.ape.max() <= bound[1]


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_fourth_set_held_since_its_fit_was_judged(record, gpu):
    """The fourth set's fa2_tc and SDPA flash rows, scored once to judge a fit for the ranking (not shipped; docs/
    known-gaps.md), held as bounds since: fa2_tc 3.1% / 2.7% (worst 15% / 14%), Spearman 0.970 / 0.967, every pick
    within 5% (worst 2.5% / 2.9%); SDPA flash 4.1% / 3.9% (worst 17% / 16%); cuDNN 6.6% / 5.7% (15% / 14%)."""
    held(record, "offgrid4", gpu, tc=(3.4, 16, 0.955, 0.98, 0.045), flash=(4.8, 18), cudnn=(4.0, 13.5))


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_fifth_set_scored_once_for_the_age_ordered_tail(record, gpu):
    """The sealed fifth set, scored once to judge the age-ordered tail by the rule research/notes/tensorcore.md stated first
    (without -> with the tail: fa2_tc 3.19% -> 3.14% (H200 3.09% -> 3.04%), Spearman 0.964 (0.959) unchanged, picks
    within 5% 100% (98.4%) unchanged; no SDPA flash or cuDNN prediction moved: 4.18% / 4.59% and 5.94% / 6.05%).
    Held as regression bounds since."""
    held(record, "offgrid5", gpu, tc=(3.4, 19, 0.95, 0.98, 0.07), flash=(5.2, 18), cudnn=(4.5, 20))


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_sixth_set_scored_once_for_the_path_join(record, gpu):
    """The sealed sixth set, scored once to judge a forward warp's own MUFU and FP32 work overlapping on its path by
    the rule research/notes/known-gaps-log.md stated first (2026-12-02; before -> after: fa2_tc 2.94% -> 3.07% (H200
    2.83% -> 2.97%), Spearman 0.9453 -> 0.9469 (0.9578 -> 0.9563), the two GPUs' mean unchanged; SDPA flash 4.37% ->
    3.38% (4.19% -> 3.39%); no cuDNN prediction moved: 3.96% / 4.32%). Held as regression bounds since; the seventh
    set (H200 only) is sealed for the next change."""
    held(record, "offgrid6", gpu, tc=(3.3, 19, 0.94, 0.95, 0.10), flash=(3.8, 14), cudnn=(4.6, 15))


def test_fa2_tc_beside_pytorch_in_the_same_run(record):
    """Timed in the same run: fa2_tc's fastest tile beats SDPA flash's FlashAttention-2 by 12% at the median (up to
    42%, and ties it at worst), and trails cuDNN's Hopper kernel by 1.4x at the median."""
    for gpu in ("h100", "h200"):
        flash, cudnn = (record[f"fa2_tc_beside_sdpa/{gpu}"][k] for k in ("sdpa-flash", "sdpa-cudnn"))
        assert flash["ratio_median"] < 0.9 and flash["ratio_max"] < 1.01
        assert 1.3 < cudnn["ratio_median"] < 1.5 and cudnn["ratio_min"] > 1.0
