"""How fast a warp issues when its SM's hot code outgrows the instruction caches, as JSON.

    python3 research/scripts/probe_icache.py OUT.json

Builds research/csrc/probe_icache.cu (its own extension module) and runs straight-line loop bodies of 4 to 128 KiB of SASS
(FFMAs on eight independent accumulators: nothing but instruction supply and the FP32 pipe limits their issue),
one block of 4 warps per SM, two blocks per SM running the same body, and two blocks per SM running two distinct
copies of it (the SM's hot code is then twice the body, as when co-resident blocks of one kernel sit in different
loops). Each warp reports the clock64 cycles of its passes; cycles per instruction is that over the instructions it
issued. Shared memory that the kernel never touches sets how many blocks share an SM. Nothing here changes clocks.
Then ("streams" runs) bodies of 4 to 32 KiB in 1 to 8 distinct copies, 2, 4 or 8 blocks per SM, each block in the
copy its start order on the SM gives it: does the supply depend on the number of code streams, or only on the
hot code they sum to?
Then ("layout" runs) a FlashAttention block's code layout: each block of 4 warps passes once through 0 to 112 KiB of
straight-line code (its prologue, unrolled masking steps and epilogue) and then loops over a 16 or 24 KiB body (its
main loop), 0 to 7 passes varying from block to block as in a causal grid, or 4 passes in every block; 1 or 2
blocks per SM, 24 waves: what the SM issues per scheduler per clock when its blocks sit at different points of that
code.
"""

from perfmodel.measure import bench
import common

