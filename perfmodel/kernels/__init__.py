"""Kernel variants: each module describes one kernel's loop nest (counts) and launch shape.

Every module offers the same functions, so callers never branch on the kernel:
``counts(gpu, B, H, N, d, Br, Bc, threads, pad, regs, l2_bytes)``, ``check(...)``, ``fits(gpu, d, Br, Bc, threads, pad)``,
``smem_bytes(d, Br, Bc, pad)``, ``block_threads(Br, threads)``, ``grid_blocks(B, H, N, Br)``, and the
constants NAME, DESCRIPTION, SOURCE, REGS_PER_THREAD, DEFAULT_THREADS, DEFAULT_PAD, PADDED.
"""

from perfmodel.errors import InputError
from perfmodel.kernels import fa1, fa2

KERNELS = {fa1.NAME: fa1, fa2.NAME: fa2}


def get(name: str):
    try:
        return KERNELS[name]
    except KeyError:
        raise InputError(f"unknown kernel '{name}'; known: {', '.join(KERNELS)}") from None


def tile_defaults(kernel, Br, threads=None, pad=None):
    """(threads, pad) as the kernel really runs them: fa1 has Br threads and no padding."""
    threads = int(kernel.block_threads(Br, threads if threads is not None else kernel.DEFAULT_THREADS))
    pad = pad if pad is not None and kernel.PADDED else kernel.DEFAULT_PAD
    return threads, int(pad)
