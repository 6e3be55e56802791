"""Instruction fetch (timing.fetch_instructions): the supply table (gpus/arch/sm_90.yaml fetch_once_ipc), where
the term applies and what it moves (research/tests/test_fetch_probe.py: the table and flash's code layout against
what was measured)."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from util import evaluate

from perfmodel.evaluation import dataset, validate
from perfmodel.hw import arch, calibration, gpu
from perfmodel.kernels import get
from perfmodel.model.timing import once_supply as supply_at

DATA = Path(__file__).resolve().parents[2] / "examples" / "measurements"


def test_supply_interpolates_within_the_table_and_holds_at_its_edges():
    tab = arch.table("sm_90", "fetch_once_ipc")
    assert supply_at(tab, 80.0, 24.0) == pytest.approx(0.288)
    assert supply_at(tab, 72.0, 16.0) == pytest.approx((0.458 + 0.407) / 2)
    assert supply_at(tab, 80.0, 20.0) == pytest.approx((0.407 + 0.288) / 2)
    assert supply_at(tab, 200.0, 40.0) == pytest.approx(0.231) and supply_at(tab, 0.0, 8.0) == pytest.approx(0.888)


def _without_fetch(cal):
    return dataclasses.replace(cal, fetch_once_ipc={})


@pytest.mark.parametrize("name,shape,tiles", [
    ("fa2_tc", dict(B=16, H=16, N=1000, d=64, dtype="fp16", causal=True), dict(Br=128, Bc=64, warps=4)),
    ("sdpa-cudnn", dict(B=16, H=16, N=1000, d=64, dtype="fp16", causal=True), dict(Br=128, Bc=128, warps=8)),
    ("sdpa-flash", dict(B=16, H=16, N=1000, d=64, dtype="fp16", causal=False), dict(Br=128, Bc=128, warps=4)),
    ("sdpa-flash", dict(B=1, H=8, N=1000, d=64, dtype="fp16", causal=True), dict(Br=128, Bc=128, warps=4)),
    ("sdpa-flash", dict(B=16, H=16, N=1000, d=96, dtype="fp16", causal=True), dict(Br=128, Bc=64, warps=4)),
])
def test_no_fetch_term_without_a_layout_or_uneven_blocks(name, shape, tiles):
    """Kernels whose code was not read (fa2_tc, cuDNN, flash's split-KV kernel and other head dims), and launches
    of even work (non-causal), predict the same with and without the supply table."""
    spec = gpu.resolve("h100")
    cal = calibration.resolve(spec)
    a = evaluate(name, **shape, cal=cal, **tiles).time_s
    b = evaluate(name, **shape, cal=_without_fetch(cal), **tiles).time_s
    assert float(a) == float(b)


def test_fetch_term_grows_with_the_once_run_code():
    """At B32 H16 d64 causal the ragged launch (84 KiB of once-run code) gains far more than the even one (40 KiB),
    and the term is bound-relevant: it moves the ragged prediction by over 20%. (The even one gains 12% since the
    join's pipes hold only the warps beside the path's, which leaves the issue slots a larger part; 1-5% before.
    SDPA flash's even causal N = 1024 rows are 1.5% off with the term and 3.6% without, H100.)"""
    cal = calibration.resolve(gpu.resolve("h100"))
    gain = {}
    for N in (1000, 1024):
        kw = dict(dtype="fp16", causal=True, Br=128, Bc=128, warps=4)
        gain[N] = float(evaluate("sdpa-flash", 32, 16, N, 64, cal=cal, **kw).time_s) / float(
            evaluate("sdpa-flash", 32, 16, N, 64, cal=_without_fetch(cal), **kw).time_s)
    assert gain[1000] > 1.2 and 1.0 <= gain[1024] < 1.15 and gain[1000] - 1 > 4 * (gain[1024] - 1)


@pytest.mark.parametrize("gpu_dir", ["h100", "h200"])
def test_ragged_causal_flash_rows(gpu_dir):
    """SDPA flash's ragged causal launches (N = 1000, 32 rows a GPU), nothing fitted to them: within 20% each (split-KV
    launches aside, whose kernels' code was not read) and 13% on average with the fetch term, against a worst of
    37% and 17-18% on average without it (over 1.4 times the mean with it)."""
    (ms,) = dataset.load([DATA / gpu_dir / "sdpa-flash.csv"])
    spec = gpu.match_device_name(ms.gpu_name)
    cal = calibration.resolve(spec)
    ragged = ms.causal & (ms.cols["N"] % 128 != 0)
    k = get("sdpa-flash")
    shape = ms.shape(ragged)                                 # causal, the ragged rows' sizes
    split = np.asarray(k.resolve(spec, shape, k.library_tiles(shape, spec)).splits) > 1
    err = {}
    for name, c in (("with", cal), ("without", _without_fetch(cal))):
        pred, _ = validate.predict_set(ms, spec, c)
        err[name] = np.abs(pred / ms.measured_s - 1)[ragged]
    assert ragged.sum() == 32 and 0 < split.sum() < 32
    assert err["with"][~split].max() < 0.20 and err["with"].mean() < 0.13
    assert err["without"].max() > 0.30 and err["without"].mean() > 1.4 * err["with"].mean()


def test_fetch_is_named_as_the_bound_where_it_binds():
    """The fetch row reports on its own (it joins the issue slots as one part): B32 H16 d64 causal at N = 1000 is
    fetch-bound, at N = 1024 it is not (a quarter of the fetch time); kernels without a layout carry none."""
    kw = dict(dtype="fp16", causal=True, Br=128, Bc=128, warps=4)
    ragged, even = (evaluate("sdpa-flash", 32, 16, N, 64, **kw) for N in (1000, 1024))
    assert str(ragged.bound) == "fetch" and str(even.bound) != "fetch"
    assert float(even.timing.times_s["fetch"]) < 0.3 * float(ragged.timing.times_s["fetch"])
    tc = evaluate("fa2_tc", 32, 16, 1000, 64, **kw)
    assert float(tc.timing.times_s["fetch"]) == 0
