"""Occupancy and waves, after CUDA 13.0 ``cuda_occupancy.h`` (reference/measurement-notes.md 5.1), vectorised."""

from __future__ import annotations

import numpy as np

from perfmodel.hw.gpu import GPUSpec


def _round_up(x, m):
    return -(-np.asarray(x) // m) * m


def block_smem_bytes(gpu: GPUSpec, dynamic_smem_bytes):
    """Shared memory one block takes on an SM: its own bytes plus the driver reserve, in allocation units."""
    return _round_up(np.asarray(dynamic_smem_bytes) + gpu.smem_reserved_per_block_bytes,
                     gpu.smem_alloc_granularity_bytes)


def blocks_per_sm(gpu: GPUSpec, threads_per_block, regs_per_thread, dynamic_smem_bytes):
    """Resident blocks per SM: the least of the warp, register, shared-memory and block limits."""
    threads = np.asarray(threads_per_block)
    warps = -(-threads // gpu.warp_size)
    limit_warps = gpu.max_warps_per_sm // np.maximum(warps, 1)
    regs_per_warp = _round_up(np.asarray(regs_per_thread) * gpu.warp_size, gpu.reg_alloc_granularity)
    warps_per_subpart = (gpu.regs_per_sm // gpu.schedulers_per_sm) // np.maximum(regs_per_warp, 1)
    limit_regs = (warps_per_subpart * gpu.schedulers_per_sm) // np.maximum(warps, 1)
    smem = block_smem_bytes(gpu, dynamic_smem_bytes)
    limit_smem = gpu.smem_per_sm_bytes // smem
    out = np.minimum(np.minimum(limit_warps, limit_regs), np.minimum(limit_smem, gpu.max_blocks_per_sm))
    fits = np.asarray(dynamic_smem_bytes) <= gpu.smem_per_block_optin_bytes
    return np.where(fits, out, 0)


def waves(gpu: GPUSpec, grid_blocks, resident_blocks_per_sm):
    """Grid blocks over the blocks the whole GPU holds at once (ncu's launch__waves_per_multiprocessor)."""
    return np.asarray(grid_blocks) / np.maximum(np.asarray(resident_blocks_per_sm) * gpu.sm_count, 1)
