"""``perfmodel probe``: microbenchmarks of the GPU at hand -> a calibration YAML for the timing model.

Each constant comes from a kernel built like the FlashAttention kernels (run-time loop bounds, fp32, shared
memory), never from the kernel timings the model is scored on:

* iter_cycles, conflict_cycles: one warp per SM running ``sum += A[lane*s + x] * B[x]`` for lane strides s
  with gcd(s, 32) = 1..32 (conflict degree k); cycles per step fitted as iter + (k - 1) * conflict;
* red_cycles, exp_cycles: the same loop as a max-reduction and as an in-place exp, one warp per SM;
* smem_wavefronts_per_clk: the same loop with 32 warps per SM (throughput);
* overlap_p: the p of the latency/throughput p-norm that best reproduces that loop at 1..32 warps per SM;
* fp32 and ex2 lanes per clock: 8 independent FMA / __expf chains per thread over a full grid;
* l2_bw, dram_bw: 16-B reads of an L2-resident buffer (mostly L1 hits: research/notes/known-gaps-log.md); a 1 GiB device copy
  (bytes read + written);
* l2_effective_bytes: the buffer size at which repeated reads fall halfway from L2 to DRAM bandwidth;
* l2_shared_bytes: the buffer size at which half the re-reads miss when every block re-reads it (timed:
  shared_room_timed; research/scripts/probe_l2_share.py counts the same with Nsight Compute);
* smem, L2 and DRAM latencies: pointer chases; sync_cycles: back-to-back __syncthreads;
* l2_red_bps: fp32 reductions (red.global.add, one or two floats a lane) from every SM into L2-resident regions
  that 1 to 64 blocks share (atomics: the backward's dQ accumulation);
* launch_overhead_s: CUDA-event time of an empty kernel.
"""

from __future__ import annotations

import datetime
import math
import shlex
import sys

import numpy as np

from perfmodel.hw.gpu import GPUSpec
from perfmodel.measure.bench import events_around

DOT_N = 32
DOT_ITERS = 200
STRIDES = [1, 2, 4, 8, 16, 32]
WARPS = [1, 2, 4, 8, 16, 32]


def _events(torch, fn, reps=5):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = events_around(torch, fn)
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    return float(np.median(times))


def _dot_cycles(torch, ext, sm, warps, stride, mode=0):
    cycles = torch.zeros(sm, dtype=torch.int64, device="cuda")
    sink = torch.zeros(1, device="cuda")
    ext.probe_dot(cycles, sink, sm, warps, stride, DOT_N, DOT_ITERS, mode)   # warm-up
    ext.probe_dot(cycles, sink, sm, warps, stride, DOT_N, DOT_ITERS, mode)
    torch.cuda.synchronize()
    return float(np.median(cycles.cpu().numpy())) / (DOT_ITERS * DOT_N)   # cycles per step per warp-sequence


def _chase(torch, ext, n_nodes, spacing_words, shared, steps=4096):
    rng = np.random.default_rng(0)
    order = rng.permutation(n_nodes)
    nxt = np.zeros(n_nodes * spacing_words, dtype=np.int32)
    for a, b in zip(order, np.roll(order, -1)):
        nxt[a * spacing_words] = b * spacing_words
    t = torch.from_numpy(nxt).cuda()
    cycles = torch.zeros(1, dtype=torch.int64, device="cuda")
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")
    ext.probe_chase(t, steps, shared, n_nodes * spacing_words if shared else 0, cycles, sink)
    torch.cuda.synchronize()
    return float(cycles.item()) / steps


