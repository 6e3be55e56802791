"""A toy kernel in one file, as the guide (docs/architecture.md) describes: every (b, h) is one block of 64 threads
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
