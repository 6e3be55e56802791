"""The committed H100 datasets: schema, provenance, correctness, and the model against counters and timings."""

import csv
import json
from pathlib import Path

import pytest

from perfmodel.evaluation import dataset, validate
from perfmodel.hw import calibration, gpu
from perfmodel.kernels import get
from perfmodel.measure.runner import PRE_SPIN_COLUMNS, TOLERANCE
from perfmodel.shape import AttentionShape
from util import evaluate

REL_ERR_MAX = TOLERANCE["fp32"]       # the fp32 kernels' tolerance against the float64 reference
LEGACY_COLUMNS = [c for c in PRE_SPIN_COLUMNS if c != "causal"]   # files measured before the causal column existed

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "measurements" / "h100"
H100 = gpu.resolve("h100")
PROVENANCE = ["gpu_name", "sm_clock_mhz_before", "sm_clock_mhz_after", "driver", "torch", "nvcc", "date", "command"]


def rows(name):
    return list(csv.DictReader(open(DATA / f"{name}.csv")))


@pytest.mark.parametrize("name", ["fa1", "fa2"])
def test_schema_size_correctness_and_provenance(name):
    rs = rows(name)
    assert len(rs) >= 300
    assert list(rs[0].keys()) == LEGACY_COLUMNS
    for r in rs:
        assert r["kernel"] == name
        assert float(r["rel_err"]) <= REL_ERR_MAX
        assert all(r[k] for k in PROVENANCE), r
        assert r["gpu_name"] == "NVIDIA H100 80GB HBM3"
        assert int(r["n_runs"]) >= 10
        assert float(r["p20_ms"]) <= float(r["median_ms"]) <= float(r["p80_ms"])
        assert int(r["local_bytes"]) == 0                      # no spills
        k = get(name)
        tiles = k.Tiles.from_columns({c: int(r[c]) for c in ("Br", "Bc", "threads", "pad")})
        assert int(r["smem_bytes"]) == int(k.smem_bytes(AttentionShape(1, 1, int(r["N"]), int(r["d"])), tiles))


@pytest.mark.parametrize("name", ["fa1", "fa2"])
def test_grid_fills_the_gpu(name):
    rs = rows(name)
    bh = {int(r["B"]) * int(r["H"]) for r in rs}
    assert min(bh) == 4 and max(bh) == 512
    assert {int(r["d"]) for r in rs} >= {32, 64, 128}
    assert any(int(r["N"]) % int(r["Bc"]) for r in rs)            # N not a multiple of the tiles
    # the grid runs to N = 8192; what the time budget excluded is listed, with the reason, beside the data
    skipped = list(csv.DictReader(open(DATA / f"{name}.skipped.csv")))
    assert max(int(r["N"]) for r in rs + skipped) == 8192
    assert all(r["reason"] in ("budget", "no-fit") for r in skipped)


def test_seed_grid_is_present():
    for name in ("fa1", "fa2"):
        seen = {(int(r["N"]), int(r["Br"]), int(r["Bc"])) for r in rows(name)
                if (r["B"], r["H"], r["d"]) == ("1", "4", "32")}
        for N in (64, 128, 256, 512):
            for t in ((16, 16), (32, 32), (64, 16), (16, 64)):
                assert (N, *t) in seen


def _ncu(name):
    return list(csv.DictReader(open(DATA / "ncu" / f"ncu_{name}.csv")))


def _f(r, k):
    return float(r[k])


