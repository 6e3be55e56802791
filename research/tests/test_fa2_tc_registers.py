"""fa2_tc's registers per instance (kernels/fa2_tc.py REGS and the sm_8x facts) against the ptxas records the
builds left (research/data/h100/fa2_tc_ptxas.txt, research/data/sass_sm89/fa2_tc_ptxas_sm*.txt) and the measured rows."""

from pathlib import Path

import pytest

from perfmodel import api
from perfmodel.kernels import fa2_tc, get
from rutil import fa2_tc_ptxas

ROOT = Path(__file__).resolve().parents[2]


def test_instance_registers_match_ptxas_and_the_measured_rows():
    """REGS, which sets a prediction's blocks per SM, is what ptxas reports for each compiled instance and what
    cudaFuncGetAttributes recorded with every measured H100 and H200 row; a prediction uses it."""
    import csv

    from perfmodel.hw import calibration, gpu
    from perfmodel.model import engine
    from perfmodel.shape import make_shape

    assert set(fa2_tc.REGS) == set(fa2_tc.INSTANCES)
    ptxas = fa2_tc_ptxas(ROOT / "research/data/h100/fa2_tc_ptxas.txt")
    assert ptxas == {k: {v} for k, v in fa2_tc.REGS.items()}
    for g in ("h100", "h200"):
        with open(ROOT / f"examples/measurements/{g}/fa2_tc.csv") as f:
            for row in csv.DictReader(f):
                key = (int(row["d"]), int(row["Br"]), int(row["Bc"]), int(row["threads"]) // 32)
                assert int(row["regs_per_thread"]) == fa2_tc.REGS[key], (g, key)
    spec = gpu.resolve("h100")
    p = engine.evaluate(spec, get("fa2_tc"), make_shape(4, 16, 4096, 64, "fp16", False), fa2_tc.FA2TCTiles(64, 64, 4),
                        calibration.resolve(spec))
    assert int(p.launch.regs) == 128 and int(p.blocks_per_sm) == 4


@pytest.mark.parametrize("sm", ["sm_80", "sm_86", "sm_89"])
def test_ampere_and_ada_registers_are_their_own_ptxas(sm):
    """On sm_80/86/89 the instances' registers are their builds' (ptxas -v, one record per architecture, the same
    on all three), not sm_90's: 10 of 21 differ by over 5, and a prediction for an Ada GPU uses them."""
    facts = get("fa2_tc").arch[sm]
    ptxas = fa2_tc_ptxas(ROOT / f"research/data/sass_sm89/fa2_tc_ptxas_{sm.replace('_', '')}.txt")
    assert ptxas == {k: {v} for k, v in facts.instance_regs.items()}
    assert set(facts.instance_regs) == set(fa2_tc.INSTANCES)
    assert sum(abs(facts.instance_regs[k] - fa2_tc.REGS[k]) > 5 for k in fa2_tc.REGS) == 10
    p = api.predict("rtx4090", "fa2_tc", N=4096, d=128, Br=128, Bc=128, warps=8, dtype="fp16").prediction
    assert int(p.launch.regs) == 236 != fa2_tc.REGS[(128, 128, 128, 8)]
