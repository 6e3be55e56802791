"""The backward pass's loop nests (FlashAttention-2's Algorithm 2, seed 004): counts of the bundled fa2_tc backward
and of the SDPA presets' backwards. Nothing here is fitted to a timing.

Every backward runs three launches (four or more for some): a preprocess (D = rowsum(dO * O), dQ_accum zeroed),
the main kernel, and a convert (dQ = dQ_accum * scale as the input type). The main kernel holds a K/V tile of Bc
keys per block and walks the Q tiles (Br rows) that see it; per (Q tile, K tile) pair it recomputes S = Q K^T and
P = exp(S - LSE), and runs five GEMMs of 2 Br Bc d FLOPs each (S, dP = dO V^T, dV += P^T dO, dK += dS^T Q,
dQ += dS K), P and dS through shared memory, dQ added to an fp32 buffer in L2 by atomics. Q, dO, LSE and D are
re-read once per K/V tile (the forward's K/V re-read, with the roles swapped), K and V are read, and dK and dV
written, once.

* ``fa2_tc`` (csrc/fa2_tc_bwd.cu, its header comment): one block per (K tile, b, K/V head), looping over the
  group's query heads; two barriers a pair; dQ by red.global.add.v2.f32 (two floats a lane); Q/dO/LSE/D
  double-buffered by cp.async; the warp grids of each GEMM per instance (BWD_GRIDS below, kFa2TcBwdInstances).
* ``sdpa-flash`` (PyTorch's vendored FlashAttention-2, flash_bwd_launch_template.h run_mha_bwd_hdim*,
  flash_bwd_kernel.h compute_dq_dk_dv_1colblock, flash_api.cpp mha_bwd): one block per (K tile, b, query head);
  sm_90 tiles by head dim (FA2_BWD_TILES); Q tiles walked from the last down; dQ by scalar atomicAdd (one fp32 a
  lane); three barriers a pair (after the wait, after dS's store, before dQ); grouped heads write dK/dV per query
  head (an expanded buffer) and at::sum reduces them (two more kernels).
* ``sdpa-cudnn``: closed source; its launch record and counters (research/data/h200/sdpa_workload_calls.json,
  research/data/h200/ncu/ncu_cudnn_bwd_d*.csv) show a memset, a preprocess (compute_dot_do_o), one main kernel
  (..._flash_bprop_wgmma_f16_knob_26_64x64x{d}_1x4x1: a producer and two consumer warpgroups, 64 query rows by
  128 keys, a persistent grid) and a convert (convert_dq_to_16bits), and with grouped heads two reductions of dK
  and dV (fmha_reduce_head). Its dQ reductions reach L2 as 64-byte bulk requests from no LSU instruction (TMA
  reductions, off the consumers' path), exactly the bytes the loop nest adds. Assumed: warpgroup MMAs from shared
  memory (a quarter of mma.sync's operand traffic), the producer feeding tiles by TMA (no load on the consumers'
  path), FlashAttention-2's loop order.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from perfmodel.errors import InputError
from perfmodel.kernels.base import Companion, Launch
from perfmodel.kernels.common import arr, cdiv
from perfmodel.model.counts import Counts

# warp grids of fa2_tc's backward instances, (d, Br, Bc, warps) -> (WSM, WKN, WQM): warps along Br for S and dP,
# along Bc for dK and dV, along Br for dQ (csrc/fa2_tc_bwd.cu, kFa2TcBwdInstances, which lists (d, Bc, Br, ...))
BWD_GRIDS = {
    (32, 128, 128, 8): (4, 4, 4),
    (64, 128, 128, 8): (4, 4, 4), (64, 64, 128, 8): (2, 4, 4), (64, 128, 64, 8): (4, 2, 4), (64, 64, 64, 4): (2, 2, 2),
    (128, 64, 128, 8): (2, 4, 2), (128, 64, 64, 8): (4, 2, 2), (128, 128, 64, 8): (4, 2, 4),
    (256, 64, 64, 8): (4, 2, 2),
}
# instructions of fa2_tc's backward instances beyond the counted classes (integer, address, loop and predicate
# work), per warp: (a (Q tile, K tile) pair, a block, a masked pair), read off Nsight Compute's executed counts of
# every instance at two lengths without a mask and one with (research/data/h200/ncu/ncu_bwd_fa2_tc_code.csv,
# research/scripts/ncu_bwd.sh; research/tests/test_bwd_ncu.py holds the solve)
BWD_CODE = {
    (32, 128, 128, 8): (369.0, 335.0, 7.5),
    (64, 128, 128, 8): (440.0, 458.0, 9.5), (64, 64, 128, 8): (264.5, 402.0, 18.67),
    (64, 128, 64, 8): (337.0, 334.0, 6.0), (64, 64, 64, 4): (379.0, 435.0, 7.5),
    (128, 64, 128, 8): (371.0, 691.5, 20.67), (128, 64, 64, 8): (336.5, 411.0, 5.5),
    (128, 128, 64, 8): (366.0, 459.0, 6.0), (256, 64, 64, 8): (386.0, 651.0, 4.0),
}
# FlashAttention-2's backward on sm_90 (>= 144 KB of shared memory a block; flash_bwd_launch_template.h
# run_mha_bwd_hdim*), by rounded head dim: (Br = kBlockM, Bc = kBlockN, warps, (AtomLayoutMSdP, NdKV, MdQ)); the head
# dims PyTorch's build compiles (sdpa.HEAD_DIMS: no 160 or 224)
FA2_BWD_TILES = {32: (128, 128, 8, (4, 4, 4)), 64: (128, 128, 8, (4, 4, 4)), 96: (64, 128, 8, (2, 4, 4)),
                 128: (64, 128, 8, (2, 4, 2)), 192: (64, 64, 8, (4, 2, 2)), 256: (64, 64, 8, (4, 2, 2))}
# cuDNN's backward, read off its launch (cuDNN 9.19 on the H200, research/data/h200/sdpa_workload_calls.json):
# one kernel, ..._sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x{d}_1x4x1..., 384 threads (a producer warpgroup and
# two consumer warpgroups), 168 registers, a persistent grid; 2 blocks of a head at N = 256, so 128 keys a block
# (64 a consumer warpgroup) and 64 query rows a step, at every head dim from 32 to 256: (Br, Bc, consumer warps)
CUDNN_BWD_TILES = {256: (64, 128, 8)}

# per-pair barriers: fa2_tc's two (after the Q/dO wait, after P and dS's stores); FlashAttention-2's three (and
# one more before the dQ GEMM)
_SYNCS = {"fa2_tc": 2, "sdpa-flash": 3, "sdpa-cudnn": 2}
# FP32-pipe instructions per score besides the exponential: the FFMA (S scale - LSE), dP - D (FADD), times P
# (FMUL), and the conversion of P and dS to 16-bit pairs (one per score)
_FP32_PER_SCORE = 4


def _round_hd(d):
    hds = np.array(sorted(FA2_BWD_TILES))
    return np.select([arr(d) <= h for h in hds], hds, 256)


def library_tiles(kernel, d: int, causal: bool):
    """(Br, Bc, warps) of a library's backward for head dim ``d``."""
    if kernel.name == "sdpa-cudnn":
        keys = sorted(CUDNN_BWD_TILES)
        return CUDNN_BWD_TILES[next((k for k in keys if d <= k), 256)]
    return FA2_BWD_TILES[int(_round_hd(d))][:3]


