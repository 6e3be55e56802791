"""fa2_tc's counts against Nsight Compute's on the H100 and H200 (research/data/{h100,h200}/ncu/ncu_fa2_tc.csv,
research/scripts/gpu_run.sh ncu-tc): the profiled set's coverage, the instructions and the bytes it requests."""

import csv
from pathlib import Path

import numpy as np
import pytest

from perfmodel.hw import gpu as gpu_mod
from util import evaluate

DATA = Path(__file__).resolve().parents[2] / "research" / "data"

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
