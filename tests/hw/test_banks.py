import math

import numpy as np
import pytest

from perfmodel.hw import banks


@pytest.mark.parametrize("stride", [1, 2, 3, 4, 8, 16, 32, 33, 37, 64, 96])
def test_gcd_rule_for_full_warps(stride):
    addrs = [t * stride * 4 for t in range(32)]
    assert banks.wavefronts(addrs) == math.gcd(stride, 32)
    assert banks.strided(stride) == math.gcd(stride, 32)


def test_broadcast_and_partial_warps():
    assert banks.wavefronts([128] * 32) == 1                 # one word for every lane
    assert banks.strided(0) == 1
    assert banks.wavefronts([0, 128, 256, 0, 128]) == 3      # three distinct words in bank 0
    assert banks.strided(32, 5) == 5
    assert banks.strided(32, 0) == 0
    assert list(banks.strided(np.array([1, 32, 16]), np.array([32, 16, 16]))) == [1, 16, 8]


def test_wide_accesses_are_split_into_phases():
    # 64-bit: two phases of 16 lanes, consecutive -> 2 wavefronts; 128-bit: four phases -> 4
    assert banks.wavefronts([t * 8 for t in range(32)], width_bytes=8) == 2
    assert banks.wavefronts([t * 16 for t in range(32)], width_bytes=16) == 4
    # 128-bit at a stride of 32 words: each phase of 8 lanes lands on the same 4 banks -> 8 per phase
    assert banks.wavefronts([t * 128 for t in range(32)], width_bytes=16) == 32
