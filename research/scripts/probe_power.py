"""Power and SM clock under each pipe's load (the power probe): what a kernel's activity costs in watts, and what clock
the GPU holds. Timed, long fa2_tc launches run at 1,650-1,830 MHz under the H100's 700 W limit, and not all tiles
alike (power-check). To predict that clock from a kernel's counts, a model needs the energy of each kind of work,
measured on work whose counts are known: this probe's. Its first finding is in the model already: under mma.sync
loads the SMs run near the datasheet's tensor clock while nvidia-smi shows the boost clock (GPUSpec.tensor_clock_hz).

Each case runs back to back for a few seconds while nvidia-smi samples the SM clock and the power draw every 20 ms:
the pipe-mix probe's kernel (probe_csrc/probe.cu probe_mix_kernel: per warp and iteration n mma.sync m16n8k16, ldmatrix.x4,
MUFU.EX2, FFMA; one block an SM) alone and in FlashAttention-2's mixes at several warps an SM; a DRAM copy and a
DRAM fill (torch); a dense fp16 GEMM (torch.mm, cuBLAS) on random operands and on zeros; and the idle GPU. Per case:
the launches' times (CUDA events), each launch's operations, the SM clock the kernel itself counted (clock64 span
over its event time, last launch), and the samples inside the case's window. Nothing here times a FlashAttention
kernel.

Usage: python3 research/scripts/probe_power.py OUT.json   (the raw samples go beside it, OUT.smi.csv)"""
import datetime
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import common

SECONDS = 3.0          # each case's run; its first RAMP seconds are left out of its summary (the clock settles)
RAMP = 1.0
LAUNCH_MS = 4.0        # about one launch's length (the iterations are scaled to it)
# (name, n_mma, n_ldsm, n_ex2, n_ffma) per warp per iteration, and the warps a block (one block an SM)
MIXES = [
    ("idle_kernel", 0, 0, 0, 0, (16,)),
    ("mma64", 64, 0, 0, 0, (4, 8, 16)),
    ("ldsm32", 0, 32, 0, 0, (8, 16)),
    ("ex2_64", 0, 0, 64, 0, (16,)),
    ("ffma128", 0, 0, 0, 128, (8, 16)),
    ("mma64+ldsm32", 64, 32, 0, 0, (16,)),
    ("fa2_d64_mt1", 64, 32, 32, 152, (8, 16)),
    ("fa2_d128_mt2", 256, 80, 64, 368, (8, 16)),
]
# the same kernel on random operands that switch from one mma.sync to the next (and a random shared tile): what the
# tensor cores and ldmatrix cost on data's bits; the name gains an "r"
RANDOM_MIXES = [
    ("mma64r", 64, 0, 0, 0, (4, 8, 16)),
    ("ldsm32r", 0, 32, 0, 0, (16,)),
    ("mma64+ldsm32r", 64, 32, 0, 0, (16,)),
    ("fa2_d64_mt1r", 64, 32, 32, 152, (8, 16)),
    ("fa2_d128_mt2r", 256, 80, 64, 368, (8, 16)),
]
L2_READ_MB = 16          # the L2 read cases' buffer: resident in L2 (50 MB on the H100, 60 on the H200)
# (name, buffer MB, blocks per SM of 256 threads): L2 reads (loads that bypass L1) at three rates, L1 reads (the
# same buffer through probe_read_kernel, whose later passes hit L1) and DRAM reads
READS = [("l2_read_4b", L2_READ_MB, 4), ("l2_read_2b", L2_READ_MB, 2), ("l2_read_1b", L2_READ_MB, 1),
         ("l1_read_4b", L2_READ_MB, 4), ("dram_read", 2048, 4)]
# POWER_CASES=a,b: run only the cases whose names start with one of these (the idle GPU always)
# POWER_ZEROS_FIRST=1: the GEMM on zeros before the one on random operands


def wanted(name: str) -> bool:
    only = [c for c in os.environ.get("POWER_CASES", "").split(",") if c]
    return not only or any(name.startswith(c) for c in only)


FIELDS_TRY = ("timestamp,clocks.sm,power.draw.instant,power.draw.average,power.limit,temperature.gpu,"
              "clocks_event_reasons.active",
              "timestamp,clocks.sm,power.draw.instant,power.draw.average,power.limit,temperature.gpu",
              "timestamp,clocks.sm,power.draw,power.draw,power.limit,temperature.gpu")


