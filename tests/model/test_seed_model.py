import math

import pytest

from perfmodel.hw import gpu
from perfmodel.model import seed as seed_model


def test_flop_loop_as_printed():
    B, H, N, d, Br, Bc = 1, 4, 100, 32, 16, 64
    f = {k: 0 for k in ("qk", "mij", "pij", "lij", "mi", "li", "pijv", "o1")}
    for i in range(math.ceil(N / Br)):           # the seed's loop, literally
        for j in range(math.ceil(N / Bc)):
            f["qk"] += 2 * Br * Bc * d
            f["mij"] += Br * Bc
            f["pij"] += 2 * Br * Bc
            f["lij"] += Br * Bc
            f["mi"] += Br
            f["li"] += 6 * Br
            f["pijv"] += 2 * Br * Bc * d
            f["o1"] += 10 * Br * d
    assert float(seed_model.compute_flops(B, H, N, d, Br, Bc)) == sum(f.values()) * B * H


def test_constants_and_time_as_printed():
    p = seed_model.predict(gpu.resolve("rtx3090"), 1, 4, 512, 32, 32, 32)
    dram = 3 * 4 * 512 * 32 * 4 + 2 * 4 * 512 * 4 + 4 * 512 * 32 * 4 + 2 * 4 * 512 * 4
    assert float(p.dram_bytes) == dram
    assert float(p.times_s["dram"]) == pytest.approx(dram / (936.2e9 * 0.01))
    assert float(p.times_s["l1"]) == pytest.approx(float(p.l1_bytes) * 6.5 / (3000e9 * 0.10))
    assert float(p.time_s) == max(float(v) for v in p.times_s.values())
    assert float(p.roofline_time_s) == pytest.approx(max(float(p.flops) / 35.58e12, dram / 936.2e9))
    assert str(p.bound) == "l1"
