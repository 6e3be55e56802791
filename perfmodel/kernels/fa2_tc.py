"""fa2_tc: the bundled tensor-core FlashAttention-2 forward (csrc/fa2_tc.cu), fp16/bf16 in, fp32 accumulation.

The loop nest (the .cu file's header states it in full): one block of W warps per (Q tile of Br rows, b, h); warp
w owns Br/W = 16*MT query rows (MT = 1 or 2) and reads every K/V tile. Per KV tile of Bc keys, per warp:

    S = Q K^T       MT*Bc*d/128 mma.m16n8k16, Bc*d/256 ldmatrix.x4 (K), MT*d/16 ldmatrix.x4 (Q; none when
                    MT = 1 and d <= 128: Q is then held in registers)
    softmax         per thread 4*MT*NS FMNMX, 4*MT shuffles (row max over the quad), 2*MT + 4*MT*NS MUFU.EX2,
                    4*MT*NS FFMA (scale and subtract), 4*MT*NS FADD (row sums), 4*MT*(d/8) FMUL (O *= alpha),
                    2*MT*NS conversions to 16-bit pairs (NS = Bc/8)
    O += P V        MT*Bc*d/128 mma.m16n8k16, Bc*d/256 ldmatrix.x4.trans (V)
    per block       Bc*d/128 cp.async 16-byte warp instructions for K and V (2*Bc*d*2 bytes), 2 __syncthreads

KV tiles per block: ceil(N/Bc); causal: ceil(min(N, q0 + Br)/Bc) (tiles above the diagonal skipped), the diagonal
and ragged tiles masked. The XOR swizzle makes every ldmatrix and cp.async phase conflict-free: 4 wavefronts per
512-byte warp instruction. Instructions beyond these (addresses, loop control, masking) are per-architecture
estimates until read off the SASS.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from perfmodel.kernels import backward
from perfmodel.kernels.base import ArchFacts, Companion, Kernel, Launch, Tiles, register
from perfmodel.kernels.common import arr, cdiv
from perfmodel.model.counts import Counts

# (d, Br, Bc, warps) compiled in csrc/fa2_tc.cu (kFa2TcInstances); tests/kernels/test_fa2_tc_model.py checks the two agree
INSTANCES = (
    (32, 128, 128, 4), (32, 128, 64, 4), (32, 64, 64, 4), (32, 128, 64, 8),
    (64, 128, 128, 4), (64, 128, 64, 4), (64, 128, 32, 4), (64, 64, 64, 4), (64, 64, 128, 4), (64, 128, 64, 8),
    (64, 128, 128, 8),
    (128, 128, 64, 4), (128, 128, 32, 4), (128, 64, 64, 4), (128, 64, 128, 4), (128, 64, 32, 4), (128, 128, 64, 8),
    (128, 128, 128, 8),
    (256, 64, 64, 4), (256, 64, 32, 4), (256, 128, 64, 8),
)
# Registers per thread of each instance, (d, Br, Bc, warps) -> regs, read off ptxas -v for sm_90
# (research/data/h100/fa2_tc_ptxas.txt; fp16 and bf16 alike). They set the blocks per SM of a prediction;
# a measured row brings its own (cudaFuncGetAttributes). tests/kernels/test_fa2_tc_model.py checks both against this table.
REGS = {
    (32, 64, 64, 4): 96, (32, 128, 64, 4): 167, (32, 128, 64, 8): 97, (32, 128, 128, 4): 251,
    (64, 64, 64, 4): 128, (64, 64, 128, 4): 179, (64, 128, 32, 4): 166, (64, 128, 64, 4): 222,
    (64, 128, 64, 8): 130, (64, 128, 128, 4): 255, (64, 128, 128, 8): 171,
    (128, 64, 32, 4): 170, (128, 64, 64, 4): 173, (128, 64, 128, 4): 239, (128, 128, 32, 4): 233,
    (128, 128, 64, 4): 255, (128, 128, 64, 8): 174, (128, 128, 128, 8): 239,
    (256, 64, 32, 4): 246, (256, 64, 64, 4): 252, (256, 128, 64, 8): 238,
}
# Spilled registers in the KV loop, (d, Br, Bc, warps) -> (LDL, STL) per warp per KV tile, read off the sm_90
# listing (research/data/h100/sass/fa2_tc.sass, research/scripts/sass_loops.py; a test): only the instance that
# holds 255 registers spills (ptxas: 44 bytes of spill stores, 32 of loads). Each reload waits before its value's
# use: on the block's path (``local``).
SPILLS = {(128, 128, 64, 4): (4, 3)}
# The fastest measured instance per head dimension on the H100 at B=4, H=16, N=4096, fp16, non-causal
# (examples/measurements/h100/fa2_tc.csv): the kernel's default tiles.
DEFAULTS = {32: (128, 128, 4), 64: (128, 128, 4), 128: (128, 64, 4), 256: (64, 64, 4)}

# The instances compiled for the inference path (fa2_tc_splitkv_instances in csrc/fa2_tc.cu): grouped K/V heads,
# Nq != Nk, the log-sum-exp output or split-KV run one of these; the square one-split forward runs INSTANCES
EXT_INSTANCES = ((32, 64, 64, 4), (64, 64, 128, 4), (64, 128, 128, 4), (128, 64, 128, 4), (128, 128, 64, 4),
                 (256, 64, 64, 4))
# the inference path's default tiles per head dimension: 64 query rows a block for a few queries (decode), else the
# square forward's
EXT_DEFAULTS = {32: (64, 64, 4), 64: (64, 128, 4), 128: (64, 128, 4), 256: (64, 64, 4)}

# The backward's compiled instances (csrc/fa2_tc_bwd.cu, kFa2TcBwdInstances, which lists them as (d, Bc, Br, warps)),
# here (d, Br, Bc, warps) as the forward's: Br query rows, Bc keys a tile; and each one's registers and dynamic shared
# memory on sm_90 (ptxas -v, nvcc 13.0; fp16 and bf16 alike; csrc/FA2_TC_BWD_NOTES.md)
BWD_INSTANCES = {
    (32, 128, 128, 8): (237, 116736),
    (64, 128, 128, 8): (255, 165888), (64, 64, 128, 8): (217, 99328), (64, 128, 64, 8): (204, 116736),
    (64, 64, 64, 4): (227, 66560),
    (128, 64, 128, 8): (255, 164864), (128, 64, 64, 8): (219, 115712), (128, 128, 64, 8): (255, 198656),
    (256, 64, 64, 8): (255, 214016),
}
# FlashAttention-2's backward tiles on sm_90 (run_mha_bwd_hdim*: Bc x Br, warps), the backward's defaults
BWD_DEFAULTS = {32: (128, 128, 8), 64: (128, 128, 8), 128: (64, 128, 8), 256: (64, 64, 8)}

# The same source built for sm_80, sm_86 and sm_89 (nvcc 13.0, torch's extension flags;
# research/data/sass_sm89/): ptxas gives every instance the same registers on the three (a test), fewer
# or more than sm_90's, and the sm_89 listing spills in the loops of two instances (read as SPILLS is; the sm_86
# listing is the same instructions). No GPU of these architectures is measured here.
REGS_SM8X = {
    (32, 64, 64, 4): 85, (32, 128, 64, 4): 165, (32, 128, 64, 8): 85, (32, 128, 128, 4): 241,
    (64, 64, 64, 4): 128, (64, 64, 128, 4): 168, (64, 128, 32, 4): 161, (64, 128, 64, 4): 213,
    (64, 128, 64, 8): 124, (64, 128, 128, 4): 255, (64, 128, 128, 8): 182,
    (128, 64, 32, 4): 166, (128, 64, 64, 4): 168, (128, 64, 128, 4): 236, (128, 128, 32, 4): 228,
    (128, 128, 64, 4): 255, (128, 128, 64, 8): 190, (128, 128, 128, 8): 236,
    (256, 64, 32, 4): 235, (256, 64, 64, 4): 247, (256, 128, 64, 8): 231,
}
SPILLS_SM8X = {(64, 64, 128, 4): (3, 3), (128, 128, 64, 4): (2, 2)}

# Warp instructions of each instance, (d, Br, Bc, warps) -> (tile, causal, ragged, last, once), read off its listing
# by research/scripts/sass_code.py (a test): a KV tile's path; what a tile adds where a warp masks it, causal or ragged; the
# next K's copies, which the last tile skips; the code a warp runs once (prologue and epilogue). sm_90: the H100's
# build (research/data/h100/sass/fa2_tc.sass); enumerated warp by warp, they give Nsight Compute's executed
# instructions within 0.06% in every profiled configuration. fp16's listing; bf16's instances are taken to match
# (the same registers, the same instructions but for the conversions' type).
CODE = {
    (32, 64, 64, 4): (285, 67, 50, 13, 279), (32, 128, 64, 4): (503, 130, 81, 14, 419),
    (32, 128, 64, 8): (275, 67, 50, 11, 273), (32, 128, 128, 4): (880, 274, 166, 22, 402),
    (64, 64, 64, 4): (362, 67, 50, 19, 392), (64, 64, 128, 4): (622, 130, 97, 31, 395),
    (64, 128, 32, 4): (395, 66, 41, 14, 612), (64, 128, 64, 4): (631, 130, 81, 20, 619),
    (64, 128, 64, 8): (346, 78, 54, 16, 358), (64, 128, 128, 4): (1129, 271, 166, 36, 596),
    (64, 128, 128, 8): (602, 142, 102, 24, 365),
    (128, 64, 32, 4): (318, 34, 25, 19, 573), (128, 64, 64, 4): (514, 79, 55, 36, 578),
    (128, 64, 128, 4): (910, 139, 102, 58, 575), (128, 128, 32, 4): (556, 80, 46, 22, 975),
    (128, 128, 64, 4): (917, 143, 86, 35, 980), (128, 128, 64, 8): (491, 78, 54, 24, 563),
    (128, 128, 128, 8): (874, 139, 102, 40, 563),
    (256, 64, 32, 4): (550, 43, 30, 34, 737), (256, 64, 64, 4): (874, 75, 54, 60, 770),
    (256, 128, 64, 8): (818, 75, 54, 40, 703),
}
# The same read off the sm_89 build (research/data/sass_sm89/fa2_tc_sm89.sass); the sm_86 listing gives the
# same counts and the sm_80 one the same but for one instruction run once, more or fewer, in four instances (a test)
CODE_SM8X = {
    (32, 64, 64, 4): (303, 66, 49, 11, 213), (32, 128, 64, 4): (523, 130, 81, 11, 329),
    (32, 128, 64, 8): (292, 66, 49, 8, 208), (32, 128, 128, 4): (900, 275, 166, 19, 335),
    (64, 64, 64, 4): (382, 66, 49, 17, 302), (64, 64, 128, 4): (657, 130, 97, 29, 332),
    (64, 128, 32, 4): (421, 66, 41, 11, 492), (64, 128, 64, 4): (661, 130, 81, 17, 513),
    (64, 128, 64, 8): (364, 77, 54, 14, 298), (64, 128, 128, 4): (1135, 275, 167, 33, 525),
    (64, 128, 128, 8): (626, 141, 103, 24, 311),
    (128, 64, 32, 4): (339, 34, 25, 19, 464), (128, 64, 64, 4): (534, 77, 55, 34, 490),
    (128, 64, 128, 4): (912, 141, 102, 56, 505), (128, 128, 32, 4): (580, 83, 46, 19, 831),
    (128, 128, 64, 4): (924, 147, 87, 34, 854), (128, 128, 64, 8): (510, 77, 54, 24, 477),
    (128, 128, 128, 8): (876, 141, 102, 38, 493),
    (256, 64, 32, 4): (556, 45, 30, 34, 647), (256, 64, 64, 4): (880, 77, 55, 58, 664),
    (256, 128, 64, 8): (822, 77, 54, 38, 614),
}

# per-step instruction estimates for tiles outside the tables (and FlashAttention-2's kernels, whose code is not
# read): a tile's instructions beyond the counted ones, per 16-wide k-step, and the mask's per masked score
_OVERHEADS = {"tile": 60, "kstep": 2, "mask_elem": 1}
_SM8X = ArchFacts(regs=255, overheads=_OVERHEADS, instance_regs=REGS_SM8X, instance_spills=SPILLS_SM8X,
                  instance_code=CODE_SM8X,
                  source="registers, spills and instructions: ptxas -v and cuobjdump -sass, nvcc 13.0, sm_80/sm_86/"
                         "sm_89 alike (no such GPU measured)")
ARCH = {
    # registers per thread differ per instance (REGS); this is the most any holds (d = 128, 128 x 64, 4 warps),
    # for tiles outside the table
    "sm_90": ArchFacts(regs=255, overheads=_OVERHEADS, instance_regs=REGS, instance_spills=SPILLS, instance_code=CODE,
                       source="registers, spills and instructions: ptxas -v and cuobjdump -sass of the measured H100 "
                              "build"),
    "sm_80": _SM8X, "sm_86": _SM8X, "sm_89": _SM8X,
}


@dataclass(frozen=True)
class FA2TCTiles(Tiles):
    """Br query rows and Bc keys per tile, ``warps`` warps per block (each owning Br/warps rows), and the forward's
    split-KV count (1: no split; its CSV column ``splits``)."""

    warps: object = 4
    splits: object = 1

    @property
    def threads(self):
        return 32 * np.asarray(self.warps)

    def columns(self) -> dict:
        return dict(super().columns(), splits=self.splits)

    @classmethod
    def from_columns(cls, cols):
        return cls(Br=cols["Br"], Bc=cols["Bc"], warps=np.asarray(cols["threads"]) // 32,
                   splits=cols.get("splits", 1))


def floor_sum(n, m, a, b):
    """sum_{i=0}^{n-1} floor((a*i + b) / m), vectorised (the standard Euclid-like reduction)."""
    n, m, a, b = (np.array(np.broadcast_to(arr(x), np.broadcast_shapes(*(np.shape(y) for y in (n, m, a, b)))))
                  for x in (n, m, a, b))
    ans = np.zeros_like(n)
    live = n > 0
    while live.any():
        q = np.where(live, a // m, 0)
        ans += np.where(live, (n - 1) * n // 2 * q, 0)
        a = np.where(live, a % m, a)
        q = np.where(live, b // m, 0)
        ans += np.where(live, n * q, 0)
        b = np.where(live, b % m, b)
        y = a * n + b
        live = live & (y >= m)
        n, b, m, a = np.where(live, y // m, n), np.where(live, y % m, b), np.where(live, a, m), np.where(live, m, a)
    return ans


def kv_tiles(Nq, Nk, Br, Bc, causal: bool, splits=1):
    """(KV tiles summed over a head's blocks, Q-tile blocks per head). Causal is aligned bottom-right: Q tile i
    (rows i Br ..) sees keys below min(Nk, (i + 1) Br + Nk - Nq), none where that is not positive; the last sees
    all Nk. ``splits`` > 1: each Q tile's key tiles are cut into that many blocks of ceil(tiles / splits) (the last
    ones shorter or empty), which the sum counts once."""
    Nq, Nk, Br, Bc = (arr(x) for x in (Nq, Nk, Br, Bc))
    Tr, Tc = cdiv(Nq, Br), cdiv(Nk, Bc)
    if not causal:
        return Tr * Tc, Tr
    off = Nk - Nq
    # blocks i0 .. Tr-2 see ceil(((i + 1) Br + off) / Bc) key tiles; those below i0 see none
    i0 = np.clip(cdiv(1 - off, Br) - 1, 0, np.maximum(Tr - 1, 0))
    inner = floor_sum(Tr - 1 - i0, Bc, Br, Br * (i0 + 1) + off + Bc - 1)
    return inner + Tc, Tr


def num_splits(batch_nheads_mblocks, num_sms: int, num_n_blocks, max_splits: int = 128):
    """flash_api.cpp's num_splits_heuristic, vectorised: 1 when the grid nearly fills the GPU, else the fewest
    splits whose wave efficiency is within 85% of the best."""
    bnm = np.asarray(batch_nheads_mblocks, dtype=np.int64)
    nnb = np.asarray(num_n_blocks, dtype=np.int64)
    bnm, nnb = np.broadcast_arrays(bnm, nnb)
    limit = np.minimum(np.minimum(max_splits, num_sms), nnb)
    effs = []
    for s in range(1, max_splits + 1):
        eligible = (s == 1) | (cdiv(nnb, s) != cdiv(nnb, max(s - 1, 1)))
        waves = bnm * s / num_sms
        eff = np.where(eligible & (s <= limit), waves / np.ceil(waves), 0.0)
        effs.append(eff)
    effs = np.stack(effs)
    best = effs.max(axis=0)
    ok = effs >= 0.85 * best
    first = np.argmax(ok, axis=0) + 1
    return np.where(bnm >= 0.8 * num_sms, 1, np.where(ok.any(axis=0), first, 1))


def fold_groups(shape, drop_empty: bool = False):
    """A decode step's problem as FlashAttention-2 (flash_api.cpp, seqlenq_ngroups_swapped) and fa2_tc run it: with
    one query and grouped heads, the H / Hkv query heads of a K/V head become that many query rows of one head (Hkv
    heads of Nq = H / Hkv); one query alone sees every key (causal or not). Vectorised; the shape as it is where
    nothing folds. ``drop_empty``: a kernel whose blocks of queries that see no key (causal, Nq > Nk) write zeros
    and exit before any load (FlashAttention-2: n_block_max <= 0) runs the last Nk rows' work alone; fa2_tc's such
    blocks still load their Q tile and walk an empty loop, which its counts hold."""
    if drop_empty and shape.causal and np.any(arr(shape.Nq) > arr(shape.Nk)):
        Nq = np.minimum(arr(shape.Nq), arr(shape.Nk))
        shape = dataclasses.replace(shape, Nq=Nq, N=Nq)
    swap = (arr(shape.Nq) == 1) & (arr(shape.H) > arr(shape.Hkv)) & (arr(shape.d) % 8 == 0)
    if not np.any(swap):
        return shape
    g = shape.group
    return dataclasses.replace(shape, H=np.where(swap, shape.Hkv, shape.H), Nq=np.where(swap, g, shape.Nq),
                               N=np.where(swap, g, shape.Nq))


def by_instance(table: dict, shape, tiles, default):
    """Each configuration's entry of ``table``, keyed by compiled instance (d, Br, Bc, warps), and ``default`` where
    it has none; a table of tuples (and a tuple default) gives one array per field."""
    d, Br, Bc, W = (arr(x) for x in (shape.d, tiles.Br, tiles.Bc, tiles.warps))
    multi = isinstance(default, tuple)
    size = np.broadcast_shapes(d.shape, Br.shape, Bc.shape, W.shape)
    out = [np.full(size, v) for v in (default if multi else (default,))]
    for (di, bri, bci, wi), entry in table.items():
        on = (d == di) & (Br == bri) & (Bc == bci) & (W == wi)
        out = [np.where(on, v, o) for v, o in zip(entry if multi else (entry,), out)]
    return out if multi else out[0]


def masked_warp_tiles(Nq, Nk, Br, Bc, W, causal: bool):
    """The KV tiles a head's warps mask, summed over its warps: fa2_tc.cu masks a tile that reaches past Nk or (causal)
    past the warp's first query row's last key. Causal: block q's warp w (first row r = q Br + w Br/W) walks
    ceil(min(Nk, q Br + Br + Nk - Nq) / Bc) tiles, those from floor((r + Nk - Nq + 1) / Bc) on masked; the last
    block's warps, whose rows may lie past Nq, mask at least the ragged tile. Closed form over the blocks
    (floor_sum); research/scripts/sass_code.py enumerates it for Nq = Nk."""
    Nq, Nk, Br, Bc, W = (arr(x) for x in (Nq, Nk, Br, Bc, W))
    Tr = cdiv(Nq, Br)
    ragged = (Nk % Bc > 0).astype(np.int64)
    if not causal:
        return Tr * W * ragged
    off = Nk - Nq
    RW = Br // np.maximum(W, 1)
    walked = floor_sum(Tr - 1, Bc, Br, np.maximum(Br + off + Bc - 1, 0))     # tiles of blocks 0 .. Tr - 2
    total = 0 * Nq
    for w in range(int(np.max(W))):
        first = w * RW + 1 + off
        unmasked = floor_sum(Tr - 1, Bc, Br, np.maximum(first, 0))
        last = np.maximum(cdiv(Nk, Bc) - np.maximum((Tr - 1) * Br + first, 0) // Bc, ragged)
        total = total + np.where(w < W, walked - unmasked + last, 0)
    return total


def _warp_tile_counts(MT, Bc, d, NS, KQ, NO, qreg, elem_fp32):
    """(mma, ldmatrix, SFU, FP32, shuffle) warp instructions of one warp per KV tile."""
    mma = 2 * MT * Bc * d // 128
    ldsm = 2 * (Bc * d // 256) + np.where(qreg, 0, MT * KQ)
    sfu = 4 * MT * NS + 2 * MT
    fp32 = 4 * MT * NS * elem_fp32 + 4 * MT * NO + 2 * MT * NS + 8 * MT
    shfl = 4 * MT
    return mma, ldsm, sfu, fp32, shfl


def _other_instructions(code, o, counted, Nq, Nk, Br, Bc, W, causal, KQ, KP, qreg, q_copies, warp_tiles, blocks_h):
    """(known, a head's warp instructions beyond the counted ones). Read off the instance's code where known
    (``known``: a tile's path less its ``counted`` work; each masked tile's mask; the code a warp runs once less
    its counted Q copies, Q fragments and O stores and less the next K's copies the last tile skips, which the
    counts hold for every tile), else estimated from the overheads ``o``."""
    tile, cmask, rmask, last, once = (np.zeros((), np.int64),) * 5 if code is None else (arr(x) for x in code)
    known = tile > 0
    other = np.where(known, tile - counted, o["tile"] + o["kstep"] * (KQ + KP))
    once_other = once - last - q_copies * 2 / W - np.where(qreg, KQ, 0)
    mask_code = np.where(known, (cmask if causal else rmask) * masked_warp_tiles(Nq, Nk, Br, Bc, W, causal), 0)
    return known, warp_tiles * other + np.where(known, mask_code + blocks_h * W * once_other, 0)


def _block_path_shape(tiles_h, blocks_h, MT, Nk, Br, Bc, splits, causal, heavy_first, N):
    """A block's KV tiles (on average), the chains its path exposes, its work's spread and step over the head's
    blocks, and the K/V loads it finds in L2."""
    # the latency path of one block (average over the head's blocks): per KV tile, the QK^T accumulation chain
    # (KQ dependent mma steps), the row max (2 shuffles after a chain of 2*NS FMNMX), the exponentials, the row
    # sum and the PV chain (KP steps); two barriers; the first K/V tile's global round trip. A warp holding MT row
    # tiles runs MT such chains, independent of one another, and the compiler interleaves them: while one waits
    # on a dependent step, the others' MMAs, exponentials and FP32 work run, and that work is on the path already
    # (the warp's own pipe work: timing's path_pipes). So the path counts 1/MT of a chain per KV tile.
    tiles_b = tiles_h / blocks_h
    exposed = tiles_b / np.maximum(MT, 1)              # (MT = 0: a tile too short for its warps, masked)
    spread = cdiv(cdiv(Nk, Bc), splits) / tiles_b       # causal: the last Q tile's block sees every key
    # causal: consecutive Q tiles differ by Br/Bc key tiles (a split block by its share of that); split-KV
    # launches dispatch a head's Q tiles once per split, so the pattern repeats every qblocks_h blocks
    step = (Br / Bc / splits / tiles_b) * (-1 if heavy_first else 1) if causal else 0 * N
    # K/V loads a block waits on each tile (single-buffered). Without a mask the first round's blocks of a head start
    # together and walk the same tiles in step: each load is the first touch of its tile (DRAM). Causal blocks start
    # at their own diagonal tiles and walk down: a tile's first reader is the block whose first steps reach it, and
    # every later reader finds it in L2. So a head misses each of its tiles once: cdiv(N, Bc) / blocks tiles a block
    # (Br/Bc: a block's own diagonal tiles), at least its first. Blocks of later rounds find their tiles in L2
    # (later_miss_share below).
    miss_tiles = np.minimum(tiles_b, np.maximum(cdiv(Nk, Bc) / blocks_h, 1))
    miss_free = (tiles_b - miss_tiles) * 2 if causal else 0 * tiles_b
    return tiles_b, exposed, spread, step, miss_free


def head_counts_fa2(Nq, Nk, d, Br, Bc, W, causal, dtype_bytes, o, q_in_registers=None, splits=1, heavy_first=True,
                    elem_fp32=3, age_split=True, softmax_overlaps_load=True, code=None, group=1):
    """Counts of one query head of an FA2-structured tensor-core forward (this kernel, or FlashAttention-2 itself
    with ``q_in_registers=False``): Nq queries against Nk keys (causal aligned bottom-right), its K/V head shared by
    ``group`` query heads, whose blocks read the same K/V tiles (first touched once by the group, re-read through
    L2). ``splits`` > 1: split-KV, each Q tile's key range cut into that many blocks.
    The launch runs head after head; ``heavy_first``: each head's Q tiles are dispatched longest first (this
    kernel), else shortest first (FlashAttention-2: blockIdx.x = m_block). ``elem_fp32``: the softmax's FP32-pipe
    instructions per score (this kernel's: FMNMX, FFMA, FADD; a library kernel's, read off its SASS).
    ``age_split``: its co-resident blocks split the SM in the schedulers' age order where this kernel's traces
    show it (Counts.age_split_warps); False: they share it evenly (a kernel nobody traced).
    ``softmax_overlaps_load``: Counts.softmax_overlaps_load. ``code``: the instance's warp instructions read off its
    listing (CODE's five fields, each an array; 0 where unknown), which set the instructions beyond the counted
    ones: a tile's, the masks', the code run once; without it (or where 0) the overheads ``o`` estimate them."""
    Nq, Nk, d, Br, Bc, W, splits = (arr(x) for x in (Nq, Nk, d, Br, Bc, W, splits))
    g = np.asarray(group, dtype=float)
    N = Nq                                                      # (the zero arrays below take its shape)
    MT = Br // W // 16
    NS, KQ, NO, KP = Bc // 8, d // 16, d // 8, Bc // 16
    qreg = ((MT == 1) & (d <= 128)) if q_in_registers is None else np.asarray(q_in_registers)
    tiles_h, qblocks_h = kv_tiles(Nq, Nk, Br, Bc, causal)
    blocks_h = qblocks_h * splits
    # tiles that need masking: the ragged last key tile of each block, and (causal) those crossing the diagonal
    ragged = (Nk % Bc > 0).astype(np.int64) * blocks_h
    diag = (cdiv(Br, Bc) + (Br % Bc > 0)) * blocks_h if causal else 0
    masked_h = np.minimum(tiles_h, ragged + diag)
    mma, ldsm, sfu, fp32, shfl = _warp_tile_counts(MT, Bc, d, NS, KQ, NO, qreg, elem_fp32)
    per_block_tile_copies = Bc * d * dtype_bytes * 2 // 512            # K and V, 512 B per warp instruction
    # per head
    warp_tiles = tiles_h * W
    q_copies = Br * d * dtype_bytes // 512                              # a Q (or O) tile's 16-byte warp copies
    prologue_copies = blocks_h * (q_copies + np.where(qreg, KQ * 0, 0))
    epilogue_stg = blocks_h * q_copies                                  # 16-byte stores, 32 lanes
    ldgsts = tiles_h * per_block_tile_copies + prologue_copies
    ldsm_h = warp_tiles * ldsm + blocks_h * W * np.where(qreg, KQ, 0)
    counted = mma + ldsm + sfu + fp32 + shfl + per_block_tile_copies / W
    known, other_h = _other_instructions(code, o, counted, Nq, Nk, Br, Bc, W, causal, KQ, KP, qreg, q_copies,
                                         warp_tiles, blocks_h)
    qd, kd = Nq * d * dtype_bytes, Nk * d * dtype_bytes           # one head's Q (or O), and its K (or V)
    tiles_b, exposed, spread, step, miss_free = _block_path_shape(tiles_h, blocks_h, MT, Nk, Br, Bc, splits, causal,
                                                                  heavy_first, N)
    # split-KV: each split writes its partial O and row statistics in fp32; a second kernel, queued behind this one,
    # reads them back and writes O (the combine: a companion, queued operation and blocks)
    accum = np.where(splits > 1, splits * Nq * (d + 1) * 4, 0)
    return Counts(
        tensor_fma=tiles_h * 2 * Br * Bc * d,
        exp=tiles_h * Br * Bc + tiles_h * Br, cmp=tiles_h * Br * Bc, add=tiles_h * Br * Bc,
        mul=tiles_h * Br * (Bc + d), fma=0 * N,
        warp_mma=warp_tiles * mma, warp_ldsm=ldsm_h, warp_ldgsts=ldgsts, warp_shfl=warp_tiles * shfl,
        warp_sfu=warp_tiles * sfu,
        warp_fp32=warp_tiles * fp32 + np.where(known, 0, masked_h * W * 4 * MT * NS * o["mask_elem"]),
        warp_other=other_h, warp_stg=epilogue_stg,
        smem_ld_wavefronts=4 * ldsm_h, smem_ld_bytes=512 * ldsm_h,
        smem_st_wavefronts=4 * ldgsts, smem_st_bytes=512 * ldgsts,
        gld_sectors=ldgsts * 16,
        l2_read_bytes=blocks_h * Br * d * dtype_bytes + tiles_h * 2 * Bc * d * dtype_bytes + accum,
        l2_write_bytes=qd + accum,
        # a group's K/V is first touched once (its share a query head), every other read of it a re-read; the
        # K/V head's blocks (of all its query heads) keep it live (memory.traffic takes K/V heads as its heads)
        dram_read_once=qd + 2 * kd / g,
        dram_read_reuse=np.maximum(tiles_h * 2 * Bc * d * dtype_bytes - 2 * kd / g, 0),
        reuse_live_bytes=2 * kd, dram_write_once=qd,
        path_mma=exposed * (KQ + KP), path_fp32=exposed * (4 * NS + 4), path_shfl=exposed * 2,
        path_sfu=exposed * 2, path_sync=tiles_b * 2 + 1, path_gmem=1 + 0 * N,
        path_load=miss_free, path_load_miss=tiles_b * 2 - miss_free,
        # the query rows each scheduler holds of one block (the join's p falls with them: overlap_rows)
        sched_rows=Br / np.minimum(W, 4) + 0 * tiles_b,
        # each KV tile's V load overlaps the S phase (QK^T and the softmax), the next K load the PV phase (half the
        # MMAs and ldmatrix); FlashAttention-2 issues its next K after QK^T instead, so its V load overlaps QK^T
        # alone and its K load the softmax and PV: the same two phases. A miss waits the part of its latency its
        # phase leaves (timing, ``miss_latency``)
        load_steps=tiles_b, gemm_phase_share=0.5 + 0 * tiles_b,
        softmax_overlaps_load=np.asarray(softmax_overlaps_load, dtype=float) + 0 * tiles_b,
        # blocks sharing an SM split it in the schedulers' age order where a step's S phase (QK^T and the softmax,
        # which does not shrink with d) is long beside its PV phase, d <= 64, and a scheduler holds 32 query rows or
        # more of each block (traced: research/notes/timing-model.md, the age-ordered tail)
        age_split_warps=np.where(age_split & (d <= 64) & (Br / np.minimum(W, 4) >= 32) & (Bc >= 128), 2, 0) + 0 * tiles_b,
        # after the first round a head's blocks no longer start together: the blocks of its head dispatched before a
        # block have fetched its tiles, which it finds in L2. Causal: its first tile, the diagonal, only if those
        # blocks were heavier (heavy_first); dispatched shortest first, they never read it
        later_miss_share=(1 - np.asarray(heavy_first, dtype=float) if causal else 0.0) + 0 * tiles_b,
        block_spread=spread, head_blocks=qblocks_h, block_step=step,
        # before its first tile a block waits on its Q tile and its first K and V tiles. Without a mask every block
        # of a head (of a split) starts at the same key tile; causal blocks start at their diagonal tiles, which
        # Bc/Br consecutive Q tiles share
        # (a Q tile copies its rows below Nq only; a group's heads are dispatched one after another and share theirs)
        burst_own_bytes=np.minimum(Br, Nq) * d * dtype_bytes, burst_kv_bytes=2 * Bc * d * dtype_bytes,
        burst_sharers=np.maximum(Bc // Br, 1) if causal else qblocks_h * group,
    )


def combine(shape, splits, name: str):
    """fa2_tc_combine_kernel queued behind a split-KV launch: one warp per query row (B H Nq rows), four a block.
    A warp reads its row's log-sum-exps twice (lanes across the splits: max, then the sum of exponentials, each
    closed by a 5-step shuffle reduction), then each split's fp32 partial row in turn (D/32 floats a lane) and
    writes O. The partials were written by the split kernel just before: found in L2, none read from DRAM.
    Its SASS (research/data/h200/decode/combine_sass_bf16.txt.gz) unrolls the split loop by four: the four
    weights' loads go out together, then at D <= 64 the four partial rows' loads together (two global round trips
    four splits), at D >= 128 each row's 16-byte loads into the same registers, one split after another (five);
    the splits left over run one at a time, two round trips each. Measured apart (research/data/h200/decode/
    decode_calls.json), a split costs the combine 240 cycles at D = 64 and 455 at 128."""
    rows = np.asarray(shape.heads, float) * arr(shape.Nq)
    d = arr(shape.d)
    on = splits > 1
    per_lane = np.maximum(d // 32, 1)
    sweeps = cdiv(splits, 32)
    warp = {"ldg": 2 * sweeps + splits * (1 + cdiv(per_lane, 4)), "sfu": sweeps + splits + 1,
            "fp32": 2 * sweeps + splits * (per_lane + 2), "shfl": 10, "other": 24 + 4 * splits}
    w = {k: np.where(on, rows * v, 0) for k, v in warp.items()}
    part = rows * splits * d * 4
    c = Counts(launches=0 * rows, queued_ops=np.where(on, 1, 0), warp_ldg=w["ldg"], warp_sfu=w["sfu"],
               warp_fp32=w["fp32"], warp_shfl=w["shfl"], warp_other=w["other"],
               warp_stg=np.where(on, rows * cdiv(per_lane * 2, 16), 0),
               l2_read_bytes=np.where(on, part + rows * splits * 4, 0),
               l2_write_bytes=np.where(on, rows * d * shape.element_bytes, 0),
               dram_write_once=np.where(on, rows * d * shape.element_bytes, 0),
               path_gmem=np.where(on, 2 + splits // 4 * np.where(d <= 64, 2, 5) + splits % 4 * 2, 0),
               path_shfl=np.where(on, 10, 0),
               path_sfu=np.where(on, 2 + splits, 0), path_fp32=np.where(on, 4 + splits, 0))
    grid = np.where(on, cdiv(rows.astype(np.int64), 4), 0)
    launch = Launch(grid_blocks=grid, threads=np.full(np.shape(grid), 128), smem_bytes=np.zeros(np.shape(grid)),
                    regs=np.full(np.shape(grid), 32))
    return Companion(counts=c, launch=launch, key=f"{name}:combine")


class FA2TC(Kernel):
    name = "fa2_tc"
    description = ("FlashAttention-2 forward on tensor cores (mma.sync m16n8k16, ldmatrix, cp.async, swizzled "
                   "shared tiles), fp16/bf16 with fp32 accumulation, causal or not")
    source = "fa2_tc.cu"
    dtypes = ("fp16", "bf16")
    causal = True
    gqa, cross = True, True
    modes = ("fwd", "bwd")
    Tiles = FA2TCTiles
    arch = ARCH
    # A warp's loop step is one dependent chain: its MMAs wait on its own ldmatrix fragments, its softmax on its
    # MMAs, the next MMAs on its softmax. So a warp's own tensor, MUFU, FP32 and shared-memory work lies on its
    # latency path (path_pipes; at a fitted rate, "own_path"), and the p-norm's throughput part holds the other
    # warps' work; warps overlap one another only through the p-norm (fitted: "overlap"). Chosen on
    # the training split over "MMA+smem and MUFU+FP32 add as two groups" (12.0% against 10.3% there). The
    # measurements agree: one block per SM spends ~2.5x its pipe time per KV tile (examples/measurements/h100,
    # B*H*N/Br <= 132 rows), and two warps per scheduler gain only 1.2-1.6x over one.
    path_pipes = ("tensor", "sfu", "fp32", "smem")
    # The pipes among themselves, as the pipe-mix probe measured FA2's loop mixes (research/data/h100/probe/
    # pipes.json): mma.sync and FFMA add, shared memory and MUFU overlap them, p = 5 reproduces the mixes to 1%.
    serial = (("tensor", "fp32"),)
    pipe_p = 5.0
    # A forward warp's own MUFU and FP32 work overlap on its path, as on the pipes, by the probe's p: the FP32
    # instructions around its exponentials issue in the gaps MUFU.EX2's interval leaves (timing.own_on_path). The
    # backward keeps them adding: its fit holds a warp's own work off its path (own_path near 0), and refitted under
    # this join it ranked its tiles below its target (research/notes/known-gaps-log.md, 2026-12-02)
    own_join = pipe_p
    fit_features = ("mma", "fp32", "gmem", "load", "load_miss", "overlap", "overlap_rows", "own_path", "miss_latency")
    # the age-ordered tail (timing; Counts.age_split_warps), which only the launches of some d <= 64 tiles pay, is
    # fitted after the costs every launch pays, those held
    fit_after = ("age_tail",)
    # The phases the tile loads overlap, as the source orders them: V's load during QK^T and the softmax, the next
    # K's during PV. The compiled loop does not keep that order: every instance of the measured build (sm_90 and
    # sm_89 listings) waits for V after QK^T and before the softmax and issues the next K after it, so the softmax
    # overlaps neither load (research/scripts/sass_phases.py; research/tests/test_sass_phases.py). Priced so and refitted on the
    # training split it picked tiles better but crossed recorded bounds on data no fit had seen (research/notes/known-gaps-log.md;
    # research/scripts/try_fa2_tc_form.py compiled-order sets this False): not shipped
    softmax_overlaps_load = True
    # Each instance's instructions as its compiled code has them (the facts' instance_code: CODE on sm_90), not the
    # overhead estimates: enumerated, within 0.06% of Nsight Compute's executed instructions in every profiled
    # launch, where the estimates run 4-14% low (no per-block code). Priced in the issue row and refitted on the
    # training split they ranked tiles worse on the held-out rows, by the rule stated for the sealed sixth set
    # (research/notes/known-gaps-log.md; research/scripts/try_fa2_tc_form.py read-code sets this True): not shipped
    instructions_read = False

    @staticmethod
    def inference_path(shape):
        """Whether a forward runs the inference path's instances (EXT_INSTANCES): grouped heads or Nq != Nk."""
        return ~np.asarray(shape.square)

    def default_tiles(self, shape=None, gpu=None):
        """The fastest measured tiles per head dimension (DEFAULTS; the backward's: FlashAttention-2's); on the
        inference path 64-row tiles for up to 64 queries, and the split count FlashAttention-2's heuristic picks
        (num_splits; an H100-sized GPU of 132 SMs when none is given)."""
        if shape is None or int(np.asarray(shape.d)) not in DEFAULTS:
            return FA2TCTiles(Br=128, Bc=64, warps=4)
        d = int(np.asarray(shape.d))
        if shape.mode != "fwd":              # a backward's tiles (fwd_bwd: its forward runs at the forward's)
            return FA2TCTiles(*BWD_DEFAULTS[d])
        if not bool(np.all(self.inference_path(shape))):
            return FA2TCTiles(*DEFAULTS[d])
        Br, Bc, w = EXT_DEFAULTS[d] if int(np.max(shape.Nq)) <= 64 else DEFAULTS[d]
        if (d, Br, Bc, w) not in EXT_INSTANCES:
            Br, Bc, w = EXT_DEFAULTS[d]
        sms = gpu.sm_count if gpu is not None else 132
        run = fold_groups(shape)
        s = num_splits(arr(run.B) * arr(run.H) * cdiv(run.Nq, Br), 2 * sms, cdiv(run.Nk, Bc))
        return FA2TCTiles(Br, Bc, w, splits=int(np.max(s)))

    def forward_tiles(self, shape, tiles, gpu=None):
        """The forward of a forward-plus-backward call: each problem's default forward tiles (vectorised over the
        problems of a shape, as the measured rows give them)."""
        return backward.each_problem(self, shape.with_mode("fwd"), gpu)

    def sweep_values(self, name):
        col = {"Br": 1, "Bc": 2, "warps": 3}.get(name)
        return None if col is None else sorted({i[col] for i in INSTANCES})

    def grid_blocks(self, shape, tiles):
        if shape.mode != "fwd":                 # one block per (K/V tile, b, K/V head)
            return arr(shape.B) * arr(shape.Hkv) * cdiv(shape.Nk, tiles.Bc)
        run = fold_groups(shape)
        return arr(run.B) * arr(run.H) * cdiv(run.Nq, tiles.Br) * arr(tiles.splits)

    def grid_dims(self, shape, tiles):
        if shape.mode != "fwd":
            return cdiv(shape.Nk, tiles.Bc), arr(shape.Hkv), arr(shape.B)
        run = fold_groups(shape)            # fa2_tc.cu: (Q tiles x splits, H, B); a decode step's groups folded
        return cdiv(run.Nq, tiles.Br) * arr(tiles.splits), arr(run.H), arr(run.B)

    def counts(self, shape, tiles, facts):
        return super().counts(fold_groups(shape) if shape.mode == "fwd" else shape, tiles, facts)

    def buffer_bytes(self, shape, tiles):
        """Split-KV's fp32 partial O and log-sum-exp of every query row and split."""
        rows = np.asarray(shape.heads, float) * arr(shape.Nq)
        s = arr(tiles.splits)
        return np.where(s > 1, 4 * rows * s * (arr(shape.d) + 1), 0)

    def launch(self, shape, tiles, arch, regs=None):
        """Each compiled instance's registers on the architecture (its facts' instance_regs: REGS on sm_90,
        REGS_SM8X on sm_80/86/89; another architecture takes the nearest one's, as ``facts`` notes), unless a
        measured row gives its own."""
        if regs is None and shape.mode != "fwd":
            regs = by_instance({k: v[0] for k, v in BWD_INSTANCES.items()}, shape, tiles, 255)
        if regs is None:
            facts = self.facts(arch)[0]
            regs = by_instance(facts.instance_regs, shape, tiles, facts.regs)
        return super().launch(shape, tiles, arch, regs)

    def smem_bytes(self, shape, tiles):
        if shape.mode != "fwd":
            return by_instance({k: v[1] for k, v in BWD_INSTANCES.items()}, shape, tiles, 0)
        return (arr(tiles.Br) + 2 * arr(tiles.Bc)) * arr(shape.d) * 2

    def constraints(self, gpu, shape, tiles):
        if shape.mode != "fwd":
            table, what = BWD_INSTANCES, "backward "
            compiled = by_instance(dict.fromkeys(table, True), shape, tiles, False)
        else:
            # grouped heads, Nq != Nk, split-KV (and the log-sum-exp a fwd_bwd keeps) run the inference instances
            ext = self.inference_path(shape) | (arr(tiles.splits) > 1)
            table, what = (EXT_INSTANCES, "inference ") if np.all(ext) else (INSTANCES, "")
            compiled = np.where(ext, by_instance(dict.fromkeys(EXT_INSTANCES, True), shape, tiles, False),
                                by_instance(dict.fromkeys(INSTANCES, True), shape, tiles, False))
        listing = "; ".join(f"d={i[0]}: {i[1]}x{i[2]}/{i[3]}w" for i in table)
        return self.tensor_core_limits(gpu, shape) + [
            (compiled, f"no compiled {what}instance for {{tiles}} (compiled: {listing})")]

    def companions(self, shape, tiles, facts):
        """Split-KV's combine kernel (fa2_tc_combine_kernel); a backward's launches (perfmodel.kernels.backward)."""
        if shape.mode != "fwd":
            return backward.companions(self, shape, tiles, facts)
        splits = arr(tiles.splits)
        if not np.any(splits > 1):
            return ()
        return (combine(self.run_shape(shape), splits, self.name),)

    def run_shape(self, shape):
        """The problem the launch runs: a decode step's grouped heads folded into rows (fold_groups)."""
        return fold_groups(shape)

    def head_counts(self, shape, tiles, facts):
        """FA2's counts, with the spill loads and stores of the instances that spill in their loop (the facts'
        instance_spills: SPILLS on sm_90), which lie on the block's path and add to its instructions; with
        ``instructions_read``, each instance's instructions as its code has them (instance_code: CODE on sm_90),
        which hold the spills already. A backward's: perfmodel.kernels.backward."""
        if shape.mode != "fwd":
            return backward.head_counts(self, shape, tiles, facts)
        code = by_instance(facts.instance_code if self.instructions_read else {}, shape, tiles, (0,) * 5)
        ldl, stl = by_instance(facts.instance_spills, shape, tiles, (0, 0))
        c = head_counts_fa2(shape.Nq, shape.Nk, shape.d, tiles.Br, tiles.Bc, tiles.warps, shape.causal,
                            shape.element_bytes, facts.overheads, softmax_overlaps_load=self.softmax_overlaps_load,
                            code=code, group=shape.group, splits=tiles.splits)
        tiles_h, qblocks_h = kv_tiles(shape.Nq, shape.Nk, tiles.Br, tiles.Bc, shape.causal)
        unread = code[0] == 0
        W = arr(tiles.warps)
        return dataclasses.replace(c, warp_other=c.warp_other + np.where(unread, tiles_h * W * (ldl + stl), 0),
                                   path_local=c.path_local + tiles_h / qblocks_h * ldl)

    def runner(self, torch, ext, shape, tiles):
        from perfmodel.measure.runner import GradRunner, Runner as Base

        Br, Bc, W, causal = int(tiles.Br), int(tiles.Bc), int(tiles.warps), bool(shape.causal)
        splits = int(getattr(tiles, "splits", 1) or 1)

        def forward(Q, K, V, O, lse=None):
            """The forward launch(es): one kernel, or with splits > 1 the split kernel and its combine."""
            extra = {}
            if splits > 1:
                B, H, Nq, d = O.shape
                extra = dict(splits=splits,
                             o_part=torch.empty((splits, B, H, Nq, d), dtype=torch.float32, device=O.device),
                             lse_part=torch.empty((splits, B, H, Nq), dtype=torch.float32, device=O.device))
            if lse is not None:
                extra["lse"] = lse
            ext.fa2_tc_forward(Q, K, V, O, Br, Bc, W, causal, **extra)

        if shape.mode == "fwd":
            class Runner(Base):
                def launch(self, Q, K, V):
                    forward(Q, K, V, self.O)

                def attributes(self):
                    args = (int(shape.d), Br, Bc, W, shape.dtype)
                    a = ext.fa2_tc_attributes(*args)
                    a["cuda_blocks_per_sm"] = ext.fa2_tc_max_blocks_per_sm(*args)
                    return a

            return Runner(torch, shape)

        class Grads(GradRunner):
            """The backward's three launches (preprocess, main, convert); fwd_bwd runs the forward with its
            log-sum-exp first, at the forward's default tiles."""

            def setup(self):
                B, H, Hkv, Nq, Nk, d = self.dims
                if not hasattr(self, "acc"):
                    self.acc = torch.empty((B, H, Nq, d), dtype=torch.float32, device="cuda")
                    self.D = torch.empty((B, H, Nq), dtype=torch.float32, device="cuda")

            def backward(self, Q, K, V):
                self.setup()
                ext.fa2_tc_backward(Q, K, V, self.O, self.dO, self.LSE, self.dQ, self.dK, self.dV, self.acc,
                                    self.D, Bc, Br, W, causal)

            def forward_backward(self, Q, K, V):
                fwd = FA2TC().default_tiles(shape.with_mode("fwd"))
                ext.fa2_tc_forward(Q, K, V, self.O, int(fwd.Br), int(fwd.Bc), int(fwd.warps), causal, lse=self.LSE)
                self.backward(Q, K, V)

            def attributes(self):
                a = ext.fa2_tc_bwd_attributes(int(shape.d), Bc, Br, W, shape.dtype)
                return {"regs_per_thread": a["regs_per_thread"], "local_bytes": a["local_bytes"],
                        "cuda_blocks_per_sm": a.get("max_blocks_per_sm", "")}

        return Grads(torch, shape)


class PaddedFA2TC(FA2TC):
    """fa2_tc asking for ``extra`` bytes of dynamic shared memory it does not use, as the co-residence probe's and the
    traces' launches do to hold fewer blocks a SM (research/scripts/probe_coresident.py, trace_fa2_tc.py). Not registered."""

    def __init__(self, extra):
        self.extra = extra

    def smem_bytes(self, shape, tiles):
        return super().smem_bytes(shape, tiles) + self.extra


KERNEL = register(FA2TC())