THREADS = 128
INSTRUCTIONS = 1 << 22          # per warp per launch: ~2-4 ms at one FFMA a clock per scheduler
MODES = ((1, False), (2, False), (2, True))      # (blocks per SM, two distinct bodies)
LAYOUT_WAVES = 24
LAYOUT_PATTERNS = {"causal": (0, 8, 1), "uniform": (4, 1, 0)}     # passes = base + (block % period) * step
STREAM_MODES = ((2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (8, 1), (8, 2), (8, 4), (8, 8))   # (blocks per SM, streams)


def passes(kb):
    """(FFMAs in one pass of a kb-KiB body, passes that make INSTRUCTIONS per warp)."""
    per_pass = kb * 1024 // 16
    return per_pass, max(INSTRUCTIONS // per_pass, 1)


def buffers(torch, sm, grid, stamps):
    """The kernels' outputs: per-SM start counters, per-thread sums, ``stamps`` clock64 values per warp."""
    return (torch.zeros(sm, dtype=torch.int32, device="cuda"), torch.empty(grid * THREADS, device="cuda"),
            torch.zeros(stamps * grid * THREADS // 32, dtype=torch.int64, device="cuda"))


def traced(torch, sm, grid, launch):
    """A launch of ``grid`` blocks that stamps each warp's start and end and each block's SM: ``launch(warm, counter,
    out, cycles, smids)`` once to warm up and once measured. Returns the stamps [blocks, warps, 2], each block's SM
    and the most blocks any SM started."""
    counter, o, cyc = buffers(torch, sm, grid, 2)
    smids = torch.zeros(grid, dtype=torch.int32, device="cuda")
    launch(True, counter, o, cyc, smids)
    counter.zero_()
    launch(False, counter, o, cyc, smids)
    torch.cuda.synchronize()
    return cyc.cpu().numpy().reshape(grid, THREADS // 32, 2), smids.cpu().numpy(), int(counter.max().item())


def sm_issue_rates(t, where, instructions):
    """Per SM, what its warps issued per scheduler per clock over the span from their first start to their last
    end on the SM's own clock: ``t`` is [blocks, warps, 2] clock64 stamps, ``where`` each block's SM,
    ``instructions`` [blocks] each warp's count."""
    import numpy as np

    rates = []
    for s_ in np.unique(where):
        sel = where == s_
        w = t[sel]
        rates.append(instructions[sel].sum() * w.shape[1] / ((w[..., 1].max() - w[..., 0].min()) * 4))
    return np.asarray(rates)


def main(path):
    import numpy as np

    torch, tool, ext = common.load_cuda("probe_icache.cu", "icache", deps=("sm_timer.cuh",))
    props = torch.cuda.get_device_properties(0)
    sm = props.multi_processor_count
    smem_sm = props.shared_memory_per_multiprocessor
    out = {"sm_count": sm, "threads": THREADS, "instructions_per_warp": INSTRUCTIONS, "runs": []}
    for bps, two in MODES:
        smem = common.smem_for_blocks_per_sm(smem_sm, bps)
        grid = sm * bps
        for kb in ext.sizes():
            per_pass, iters = passes(kb)
            counter, o, cyc = buffers(torch, sm, grid, 1)
            ext.run(kb, grid, THREADS, smem, 2, two, counter, o, cyc)                   # warm-up
            counter.zero_()
            start, end = bench.events_around(torch, lambda: ext.run(kb, grid, THREADS, smem, iters, two, counter, o,
                                                                      cyc))
            torch.cuda.synchronize()
            c = cyc.cpu().numpy().astype(float)
            cpi = c / (iters * per_pass)
            row = {"body_kib": kb, "blocks_per_sm": bps, "two_bodies": two, "hot_code_kib": kb * (2 if two else 1),
                   "iters": iters, "cpi_median": float(np.median(cpi)), "cpi_max": float(cpi.max()),
                   "cpi_min": float(cpi.min()), "event_ms": start.elapsed_time(end),
                   "blocks_started_per_sm_max": int(counter.max().item())}
            out["runs"].append(row)
            print(f"bps {bps} two {int(two)} body {kb:4d} KiB  cycles/instruction {row['cpi_median']:.3f} "
                  f"(max {row['cpi_max']:.3f})  {row['event_ms']:.2f} ms", flush=True)
    out["stream_runs"] = []
    for bps, streams in STREAM_MODES:
        smem = common.smem_for_blocks_per_sm(smem_sm, bps)
        grid = sm * bps
        for kb in ext.stream_sizes():
            per_pass, iters = passes(kb)
            t, where, started = traced(torch, sm, grid, lambda warm, *bufs: ext.run_streams(
                kb, grid, THREADS, smem, 2 if warm else iters, streams, *bufs))
            ipc = sm_issue_rates(t, where, np.full(grid, iters * per_pass))
            row = {"body_kib": kb, "blocks_per_sm": bps, "streams": streams, "hot_code_kib": kb * streams,
                   "iters": iters, "ipc_per_scheduler": float(np.median(ipc)), "ipc_min": float(np.min(ipc)),
                   "blocks_started_per_sm_max": started}
            out["stream_runs"].append(row)
            print(f"bps {bps} streams {streams} body {kb:3d} KiB hot {kb * streams:4d} KiB  "
                  f"IPC/scheduler {row['ipc_per_scheduler']:.3f}", flush=True)
    out["layout_runs"] = []
    chunk = 8 * 1024 // 16                       # FFMAs in one 8-KiB once-run chunk
    for bps in (1, 2):
        smem = common.smem_for_blocks_per_sm(smem_sm, bps)
        grid = sm * bps * LAYOUT_WAVES
        for loop_kb in ext.layout_loops():
            for pattern, (base, period, step) in LAYOUT_PATTERNS.items():
                if bps == 1 and (loop_kb != 24 or pattern != "causal"):
                    continue
                for once in range(0, ext.layout_chunks() + 1, 2):
                    t, where, _ = traced(torch, sm, grid, lambda warm, *bufs: ext.run_layout(
                        loop_kb, grid, THREADS, smem, once, base, period, step, *bufs))
                    passes_ = base + (np.arange(grid) % period) * step
                    inst = once * chunk + passes_ * loop_kb * 1024 // 16
                    ipc = sm_issue_rates(t, where, inst)
                    row = {"blocks_per_sm": bps, "loop_kib": loop_kb, "once_kib": once * 8, "pattern": pattern,
                           "mean_passes": float(passes_.mean()), "grid": grid,
                           "once_fraction": float(once * chunk / inst.mean()),
                           "ipc_per_scheduler": float(np.median(ipc)), "ipc_min": float(np.min(ipc)),
                           "ipc_max": float(np.max(ipc))}
                    out["layout_runs"].append(row)
                    print(f"layout bps {bps} loop {loop_kb} KiB once {once * 8:4d} KiB {pattern:8s} "
                          f"IPC/scheduler {row['ipc_per_scheduler']:.3f} ({row['ipc_min']:.3f}-{row['ipc_max']:.3f})",
                          flush=True)
    common.write_record(path, torch, tool, out)


if __name__ == "__main__":
    common.run_script(main)