def _grids(kernel, shape, tiles):
    """Each configuration's warp grids (WSM, WKN, WQM): fa2_tc's compiled instance's, FlashAttention-2's atom
    layouts; elsewhere (cuDNN, an uncompiled tile) the warps along the rows, as many as Br/16 allows."""
    d, Br, Bc, W = (arr(x) for x in (shape.d, tiles.Br, tiles.Bc, tiles.warps))
    size = np.broadcast_shapes(d.shape, Br.shape, Bc.shape, W.shape)
    dflt = np.minimum(W, np.maximum(Br // 16, 1))
    out = [np.broadcast_to(dflt, size).copy() for _ in range(3)]
    out[1] = np.broadcast_to(np.minimum(W, np.maximum(Bc // 16, 1)), size).copy()
    if kernel.name == "fa2_tc":
        table = BWD_GRIDS
    elif kernel.name == "sdpa-flash":
        table = {(hd, br, bc, w): g for hd, (br, bc, w, g) in FA2_BWD_TILES.items()}
        d = _round_hd(d)
    else:
        table = {}
    for (di, bri, bci, wi), g in table.items():
        on = (d == di) & (Br == bri) & (Bc == bci) & (W == wi)
        out = [np.where(on, v, o) for v, o in zip(g, out)]
    return out


def pairs_per_head(Nq, Nk, Br, Bc, causal: bool):
    """(pairs of one query head summed over its K tiles, the first K tile's pairs, K tiles). K tile j (keys from
    j Bc) pairs with the Q tiles from m_min = max(0, floor((j Bc - (Nk - Nq)) / Br)) to the last (causal, aligned
    bottom-right: flash_bwd_kernel.h m_block_min, fa2_tc_bwd.cu m_min); every Q tile without a mask."""
    from perfmodel.kernels.fa2_tc import floor_sum

    Nq, Nk, Br, Bc = (arr(x) for x in (Nq, Nk, Br, Bc))
    Tr, Tc = cdiv(Nq, Br), cdiv(Nk, Bc)
    if not causal:
        return Tr * Tc, Tr, Tc
    shift = Nk - Nq
    j1 = np.clip(cdiv(np.maximum(shift, 0), Bc), 0, Tc)           # first tile with j Bc - shift >= 0
    skipped = floor_sum(Tc - j1, Br, Bc, j1 * Bc - shift)
    first = Tr - np.maximum(0, (-shift) // Br)
    return Tr * Tc - skipped, first, Tc


def masked_pairs(Nq, Nk, Br, Bc, causal: bool):
    """Pairs of a query head that mask scores: the ragged last K tile's, and (causal) those crossing the diagonal,
    about ceil(Bc / Br) + 1 per K tile."""
    Nq, Nk, Br, Bc = (arr(x) for x in (Nq, Nk, Br, Bc))
    Tr, Tc = cdiv(Nq, Br), cdiv(Nk, Bc)
    ragged = np.where(Nk % Bc > 0, Tr, 0)
    diag = Tc * (cdiv(Bc, Br) + 1) if causal else 0
    return np.minimum(Tr * Tc, ragged + diag)


def main_counts(kernel, shape, tiles, facts, per_query_head_blocks: bool, red_floats: int, expanded_dkv: bool,
                wgmma: bool = False, score_passes=1):
    """Counts of one query head of an FA2-structured backward main kernel (the launch multiplies by B H).

    ``per_query_head_blocks``: one block per (K tile, query head) (FlashAttention-2); else one per (K tile, K/V
    head) walking the group's query heads (fa2_tc). ``red_floats``: floats an atomic warp lane adds (2: fa2_tc's
    red.v2 on sm_90; 1: FlashAttention-2's atomicAdd). ``expanded_dkv``: dK and dV written per query head (FA2 with
    grouped heads). ``wgmma``: warpgroup MMAs reading both operands from shared memory (cuDNN, assumed).
    ``score_passes``: how many times a pair computes its scores (S and dP's GEMMs, the exponentials and the FP32 work
    on them, their waits and barriers): 2 where the dK and dV accumulators are walked in two halves of d."""
    Nq, Nk, d, Br, Bc, W = (arr(x) for x in (shape.Nq, shape.Nk, shape.d, tiles.Br, tiles.Bc, tiles.warps))
    causal, b = bool(shape.causal), shape.element_bytes
    g = np.asarray(shape.group, dtype=float)
    o = facts.overheads
    wsm, wkn, wqm = _grids(kernel, shape, tiles)
    pairs, first, Tc = pairs_per_head(Nq, Nk, Br, Bc, causal)
    masked = masked_pairs(Nq, Nk, Br, Bc, causal)
    # blocks per query head and their mean, first (heaviest) pairs: fa2_tc's block walks all g heads
    gb = np.ones_like(g) if per_query_head_blocks else g
    blocks_q = Tc / gb
    pb = pairs / Tc * gb
    # per pair, whole block: the five GEMMs' m16n8k16 MMAs; ldmatrix.x4 per warp of each GEMM (a warp tile of m x n
    # over k loads k/16 (m/16 + n/16)): S and dP over (Br/WSM) x (Bc/WSN), K = d; dV and dK over (Bc/WKN) x
    # (d/WKD), K = Br; dQ over (Br/WQM) x (d/WQD), K = Bc
    passes = arr(score_passes)
    mma = (5 + 2 * (passes - 1)) * Br * Bc * d // 2048
    wsn, wkd, wqd = W // wsm, W // wkn, W // wqm
    ldsm_w = (2 * (d // 16) * (Br // wsm // 16 + Bc // wsn // 16) + 2 * (Br // 16) * (Bc // wkn // 16 + d // wkd // 16)
              + (Bc // 16) * (Br // wqm // 16 + d // wqd // 16))
    ldsm = W * ldsm_w
    scores = Br * Bc
    sfu = scores // 32 * passes
    fp32 = scores // 32 * _FP32_PER_SCORE * passes
    sts = 2 * scores // 64                       # P and dS, a 16-bit pair a lane: 128-byte warp stores, conflict-free
    red = Br * d // (32 * red_floats)            # dQ's atomics, warp instructions
    q_copies = 2 * Br * d * b // 512             # Q and dO tiles, 16-byte cp.async warp copies
    stat_copies = 2 * Br // 32                   # LSE and D rows, 4-byte cp.async warp copies
    ksteps = 2 * (d // 16) + 2 * (Br // 16) + Bc // 16
    other = W * (o["tile"] + o["kstep"] * ksteps)
    # fa2_tc's compiled instances: their own code's counts (BWD_CODE); elsewhere the overheads' estimate
    code = [np.zeros(np.shape(other))] * 3
    if kernel.name == "fa2_tc":
        from perfmodel.kernels.fa2_tc import by_instance

        code = [np.broadcast_to(x, np.broadcast_shapes(np.shape(other), np.shape(x))).astype(float)
                for x in by_instance(BWD_CODE, shape, tiles, (0.0, 0.0, 0.0))]
    read = code[0] > 0
    # per block: K and V in (cp.async), dK and dV out (staged through shared memory: 4-byte stores, 16-byte loads,
    # 16-byte global stores)
    kv_copies = 2 * Bc * d * b // 512
    out_sts = 2 * Bc * d // 64
    qd, kd = Nq * d * b, Nk * d * b
    stats = 8 * Nq                                # LSE and D, fp32
    pair_read = 2 * Br * d * b + 8 * Br
    nsync = _SYNCS.get(kernel.name, 2)
    spread = np.where(pb > 0, first * gb / np.maximum(pb, 1e-9), 1.0) if causal else 1.0 + 0 * pb
    step = -(Bc / Br) * gb / np.maximum(pb, 1e-9) if causal else 0 * pb
    if wgmma:
        # a warpgroup MMA reads its shared operands once for its four warps: a quarter of the ldmatrix traffic
        smem_ld = ldsm * 4 / 4
        ld_instr = 0 * ldsm
    else:
        smem_ld, ld_instr = ldsm * 4, ldsm
    c = Counts(
        tensor_fma=pairs * (5 + 2 * (passes - 1)) * Br * Bc * d,
        exp=pairs * scores * passes, add=pairs * scores * passes, mul=pairs * scores * passes,
        fma=pairs * scores * passes,
        warp_mma=0 * pairs if wgmma else pairs * mma, warp_wgmma=pairs * mma if wgmma else 0 * pairs,
        warp_ldsm=pairs * ld_instr,
        warp_sfu=pairs * sfu,
        warp_fp32=pairs * fp32 + masked * scores // 32 * o["mask_elem"],
        warp_sts=pairs * sts + blocks_q * out_sts,
        warp_lds=blocks_q * kv_copies,
        warp_stg=pairs * red + blocks_q * kv_copies,
        warp_ldgsts=pairs * (q_copies + stat_copies) + blocks_q * kv_copies,
        warp_other=np.where(read, W * (pairs * code[0] + blocks_q * code[1] + masked * code[2]), pairs * other),
        smem_ld_wavefronts=pairs * smem_ld + blocks_q * 4 * kv_copies,
        smem_ld_bytes=pairs * smem_ld * 128 + blocks_q * 512 * kv_copies,
        # (the atomics pass L1TEX's 128-byte data path, which shared memory's wavefronts use: 4 red_floats bytes a lane)
        smem_st_wavefronts=pairs * (sts + 4 * q_copies + stat_copies + red * red_floats)
        + blocks_q * (out_sts + 4 * kv_copies),
        smem_st_bytes=pairs * (128 * sts + 512 * q_copies + 8 * Br) + blocks_q * (128 * out_sts + 512 * kv_copies),
        gld_sectors=(pairs * (q_copies + 0) + blocks_q * kv_copies) * 16 + pairs * 2 * Br * 4 // 32,
        l2_read_bytes=pairs * pair_read + blocks_q * 2 * Bc * d * b,
        # the atomics reach L2 as fp32 adds into dQ_accum; dK and dV leave once (per query head where expanded)
        l2_write_bytes=pairs * 4 * Br * d + (2 * kd if expanded_dkv else 2 * kd / g),
        l2_red_bytes=pairs * 4 * Br * d,
        # Q, dO, LSE, D first touched once, re-read by every further K tile (the group's K/V head keeps them live);
        # K and V once for the group; dQ_accum, zeroed by the preprocess, fetched and written back once
        dram_read_once=2 * qd + stats + 2 * kd / g + 4 * Nq * d,
        dram_read_reuse=np.maximum(pairs * pair_read - (2 * qd + stats), 0),
        reuse_live_bytes=g * (2 * qd + stats),
        dram_write_once=(2 * kd if expanded_dkv else 2 * kd / g) + 4 * Nq * d,
        # one block's path: per pair the three GEMM phases' accumulation chains (S with dP, dV with dK, dQ), the
        # exponential and the FP32 steps after it, the barriers; the Q/dO loads are prefetched a pair ahead (no
        # wait on the path); the first K/V and Q tiles' round trip
        path_mma=0 * pb if wgmma else pb * (d // 16 + Br // 16 + Bc // 16),
        path_wgmma=pb * 3 * passes if wgmma else 0 * pb,
        path_sfu=pb * passes, path_fp32=pb * _FP32_PER_SCORE * passes, path_sync=pb * nsync * passes + 2,
        path_gmem=1 + 0 * pb,
        block_spread=spread, head_blocks=Tc * gb / gb, block_step=step,
        # the main kernel holds 255 registers (dK and dV accumulators for its whole K tile): no fragments loaded
        # ahead, each ldmatrix waited on before its MMAs, and the barriers keep the block's warps in one GEMM phase
        smem_serial=(0.0 if wgmma else 1.0) + 0 * pb,
        # before its first pair a block fetches its K and V tiles (its own) and its first Q and dO tiles, which the
        # head's blocks share: every block of a head starts at the same Q tile without a mask (and FA2's, walking
        # down from the last, causal too); fa2_tc's causal blocks start at their own diagonal
        burst_own_bytes=2 * Bc * d * b + 0 * pb, burst_kv_bytes=2 * Br * d * b + 0 * pb,
        burst_sharers=(np.maximum(Br // Bc, 1) if (causal and not per_query_head_blocks) else Tc) + 0 * Nq,
    )
    return c


def stream_companion(key, read_b, write_b, grid_threads, inst_per_thread, fp32_per_thread, regs=32, before=False,
                     round_trips=1):
    """A memory-streaming kernel (the preprocess, the convert, a reduction): ``grid_threads`` threads in 256-thread
    blocks, each issuing ``inst_per_thread`` (loads, stores) and ``fp32_per_thread`` FP32 instructions; its bytes,
    and ``round_trips`` dependent global round trips a block."""
    threads = np.asarray(grid_threads, dtype=float)
    grid = np.maximum(np.ceil(threads / 256), 1)
    warps = np.ceil(threads / 32)
    c = Counts(launches=0 * grid, queued_ops=1 + 0 * grid,
               warp_ldg=warps * inst_per_thread[0], warp_stg=warps * inst_per_thread[1],
               warp_fp32=warps * fp32_per_thread, warp_other=warps * 8,
               l2_read_bytes=read_b, l2_write_bytes=write_b, dram_read_once=read_b, dram_write_once=write_b,
               gld_sectors=read_b / 32, path_gmem=round_trips + 0 * grid, path_fp32=fp32_per_thread + 0 * grid)
    launch = Launch(grid_blocks=grid.astype(np.int64), threads=np.full(np.shape(grid), 256),
                    smem_bytes=np.zeros(np.shape(grid)), regs=np.full(np.shape(grid), regs))
    return Companion(counts=c, launch=launch, key=key, before=before)


def _pre_and_convert(kernel, shape, rows, d, b):
    """The preprocess (reads O and dO, writes D and zeroes dQ_accum: FA2's flash_bwd_dot_do_o_kernel, fa2_tc's
    fa2_tc_bwd_pre) and the convert (reads dQ_accum, writes dQ: convert_dQ, fa2_tc_bwd_convert)."""
    chunks = rows * d / 8
    pre = stream_companion(f"{kernel.name}:bwd_pre", 2 * rows * d * b, 4 * rows * d + 4 * rows, chunks,
                            (2, 2), 8 + np.log2(np.maximum(d / 8, 1)), before=True)
    conv = stream_companion(f"{kernel.name}:bwd_convert", 4 * rows * d, rows * d * b, chunks, (2, 1), 8)
    return pre, conv


def head_counts(kernel, shape, tiles, facts):
    """fa2_tc's main backward launch, one query head's share."""
    return main_counts(kernel, shape, tiles, facts, per_query_head_blocks=False, red_floats=2, expanded_dkv=False)


def companions(kernel, shape, tiles, facts):
    """The preprocess and the convert queued around the main launch; and what each library's launch record
    (research/data/h200/sdpa_workload_calls.json) shows beside them: SDPA flash's two copies of a (B, H, Nq, d)
    tensor before it (at::_flash_attention_backward makes its gradient and output contiguous: PyTorch hands both
    over in the (B, Nq, H, d) layout FlashAttention reads), and with grouped heads both libraries' reduction of
    dK and dV over each group (flash: at::sum, two reduce kernels; cuDNN: two fmha_reduce_head kernels)."""
    rows = np.asarray(shape.heads, float) * arr(shape.Nq)
    d, b = arr(shape.d), shape.element_bytes
    pre, conv = _pre_and_convert(kernel, shape, rows, d, b)
    out = [pre, conv]
    if kernel.name == "sdpa-flash":
        tensor = rows * d * b
        copy = stream_companion(f"{kernel.name}:bwd_contiguous", 2 * tensor, 2 * tensor, 2 * rows * d / 8,
                                 (1, 1), 0, before=True)
        out.append(dataclasses.replace(copy, counts=dataclasses.replace(copy.counts, queued_ops=2 + 0 * rows)))
    if kernel.name in ("sdpa-flash", "sdpa-cudnn") and np.any(np.asarray(shape.group) > 1):
        # dK and dV come out per query head, and each is summed over its group: reads B Nk H d twice, writes
        # B Nk Hkv d twice
        grouped = np.asarray(shape.group) > 1
        kv = np.asarray(shape.B, float) * arr(shape.Nk) * d * b
        red = stream_companion(f"{kernel.name}:bwd_gqa_sum",
                                np.where(grouped, 2 * kv * arr(shape.H), 0), np.where(grouped, 2 * kv * arr(shape.Hkv), 0),
                                np.where(grouped, 2 * np.asarray(shape.B, float) * arr(shape.Nk) * arr(shape.H) * d / 8, 0),
                                (1, 1), 4)
        c = dataclasses.replace(red.counts, queued_ops=np.where(grouped, 2, 0), path_gmem=np.where(grouped, 1, 0))
        out.append(dataclasses.replace(red, counts=c))
    return tuple(out)


# cuDNN's backward: SM cycles a work tile (one 128-key tile of a head) spends outside its loop over query tiles,
# read off Nsight Compute's warp samples of one launch (B 1 H 16 N 4096 d 128, research/data/h200/cudnn_sass/
# sdpa_sass.tar.gz, sass_cudnn_bwd_d128.csv): the consumer warps' samples in code they run once a work tile are
# 3.9% of all of theirs (13,688 of 349,985), over 3.88 work tiles a CTA of 979k active cycles. The launch record's
# N = 256 calls (one work tile a CTA: research/data/h200/sdpa_workload_calls.json) leave 5-6 us beside their four
# pairs, the same.
CUDNN_TILE_CYCLES = 9900


def counts(kernel, shape, tiles, facts):
    """An SDPA preset's main backward launch, the whole launch's counts (Kernel.counts of its head counts)."""
    if kernel.name == "sdpa-flash":
        head = main_counts(kernel, shape, tiles, facts, per_query_head_blocks=True, red_floats=1,
                           expanded_dkv=True)
    elif kernel.name == "sdpa-cudnn":
        head = main_counts(kernel, shape, tiles, facts, per_query_head_blocks=True, red_floats=4, expanded_dkv=True,
                           wgmma=True, score_passes=np.where(kernel.kernel_head_dim(shape.d) > 128, 2, 1))
        # the accumulator's memset; a work tile's prologue and epilogue (its first tiles' wait, dK and dV out through
        # shared memory and TMA stores, the barriers between), measured whole in place of the round trip and the two
        # barriers the loop nest puts there
        head = dataclasses.replace(head, queued_ops=1 + 0 * head.path_gmem, path_gmem=0 * head.path_gmem,
                                   path_sync=head.path_sync - 2, path_cycle=CUDNN_TILE_CYCLES + 0 * head.path_gmem)
        # one Q/dO stage (d = 256: K and V of its 128 keys take 128 KB of the 227): every pair's two copies are
        # single-stage (Counts.stage_*)
        Br, d, b = arr(tiles.Br), arr(shape.d), shape.element_bytes
        one = kernel.stages(shape, tiles, "bwd") <= 1
        pairs = pairs_per_head(shape.Nq, shape.Nk, Br, tiles.Bc, bool(shape.causal))[0]
        head = dataclasses.replace(head, stage_loads=np.where(one, 2 * pairs, 0),
                                   stage_bytes=np.where(one, 2 * pairs * Br * d * b, 0))
    else:
        raise InputError(f"kernel {kernel.name}: no backward model")
    BH = shape.heads
    per_launch = {f.name: BH * getattr(head, f.name) for f in dataclasses.fields(Counts)
                  if not f.name.startswith("path_") and f.name not in Counts.UNSCALED + Counts.RATIOS}
    return dataclasses.replace(head, **per_launch)


def grid_blocks(kernel, shape, tiles):
    """One block per (K tile, b, query head) (FlashAttention-2, cuDNN assumed alike)."""
    return arr(shape.B) * arr(shape.H) * cdiv(shape.Nk, tiles.Bc)


def smem_bytes(shape, tiles):
    """K and V, two buffers of Q and dO, P and dS, two of LSE and D (csrc/fa2_tc_bwd.cu smem_bytes; FA2's
    kSmemSize1colblock is the same tiles)."""
    d, Br, Bc = arr(shape.d), arr(tiles.Br), arr(tiles.Bc)
    return 2 * Bc * d * 2 + 4 * Br * d * 2 + 2 * Br * Bc * 2 + 4 * Br * 4


def each_problem(kernel, shape, gpu):
    """``kernel.default_tiles`` of every problem of a vectorised shape, as tile arrays (a forward-plus-backward call's
    forward tiles; the problems are few, each distinct one asked once)."""
    from perfmodel.shape import AXES

    cols = np.broadcast_arrays(*(arr(getattr(shape, a)) for a in AXES))
    if cols[0].ndim == 0:
        return kernel.default_tiles(shape, gpu)
    keys = list(zip(*(c.ravel().tolist() for c in cols)))
    memo = {}
    for k in set(keys):
        one = dataclasses.replace(shape, N=k[AXES.index("Nq")], **dict(zip(AXES, k)))
        memo[k] = kernel.default_tiles(one, gpu)
    fields = kernel.Tiles.fields()
    vals = {f: np.array([int(np.asarray(getattr(memo[k], f))) for k in keys]).reshape(cols[0].shape) for f in fields}
    return kernel.Tiles(**vals)