def run(spec: GPUSpec, verbose: bool = False, log=print) -> dict:
    """Run every microbenchmark on the GPU at hand: {"provenance", "values" (the calibration), "raw" (what was
    measured)}."""
    from perfmodel.measure import build, runner

    torch = build.require_torch()
    tool = build.check_toolchain(torch)
    ext = build.load_probe(verbose=verbose)
    props = torch.cuda.get_device_properties(0)
    sm = props.multi_processor_count
    clock = runner.Clock()
    raw: dict = {}
    dot = _dot_steps(torch, ext, sm, spec, raw, log)                              # 1 and 2
    sink = torch.zeros(1, device="cuda")
    lanes = _lanes(torch, ext, sm, spec, clock, sink, raw, log)                 # 3
    memory = _bandwidths(torch, ext, sm, props, sink, raw, log)                 # 4, 4b and 4c
    latency = _latencies(torch, ext, sm, raw, log)                              # 5
    red = atomics(torch, ext, sm, raw, log)                                     # 5c
    # 5b. tensor cores: mma.sync m16n8k16 (fp32 accumulate), dependent latency and the SM's sustained rate
    mma = _mma(torch, ext, sm, props.major >= 8, log)
    raw.update(mma)

    # 6. launch overhead as `measure` sees it: an empty kernel timed like the kernels (flush, events)
    from perfmodel.measure.bench import Bencher
    launch = Bencher(torch, flush=True).run(ext.probe_empty, min_runs=50, max_runs=200).median_ms * 1e-3
    log(f"empty kernel, timed as measure times kernels: {launch * 1e6:.2f} µs")

    values = dict(dram_bw_bps=memory["dram_bw"], l2_bw_bps=memory["l2_bw"], l2_effective_bytes=memory["l2_eff"],
                  smem_wavefronts_per_clk=dot["smem_wf_per_clk"], fp32_lanes_per_clk=lanes["fp32_lanes"],
                  sfu_lanes_per_clk=lanes["sfu_lanes"], launch_overhead_s=launch, overlap_p=dot["overlap_p"])
    if memory["l2_shared_bytes"]:        # else unmeasured: the calibration keeps its default (0: the L2 size)
        values["l2_shared_bytes"] = memory["l2_shared_bytes"]
    # the reductions' rate: within 15% for one or two floats a lane and any sharing, so their median
    values["l2_red_bps"] = float(np.median(list(red.values())))
    if mma:
        values["mma_cycles"] = mma["mma_cycles_per_sm_fp16"]
    path_cycles = dict(dot=float(dot["iter_cycles"]), reduction=dot["red_cycles"], exp=dot["exp_cycles"],
                       conflict=float(dot["conflict_cycles"]), fp32=spec.fp32_latency_cycles,
                       sfu=spec.sfu_latency_cycles, gmem=latency["l2"], sync=latency["sync"])
    if mma:
        path_cycles["mma"] = mma["mma_latency_cycles_fp16"]
    provenance = dict(gpu_name=torch.cuda.get_device_name(), sm_count=sm, sm_clock_mhz=lanes["mhz"],
                      sm_clock_max_mhz=clock.max_mhz(), driver=clock.driver(), torch=str(torch.__version__),
                      torch_cuda=tool["torch_cuda"], nvcc=tool["nvcc"],
                      date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      command=" ".join(["perfmodel"] + [shlex.quote(a) for a in sys.argv[1:]]),
                      notes="path_cycles.fp32 and path_cycles.sfu are taken from the spec, not probed")
    values = {k: float(v) for k, v in values.items()}
    values["path_cycles"] = {k: float(v) for k, v in path_cycles.items()}
    return {"provenance": provenance, "values": values, "raw": _plain(raw)}


