"""Per-block traces of fa2_tc launches: which SM each block ran on, when it started and ended, as JSON.

    [TRACE_SET=late|fair|phase|phase-cold|short] python3 research/scripts/trace_fa2_tc.py OUT.json

Builds research/csrc/fa2_tc_trace.cu (fa2_tc compiled with FA2TC_TRACE, its own extension module) and runs a list of
problems, chosen where the model's causal scheduling is least sure: grids that fill one round, causal and not,
tiles of 4 and 8 warps, and a few large grids. Each launch is traced five times after a warm-up. The spans (first
block's start to last block's end) are the measurement: the recorded event times also hold the host's copy of
the trace pointer into the module before each launch. Nothing here changes clocks. TRACE_SET=late: instead, the
causal launches the model predicts worst (examples/measurements/h100/fa2_tc.csv, held-out rows 17-23% fast), whose
heavy blocks start after the first round or share their SM with two others. TRACE_SET=fair: every instance, fp16,
non-causal, at the measured build's blocks per SM (forced with unused shared memory where the trace build would fit
more), in grids of exactly one and four rounds (B1, H 4 or 16 times the blocks per SM, N 33 tiles of Br); and the
instances of one block a SM at B32 H8 N1000 and B2 H8 N8192: how evenly co-resident blocks share their SM, and what
a block costs beside its tiles where nothing overlaps its start and end. TRACE_SET=phase: the phase build
(research/csrc/fa2_tc_phase.cu), whose blocks also record the SM cycles their warp 0 spends waiting for K, in QK^T and the
softmax, waiting for V and in PV: every instance at each blocks a SM from one to the measured build's, in grids of
one and two rounds; the last of three launches' records is kept. TRACE_SET=phase-cold: the same, each launch after
an L2 flush (as the timed grid's are). TRACE_SET=short: the phase build, each launch after an L2 flush, on the
problems whose tile pick misses the measured best by more than 5% (SHORT, with the same heads over longer walks),
and each launch of the trace build and of the measured build timed interleaved (bench.Bencher.interleaved).
"""

import dataclasses
import os

from perfmodel import api
from perfmodel.kernels import fa2_tc
from perfmodel.measure import bench, build
import common


# (B, H, N, d, Br, Bc, warps); each causal and not, fp16
PROBLEMS = [
    (2, 16, 1000, 128, 128, 64, 4), (1, 16, 1000, 128, 128, 64, 4), (1, 8, 3000, 128, 128, 64, 4),
    (1, 16, 2048, 128, 128, 64, 4), (32, 1, 1000, 128, 128, 64, 4), (8, 16, 2048, 128, 128, 64, 4),
    (2, 1, 128, 64, 64, 64, 4), (1, 16, 128, 64, 64, 64, 4), (8, 8, 333, 64, 128, 64, 8),
    (4, 16, 1024, 64, 64, 128, 4), (4, 16, 1024, 32, 128, 64, 4), (8, 1, 3000, 128, 128, 128, 8),
    (2, 8, 1000, 128, 64, 64, 4), (4, 16, 4096, 64, 128, 128, 4), (2, 16, 1000, 128, 64, 64, 4),
]
# the phase build's per-block words beyond SM, start and end (fa2_tc.cu, "Trace builds only"): warp 0's SM cycles in
# its KV loop's phases, summed over its tiles, and from its start to the block's end
PHASES = ("wait_k_cycles", "s_cycles", "wait_v_cycles", "pv_cycles", "total_cycles")
LATE = [
    (1, 16, 3000, 64, 128, 128, 4), (1, 16, 3000, 128, 128, 64, 4), (4, 16, 1024, 64, 128, 32, 4),
    (8, 16, 333, 128, 128, 64, 4), (32, 8, 128, 128, 128, 64, 4), (1, 8, 8192, 128, 128, 64, 4),
]


def measured_build(gpu_key, d, Br, Bc, warps) -> tuple:
    """(blocks per SM, shared memory bytes a block) of the measured build's instance: the model's occupancy from its
    registers (fa2_tc.REGS, read off ptxas) and the kernel's shared memory."""
    p = api.predict(gpu_key, "fa2_tc", B=1, H=1, N=Br, d=d, dtype="fp16", Br=Br, Bc=Bc, warps=warps).prediction
    return int(p.blocks_per_sm), int(p.launch.smem_bytes)


