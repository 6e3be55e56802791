"""The seed report's model (seed 000, "Flash Attention Performance Model"), kept as the named baseline.

As printed in the seed: FLOPs from its loop over (i, j) tiles; DRAM bytes = Q, K, V read, O written, l and m
read and written once; L2 bytes = DRAM bytes ("all DRAM accesses also go through L2"); time = the max of
compute, DRAM / (BW x 1%), L2 / (BW x 1%) and L1 x 6.5 / (BW x 10%); roofline = max(FLOPs / peak, DRAM / BW).

Two things the seed does not print, and how this module fills them:
* its L1 byte count ("we count [shared memory's] number of reads & writes"): here, the element reads and
  writes of shared memory in the seed kernel (Kj, Vj stored once per j; Qi stored, S written twice and read
  once, Qi·Kj and S·Vj read per (i, j) pair), 4 B each;
* other GPUs: the seed has one set of constants (RTX 3090 figures) and nothing that depends on the GPU, so
  the baseline uses them as printed on every GPU; this is the model the seed report validates and the one
  this project is measured against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.hw.gpu import GPUSpec
from perfmodel.kernels.common import cdiv

DRAM_UTILISATION = 0.01
L2_UTILISATION = 0.01
L1_UTILISATION = 0.10
BANK_CONFLICT_FACTOR = 6.5
BYTES_PER_ELEMENT = 4
# The seed's tunable parameters, for the RTX 3090
SEED_PEAK_COMPUTE = 35.58e12
SEED_DRAM_BW = 936.2e9
SEED_L2_BW = 1500.0e9
SEED_L1_BW = 3000.0e9


@dataclass(frozen=True)
class SeedPrediction:
    flops: np.ndarray
    dram_bytes: np.ndarray
    l2_bytes: np.ndarray
    l1_bytes: np.ndarray
    times_s: dict
    time_s: np.ndarray
    bound: np.ndarray
    roofline_time_s: np.ndarray


def constants(gpu: GPUSpec | None = None) -> dict:
    """The seed's tunable parameters, as printed (the GPU is not consulted: see the module docstring)."""
    return dict(peak_compute=SEED_PEAK_COMPUTE, dram_bandwidth=SEED_DRAM_BW,
                l2_bandwidth=SEED_L2_BW, l1_bandwidth=SEED_L1_BW)


def compute_flops(B, H, N, d, Br, Bc):
    """The seed's FLOP loop, summed in closed form over its Tr x Tc iterations, times B*H blocks."""
    B, H, N, d, Br, Bc = (np.asarray(x, dtype=np.int64) for x in (B, H, N, d, Br, Bc))
    Tr, Tc = cdiv(N, Br), cdiv(N, Bc)
    per_pair = (2 * Br * Bc * d      # flops_qk
                + Br * Bc            # flops_mij
                + 2 * Br * Bc        # flops_pij
                + Br * Bc            # flops_lij
                + Br                 # flops_mi_new
                + 6 * Br             # flops_li_new
                + 2 * Br * Bc * d    # flops_pijv
                + 10 * Br * d)       # flops_o1
    return (Tr * Tc * per_pair * B * H).astype(float)


def compute_memory_accesses(B, H, N, d, Br, Bc):
    B, H, N, d, Br, Bc = (np.asarray(x, dtype=np.int64) for x in (B, H, N, d, Br, Bc))
    e = BYTES_PER_ELEMENT
    dram_read_qkv = 3 * (B * H * N * d * e)
    dram_read_lm = 2 * (B * H * N * e)
    dram_write_o = B * H * N * d * e
    dram_write_lm = 2 * B * H * N * e
    dram = (dram_read_qkv + dram_read_lm + dram_write_o + dram_write_lm).astype(float)
    Tr, Tc = cdiv(N, Br), cdiv(N, Bc)
    l1_elems = Tc * 2 * Bc * d + Tc * Tr * (Br * d + 4 * Br * Bc * d + 3 * Br * Bc)
    l1 = (B * H * l1_elems * e).astype(float)
    return dram, dram.copy(), l1


def predict(gpu: GPUSpec, B, H, N, d, Br, Bc) -> SeedPrediction:
    c = constants(gpu)
    flops = compute_flops(B, H, N, d, Br, Bc)
    dram, l2, l1 = compute_memory_accesses(B, H, N, d, Br, Bc)
    times = {
        "compute": flops / c["peak_compute"],
        "dram": dram / (c["dram_bandwidth"] * DRAM_UTILISATION),
        "l2": l2 / (c["l2_bandwidth"] * L2_UTILISATION),
        "l1": l1 * BANK_CONFLICT_FACTOR / (c["l1_bandwidth"] * L1_UTILISATION),
    }
    names = list(times)
    stacked = np.stack(np.broadcast_arrays(*times.values()))
    time = stacked.max(axis=0)
    bound = np.asarray(names)[stacked.argmax(axis=0)]
    roofline = np.maximum(flops / c["peak_compute"], dram / c["dram_bandwidth"])
    return SeedPrediction(flops, dram, l2, l1, times, time, bound, roofline)