def start_sampler(path: Path):
    """nvidia-smi sampling every 20 ms into ``path``; the query fields it accepts (instant power where the driver has
    it)."""
    for fields in FIELDS_TRY:
        ok = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                            capture_output=True, text=True)
        if ok.returncode == 0 and "Not Supported" not in ok.stdout and "Invalid" not in ok.stdout:
            f = open(path, "w")
            proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                                     "-lms", "20"], stdout=f, stderr=subprocess.DEVNULL)
            return proc, f, fields
    raise SystemExit("error: nvidia-smi cannot sample clocks and power on this machine")


def read_samples(path: Path):
    """(local datetime, SM MHz, power W, average power W, limit W, temperature C[, the clock event reasons' bit
    mask]) per sample line."""
    out = []
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        try:
            ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
            out.append((ts, *(float(p) for p in parts[1:6]), *parts[6:7]))
        except (ValueError, IndexError):
            continue
    return out


def run_case(torch, launch, ops_per_launch: dict, cycles=None):
    """Launch back to back for SECONDS; per-launch event times. Returns the case's record (its window in local
    time, for the samples)."""
    launch()
    torch.cuda.synchronize()
    start = datetime.datetime.now()
    t_end = time.time() + SECONDS
    events = []
    while time.time() < t_end:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        launch()
        b.record()
        events.append((a, b))
        if len(events) % 8 == 0:
            events[-8][1].synchronize()          # keep at most a few launches queued
    torch.cuda.synchronize()
    end = datetime.datetime.now()
    ms = np.array([a.elapsed_time(b) for a, b in events])
    rec = {"window": [start.isoformat(), end.isoformat()], "launches": len(ms), "launch_ms": ms.tolist(),
           "ops_per_launch": ops_per_launch}
    if cycles is not None:
        rec["kernel_clock_mhz_last"] = float(np.median(cycles.cpu().numpy())) / (ms[-1] * 1e-3) / 1e6
    return rec


def idle_case():
    """The idle GPU for SECONDS: a case record with no launches (its window, for the samples)."""
    t0 = datetime.datetime.now()
    time.sleep(SECONDS)
    return {"window": [t0.isoformat(), datetime.datetime.now().isoformat()], "launches": 0, "launch_ms": [],
            "ops_per_launch": {}}


def summarise(rec, samples):
    lo = datetime.datetime.fromisoformat(rec["window"][0]) + datetime.timedelta(seconds=RAMP)
    hi = datetime.datetime.fromisoformat(rec["window"][1])
    inside = [s for s in samples if lo <= s[0] <= hi]
    if not inside:
        return
    arr = np.array([s[1:6] for s in inside])
    rec["samples"] = [[s[0].isoformat(), *s[1:]] for s in inside]
    rec["median"] = {"sm_clock_mhz": float(np.median(arr[:, 0])), "power_w": float(np.median(arr[:, 1])),
                     "power_avg_w": float(np.median(arr[:, 2])), "power_limit_w": float(np.median(arr[:, 3])),
                     "temperature_c": float(np.median(arr[:, 4]))}
    reasons = sorted({s[6] for s in inside if len(s) > 6})
    if reasons:
        rec["clock_event_reasons_seen"] = reasons          # nvidia-smi's bit mask (0x4: software power cap, ...)
    if rec["launch_ms"]:                                   # (the idle GPU launches nothing)
        n = max(1, int(len(rec["launch_ms"]) * (1 - RAMP / SECONDS)))
        ms = float(np.median(rec["launch_ms"][-n:]))
        rec["median"]["launch_ms"] = ms
        rec["median"]["ops_per_s"] = {k: v / (ms * 1e-3) for k, v in rec["ops_per_launch"].items()}


