"""fa2_tc's backward counts against Nsight Compute's on the H200 (research/scripts/ncu_bwd.sh): the instances'
instruction table (backward.BWD_CODE) is what the code profile gives, and every counted class of the main launch,
its atomics, the bytes it asks of L2 and reads from DRAM, and its two companions' L2 bytes lie within 10% of the
counters in 12 other configurations (other batches, heads and lengths, grouped heads, Nq != Nk)."""

import csv
from pathlib import Path

import numpy as np
import pytest

from perfmodel.hw import calibration, gpu as gpu_mod
from perfmodel.kernels import backward, get
from perfmodel.measure.one import configure
from perfmodel.model import engine

NCU = Path(__file__).resolve().parents[2] / "research" / "data" / "h200" / "ncu"
AXES = ("B", "H", "Hkv", "N", "Nq", "Nk", "d", "dtype", "causal", "mode", "Br", "Bc", "warps")


def _launches(name):
    """(configuration, {launch index: counter row}) of each profiled backward, in the file's order."""
    rows = list(csv.DictReader(open(NCU / f"{name}.csv")))
    assert len(rows) % 3 == 0 and all(int(r["launch"]) == i % 3 for i, r in enumerate(rows))
    return [({a: rs[0][a] for a in AXES if rs[0][a] != ""}, rs) for rs in (rows[i:i + 3] for i in range(0, len(rows), 3))]


def _predict(params):
    k = get("fa2_tc")
    shape, tiles = configure(k, params)
    spec = gpu_mod.resolve("h200")
    p = engine.evaluate(spec, k, shape, tiles, calibration.resolve(spec))
    return shape, tiles, {ln.name: ln.counts for ln in p.launches}


CHECKS = _launches("ncu_bwd_fa2_tc")


def test_the_profiled_set_spans_tiles_masks_groups_and_lengths():
    confs = [c for c, _ in CHECKS]
    assert len(confs) >= 8
    assert {(c["d"], c["Br"], c["Bc"]) for c in confs} >= {("64", "128", "128"), ("64", "64", "64"),
                                                             ("128", "64", "128"), ("128", "128", "64")}
    assert {c["causal"] for c in confs} == {"0", "1"}
    assert any("Hkv" in c for c in confs) and any("Nq" in c for c in confs)
    for _, rs in CHECKS:
        assert [r["Kernel Name"].split("<")[0].split()[-1] for r in rs] == [
            "fa2_tc_bwd_pre", "fa2_tc_bwd_kernel", "fa2_tc_bwd_convert"]


def test_the_instruction_table_is_what_the_code_profile_gives():
    """Per instance: two lengths without a mask give its instructions beyond the counted classes a pair and a
    block (per warp), the causal length those of a masked pair; backward.BWD_CODE holds them."""
    solved = {}
    for params, rs in _launches("ncu_bwd_fa2_tc_code"):
        shape, tiles, launches = _predict(params)
        c = launches["fa2_tc:bwd"]
        pairs, _, Tc = backward.pairs_per_head(shape.Nq, shape.Nk, tiles.Br, tiles.Bc, shape.causal)
        masked = backward.masked_pairs(shape.Nq, shape.Nk, tiles.Br, tiles.Bc, shape.causal)
        W = int(tiles.warps)
        other = float(rs[1]["smsp__inst_executed.sum"]) - float(c.warp_instructions - c.warp_other)
        key = (int(shape.d), int(tiles.Br), int(tiles.Bc), W)
        solved.setdefault(key, []).append((shape.causal, float(pairs) * shape.heads * W,
                                           float(Tc) * shape.B * shape.Hkv * W, float(masked) * shape.heads * W, other))
    assert set(solved) == set(backward.BWD_CODE)
    for key, runs in solved.items():
        plain = [r for r in runs if not r[0]]
        (a, b) = np.linalg.solve(np.array([r[1:3] for r in plain]), np.array([r[4] for r in plain]))
        (_, p, bl, m, o), = [r for r in runs if r[0]]
        assert backward.BWD_CODE[key] == pytest.approx((a, b, (o - a * p - b * bl) / m), abs=0.01), key


@pytest.mark.parametrize("params,rs", CHECKS, ids=lambda x: "-".join(f"{k}{v}" for k, v in x.items()
                                                                     if k not in ("dtype", "mode"))
                         if isinstance(x, dict) else "")
def test_backward_counts_match_nsight_compute(params, rs):
    _, _, launches = _predict(params)
    c = launches["fa2_tc:bwd"]
    main = {k: float(rs[1][k]) for k in rs[1] if k.startswith(("smsp__", "lts__", "l1tex__", "dram__"))}
    pairs = {
        "hmma": (c.warp_mma, main["smsp__inst_executed_pipe_tensor_op_hmma.sum"]),
        "ldmatrix": (c.warp_ldsm, main["smsp__sass_inst_executed_op_ldsm.sum"]),
        "cp.async": (c.warp_ldgsts, main["smsp__sass_inst_executed_op_ldgsts.sum"]),
        "mufu": (c.warp_sfu, main["smsp__inst_executed_pipe_xu.sum"]),
        "shared stores": (c.warp_sts, main["smsp__sass_inst_executed_op_shared_st.sum"]),
        "instructions": (c.warp_instructions, main["smsp__inst_executed.sum"]),
        # the dQ atomics: 32-byte sectors they add in L2, one a request
        "atomic sectors": (c.l2_red_bytes / 32, main["lts__t_sectors_srcunit_tex_op_red.sum"]),
        "atomic requests": (c.l2_red_bytes / 32, main["lts__t_requests_srcunit_tex_op_red.sum"]),
        # the sectors its loads ask of L2 (what L2 itself counts is fewer where blocks walk a tile together)
        "load sectors": (c.l2_read_bytes / 32, main["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]),
        # each launch starts with cold caches (--cache-control all): everything it reads comes from DRAM once
        "dram read": (c.dram_read_once, main["dram__bytes_read.sum"]),
    }
    for what, (model, counter) in pairs.items():
        assert abs(float(np.asarray(model)) - counter) <= 0.10 * counter, (what, float(np.asarray(model)), counter)
    for key, r in (("fa2_tc:bwd_pre", rs[0]), ("fa2_tc:bwd_convert", rs[2])):
        comp = launches[key]
        for model, metric in ((comp.l2_read_bytes, "lts__t_sectors_srcunit_tex_op_read.sum"),
                              (comp.l2_write_bytes, "lts__t_sectors_srcunit_tex_op_write.sum")):
            counter = float(r[metric]) * 32
            assert abs(float(np.asarray(model)) - counter) <= 0.10 * counter, (key, metric)
