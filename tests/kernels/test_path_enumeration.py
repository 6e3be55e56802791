"""The latency-path features (path_*) and warp_other of the closed forms against the literal enumeration.

tests/enumerate_kernels.py walks every loop of csrc/fa1.cu and csrc/fa2.cu and tallies, for the path warp of
one block, what each path feature means (model.counts.PATH_FEATURES), and warp_other from the overhead constants
per loop step. It keeps two readings: the literal one of the .cu source and the one the closed form states
(``spec_*``); the closed form must equal the second exactly. Where the two readings differ, the departure is
named here (DEPARTURES) and pinned: no undocumented difference, and no documented one that never shows.
"""

from functools import lru_cache

import numpy as np
import pytest

import enumerate_kernels as enum
from perfmodel.model.counts import PATH_FEATURES
from test_counts import FA1_CASES, FA2_CASES
from util import evaluate

# configurations beyond test_counts' that make the remaining departures show: a partial second column chunk
# of P2 at a conflicting stride (d = 32, pad 0, Bc = 40), and a block with fewer rows than Br (N < Br)
FA2_EXTRA = [(1, 1, 40, 32, 16, 40, 64, 0), (1, 1, 5, 8, 8, 8, 32, 0)]

# label in enumerate_kernels.py -> (kernel, the fields it changes, what the closed form does instead of the .cu)
DEPARTURES = {
    "fa1-outer-2d": ("fa1", {"path_outer"},
                     "path_outer counts nc + 2d outer iterations per (K/V tile, Q tile) step; the .cu (and "
                     "fa1's own warp_other) has nc + d: the y loop of Q K^T and the x loop of P V"),
    "fa1-outer-kv": ("fa1", {"path_outer"},
                     "path_outer has no outer iteration for the path warp's K/V row loop (ceil(nc/Br) per K/V "
                     "tile), which warp_other charges"),
    "fa1-conflict-kv": ("fa1", {"path_conflict"},
                        "path_conflict leaves out the Kj/Vj store conflicts (lane stride d) of the path warp's "
                        "K/V rows, although path_gmem counts those rows' loads"),
    "fa1-other-idle-warp": ("fa1", {"warp_other"},
                            "warp_other charges the per-(i, j) 'tile' overhead only to warps with a valid row; "
                            "a warp past N in the last Q tile still runs the i step"),
    "fa2-outer-p4": ("fa2", {"path_outer"},
                     "path_outer takes one outer iteration per (row, column chunk) of P4; the .cu and fa2's "
                     "warp_other have one per row (the chunk loop is innermost)"),
    "fa2-outer-prologue": ("fa2", {"path_outer"},
                           "path_outer has no outer iteration for warp 0's prologue rows (ceil(Br/W))"),
    "fa2-epilogue": ("fa2", {"path_outer", "path_fp32", "path_sfu", "path_gmem"},
                     "the epilogue is charged as one row of one chunk (fp32 +2, sfu +1, gmem +1, no outer); "
                     "warp 0 runs ceil(nr/W) rows of ceil(d/32) chunks (1 MUFU.RCP and 1 + ceil(d/32) FMUL "
                     "per row) and its global stores are no round trip"),
    "fa2-gmem-prologue": ("fa2", {"path_gmem"},
                          "the prologue's Q rows are ceil(Br/W) round trips even for rows >= nr, where "
                          "(r < nr) ? Q[..] : 0.f issues no load"),
    "fa2-conflict-p2": ("fa2", {"path_conflict"},
                        "P2's Ks conflicts use the lanes of the first column chunk, min(nc, 32), for every "
                        "chunk; a partial last chunk has fewer lanes"),
    "fa2-conflict-rows": ("fa2", {"path_conflict"},
                          "P3/P5's Ss conflicts use min(Br, 32) lanes for every pass of warp 0; when Br > T the "
                          "last pass has only the rows left"),
    "fa2-other-tile": ("fa2", {"warp_other"},
                       "warp_other charges the per-K/V-tile 'tile' overhead (bounds, five barriers, loop "
                       "control) once per block; every one of the W warps runs it"),
}

FIELDS = ["path_" + f for f in PATH_FEATURES] + ["warp_other"]


@lru_cache(maxsize=None)
def enumerated(kernel, cfg):
    return getattr(enum, kernel)(*cfg)


def closed(kernel, cfg):
    if kernel == "fa1":
        B, H, N, d, Br, Bc = cfg
        return evaluate("fa1", B, H, N, d, Br=Br, Bc=Bc).counts
    B, H, N, d, Br, Bc, T, pad = cfg
    return evaluate("fa2", B, H, N, d, Br=Br, Bc=Bc, threads=T, pad=pad).counts


ALL = [("fa1", c) for c in FA1_CASES] + [("fa2", c) for c in FA2_CASES + FA2_EXTRA]


# features of the tensor-core kernels' paths (MMA chains, warpgroup MMA group waits, shuffles, the K/V tile loads
# a single-buffered loop waits on, spill reloads of the one fa2_tc instance that spills, a closed kernel's profiled
# cycles): the fp32 kernels have none
TENSOR_ONLY = ("mma", "wgmma", "shfl", "load", "load_miss", "local", "cycle")


def test_the_enumeration_tallies_every_path_feature():
    assert enum.PATH == tuple(f for f in PATH_FEATURES if f not in TENSOR_ONLY)


@pytest.mark.parametrize("kernel, cfg", ALL)
def test_fp32_kernels_have_no_tensor_core_path(kernel, cfg):
    got = closed(kernel, cfg)
    assert all(float(np.asarray(got.path(f))) == 0 for f in TENSOR_ONLY)


@pytest.mark.parametrize("kernel, cfg", ALL)
def test_path_features_and_other_equal_enumeration(kernel, cfg):
    got, want = closed(kernel, cfg), enumerated(kernel, cfg)
    for f in FIELDS:
        g, w = float(np.asarray(getattr(got, f))), want["spec_" + f]
        if f == "warp_other":     # fractional constants (27/16 per step, ...)
            assert g == pytest.approx(w, rel=1e-9, abs=0), f"{f} for {kernel} {cfg}: closed {g} vs enumeration {w}"
        else:
            assert g == w, f"{f} for {kernel} {cfg}: closed form {g} vs enumeration {w}"


@pytest.mark.parametrize("kernel, cfg", ALL)
def test_literal_and_closed_form_readings_differ_only_by_documented_departures(kernel, cfg):
    e = enumerated(kernel, cfg)
    delta = {f: 0 for f in FIELDS}
    for key, v in e.items():
        if key.startswith("departure:"):
            _, label, field = key.split(":")
            assert label in DEPARTURES and DEPARTURES[label][0] == kernel, f"undocumented departure {label}"
            assert field in DEPARTURES[label][1], f"{label} changes {field}"
            delta[field] += v
    for f in FIELDS:
        assert e[f] - e["spec_" + f] == pytest.approx(delta[f], abs=1e-9), f
        if delta[f] == 0:
            assert e[f] == pytest.approx(e["spec_" + f], rel=1e-12, abs=0), f"{f} for {kernel} {cfg}"


@pytest.mark.parametrize("label", sorted(DEPARTURES))
def test_every_documented_departure_shows_in_some_configuration(label):
    kernel, fields, _ = DEPARTURES[label]
    shown = {f for k, c in ALL if k == kernel for f in fields
             if enumerated(k, c).get(f"departure:{label}:{f}", 0) != 0}
    assert shown == fields, f"{label}: shows in {shown}, documented for {fields}"