def forced(ext, spec, d, Br, Bc, w, want, smem) -> tuple:
    """(extra_smem, blocks per SM): the unused shared memory (in KiB steps) that holds this build's instance to at
    most ``want`` blocks a SM, and the blocks a SM it then runs (fewer where its own registers allow fewer)."""
    extra = 0
    while ext.blocks_per_sm(d, Br, Bc, w, 0, extra) > want and smem + extra < spec.smem_per_block_optin_bytes:
        extra += 1024
    return extra, ext.blocks_per_sm(d, Br, Bc, w, 0, extra)


def fair_runs(ext, gpu_key):
    """(B, H, N, d, Br, Bc, warps, causals, extra_smem, blocks_per_sm) of TRACE_SET=fair."""
    spec = api.load_gpu(gpu_key)
    runs = []
    for d, Br, Bc, w in fa2_tc.INSTANCES:
        want, smem = measured_build(gpu_key, d, Br, Bc, w)
        extra, got = forced(ext, spec, d, Br, Bc, w, want, smem)
        N = 33 * Br
        shapes = [(1, 4 * want, N), (1, 16 * want, N)] + ([(32, 8, 1000), (2, 8, 8192)] if want == 1 else [])
        runs += [(B, H, n, d, Br, Bc, w, (False,), extra, got) for B, H, n in shapes]
    return runs


def phase_runs(ext, gpu_key):
    """(B, H, N, d, Br, Bc, warps, causals, extra_smem, blocks_per_sm) of TRACE_SET=phase: every instance at each
    blocks a SM from one to the measured build's, in grids of exactly one and two rounds (N 33 tiles of Br)."""
    spec = api.load_gpu(gpu_key)
    runs = []
    for d, Br, Bc, w in fa2_tc.INSTANCES:
        most, smem = measured_build(gpu_key, d, Br, Bc, w)
        for want in range(1, most + 1):
            extra, got = forced(ext, spec, d, Br, Bc, w, want, smem)
            runs += [r for r in ((1, rounds * 4 * got, 33 * Br, d, Br, Bc, w, (False,), extra, got)
                                 for rounds in (1, 2)) if r not in runs]     # (this build may fit fewer)
    return runs


# TRACE_SET=short: the problems whose tile pick misses the measured best by more than 5% on the H100
# (examples/benchmarks/tile_advice_fa2_tc.json: few heads of N = 333, d = 64; 256 causal heads of N = 128, d = 128)
# and the same d = 64 heads over longer walks (N = 1000, 3000), each with its three measured tiles: (B, H, N, d,
# causal) -> tiles (Br, Bc, warps)
SHORT = {(1, 8, 333, 64, False): ((128, 128, 4), (64, 64, 4), (128, 64, 8)),
         (2, 8, 333, 64, False): ((128, 128, 4), (64, 64, 4), (128, 64, 8)),
         (32, 8, 333, 64, False): ((128, 128, 4), (64, 64, 4), (128, 64, 8)),
         (1, 8, 1000, 64, False): ((128, 128, 4), (64, 64, 4), (128, 64, 8)),
         (1, 8, 3000, 64, False): ((128, 128, 4), (64, 64, 4), (128, 64, 8)),
         (32, 8, 128, 128, True): ((128, 64, 4), (64, 64, 4), (128, 128, 8))}


def short_runs(ext, gpu_key):
    """(B, H, N, d, Br, Bc, warps, causals, extra_smem, blocks_per_sm) of TRACE_SET=short: each at the measured
    build's blocks per SM (forced with unused shared memory where the phase build would fit more)."""
    spec = api.load_gpu(gpu_key)
    runs = []
    for (B, H, N, d, causal), tiles in SHORT.items():
        for Br, Bc, w in tiles:
            want, smem = measured_build(gpu_key, d, Br, Bc, w)
            extra, got = forced(ext, spec, d, Br, Bc, w, want, smem)
            runs.append((B, H, N, d, Br, Bc, w, (causal,), extra, got))
    return runs