def _dot_steps(torch, ext, sm: int, spec: GPUSpec, raw: dict, log) -> dict:
    """The shared-memory dot step: its latency, bank-conflict cost, reduction and exp steps (one warp per SM), the
    shared wavefronts an SM serves a clock and the latency/throughput p-norm (1 to 32 warps per SM)."""
    # 1. the dot step in the latency regime: one warp per SM, conflict degree k = gcd(s, 32)
    lat = {s: _dot_cycles(torch, ext, sm, 1, s) for s in STRIDES}
    raw["dot_cycles_per_step_1warp"] = lat
    k = np.array([math.gcd(s, 32) for s in STRIDES], dtype=float)
    y = np.array([lat[s] for s in STRIDES])
    A = np.stack([np.ones_like(k), k - 1], axis=1)
    (iter_cycles, conflict_cycles), *_ = np.linalg.lstsq(A, y, rcond=None)
    log(f"dot step, 1 warp/SM: {dict((s, round(v, 2)) for s, v in lat.items())} cycles -> iter {iter_cycles:.2f}, "
        f"conflict {conflict_cycles:.2f}")
    red_cycles = _dot_cycles(torch, ext, sm, 1, 1, mode=1)
    exp_cycles = _dot_cycles(torch, ext, sm, 1, 1, mode=2)
    raw.update(red_cycles_per_step_1warp=red_cycles, exp_cycles_per_step_1warp=exp_cycles)
    log(f"reduction step {red_cycles:.2f} cycles, exp step {exp_cycles:.2f} cycles (1 warp/SM, conflict-free)")

    # 2. throughput and the latency/throughput blend: 1..32 warps per SM, k = 1 and k = 32
    grid = {(w, s): _dot_cycles(torch, ext, sm, w, s) for w in WARPS for s in (1, 32)}
    raw["dot_cycles_per_step_by_warps"] = {f"{w}w_s{s}": v for (w, s), v in grid.items()}
    wf32 = 32 * (32 + 1) / grid[(32, 32)]         # 32 warps x (32 + 1) wavefronts per step
    wf1 = 32 * 2 / grid[(32, 1)]
    smem_wf_per_clk = max(wf32, wf1)
    log(f"shared wavefronts per clock per SM: {wf32:.3f} (32-way), {wf1:.3f} (conflict-free)")

    def blend(p):
        err = []
        for (w, s), meas in grid.items():
            kk = math.gcd(s, 32)
            chain = iter_cycles + (kk - 1) * conflict_cycles
            used = min(w, 4) / 4
            thr = max(w * (kk + 1) / smem_wf_per_clk, w * 4 / (4 * used), w * 32 / (spec.fp32_lanes_per_sm * used))
            err.append(math.log((chain ** p + thr ** p) ** (1 / p) / meas) ** 2)
        return sum(err)

    ps = np.linspace(1.0, 12.0, 111)
    overlap_p = float(ps[np.argmin([blend(p) for p in ps])])
    log(f"latency/throughput p-norm: p = {overlap_p:.2f}")
    return dict(iter_cycles=iter_cycles, conflict_cycles=conflict_cycles, red_cycles=red_cycles,
                exp_cycles=exp_cycles, smem_wf_per_clk=smem_wf_per_clk, overlap_p=overlap_p)


