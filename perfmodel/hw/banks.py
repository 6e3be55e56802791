"""Shared-memory wavefronts from the per-lane addresses a warp issues.

Hardware rule (CUDA Programming Guide, shared memory; reference/hopper-measured.md, where it holds exactly):
32 banks of 4 bytes, successive words in successive banks; lanes reading the *same* word are served at once
(broadcast); a warp instruction needs as many wavefronts as the largest number of *distinct* words that fall in
one bank. 64- and 128-bit accesses are split into 2 or 4 phases of 16 or 8 lanes, each phase at least one
wavefront (the usual model; see reference/measurement-notes.md 4.1-4.2).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

WARP = 32


def wavefronts(byte_addrs, width_bytes: int = 4, banks: int = 32, bank_bytes: int = 4) -> int:
    """Wavefronts for ONE warp-level shared-memory instruction.

    ``byte_addrs``: start address of each *active* lane, in lane order (inactive lanes left out, or None).
    """
    phases = {4: 1, 8: 2, 16: 4}[width_bytes]
    per_phase = WARP // phases
    addrs = list(byte_addrs)
    if not any(a is not None for a in addrs):
        return 0
    total = 0
    for p in range(phases):
        group = [a for a in addrs[p * per_phase:(p + 1) * per_phase] if a is not None]
        words_per_bank: dict[int, set[int]] = {}
        for a in group:
            for w in range(a // bank_bytes, (a + width_bytes) // bank_bytes):
                words_per_bank.setdefault(w % banks, set()).add(w)
        total += max((len(v) for v in words_per_bank.values()), default=0)
    return total


@lru_cache(maxsize=None)
def _strided_table(banks: int = 32) -> np.ndarray:
    """table[s % banks, a] = wavefronts of a 32-bit access by the first ``a`` lanes at word stride s (s != 0)."""
    table = np.zeros((banks, WARP + 1), dtype=np.int64)
    for s_mod in range(banks):
        s = s_mod if s_mod else banks  # any stride that is a multiple of 32 behaves like 32
        for a in range(1, WARP + 1):
            table[s_mod, a] = wavefronts([t * s * 4 for t in range(a)])
    return table


def strided(stride_words, active_lanes=WARP):
    """Wavefronts of 32-bit accesses where lane t reads word base + t*stride (vectorised over arrays).

    stride 0 is a broadcast (one word for the whole warp): 1 wavefront. The gcd rule follows:
    a full warp at stride s needs gcd(s, 32) wavefronts.
    """
    s = np.asarray(stride_words, dtype=np.int64)
    a = np.clip(np.asarray(active_lanes, dtype=np.int64), 0, WARP)
    out = _strided_table()[np.mod(s, 32), a]
    return np.where(a == 0, 0, np.where(s == 0, 1, out))