def main(path):
    which = os.environ.get("TRACE_SET", "first")
    # phase-cold: the phase runs, each launch after an L2 flush; short: the phase build on SHORT, flushed too
    cold = which in ("phase-cold", "short")
    which = "phase" if which == "phase-cold" else which
    if which in ("phase", "short"):
        torch, tool, ext = common.load_cuda("fa2_tc_phase.cu", "phase",
                                             deps=("fa2_tc_trace.cu", "fa2_tc.cu", "sm_timer.cuh"))
    else:
        torch, tool, ext = common.load_cuda("fa2_tc_trace.cu", "trace", deps=("fa2_tc.cu", "sm_timer.cuh"))
    words = int(ext.trace_words)                  # per block: 3, or 8 in the phase build
    out = {"runs": [], "trace_set": os.environ.get("TRACE_SET", "first")}      # (the command line omits it)
    flush = bench.Bencher(torch).flush_l2 if cold else (lambda: None)
    if which == "fair":
        runs = fair_runs(ext, os.environ.get("GPU_KEY", "h100"))
    elif which == "phase":
        runs = phase_runs(ext, os.environ.get("GPU_KEY", "h100"))
    elif which == "short":
        runs = short_runs(ext, os.environ.get("GPU_KEY", "h100"))
    else:
        runs = [(*p, (False, True), 0, None) for p in (LATE if which == "late" else PROBLEMS)]
    for B, H, N, d, Br, Bc, w, causals, extra, bpsm in runs:
        for causal in causals:
            g = torch.Generator(device="cuda").manual_seed(0)
            Q, K, V = (torch.randn((B, H, N, d), device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
            O = torch.empty_like(Q)
            blocks = -(-N // Br) * H * B
            trace = torch.zeros(words * blocks, dtype=torch.int64, device="cuda")
            ext.fa2_tc_traced(Q, K, V, O, Br, Bc, w, causal, trace, extra)      # warm-up
            ref = torch.nn.functional.scaled_dot_product_attention(Q.float(), K.float(), V.float(), is_causal=causal)
            err = float((O.float() - ref).abs().max())
            reps, times = [], []
            for _ in range(3 if which == "phase" else 5):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                flush()
                s.record()
                ext.fa2_tc_traced(Q, K, V, O, Br, Bc, w, causal, trace, extra)
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e) * 1e3)
                t = trace.view(-1, words).cpu()
                reps.append(common.block_times(t[:, 0].tolist(), t[:, 1].tolist(), t[:, 2].tolist()))
                if words == 8:
                    reps[-1].update({k: t[:, 3 + i].tolist() for i, k in enumerate(PHASES)})
            if which == "phase":
                reps = reps[-1:]            # the last launch's record (the phase records are large)
            timed = {}
            if which == "short":
                # the trace build's launch alone (into the buffer set above) and the measured build's, timed
                # interleaved as the timed grid's runs are (L2 flush, spins): what the trace build adds to a launch
                main_ext = build.load()
                timed = {k: dataclasses.asdict(t) for k, t in bench.Bencher(torch).interleaved({
                    "trace_build": lambda: ext.fa2_tc_traced_again(Q, K, V, O, Br, Bc, w, causal, extra),
                    "measured_build": lambda: main_ext.fa2_tc_forward(Q, K, V, O, Br, Bc, w, causal)}).items()}
            out["runs"].append({"B": B, "H": H, "N": N, "d": d, "Br": Br, "Bc": Bc, "warps": w, "causal": causal,
                                "dtype": "fp16", "max_abs_err_vs_fp32_sdpa": err, "event_us": times, "reps": reps,
                                **({} if bpsm is None else {"extra_smem": extra, "blocks_per_sm": bpsm}),
                                **({"l2_flushed": True} if cold else {}), **({"timed": timed} if timed else {})})
            span = max(reps[-1]["end_ns"]) / 1e3
            print(f"B{B} H{H} N{N} d{d} {Br}x{Bc}/{w}w causal={int(causal)}: {blocks} blocks, span {span:.1f} us, "
                  f"events {min(times):.1f} us, max err {err:.1e}", flush=True)
    common.write_record(path, torch, tool, out)


if __name__ == "__main__":
    common.run_script(main)
