"""The SDPA presets in the model: library rows are predicted with the preset's own tiles, and cuDNN's serial
group (the presets against the library's own launches, SASS and counters: the research tests)."""

from pathlib import Path

import numpy as np
import pytest

from perfmodel.evaluation import dataset, validate
from perfmodel.hw import calibration, gpu as gpu_mod
from perfmodel.model import engine
from perfmodel.shape import AttentionShape

from util import on_h100

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "examples" / "measurements" / "h100"


def test_validate_predicts_library_kernels_with_their_own_tiles():
    """Rows of a library kernel are predicted with the preset's tiles, whatever their tile columns say (they record
    the preset of the day they were measured)."""
    (ms,) = dataset.load([H100 / "sdpa-cudnn.csv"])
    ms = ms.take(np.arange(12))
    spec = gpu_mod.match_device_name(ms.gpu_name)
    cal = calibration.resolve(spec)
    a, _ = validate.predict_set(ms, spec, cal)
    for col in ("Br", "Bc"):
        ms.cols[col] = np.full(len(ms), 64)
    b, _ = validate.predict_set(ms, spec, cal)
    assert np.array_equal(a, b)


def test_cudnn_step_is_the_longer_of_both_gemms_and_one_warpgroups_gemms_and_softmax():
    """cuDNN's serial group (the ping-pong its SASS and profiles show): one round of one block per SM takes at least
    the longer of the tensor pipe's time (both warpgroups' GEMMs) and half of it beside half the MUFU and FP32 time
    and the latency path; adding both warpgroups' GEMMs to the softmax is slower, and either side alone is faster."""
    from perfmodel.model import timing

    sh = AttentionShape(B=1, H=16, N=4096, d=128, dtype="fp16", causal=False)
    spec, k, t = on_h100("sdpa-cudnn", sh)
    cal = calibration.resolve(spec)
    p = engine.evaluate(spec, k, sh, t, cal)
    ts = p.timing.times_s
    ping_pong = max(ts["wgmma"], ts["wgmma"] / 2 + ts["sfu"] / 2 + ts["fp32"] / 2 + ts["latency"])
    assert float(p.time_s) >= float(ping_pong) * (1 - 1e-6)
    args = (p.counts, p.traffic, p.launch.grid_blocks, p.launch.threads, p.blocks_per_sm, spec, cal, k.fit_key)

    def with_serial(serial):
        return float(timing.predict(*args, serial, k.path_pipes, k.pipe_p).time_s)
    assert with_serial(k.serial) == pytest.approx(float(p.time_s))
    assert with_serial((("wgmma", ("sfu", 0.5), ("fp32", 0.5), "latency"),)) > float(p.time_s)
    assert with_serial((("wgmma",),)) < float(p.time_s)
    assert with_serial(((("wgmma", 0.5), ("sfu", 0.5), ("fp32", 0.5)),)) < float(p.time_s)


@pytest.mark.parametrize("kernel, d, compiled", [("sdpa-flash", 80, 96), ("sdpa-flash", 40, 64),
                                                 ("sdpa-cudnn", 80, 128), ("sdpa-cudnn", 32, 64)])
def test_a_head_dim_between_instances_computes_at_the_next_and_moves_its_own_bytes(kernel, d, compiled):
    """A library kernel compiled for a larger head dim loops over all of its columns (the rest zero-filled):
    its MMAs are those of the compiled head dim, its global-memory bytes the problem's."""
    from perfmodel.kernels import get

    k = get(kernel)
    facts = k.facts("sm_90")[0]
    own = AttentionShape(B=2, H=16, N=2048, d=d, dtype="bf16")
    at = AttentionShape(B=2, H=16, N=2048, d=compiled, dtype="bf16")
    tiles = k.default_tiles(own, gpu_mod.resolve("h200"))
    got, big = k.counts(own, tiles, facts), k.counts(at, tiles, facts)
    assert float(got.tensor_fma) == float(big.tensor_fma)
    assert float(got.dram_read_once) == pytest.approx(float(big.dram_read_once) * d / compiled)


def test_cudnn_masks_every_score_when_the_keys_leave_the_last_tile_ragged_unless_causal():
    """Keys that do not fill the last 128-key tile add PAD_ALU instructions a score to every tile of the plain
    forward, on the step's chain; the causal kernel, which masks its diagonal tiles anyway, adds none."""
    from perfmodel.kernels import get

    k = get("sdpa-cudnn")
    spec = gpu_mod.resolve("h200")
    facts, _ = k.facts(spec.sm)
    tiles = k.default_tiles(AttentionShape(2, 16, 5120, 128, "bf16", False), spec)
    for causal in (False, True):
        even, ragged = (k.counts(AttentionShape(2, 16, N, 128, "bf16", causal), tiles, facts) for N in (5120, 5000))
        extra = float(ragged.warp_other - even.warp_other)
        scores = 2 * 16 * (40 * 40 if not causal else 40 * 41 / 2) * 128 * 128
        if causal:
            assert extra == pytest.approx(0, abs=1e-6 * scores)
            assert float(ragged.path_cycle) == pytest.approx(float(even.path_cycle))
        else:
            assert extra == pytest.approx(k.PAD_ALU * scores / 32, rel=0.02)
            assert float(ragged.path_cycle) > float(even.path_cycle) + 40 * 2 * 64 * k.PAD_ALU * 0.99


def test_cudnn_decode_takes_64_keys_a_step_at_d_256():
    """cuDNN's one-query kernel walks 128 keys a step (32 a warp) up to d = 128 and 64 (16 a warp) at d = 256, as
    its SASS counts show."""
    from perfmodel import api

    for d, per_warp in ((64, 32), (128, 32), (256, 16)):
        r = api.predict(gpu="h200", kernel="sdpa-cudnn", B=8, H=32, Hkv=8, Nq=1, Nk=8192, d=d, dtype="bf16")
        assert int(np.asarray(r.prediction.tiles.Bc)) == per_warp, d
