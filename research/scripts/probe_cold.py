"""What a launch costs beyond its kernel's own work, as `measure` times it: the L2 flush, shared memory, queueing, as JSON.

    python3 research/scripts/probe_cold.py OUT.json

`measure` flushes the L2 before every timed run by writing a 256 MiB buffer (perfmodel/measure/bench.py), so each
run starts with the L2 full of that buffer's dirty lines and the kernel's inputs in DRAM. This probe times, exactly as `measure` times kernels (CUDA events, head start, median of many runs),
under three flushes: "zero" (the one `measure` uses), "read" (the buffer is read instead: the L2 holds clean lines)
and "none":

* an empty launch (the launch cost the calibration holds), asking for 0 to 200 KiB of dynamic shared memory that it
  never uses (does a launch pay for the SM's shared-memory carveout?);
* touch launches (research/csrc/probe_cold.cu): G blocks each read a slice of a buffer, packed or one slice per 2 MiB page,
  at 1, 132 and 1056 blocks and 2 to 64 KiB a block, and at 132 blocks with 0 to 200 KiB of unused shared memory;
* a few small launches of fa2_tc and of PyTorch SDPA's flash and cuDNN backends (checked against the float64
  reference first): what the flush costs a real kernel. These timings are diagnostics, not inputs to the model.

Each is timed once and twice between the events: a second launch queued behind the first overlaps its launch
work with the first's execution, so the difference is what a launch costs when it is not the first.

Nothing here changes clocks or power limits.
"""
import json

from perfmodel.measure import bench, build
import common

PAGE = 2 << 20
KERNELS = [          # (kernel, NAME=VALUE parameters as `python -m perfmodel.measure.one` takes them)
    ("fa2_tc", "B=1 H=1 N=128 d=64 dtype=fp16 causal=1 Br=64 Bc=64 warps=4"),
    ("fa2_tc", "B=1 H=16 N=512 d=128 dtype=fp16 causal=0 Br=128 Bc=64 warps=4"),
    ("fa2_tc", "B=4 H=16 N=1024 d=64 dtype=fp16 causal=1 Br=64 Bc=128 warps=4"),
    ("fa2_tc", "B=8 H=16 N=2048 d=128 dtype=fp16 causal=0 Br=128 Bc=64 warps=4"),
    ("sdpa-flash", "B=1 H=16 N=512 d=128 dtype=fp16 causal=0"),
    ("sdpa-flash", "B=1 H=8 N=512 d=64 dtype=fp16 causal=0"),
    ("sdpa-flash", "B=4 H=16 N=1024 d=128 dtype=fp16 causal=1"),
    ("sdpa-cudnn", "B=4 H=8 N=512 d=64 dtype=fp16 causal=1"),
    ("sdpa-cudnn", "B=1 H=16 N=512 d=128 dtype=fp16 causal=0"),
    ("sdpa-cudnn", "B=4 H=16 N=1024 d=128 dtype=fp16 causal=1"),
]


class ReadFlush(bench.Bencher):
    """The same timing with the flush buffer read rather than written: the L2 then holds clean lines."""

    def flush_l2(self) -> None:
        self.sink = self.cache.sum()


SMEM = (0, 48 * 1024, 100 * 1024, 200 * 1024)


def touches(sm):
    """(grid, bytes per block, stride, dynamic shared memory) of every touch launch."""
    out = []
    for grid in (1, sm, 8 * sm):
        for kib in (2, 32):
            for stride in ("packed", "page"):
                out.append((grid, kib * 1024, stride, 0))
    out.append((8 * sm, 64 * 1024, "packed", 0))
    out += [(sm, 2048, "packed", smem) for smem in SMEM[1:]]
    return out


def main(path):
    torch, tool, ext = common.load_cuda("probe_cold.cu", "cold")
    from perfmodel.kernels import get as get_kernel
    from perfmodel.measure import one, runner as runner_mod

    sm = torch.cuda.get_device_properties(0).multi_processor_count
    benchers = {"zero": bench.Bencher(torch), "read": ReadFlush(torch), "none": bench.Bencher(torch, flush=False)}
    rows = []

    def timed(label, fn, setup=None, **info):
        """fn timed under each flush, once and twice between the events (the second launch back to back)."""
        for calls in (1, 2):
            run = fn if calls == 1 else (lambda: (fn(), fn()))
            for mode, b in benchers.items():
                t = b.run(run, setup=setup, min_runs=50, max_runs=200)
                rows.append(dict(label, calls=calls, flush=mode, median_us=t.median_ms * 1e3, p20_us=t.p20_ms * 1e3,
                                 p80_us=t.p80_ms * 1e3, n_runs=t.n_runs, **info))
                print(f"{label} x{calls} flush={mode:4s} {t.median_ms * 1e3:9.2f} us", flush=True)

    for smem in SMEM:
        timed({"what": "empty", "smem_bytes": smem}, lambda: ext.empty(smem))
    dst = torch.zeros(8 * sm, device="cuda")
    for grid, nbytes, stride, smem in touches(sm):
        step = PAGE if stride == "page" else nbytes
        src = torch.randint(0, 1 << 30, (((grid - 1) * step + nbytes) // 4,), dtype=torch.int32, device="cuda")
        timed({"what": "touch", "grid": grid, "bytes_per_block": nbytes, "stride": stride, "smem_bytes": smem},
              lambda: ext.touch(src, dst, grid, step, nbytes, smem))
        del src
    kext = build.load()
    for name, params in KERNELS:
        k = get_kernel(name)
        shape, tiles = one.configure(k, dict(kv.split("=") for kv in params.split()))
        r = k.runner(torch, kext, shape, tiles)
        err = runner_mod.check_correct(torch, r, seed=1)
        if not err <= r.tolerance:
            print(f"{name} {params}: relative error {err:.3g}, not timed", flush=True)
            continue
        Q, K, V = r.inputs(2)
        timed({"what": "kernel", "kernel": name, "params": params}, lambda: r.timed_launch(Q, K, V), setup=r.setup,
              rel_err=err)
        del Q, K, V, r
    json.dump({"provenance": common.script_provenance(torch, tool), "sm_count": sm,
               "flush_bytes": benchers["zero"].cache.numel() * 4, "head_start_s": bench.HEAD_START_S,
               "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    common.run_script(main)
