"""The committed H100 fp32 datasets beside what research/data holds of them: the grid's skip list (what the time
budget excluded) and fa1's and fa2's counts against Nsight Compute's counters (research/data/h100/ncu)."""

import csv
from pathlib import Path

import pytest

from perfmodel.hw import calibration, gpu
from util import evaluate

ROOT = Path(__file__).resolve().parents[2]
H100 = gpu.resolve("h100")


def rows(path):
    """The rows of a CSV under the repository root, as dicts."""
    return list(csv.DictReader(open(ROOT / path)))


@pytest.mark.parametrize("name", ["fa1", "fa2"])
def test_grid_fills_the_gpu(name):
    rs = rows(f"examples/measurements/h100/{name}.csv")
    bh = {int(r["B"]) * int(r["H"]) for r in rs}
    assert min(bh) == 4 and max(bh) == 512
    assert {int(r["d"]) for r in rs} >= {32, 64, 128}
    assert any(int(r["N"]) % int(r["Bc"]) for r in rs)            # N not a multiple of the tiles
    # the grid runs to N = 8192; what the time budget excluded is listed, with the reason, beside the data
    skipped = rows(f"research/data/h100/{name}.skipped.csv")
    assert max(int(r["N"]) for r in rs + skipped) == 8192
    assert all(r["reason"] in ("budget", "no-fit") for r in skipped)


def _f(r, k):
    return float(r[k])


@pytest.mark.parametrize("name", ["fa1", "fa2"])
def test_counts_match_hardware_counters(name):
    """Shared wavefronts, bank conflicts and FFMA within 10% of Nsight Compute's counters on every profiled
    configuration; DRAM read bytes within 10% on at least 90% of them and within 15% on all (one fa1 case with
    a 1 MB read is 11.4% above the model: research/notes/known-gaps-log.md)."""
    rs = rows(f"research/data/h100/ncu/ncu_{name}.csv")
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
        # capacity the reuse model is approximate (research/notes/known-gaps-log.md), so it is held to 10% below half of L2
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
