"""A toy kernel in one file, as the guide (docs/contributing.md) describes: every (b, h) is one block of 64 threads
that streams K and V once and does 2 N^2 d FMAs on the FP32 pipe. Registering it is all it takes to predict it."""

from dataclasses import dataclass

import numpy as np

from perfmodel.kernels import ArchFacts, Kernel, Tiles, register
from perfmodel.model.counts import Counts


@dataclass(frozen=True)
class ToyTiles(Tiles):
    Br: object = 64
    Bc: object = 64

    @property
    def threads(self):
        return 64 + 0 * np.asarray(self.Br)


class Toy(Kernel):
    name = "toy"
    description = "a toy streaming kernel for the interface test"
    Tiles = ToyTiles
    arch = {"sm_90": ArchFacts(regs=32)}

    def default_tiles(self, shape=None, gpu=None):
        return ToyTiles()

    def grid_blocks(self, shape, tiles):
        return np.asarray(shape.B) * np.asarray(shape.H)

    def smem_bytes(self, shape, tiles):
        return 4 * (np.asarray(tiles.Br) + 2 * np.asarray(tiles.Bc)) * np.asarray(shape.d)

    def head_counts(self, shape, tiles, facts):
        N, d = np.asarray(shape.N, float), np.asarray(shape.d, float)
        fma = 2 * N * N * d
        return Counts(fma=fma, warp_fp32=fma / 32, l2_read_bytes=3 * N * d * 4, l2_write_bytes=N * d * 4,
                      dram_read_once=3 * N * d * 4, dram_write_once=N * d * 4, path_fp32=fma / 64)


KERNEL = register(Toy())


class ToyGrouped(Toy):
    """The toy for grouped K/V heads and Nq != Nk: each of the H query heads' blocks streams its K/V head's Nk keys
    (Hkv heads of them, each read once from DRAM and H / Hkv times from L2) against its Nq queries."""

    name = "toy-gqa"
    gqa, cross = True, True

    def head_counts(self, shape, tiles, facts):
        Nq, Nk, d = (np.asarray(x, float) for x in (shape.Nq, shape.Nk, shape.d))
        g = np.asarray(shape.group, float)
        fma = 2 * Nq * Nk * d
        kv = 2 * Nk * d * 4
        return Counts(fma=fma, warp_fp32=fma / 32, l2_read_bytes=Nq * d * 4 + kv, l2_write_bytes=Nq * d * 4,
                      dram_read_once=Nq * d * 4 + kv / g, dram_write_once=Nq * d * 4, path_fp32=fma / 64)


class ToyTwoLaunch(Toy):
    """The toy whose call is two launches (a main kernel and a small second one, as split-KV's combine), and which
    runs a backward (2.5 times the forward's work, as FlashAttention counts it) for modes bwd and fwd_bwd."""

    name = "toy-two"
    modes = ("fwd", "bwd")

    def head_counts(self, shape, tiles, facts):
        c = super().head_counts(shape, tiles, facts)
        return c.scaled(2.5) if shape.mode == "bwd" else c

    def companions(self, shape, tiles, facts):
        from perfmodel.kernels.base import Companion, Launch

        blocks = np.asarray(shape.B) * np.asarray(shape.H)
        rows = blocks * np.asarray(shape.Nq, float)
        c = Counts(warp_fp32=rows / 32, l2_read_bytes=rows * 4, dram_read_once=rows * 4, path_fp32=8 + 0 * rows)
        ln = Launch(grid_blocks=blocks, threads=32 + 0 * blocks, smem_bytes=0 * blocks, regs=16 + 0 * blocks)
        return (Companion(counts=c, launch=ln, key=f"{self.name}:second"),)


GROUPED, TWO = register(ToyGrouped()), register(ToyTwoLaunch())
