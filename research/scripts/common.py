"""What the research scripts share (research/scripts/*.py; not part of the package): a probe script's entry point,
set-up and record (run_script, script_setup, write_record, script_provenance), the builds of the CUDA sources in
research/csrc (load_cuda), nvidia-smi sampling (Sampler), Nsight Compute joins, and the readings of the probe
records that set the architecture files' constants (cold_start_cycles, queued_op_us, once_supply). Imported as
``import common``: running ``python3 research/scripts/NAME.py`` puts this folder on the path."""

from __future__ import annotations

import datetime
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

CSRC = Path(__file__).resolve().parent.parent / "csrc"     # research/csrc: the CUDA sources only these scripts build


def load_cuda(source: str, tag: str, deps=(), arch: str | None = None):
    """(torch, toolchain facts, module) of research/csrc/``source`` built as its own extension module
    (perfmodel.measure.build.load_single); ``deps``: the files it includes, by name, looked up in research/csrc,
    then with the kernels' and the probe's sources."""
    from perfmodel.measure import build

    folders = (CSRC, build.csrc_dir(), build.probe_csrc_dir())
    find = lambda name: next((d / name for d in folders if (d / name).exists()), CSRC / name)
    return build.load_single(CSRC / source, tag, deps=[find(d) for d in deps], arch=arch)


def cold_start_cycles(record: dict) -> float:
    """SM cycles a launch's first global round trip costs after the timing's L2 flush beyond a warm one, from a
    scripts/probe_cold.py record: the touch launch of one block per SM, each block reading 2 KiB once, timed with
    the flush `measure` uses less the same without a flush (median over its packed and page-strided layouts), at
    the clock the record was taken at."""
    sm = record["sm_count"]
    pick = lambda flush: [r["median_us"] for r in record["rows"]
                          if r["what"] == "touch" and r["grid"] == sm and r["bytes_per_block"] == 2048
                          and r.get("smem_bytes", 0) == 0 and r.get("calls", 1) == 1 and r["flush"] == flush]
    cold, warm = pick("zero"), pick("none")
    if not cold or len(cold) != len(warm):
        raise ValueError("the record has no touch launch of one block per SM with and without the flush")
    return float(np.median(np.subtract(cold, warm))) * record["provenance"]["sm_clock_mhz"]      # us x MHz


def queued_op_us(record: dict) -> float:
    """Microseconds a second GPU operation queued behind the first in one timed call adds, from a
    scripts/probe_cold.py record: two empty launches between the events less one, with the flush `measure` uses
    (median over the shared-memory sizes asked for)."""
    t = {(r["calls"], r.get("smem_bytes", 0)): r["median_us"] for r in record["rows"]
         if r["what"] == "empty" and r["flush"] == "zero"}
    sizes = sorted(s for c, s in t if c == 1 and (2, s) in t)
    if not sizes:
        raise ValueError("the record has no empty launches timed once and twice with the flush")
    return float(np.median([t[(2, s)] - t[(1, s)] for s in sizes]))


def once_supply(layout_runs, blocks_per_sm: int = 2, pattern: str = "causal") -> dict:
    """The instruction supply of once-run code, from the instruction-cache probe's layout runs
    (scripts/probe_icache.py): for each loop body size and once-run code size, the warp instructions per scheduler
    per clock that the once-run part got. A run's time per scheduler is split as T = loop / r_loop + once / r_once,
    with r_loop the same loop's rate without once-run code (the run with none), so r_once = once / (T - loop /
    r_loop); at 0 KiB the entry is r_loop itself. {"loop_kib": [...], "once_kib": [...], "ipc": [[per once size]
    per loop size]} (ipc rounded to 3 digits)."""
    runs = [r for r in layout_runs if r["blocks_per_sm"] == blocks_per_sm and r["pattern"] == pattern]
    loops = sorted({r["loop_kib"] for r in runs})
    onces = sorted({r["once_kib"] for r in runs})
    table = []
    for loop in loops:
        at = {r["once_kib"]: r for r in runs if r["loop_kib"] == loop}
        r_loop = at[0]["ipc_per_scheduler"]
        row = []
        for once in onces:
            r = at[once]
            loop_inst = r["mean_passes"] * loop * 1024 / 16
            once_inst = once * 1024 / 16
            t = (once_inst + loop_inst) / r["ipc_per_scheduler"]
            row.append(round(once_inst / (t - loop_inst / r_loop), 3) if once else round(r_loop, 3))
        table.append(row)
    return {"loop_kib": loops, "once_kib": onces, "ipc": table}


