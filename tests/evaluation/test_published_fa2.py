"""Published FlashAttention-2 figures on the A100 and the H100 (examples/published_fa2.py ->
examples/benchmarks/published_fa2.json, docs/accuracy.md): the record holds the script's table, every figure has a
source, and the model's predictions are recorded as the model gives them now (a change to the model that moves one
fails here until the script is rerun)."""
import json
from pathlib import Path

import pytest

from util import assert_same_record, script

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "examples" / "benchmarks" / "published_fa2.json"


@pytest.fixture(scope="module")
def mod():
    return script("published_fa2")


@pytest.fixture(scope="module")
def recorded():
    return json.loads(RECORD.read_text())


def test_the_record_holds_the_scripts_table(mod, recorded):
    """One row a legible figure, in the table's order, with its published value, source and panel."""
    table = [(gpu, mode, d, causal, N, v, source, panel)
             for gpu, mode, d, causal, source, panel, values in mod.PUBLISHED
             for N, v in zip(mod.SEQLENS, values) if v is not None]
    assert [(r["gpu"], r["mode"], r["d"], r["causal"], r["N"], r["published_tflops"], r["source"], r["panel"])
            for r in recorded["rows"]] == table
    assert len(table) == 81 and recorded["kernel"] == "sdpa-flash"


def test_every_figure_has_a_source(mod, recorded):
    """A source names its figure, its paper (an arXiv address whose number the detail repeats) and where the labels
    were read: an image at a commit, or the PDF's text layer."""
    assert recorded["sources"] == mod.SOURCES
    for r in recorded["rows"]:
        src = mod.SOURCES.get(r["source"])
        assert src is not None and src["figure"] and r["panel"] in ("(a)", "(b)", "(c)", "(d)"), r
        assert src["url"].startswith("https://arxiv.org/abs/") and src["url"].rsplit("/", 1)[1] in src["detail"], src
        assert " @ " in src["detail"] or "text layer" in src["detail"], src


def test_the_shapes_are_flashattentions_benchmark(recorded):
    """Batch x seqlen = 16k tokens, hidden dim 2048, fp16."""
    for r in recorded["rows"]:
        assert r["B"] * r["N"] == 16384 and r["H"] * r["d"] == 2048 and r["dtype"] == "fp16", r


def test_tflops_follow_flashattentions_convention(mod, recorded):
    """4 B H N^2 d for the forward, halved when causal; 2.5x for the backward, 3.5x for both: each recorded TFLOP/s is
    those FLOPs over the predicted time."""
    assert mod.fa_flops(1, 16, 16384, 128, False, "fwd") == 4 * 16 * 16384 ** 2 * 128
    assert mod.fa_flops(1, 16, 16384, 128, True, "fwd_bwd") == 3.5 * 2 * 16 * 16384 ** 2 * 128
    for r in recorded["rows"]:
        flops = mod.fa_flops(r["B"], r["H"], r["N"], r["d"], r["causal"], r["mode"])
        assert r["predicted_tflops"] == pytest.approx(flops / r["predicted_s"] / 1e12, rel=1e-9), r
        assert r["ratio"] == pytest.approx(r["predicted_tflops"] / r["published_tflops"], rel=1e-9), r


def test_the_recorded_predictions_are_what_the_model_gives(mod, recorded):
    """Recomputed from the script's table: every prediction, bound and summary figure as recorded (floats to 1e-6)."""
    assert_same_record(recorded, mod.compute(), rel=1e-6)