def _lanes(torch, ext, sm: int, spec: GPUSpec, clock, sink, raw: dict, log) -> dict:
    """3. FP32 and ex2 throughput: lanes per clock per SM at the SM clock read now (the spec's boost clock where
    none is read)."""
    blocks, threads, iters = sm * 8, 256, 4096
    t = _events(torch, lambda: ext.probe_fma(sink, blocks, threads, iters))
    mhz = clock.sm_mhz() or spec.clock_boost_mhz
    fma_per_s = blocks * threads * iters * 8 / t
    fp32_lanes = fma_per_s / (sm * float(mhz) * 1e6)
    t = _events(torch, lambda: ext.probe_exp(sink, blocks, threads, iters // 4))
    exp_per_s = blocks * threads * (iters // 4) * 8 / t
    sfu_lanes = exp_per_s / (sm * float(mhz) * 1e6)
    raw.update(fp32_tflops=2 * fma_per_s / 1e12, exp_per_s=exp_per_s, probe_clock_mhz=mhz)
    log(f"FP32 {2 * fma_per_s / 1e12:.1f} TFLOP/s ({fp32_lanes:.1f} lanes/clk/SM), "
        f"exp {exp_per_s / 1e12:.2f} T/s ({sfu_lanes:.1f} lanes/clk/SM) at {mhz} MHz")
    return dict(fp32_lanes=fp32_lanes, sfu_lanes=sfu_lanes, mhz=mhz)


def _bandwidths(torch, ext, sm: int, props, sink, raw: dict, log) -> dict:
    """4. L2 and DRAM bandwidth; the effective L2 capacity; the room L2 gives lines every block re-reads."""
    l2_buf = torch.ones(max(props.L2_cache_size // 4 // 4, 1 << 18), device="cuda")   # a quarter of L2
    reps = 50
    t = _events(torch, lambda: ext.probe_read(l2_buf, reps, sink, sm * 4))
    l2_bw = l2_buf.numel() * 4 * reps / t
    x = torch.empty(1 << 28, device="cuda")
    yb = torch.empty_like(x)
    t = _events(torch, lambda: yb.copy_(x))
    dram_bw = 2 * x.numel() * 4 / t
    del x, yb, l2_buf
    raw.update(l2_read_gbps=l2_bw / 1e9, dram_copy_gbps=dram_bw / 1e9)
    log(f"L2 read {l2_bw / 1e12:.2f} TB/s, DRAM copy {dram_bw / 1e12:.2f} TB/s")

    # 4b. effective L2 capacity: read buffers of growing size repeatedly; the capacity is where the read
    # bandwidth falls halfway from its L2 plateau towards DRAM (log-interpolated between sizes)
    sizes_mb = [4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 96]
    bw_by_size = {}
    for mb in sizes_mb:
        buf = torch.ones(mb * (1 << 20) // 4, device="cuda")
        t = _events(torch, lambda: ext.probe_read(buf, 10, sink, sm * 4))
        bw_by_size[mb] = buf.numel() * 4 * 10 / t
        del buf
    plateau = max(bw_by_size.values())
    floor = min(bw_by_size.values())
    half = (plateau + floor) / 2
    l2_eff = float(sizes_mb[-1]) * (1 << 20)
    for a, b in zip(sizes_mb, sizes_mb[1:]):
        if bw_by_size[a] >= half > bw_by_size[b]:
            f = (bw_by_size[a] - half) / (bw_by_size[a] - bw_by_size[b])
            l2_eff = math.exp(math.log(a) + f * (math.log(b) - math.log(a))) * (1 << 20)
            break
    raw["read_gbps_by_buffer_mb"] = {mb: v / 1e9 for mb, v in bw_by_size.items()}
    log(f"read bandwidth by buffer size: {dict((mb, round(v / 1e12, 2)) for mb, v in bw_by_size.items())} TB/s"
        f" -> effective L2 {l2_eff / 2**20:.1f} MiB")

    # 4c. the room L2 gives lines every block re-reads (the DRAM rule's cross-wave unit), timed (its own module)
    _, _, share_ext = share_module()
    shared = shared_room_timed(torch, share_ext, sm, props.L2_cache_size, log=log)
    raw["shared_read_seconds_by_buffer_bytes"] = dict(zip(shared["sizes_bytes"], shared["seconds"]))
    return dict(l2_bw=l2_bw, dram_bw=dram_bw, l2_eff=l2_eff, l2_shared_bytes=shared["l2_shared_bytes"])


def _latencies(torch, ext, sm: int, raw: dict, log) -> dict:
    """5. Shared-memory, L2 and DRAM latencies (pointer chases) and a __syncthreads of 256 threads, in cycles."""
    smem_lat = _chase(torch, ext, 1024, 1, True)
    l2_lat = _chase(torch, ext, 8192, 32, False)                 # 1 MB, one node per 128-B line
    dram_lat = _chase(torch, ext, 1 << 18, 1024, False, 2048)    # 1 GiB, one node per 4 KiB
    cycles = torch.zeros(sm, dtype=torch.int64, device="cuda")
    ext.probe_sync(cycles, sm, 256, 10000)
    torch.cuda.synchronize()
    sync = float(np.median(cycles.cpu().numpy())) / 10000
    raw.update(smem_latency_cycles=smem_lat, l2_latency_cycles=l2_lat, dram_latency_cycles=dram_lat,
               sync_cycles_256threads=sync)
    log(f"latency: shared {smem_lat:.0f}, L2 {l2_lat:.0f}, DRAM {dram_lat:.0f} cycles; sync {sync:.1f} cycles")
    return dict(l2=l2_lat, sync=sync)


RED_SHARES = (1, 4, 16, 64)      # blocks that add to one region together (1: each its own)
RED_REGION = 16384               # floats a region: 64 KB, a 128 x 128 fp32 dQ tile


def atomics(torch, ext, sm: int, raw: dict, log) -> dict:
    """5c. fp32 reductions into L2 (the backward's dQ accumulation), from 8 blocks of 256 threads a SM: bytes added
    a second for one float a lane (atomicAdd) and two (red.global.add.v2), to regions each block has alone and to
    regions 4, 16 and 64 blocks add to together; every region stays in L2."""
    blocks, iters, out = 8 * sm, 512, {}
    buf = torch.zeros(blocks * RED_REGION, device="cuda")
    for vec in (1, 2):
        for share in RED_SHARES:
            t = _events(torch, lambda: ext.probe_red(buf, blocks, RED_REGION, share, iters, vec))
            out[f"v{vec}_share{share}"] = blocks * 256 * iters * vec * 4 / t
    del buf
    raw["red_bytes_per_s"] = out
    log("fp32 reductions into L2: " + ", ".join(f"{k} {v / 1e12:.2f} TB/s" for k, v in out.items()))
    return out


def _mma(torch, ext, sm: int, has_mma: bool, log) -> dict:
    """mma.sync m16n8k16 per dtype: latency (one warp, one dependent chain) and SM cycles per instruction at the
    best of 4, 8 and 16 warps per SM with 8 independent chains each."""
    if not has_mma:
        return {}
    out = {}
    cycles = torch.zeros(sm, dtype=torch.int64, device="cuda")
    sink = torch.zeros(1, device="cuda")
    iters = 4096
    for code, dt in ((0, "fp16"), (1, "bf16")):
        ext.probe_mma(cycles, sink, sm, 1, iters, code, 1)
        torch.cuda.synchronize()
        ext.probe_mma(cycles, sink, sm, 1, iters, code, 1)
        torch.cuda.synchronize()
        out[f"mma_latency_cycles_{dt}"] = float(np.median(cycles.cpu().numpy())) / iters
        rates = {}
        for w in (4, 8, 16):
            ext.probe_mma(cycles, sink, sm, w, iters, code, 8)
            torch.cuda.synchronize()
            rates[w] = w * iters * 8 / float(np.median(cycles.cpu().numpy()))      # mma per SM clock
        out[f"mma_per_clk_by_warps_{dt}"] = rates
        out[f"mma_cycles_per_sm_{dt}"] = 1.0 / max(rates.values())
        log(f"mma.sync m16n8k16 {dt}: latency {out[f'mma_latency_cycles_{dt}']:.1f} cycles; "
            f"{max(rates.values()) * 4096:.0f} FLOP/clk/SM ({dict((w, round(r, 3)) for w, r in rates.items())} mma/clk)")
    return out


SHARE_PASSES = 4          # walks of the buffer a shared-read launch makes (the first misses in any case)
SHARE_BLOCKS_PER_SM = 4   # its 256-thread blocks a SM, all resident at once


def half_miss(points, share: float = 0.5) -> float:
    """The bytes (buffer size, re-use distance) at which half the re-reads miss, or ``share`` of them: linear
    between the measured (bytes, miss share) points, at their first crossing."""
    runs = sorted(points)
    for (x0, m0), (x1, m1) in zip(runs, runs[1:]):
        if m0 < share <= m1:
            return x0 + (x1 - x0) * (share - m0) / (m1 - m0)
    raise ValueError(f"the re-reads never cross a miss share of {share:g}")


def shared_room_from_times(sizes, seconds, ends: int = 3) -> float:
    """The room L2 gives lines every block re-reads (calibration ``l2_shared_bytes``) from the shared-read launches'
    times alone, where no counter of DRAM bytes is at hand: every block walks one buffer SHARE_PASSES times after
    an L2 flush, at each size in ``sizes``. The time a buffer byte takes, y = t / size, is flat while the re-reads
    hit and flat again, higher, once they all miss; a size's share of missed re-reads is where its y lies between
    the two plateaus (the mean y of the ``ends`` smallest and of the ``ends`` largest sizes), and the room is
    half_miss of those shares. From the times Nsight Compute took of the launches it counted (probe/
    l2_share_fine.json) this lands within 0.5% of the room their DRAM bytes give; timed apart, with this probe's
    flush (shared_room_timed), 2.7% below it on the H100 and 2.0% above on the H200 (research/tests/test_l2_share_probe.py).
    ValueError where the sizes do not reach from one plateau to the other."""
    order = np.argsort(sizes)
    b = np.asarray(sizes, float)[order]
    y = np.asarray(seconds, float)[order] / b
    if len(b) < 2 * ends + 1:
        raise ValueError(f"{len(b)} sizes are too few to find both plateaus")
    hit, miss = y[:ends].mean(), y[-ends:].mean()
    if not miss > 1.15 * hit:
        raise ValueError(f"a byte takes {miss / hit:.2f}x as long at the largest sizes as at the smallest: "
                         f"no step from L2 hits to misses")
    return half_miss(zip(b, (y - hit) / (miss - hit)))


def share_module():
    """(torch, toolchain facts, module) of probe_csrc/probe_share.cu, the shared-read launch, built as its own
    extension (`perfmodel probe`, research/scripts/probe_l2_share.py)."""
    from perfmodel.measure import build

    return build.load_single(build.probe_csrc_dir() / "probe_share.cu", "share",
                             deps=(build.csrc_dir() / "sm_timer.cuh",))


def shared_read_sizes(l2_bytes: int) -> list:
    """The buffer sizes the shared-read launch is timed at: 41 from 0.2x to 1.2x the device's L2 (multiples of
    64 bytes)."""
    return [int(l2_bytes * f) // 64 * 64 for f in np.linspace(0.2, 1.2, 41)]


def shared_room_timed(torch, ext, sm: int, l2_bytes: int, reps: int = 3, log=print) -> dict:
    """Time the shared-read launch (probe_csrc/probe_share.cu built as ``ext``, every block reading one buffer) at 41
    sizes from 0.2x to 1.2x the device's L2, each launch after a flush that reads a buffer twice the L2's size
    (leaving it clean, as Nsight Compute's flush does), the median of ``reps``; and the room
    shared_room_from_times finds (0.0, said in the log, where it finds none)."""
    blocks = sm * SHARE_BLOCKS_PER_SM
    sizes = shared_read_sizes(l2_bytes)
    buf = torch.rand(max(sizes) // 4, device="cuda")
    flush = torch.ones(2 * l2_bytes // 4, device="cuda")
    active = torch.ones(max(sm, 256), dtype=torch.int32, device="cuda")
    smid = torch.zeros(blocks, dtype=torch.int32, device="cuda")
    sink = torch.zeros(1, device="cuda")
    seconds = []
    for size in sizes:
        launch = lambda: ext.share(buf, size // 4, blocks, SHARE_PASSES, active, sink, smid, blocks)
        launch()                                                 # warm-up
        times = []
        for _ in range(reps):
            flush.sum()
            s, e = events_around(torch, launch)
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) * 1e-3)
        seconds.append(float(np.median(times)))
    try:
        room = shared_room_from_times(sizes, seconds)
        log(f"L2 room for lines every block re-reads: {room / 2**20:.1f} MiB (half their re-reads miss)")
    except ValueError as exc:
        room = 0.0
        log(f"L2 room for lines every block re-reads: not measured ({exc})")
    return {"sizes_bytes": sizes, "seconds": seconds, "l2_shared_bytes": room}


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (np.floating, np.integer)):
        return float(x)
    return x