def smem_for_blocks_per_sm(smem_per_sm: int, blocks: int) -> int:
    """Dynamic shared memory per block (a multiple of 128 B) with which ``blocks`` blocks fit on an SM of
    ``smem_per_sm`` bytes and ``blocks`` + 1 do not, each block also holding the 1 KiB the runtime reserves: how the
    probe scripts set how many blocks share an SM."""
    return (smem_per_sm // blocks - 1024) // 128 * 128 - 1024


def block_times(smid, start_ns, end_ns) -> dict:
    """One launch's per-block record as the probe scripts store it (scripts/probe_dispatch.py, trace_fa2_tc.py):
    each block's SM and its start and end on the global timer, in ns from the earliest start."""
    base = min(start_ns)
    return {"smid": list(smid), "start_ns": [x - base for x in start_ns], "end_ns": [x - base for x in end_ns]}


def ncu_launches(ncu_csv, configs_path, name: str):
    """A probe run under Nsight Compute (``--csv --page raw``), one launch per configuration in order: the CSV's
    header, its launches' rows, and the configuration record (``configs``: one per launch). A count that does not
    match exits with a line naming the probe ``name``."""
    import csv
    import json

    lines = [line for line in open(ncu_csv) if line.startswith('"')]
    rows = list(csv.reader(lines))
    header, data = rows[0], rows[2:]
    rec = json.load(open(configs_path))
    if len(data) != len(rec["configs"]):
        sys.exit(f"{name}: {len(data)} profiled launches for {len(rec['configs'])} configurations")
    return header, data, rec


def ncu_probe_main(launch, join, usage: str) -> None:
    """The entry point of a probe run in two steps (scripts/probe_l2_reuse.py, probe_l2_share.py): ``launch
    CONFIGS.json`` under Nsight Compute, then ``join NCU.csv CONFIGS.json OUT.json`` anywhere; else ``usage``."""
    if len(sys.argv) == 3 and sys.argv[1] == "launch":
        launch(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "join":
        join(*sys.argv[2:])
    else:
        sys.exit(usage)


def script_setup(kernels: bool = False):
    """What a probe script (scripts/probe_*.py) starts from: torch, the toolchain record, the built extension (the
    probe's microbenchmarks; with ``kernels``, the kernels' module), the SM count and a zeroed int64 buffer of one
    entry per SM on the GPU (each block's clock64 span)."""
    from perfmodel.measure import build

    torch = build.require_torch()
    tool = build.check_toolchain(torch)
    ext = build.load() if kernels else build.load_probe()
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    return torch, tool, ext, sm, torch.zeros(sm, dtype=torch.int64, device="cuda")


def best_cycles_per_iter(torch, launch, cycles, iters: int, reps: int = 3) -> float:
    """SM cycles per loop iteration of a probe kernel that writes each block's clock64 span into ``cycles``: the
    median over blocks, the least of ``reps`` launches (``launch()``), over ``iters``."""
    best = None
    for _ in range(reps):
        launch()
        torch.cuda.synchronize()
        c = float(np.median(cycles.cpu().numpy())) / iters
        best = c if best is None else min(best, c)
    return best


def run_script(main) -> None:
    """A probe script's entry point (scripts/probe_*.py and the like): one argument, the JSON file to write; what
    the machine lacks (torch, CUDA, nvcc, the architecture a probe needs) is a one-line error and exit code 2."""
    from pathlib import Path

    from perfmodel.errors import InputError

    if len(sys.argv) != 2:
        sys.exit(f"usage: python3 scripts/{Path(sys.argv[0]).name} OUT.json")
    try:
        main(sys.argv[1])
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def profiled_gpu_events(torch, fn) -> list:
    """The trace events (Chrome trace format) of one run of ``fn`` under torch.profiler, GPU activity only,
    synchronised at its end."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        return json.load(open(f.name)).get("traceEvents", [])


def write_record(path, torch, tool: dict, record: dict, indent=None, **provenance) -> None:
    """Write a probe script's record as JSON with its provenance (script_provenance, plus ``provenance``'s
    entries) under "provenance"."""
    import json

    record["provenance"] = {**script_provenance(torch, tool), **provenance}
    with open(path, "w") as f:
        json.dump(record, f, indent=indent)


def script_provenance(torch, tool: dict, command: str | None = None) -> dict:
    """Where a probe script's numbers come from (scripts/probe_*.py): the GPU, its clock, driver, torch, nvcc,
    the date and the command (default: the running script's, as ``python3 scripts/NAME.py ARGS``)."""
    from pathlib import Path

    from perfmodel.measure import runner

    if command is None:
        command = " ".join([f"python3 scripts/{Path(sys.argv[0]).name}", *sys.argv[1:]])

    clock = runner.Clock()
    return dict(gpu_name=torch.cuda.get_device_name(), sm_clock_mhz=clock.sm_mhz(), driver=clock.driver(),
                torch=str(torch.__version__), nvcc=tool["nvcc"],
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), command=command)


class Sampler:
    """nvidia-smi samples of the SM clock (MHz) and board power (W) every 50 ms while running (the probe scripts:
    the clock a load runs at, which no clock64 count shows)."""

    def __init__(self):
        self.rows, self.proc = [], None

    def __enter__(self):
        try:
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                                          "--format=csv,noheader,nounits", "-lms", "50"],
                                         stdout=subprocess.PIPE, text=True)
        except OSError:
            return self
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.rows.append([float(x) for x in line.split(",")])
            except ValueError:
                pass

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()

    def summary(self, skip=4):
        r = np.array(self.rows[skip:] or self.rows or [[np.nan, np.nan]])
        return {"sm_clock_mhz_median": float(np.median(r[:, 0])), "sm_clock_mhz_min": float(np.min(r[:, 0])),
                "power_w_median": float(np.median(r[:, 1])), "samples": int(len(r))}
