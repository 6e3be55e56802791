"""The age-ordered tail (timing; Counts.age_split_warps; the FIT_PARAM age_tail, fitted after fa2_tc's path costs
with those held): which launches it moves, and what research/scripts/fit_age_tail.py records of it (research/notes/tensorcore.md)."""
import pytest

from perfmodel import api
from perfmodel.hw import calibration
from perfmodel.model import engine
from rutil import script

FIT = script("fit_age_tail")


def _time(cal, kernel, B, H, N, d, causal=False, **tiles):
    spec = api.load_gpu("h100")
    k, shape, t = api.configure(kernel, B, H, N, d, "fp16", causal, gpu=spec, **tiles)
    return float(engine.evaluate(spec, k, shape, t, cal).time_s)


def test_the_shipped_tail_is_fitted_after_the_path_costs_and_carried():
    h100 = calibration.resolve(api.load_gpu("h100"))
    fit = h100.path_fits["fa2_tc"]
    assert fit["training"]["fitted_after"]["features"] == ["age_tail"]
    assert "--after-only" in fit["training"]["fitted_after"]["command"]
    assert "age_tail" not in fit["training"]["features_fitted"]
    assert 0.05 < h100.path_costs("fa2_tc")["age_tail"] < 0.12
    h200 = calibration.resolve(api.load_gpu("h200"))
    assert h200.path_fits["fa2_tc"]["costs"] == fit["costs"]


def test_the_tail_moves_only_the_last_round_of_blocks_that_split_in_age_order():
    cal = FIT.ranking_oracles.without_tail(calibration.resolve(api.load_gpu("h100")))
    tail = FIT.ranking_oracles.with_tail(cal, 0.1)
    ratio = lambda *a, **k: _time(tail, *a, **k) / _time(cal, *a, **k)
    # 8 heads of N = 3000 at d = 64, 128x128/4w: one round of two blocks on 60 SMs: the whole round, 10% later
    one_round = ratio("fa2_tc", 1, 8, 3000, 64, Br=128, Bc=128, warps=4)
    assert one_round == pytest.approx(1.1, abs=0.01)
    # many rounds: only the last round's share
    many = ratio("fa2_tc", 33, 8, 4096, 64, Br=128, Bc=128, warps=4)     # 64 blocks an SM, 2 a round
    assert 1.0 < many < 1.02
    # a last round of one block on the busiest SM (272 blocks: three on it, two a round): no SM-mate to split with
    assert ratio("fa2_tc", 1, 34, 1024, 64, Br=128, Bc=128, warps=4) == pytest.approx(1, abs=1e-6)
    # tiles that share their SM evenly, causal grids (their own bounds), d = 128, and SDPA flash (untraced)
    for args, tiles in (((1, 8, 3000, 64), dict(Br=64, Bc=64, warps=4)),
                        ((1, 8, 3000, 64), dict(Br=128, Bc=64, warps=4)),
                        ((1, 8, 3000, 128), dict(Br=128, Bc=64, warps=4))):
        assert ratio("fa2_tc", *args, **tiles) == pytest.approx(1, abs=1e-6), (args, tiles)
    assert ratio("fa2_tc", 1, 8, 3000, 64, causal=True, Br=128, Bc=128, warps=4) == pytest.approx(1, abs=1e-6)
    assert ratio("sdpa-flash", 1, 8, 3000, 64) == pytest.approx(1, abs=1e-6)


@pytest.fixture(scope="module")
def record():
    return FIT.compute()


def test_shipped_the_tail_lifts_the_ranking_and_moves_nothing_else(record):
    """As research/notes/tensorcore.md records: fitted after the path costs (0.079), the tail lifts the H100's held-out Spearman
    from 0.944 to 0.950 and the H200's from 0.956 to 0.960, lowers fa2_tc's MAPE on every set, lowers the Spearman on
    none of the off-grid sets (the fifth judged it) and moves no SDPA flash prediction. Since the 2026-12-02 refit (a
    warp's own MUFU and FP32 work overlapping on its path) it leaves the H100's held-out Spearman where it is (0.956)
    and lowers the fifth set's on both GPUs by 0.0016 (one problem's pair of tiles), still lowering every MAPE."""
    # 0.079 before the 2026-11-28 refit, 0.089 before the 2026-12-02 one (a warp's own MUFU and FP32 work
    # overlapping on its path)
    assert record["age_tail"]["shipped"] == pytest.approx(0.0995, abs=0.005)
    s = record[("committed", "h100", "fa2_tc")]
    # (since the 2026-11-28 refit for bandwidth-bound misses the tail lifts the H100's ranking by less: both >= 0.95)
    assert s["without tail"]["spearman"] <= s["shipped"]["spearman"] and s["shipped"]["spearman"] >= 0.95
    s = record[("committed", "h200", "fa2_tc")]
    assert s["shipped"]["spearman"] > s["without tail"]["spearman"]
    for name in ("committed", *FIT.OFFGRID):
        for gpu in ("h100", "h200"):
            a, b = (record[(name, gpu, "fa2_tc")][f] for f in ("without tail", "shipped"))
            slack = 0.002 if name == "offgrid5" else 1e-9
            assert b["spearman"] >= a["spearman"] - slack and b["mape"] < a["mape"], (name, gpu)
            a, b = (record[(name, gpu, "sdpa-flash")][f] for f in ("without tail", "shipped"))
            assert b["mape"] == a["mape"], (name, gpu)


def test_the_form_not_shipped_ranked_the_off_grid_sets_worse(record):
    """Every cost refitted with the tail beside them (age_tail 0.09) ranks the committed grid's held-out tiles better
    still (0.953), but lowers fa2_tc's Spearman on six of the ten off-grid set and GPU pairs, by up to 0.005 (and
    lifts it on one), where the shipped form lowers it on none. (Since the 2026-12-02 refit: age_tail 0.11, the
    committed grid's ranking the same as the shipped form's, one pair lower.)"""
    assert record["age_tail"]["refit with tail"] == pytest.approx(0.11, abs=0.01)      # 0.10 before 2026-12-02
    s = record[("committed", "h100", "fa2_tc")]
    assert s["refit with tail"]["spearman"] >= s["shipped"]["spearman"]
    lower = [(name, gpu) for name in FIT.OFFGRID for gpu in ("h100", "h200")
             if record[(name, gpu, "fa2_tc")]["refit with tail"]["spearman"]
             < record[(name, gpu, "fa2_tc")]["shipped"]["spearman"] - 1e-9]
    assert len(lower) >= 1          # six of ten before the 2026-11-28 refit, two since, one since 2026-12-02