def main(out_path):
    torch, tool, ext, sm, cycles = common.script_setup()
    sink = torch.zeros(1, device="cuda")
    smi_path = Path(out_path).with_suffix(".smi.csv")
    proc, fh, fields = start_sampler(smi_path)
    cases = {}
    try:
        time.sleep(2.0)
        cases["idle"] = idle_case()
        for name, m, l, e, f, warps, rnd in ([(*x, False) for x in MIXES] + [(*x, True) for x in RANDOM_MIXES]):
            for w in warps:
                if not wanted(f"{name}_{w}w"):
                    continue
                def go(iters, w=w, m=m, l=l, e=e, f=f, rnd=rnd):
                    ext.probe_mix(cycles, sink, sm, w, iters, m, l, e, f, False, rnd)
                go(16)
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                go(256)
                b.record()
                torch.cuda.synchronize()
                iters = int(max(16, 256 * LAUNCH_MS / max(a.elapsed_time(b), 1e-3)))
                per = sm * w * iters
                ops = {"mma": per * m, "ldmatrix_x4": per * l, "ex2": per * e, "ffma": per * f}
                key = f"{name}_{w}w"
                cases[key] = run_case(torch, lambda: go(iters), ops, cycles)
                cases[key].update(iters=iters, warps=w, blocks=sm, random_operands=rnd)
                print(key, cases[key]["launches"], "launches", flush=True)
                time.sleep(0.5)
        for name, mb, per_sm in READS:
            if not wanted(name):
                continue
            buf = torch.ones(mb * 2 ** 20 // 4, device="cuda")
            read = ext.probe_l2_read if name.startswith("l2") else ext.probe_read
            read(buf, 1, sink, sm * per_sm)
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            read(buf, 4, sink, sm * per_sm)
            b.record()
            torch.cuda.synchronize()
            reps = int(max(1, 4 * LAUNCH_MS / max(a.elapsed_time(b), 1e-3)))
            key = {"l2": "l2_read_bytes", "l1": "l1_read_bytes"}.get(name[:2], "dram_read_bytes")
            cases[name] = run_case(torch, lambda: read(buf, reps, sink, sm * per_sm),
                                   {key: buf.numel() * 4 * reps})
            cases[name].update(buffer_mb=mb, blocks=sm * per_sm, threads=256, passes=reps)
            print(name, cases[name]["launches"], "launches", flush=True)
            del buf
            time.sleep(0.5)
        if wanted("dram_copy") or wanted("dram_fill"):
            nbytes = 2 * 2 ** 30
            src = torch.empty(nbytes // 2, dtype=torch.float16, device="cuda").normal_()
            dst = torch.empty_like(src)
            cases["dram_copy"] = run_case(torch, lambda: dst.copy_(src), {"dram_read_bytes": nbytes,
                                                                         "dram_write_bytes": nbytes})
            time.sleep(0.5)
            cases["dram_fill"] = run_case(torch, lambda: dst.fill_(1.0), {"dram_write_bytes": nbytes})
            time.sleep(0.5)
            del src, dst
        # a dense fp16 GEMM (torch, cuBLAS) on random operands and on zeros: the tensor cores' power depends on the
        # bits they switch, which the probe kernel above (fixed operand registers) does not
        n = 8192
        gemms = (("gemm_random", lambda: torch.randn(n, n, dtype=torch.float16, device="cuda")),
                 ("gemm_zeros", lambda: torch.zeros(n, n, dtype=torch.float16, device="cuda")))
        for name, make in (gemms[::-1] if os.environ.get("POWER_ZEROS_FIRST") else gemms):
            if not wanted(name):
                continue
            x, y = make(), make()
            out = torch.empty(n, n, dtype=torch.float16, device="cuda")
            cases[name] = run_case(torch, lambda: torch.mm(x, y, out=out), {"tensor_flop": 2 * n ** 3})
            del x, y, out
            time.sleep(0.5)
        time.sleep(1.0)
        if wanted("idle_end"):             # the idle GPU again, warm: what the temperature adds to the idle draw
            cases["idle_end"] = idle_case()
    finally:
        proc.terminate()
        proc.wait()
        fh.close()
    samples = read_samples(smi_path)
    for rec in cases.values():
        summarise(rec, samples)
    for k, rec in cases.items():
        print(k, rec.get("median", {}).get("sm_clock_mhz"), rec.get("median", {}).get("power_w"), flush=True)
    common.write_record(out_path, torch, tool, {"cases": cases, "smi_fields": fields, "seconds": SECONDS,
                                               "ramp_left_out_s": RAMP, "launch_ms_target": LAUNCH_MS}, indent=1)


if __name__ == "__main__":
    common.run_script(main)
