"""How far to trust the model's answers, from what it was measured against.

A prediction's error: MEASURED (measured_accuracy.json beside this module, shipped with the package) holds, per
kernel and GPU, the error of the shipped configuration on the committed datasets, as research/scripts/record_accuracy.sh
records it in examples/accuracy.json (held-out rows where path costs were fitted on that GPU's rows, every row
elsewhere); `perfmodel predict` prints it beside each prediction.

A tile pick: how often the tile the model ranks fastest was the measured fastest, by how much slower the model
predicts its runner-up (the margin `perfmodel sweep --best` prints).

A pick there is among a problem's measured tiles, mostly three (a sweep may weigh more), so the shares say how far
the model's order of two tiles holds at a margin. They pool every fa2_tc problem measured before the sixth off-grid
set: the committed grids of the H100 and the H200 and the off-grid sets 1-5, 2,006 problems. They ship as PICKS
(pick_best.json beside this module; examples/tile_advice.py writes it; tests/evaluation/test_tile_advice.py holds that
they reproduce, that each of the three sources lies within 0.2 of them in every bin, and that the sixth set, held
out, does). From the H100's grid alone, as they were first taken, its bins of 24-36 problems moved by up to 0.2 with
one refit. Where the model calls two tiles within 1% of each other its pick was the fastest in half of those
problems: time both."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

MEASURED = Path(__file__).with_name("measured_accuracy.json")
PICKS = Path(__file__).with_name("pick_best.json")
# per kernel, GPU and workload (decode, grouped prefill, cross-attention, bwd, fwd_bwd): the error on the H200's
# inference and training datasets (examples/workloads.py writes it)
WORKLOADS = Path(__file__).with_name("measured_workloads.json")
# the sections of examples/accuracy.json that hold the shipped configuration (the others: probe constants only, an
# unprobed H200)
SHIPPED_SECTIONS = ("fitted", "h200_all_rows", "tensor_core")

# margin bins (runner-up's predicted time over the pick's, less 1): below 1%, 1-2%, 2-5%, 5-10%, 10% and more; a
# kernel's shares per bin are its entry of PICKS
MARGIN_EDGES = (0.01, 0.02, 0.05, 0.10)
SOURCE = "the committed grids (H100, H200) and off-grid sets 1-5, pooled (examples/tile_advice.py)"


def margin_bin(margin) -> np.ndarray:
    """The bin of MARGIN_EDGES each margin falls in (0 = below 1%)."""
    return np.digitize(np.asarray(margin, dtype=float), MARGIN_EDGES)


def pick_margins(groups, ranked, truth) -> tuple[np.ndarray, np.ndarray]:
    """For each group of >= 3 tile configurations sharing a problem: the margin of the runner-up by ``ranked`` over
    the pick, and whether the pick is the fastest by ``truth``."""
    from perfmodel.evaluation.validate import tile_choices

    margins, hits = [], []
    for ii in tile_choices(groups):
        order = ii[np.argsort(ranked[ii], kind="stable")]
        margins.append(ranked[order[1]] / ranked[order[0]] - 1)
        hits.append(truth[order[0]] == truth[ii].min())
    return np.array(margins), np.array(hits, dtype=bool)


def shares(margins, hits) -> list:
    """Per margin bin: [share of picks that were the fastest, rounded to 2 digits, or None; problems]."""
    b = margin_bin(margins)
    return [[round(float(hits[b == k].mean()), 2) if (b == k).any() else None, int((b == k).sum())]
            for k in range(len(MARGIN_EDGES) + 1)]


@lru_cache(maxsize=None)
def pick_table(kernel: str) -> tuple:
    """((share, problems), ...) per margin bin of a kernel's recorded picks (PICKS); () for a kernel without one."""
    picks = json.loads(PICKS.read_text()) if PICKS.exists() else {}
    return tuple(tuple(x) for x in picks.get("kernels", {}).get(kernel, ()))


def pick_best(kernel, margin: float):
    """(share, problems) of the recorded picks at this margin that were the measured fastest; None for a kernel
    (a perfmodel.kernels.Kernel) without a record."""
    table = pick_table(kernel.name)
    return table[int(margin_bin(margin))] if table else None


def measured_table(record: dict) -> dict:
    """kernel -> gpu key -> {mape, max_ape, rows, split} of the shipped configuration, from an examples/accuracy.json
    record (the content of measured_accuracy.json)."""
    out: dict = {}
    for section in SHIPPED_SECTIONS:
        for v in record[section].values():
            out.setdefault(v["kernel"], {})[v["gpu"]] = {"mape": round(v["mape"], 2), "max_ape": round(v["max_ape"], 1),
                                                         "rows": v["n"], "split": v["split"]}
    return out


@lru_cache(maxsize=1)
def _measured() -> dict:
    return json.loads(MEASURED.read_text()) if MEASURED.exists() else {}


def workloads(Nq, Nk, H, Hkv, mode):
    """Each problem's workload, as the accuracy records name them (vectorised): plain (square, all heads, forward),
    decode (up to 128 queries against more keys), grouped prefill, cross-attention, or its mode (bwd, fwd_bwd)."""
    Nq, Nk, H, Hkv = (np.asarray(x) for x in (Nq, Nk, H, Hkv))
    fwd = np.where((Nq <= 128) & (Nk > Nq), "decode",
                   np.where(Hkv != H, "grouped prefill", np.where(Nq != Nk, "cross-attention", "plain")))
    return np.where(np.asarray(mode) == "fwd", fwd, mode)


def workload_of(shape) -> str:
    """A scalar problem's workload (workloads)."""
    return str(workloads(shape.Nq, shape.Nk, shape.H, shape.Hkv, shape.mode))


@lru_cache(maxsize=1)
def _workloads() -> dict:
    return json.loads(WORKLOADS.read_text()) if WORKLOADS.exists() else {}


def measured_accuracy(kernel: str, gpu_key: str, workload: str = "plain") -> dict:
    """How the kernel's predictions fared against measurements of this workload: {"this_gpu": entry or None, "gpus":
    {gpu key: entry}, "workload": its name} (entries as measured_table's; "gpus" empty where the kernel was never
    measured on this workload)."""
    if workload == "plain":
        by_gpu = _measured().get(kernel, {})
    else:
        by_gpu = {g: w[workload] for g, w in _workloads().get(kernel, {}).items() if workload in w}
    return {"this_gpu": by_gpu.get(gpu_key), "gpus": dict(by_gpu), "workload": workload}
