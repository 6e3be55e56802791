"""Every closed form of the kernels' loop nests against a literal enumeration (tests/enumerate_kernels.py)."""

import numpy as np
import pytest

import enumerate_kernels as enum
from util import evaluate

FIELDS = ["fma", "exp", "cmp", "add", "mul", "warp_fp32", "warp_sfu", "warp_lds", "warp_sts", "warp_ldg",
          "warp_stg", "smem_ld_bytes", "smem_st_bytes", "smem_ld_wavefronts", "smem_st_wavefronts",
          "l2_read_bytes", "l2_write_bytes"]
LAUNCH = {"grid_blocks": "grid_blocks", "threads_per_block": "threads", "smem_bytes_per_block": "smem_bytes"}


def fa1(B, H, N, d, Br, Bc):
    return evaluate("fa1", B, H, N, d, Br=Br, Bc=Bc)


def fa2(B, H, N, d, Br, Bc, threads=128, pad=1):
    return evaluate("fa2", B, H, N, d, Br=Br, Bc=Bc, threads=threads, pad=pad)

# (B, H, N, d, Br, Bc): tiles that divide N and tiles that do not, partial warps (Br not a multiple of 32),
# several warps, d below, at and above 32, strides that conflict (d = 8, 16, 32) and ones that do not.
FA1_CASES = [
    (1, 1, 16, 8, 8, 8), (1, 2, 20, 8, 8, 6), (2, 1, 33, 4, 16, 8), (1, 1, 40, 32, 32, 16),
    (1, 1, 37, 16, 40, 12), (1, 1, 70, 8, 64, 32), (1, 1, 24, 5, 7, 5), (1, 1, 19, 3, 19, 20),
    (1, 1, 9, 16, 4, 64), (1, 1, 66, 2, 33, 7),
]
FA2_CASES = [  # (B, H, N, d, Br, Bc, threads, pad)
    (1, 1, 16, 8, 8, 8, 32, 1), (1, 2, 20, 8, 8, 6, 64, 1), (2, 1, 33, 32, 16, 8, 64, 0),
    (1, 1, 40, 40, 12, 40, 96, 1), (1, 1, 37, 16, 40, 12, 128, 0), (1, 1, 70, 8, 33, 35, 32, 5),
    (1, 1, 24, 5, 7, 5, 64, 2), (1, 1, 50, 64, 16, 16, 32, 0), (1, 1, 9, 16, 4, 64, 256, 1),
]


def _check(pred, want, cfg):
    got = {f: getattr(pred.counts, f) for f in FIELDS}
    got.update({f: getattr(pred.launch, g) for f, g in LAUNCH.items()})
    for f, v in got.items():
        assert float(np.asarray(v)) == want[f], f"{f} for {cfg}: closed form {float(np.asarray(v))} vs " \
            f"enumeration {want[f]}"


@pytest.mark.parametrize("cfg", FA1_CASES)
def test_fa1_closed_forms_equal_enumeration(cfg):
    _check(fa1(*cfg), enum.fa1(*cfg), cfg)


@pytest.mark.parametrize("cfg", FA2_CASES)
def test_fa2_closed_forms_equal_enumeration(cfg):
    B, H, N, d, Br, Bc, T, pad = cfg
    _check(fa2(B, H, N, d, Br, Bc, threads=T, pad=pad), enum.fa2(*cfg), cfg)


def _aligned(N, d, Br):
    # sector counts assume runs that start on a 32-B sector: d, N and Br multiples of 8 floats
    return N % 8 == 0 and d % 8 == 0 and Br % 8 == 0


@pytest.mark.parametrize("cfg", [c for c in FA1_CASES if _aligned(c[2], c[3], c[4])])
def test_fa1_sectors_for_aligned_rows(cfg):
    assert float(fa1(*cfg).counts.gld_sectors) == enum.fa1(*cfg)["gld_sectors"]


@pytest.mark.parametrize("cfg", [c for c in FA2_CASES if _aligned(c[2], c[3], c[4])])
def test_fa2_sectors_for_aligned_rows(cfg):
    B, H, N, d, Br, Bc, T, pad = cfg
    got = float(fa2(B, H, N, d, Br, Bc, threads=T, pad=pad).counts.gld_sectors)
    assert got == enum.fa2(*cfg)["gld_sectors"]


def test_counts_are_vectorised():
    # arrays of configurations give the same numbers as one configuration at a time
    Ns = np.array([16, 20, 33, 40])
    batch = fa1(1, 1, Ns, 8, 8, 6).counts
    for i, n in enumerate(Ns):
        one = fa1(1, 1, int(n), 8, 8, 6).counts
        for f in FIELDS:
            assert np.broadcast_to(getattr(batch, f), Ns.shape)[i] == float(np.asarray(getattr(one, f)))


def test_flops_of_the_two_matmuls_dominate_at_scale():
    # Q K^T and P V are 2 N^2 d FMAs per head; everything else is O(N^2) or O(N d)
    c = fa2(1, 1, 1024, 64, 64, 64).counts
    assert float(c.fma) == pytest.approx(2 * 1024 * 1024 * 64, rel=0.02)
    c1 = fa1(1, 1, 1024, 64, 64, 64).counts
    assert float(c1.fma) == pytest.approx(2 * 1024 * 1024 * 64, rel=0.02)


def test_dram_traffic_is_compulsory_when_the_working_set_fits():
    """Reads are the first touches; the written output stays in L2 (write-back) while it is below the dirty bytes
    L2 keeps at the kernel's end, and only fa1's re-writes leak their small cleaning share (perfmodel.model.memory;
    research/tests/test_dram_vs_ncu.py holds both to Nsight Compute)."""
    from perfmodel.model.memory import RULE
    B, H, N, d = 2, 4, 512, 32
    c1 = fa1(B, H, N, d, 32, 32).traffic
    # Q, K, V and the initial O, l, m read once; O, l, m re-written on every later K/V tile (N/Bc - 1 of them)
    assert float(c1.dram_read_bytes) == B * H * (4 * N * d + 2 * N) * 4
    rewrites = B * H * (N // 32 - 1) * (N * d + 2 * N) * 4
    assert float(c1.dram_write_bytes) == pytest.approx(RULE.clean * rewrites)
    c2 = fa2(B, H, N, d, 32, 32).traffic
    assert float(c2.dram_read_bytes) == B * H * 3 * N * d * 4
    assert float(c2.dram_write_bytes) == 0
    # an output beyond what L2 keeps dirty is written back, all but that
    big = fa2(64, 16, 1024, 64, 64, 64)
    out = 64 * 16 * 1024 * 64 * 4
    kept = RULE.dirty_kept * big.gpu.l2_bytes
    assert float(big.traffic.dram_write_bytes) == pytest.approx(out - kept)


def test_dram_rereads_appear_when_the_working_set_exceeds_l2():
    big = fa1(32, 16, 4096, 128, 64, 64).traffic   # 512 heads x 4 MB of Q/O: far beyond 50 MB of L2
    compulsory = 32 * 16 * (4 * 4096 * 128 + 2 * 4096) * 4
    assert float(big.dram_read_bytes) > 2 * compulsory