@pytest.mark.parametrize("name", ["fa1", "fa2"])
def test_counts_match_hardware_counters(name):
    """Shared wavefronts, bank conflicts and FFMA within 10% of Nsight Compute's counters on every profiled
    configuration; DRAM read bytes within 10% on at least 90% of them and within 15% on all (one fa1 case with
    a 1 MB read is 11.4% above the model: docs/known-gaps.md)."""
    rs = _ncu(name)
    assert len(rs) >= 10
    cal = calibration.resolve(H100)
    bad, dram_errors = [], []
    for r in rs:
        p = {k: int(r[k]) for k in ("B", "H", "N", "d", "Br", "Bc", "threads", "pad")}
        pred = evaluate(name, p["B"], p["H"], p["N"], p["d"], cal=cal, regs=int(_f(r, "launch__registers_per_thread")),
                        Br=p["Br"], Bc=p["Bc"], threads=p["threads"], pad=p["pad"])
        c = pred.counts
        wf = _f(r, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum") + \
            _f(r, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")
        bc = _f(r, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum") + \
            _f(r, "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")
        checks = {
            "wavefronts": (float(c.smem_wavefronts), wf),
            "ffma": (float(c.fma), _f(r, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")),
            "dram_read": (float(pred.traffic.dram_read_bytes), _f(r, "dram__bytes_read.sum")),
        }
        # DRAM reads are compulsory traffic while the re-read working set sits well inside L2; near L2's
        # capacity the reuse model is approximate (docs/known-gaps.md), so it is held to 10% below half of L2
        if name == "fa1":
            live = (2 * p["N"] * p["d"] + 2 * p["N"]) * 4 * min(p["B"] * p["H"], 132)
        else:
            live = 2 * p["N"] * p["d"] * 4 * min(p["B"] * p["H"], 132)
        if live > 0.5 * cal.l2_effective_bytes:
            checks.pop("dram_read")
        dram = checks.pop("dram_read", None)
        if dram is not None:
            dram_errors.append(abs(dram[0] - dram[1]) / dram[1])
        for what, (model, counter) in checks.items():
            if abs(model - counter) > 0.10 * counter:
                bad.append((p, what, model, counter))
        # bank conflicts: ncu reports a noise floor of stray conflicts (L1 traffic shares the banks); below 1%
        # of the wavefronts a conflict-free prediction is right
        model_bc = float(c.bank_conflicts)
        if not (abs(model_bc - bc) <= 0.10 * bc or (model_bc == 0 and bc <= 0.01 * wf)):
            bad.append((p, "bank_conflicts", model_bc, bc))
    assert not bad, "\n".join(map(str, bad))
    assert len(dram_errors) >= 8
    assert max(dram_errors) <= 0.15
    assert sum(e <= 0.10 for e in dram_errors) >= 0.9 * len(dram_errors)


ACCURACY = json.loads((ROOT / "examples" / "accuracy.json").read_text())


@pytest.mark.parametrize("name", ["fa1", "fa2"])
@pytest.mark.parametrize("variant", ["fitted", "probe_only"])
def test_accuracy_does_not_regress(name, variant):
    """The MAPE on the committed data (held-out rows) must not rise above the figure in examples/accuracy.json."""
    evs = validate.evaluate(dataset.load([DATA / f"{name}.csv"]), use_fits=variant == "fitted")
    s = evs[0].summary()
    rec = ACCURACY[variant][name]
    assert s["split"] == "test" and s["n"] == rec["n"]
    # timing runs in float32: the recorded figures reproduce to a few 1e-6 relative across numpy builds
    assert s["mape"] <= rec["mape"] * (1 + 1e-4)
    assert s["max_ape"] <= rec["max_ape"] * (1 + 1e-4)
    assert s["spearman"] >= rec["spearman"] - 1e-4


@pytest.mark.parametrize("name", ["fa1", "fa2"])
def test_h200_dataset_and_accuracy(name):
    """H200 rows: full provenance and correctness; predicted with the H200 spec and calibration, no H200 timing
    fitted, so every row is held out."""
    path = ROOT / "examples" / "measurements" / "h200" / f"{name}.csv"
    rs = list(csv.DictReader(open(path)))
    assert len(rs) >= 300 and all(r["gpu_name"] == "NVIDIA H200" for r in rs)
    assert all(float(r["rel_err"]) <= REL_ERR_MAX and all(r[k] for k in PROVENANCE) for r in rs)
    ev = validate.evaluate(dataset.load([path]), split="all")[0]
    s = ev.summary()
    assert ev.gpu == "h200"
    rec = ACCURACY["h200_all_rows"][name]
    assert s["n"] == rec["n"] and s["mape"] <= rec["mape"] * (1 + 1e-4) and s["max_ape"] <= rec["max_ape"] * (1 + 1e-4)
    assert s["mape"] <= 10 and s["max_ape"] <= 30 and s["spearman"] >= 0.9


@pytest.mark.parametrize("name", ["fa1", "fa2"])
def test_issue_acceptance_on_held_out_rows(name):
    """MAPE <= 10%, worst <= 30%, Spearman >= 0.9 over tiles, on rows no constant was fitted to."""
    s = validate.evaluate(dataset.load([DATA / f"{name}.csv"]))[0].summary()
    assert s["mape"] <= 10 and s["max_ape"] <= 30 and s["spearman"] >= 0.9
    assert s["seed_mape"] > 5 * s["mape"]                     # and far better than the seed's model
