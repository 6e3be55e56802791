"""Where the block scheduler puts a launch's blocks, and when they start and end, as JSON.

    python3 research/scripts/probe_dispatch.py OUT.json

Builds research/csrc/probe_dispatch.cu (its own extension module) and launches a spin kernel whose every block records its
SM (%smid) and its start and end on the GPU's global timer. Shared memory sets 1, 2 or 4 blocks per SM. Launches:
uniform work at grids from one block per SM to several rounds (which blocks share an SM, in what order SMs are
filled, which SM gets the next block when one finishes), and causal-like grids whose blocks' work falls or rises
along each "head" of 8 or 16 blocks (how far a head's heavy blocks land from one another). Each launch runs three
times (is the placement the same each time?). The spin is a dependent FFMA chain (mode 0) or eight chains that
fill the FP32 pipes (mode 1: blocks sharing an SM slow one another). Nothing here changes clocks or power limits.
"""
import common

SPIN = 20000          # FFMA iterations of a unit of work: ~40 us of a dependent chain at ~2 GHz


def launches(sm):
    """(label, blocks per SM wanted, mode, work per block) of every launch."""
    out = []
    for bps in (1, 2, 4):
        for grid in sorted({sm, 2 * 128, sm * bps, sm * bps + 36, 2 * sm * bps, 1024}):
            out.append((f"uniform bps{bps} grid{grid}", bps, 0, [SPIN] * grid))
    for bps in (1, 2, 4):
        for nx in (8, 16):
            for grid in (256, 512):
                for order in ("heavy-first", "light-first"):
                    w = [SPIN * ((nx - j % nx) if order == "heavy-first" else (j % nx + 1)) // nx
                         for j in range(grid)]
                    for mode in (0, 1):
                        out.append((f"causal {order} bps{bps} nx{nx} grid{grid} mode{mode}", bps, mode, w))
    return out


def main(path):
    torch, tool, ext = common.load_cuda("probe_dispatch.cu", "dispatch", deps=("sm_timer.cuh",))
    props = torch.cuda.get_device_properties(0)
    sm = props.multi_processor_count
    smem_sm = props.shared_memory_per_multiprocessor
    threads = 128
    out = {"sm_count": sm, "threads": threads, "spin": SPIN, "runs": []}
    sink = torch.zeros(1, device="cuda")
    for label, bps, mode, work in launches(sm):
        smem = common.smem_for_blocks_per_sm(smem_sm, bps)
        got = ext.blocks_per_sm(threads, smem)
        w = torch.tensor(work, dtype=torch.int32, device="cuda")
        g = len(work)
        smid = torch.zeros(g, dtype=torch.int32, device="cuda")
        t0 = torch.zeros(g, dtype=torch.int64, device="cuda")
        t1 = torch.zeros(g, dtype=torch.int64, device="cuda")
        ext.probe_dispatch(w, smid, t0, t1, sink, threads, smem, mode)       # warm-up
        reps = []
        for _ in range(3):
            ext.probe_dispatch(w, smid, t0, t1, sink, threads, smem, mode)
            torch.cuda.synchronize()
            reps.append(common.block_times(smid.cpu().tolist(), t0.cpu().tolist(), t1.cpu().tolist()))
        out["runs"].append({"label": label, "blocks_per_sm": got, "smem_bytes": smem, "mode": mode, "work": work,
                            "reps": reps})
        last = reps[-1]
        print(f"{label:48s} bps {got}  span {max(last['end_ns']) / 1e3:8.1f} us  "
              f"SMs used {len(set(last['smid']))}", flush=True)
    common.write_record(path, torch, tool, out)


if __name__ == "__main__":
    common.run_script(main)
