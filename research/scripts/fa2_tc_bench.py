#!/usr/bin/env python3
"""fa2_tc on one GPU: build, list the instances, check correctness, and time against PyTorch SDPA.

Run from the repository root (PYTHONPATH=. or an installed perfmodel):

    python3 research/scripts/fa2_tc_bench.py info  --out OUT/fa2_tc_instances.json
    python3 research/scripts/fa2_tc_bench.py check --out OUT/fa2_tc_check.json
    python3 research/scripts/fa2_tc_bench.py bench --out OUT/fa2_tc_vs_sdpa.json [--dtypes fp16 --ds 128 --ns 4096 8192]
    python3 research/scripts/fa2_tc_bench.py all   --out-dir OUT          (info, check and bench, one build)

check: every compiled instance x dtype x causal x N (default 1, 77, 200, 1000, 1024) on fresh torch.randn inputs
against torch's SDPA on the inputs upcast to float64 (is_causal=...), by ||out - ref|| / ||ref||. The output is
NaN-poisoned with a NaN guard region after it that must stay NaN; Q, K, V also sit in front of NaN guards (a read
past the last row shows up as NaN). Every element must be written (no NaN left).

bench: for each dtype, causal, d, N: B*H*N = --tokens (default 16*16*8192, the FlashAttention papers' size), H = 16.
Each fa2_tc instance of that d is checked (fresh inputs, poisoned output; the float64 reference on the first and
last head) and timed; the fastest is timed again beside SDPA's flash and cuDNN backends (null if unavailable), on
the same inputs, each checked first. Times: CUDA events around each run, after warm-up, every run prepared as
perfmodel measure's (L2 flushed; spins before and after it read the SM clock); the best instance and SDPA's
backends interleaved run by run (perfmodel.measure.bench.Bencher.interleaved); the median of --runs runs.
FLOPs = 4*B*H*N^2*d, halved under causal.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from perfmodel.measure import build, runner  # noqa: E402

sys.path.insert(0, str(ROOT / "research" / "scripts"))
import sass_loops  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
# Relative Frobenius error limits. Observed (H100): fp16 ~4e-4, bf16 ~3e-3 (P rounded to the input dtype before
# PV, and O rounded on output); the limits leave ~4x room and still fail any indexing or masking error. They are
# perfmodel measure's (runner.TOLERANCE), so that both check a kernel alike.
TOL = {dt: runner.TOLERANCE[dt] for dt in DTYPES}
GUARD = 4096          # NaN elements after each tensor
H_BENCH = 16


def sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""


def smi(field: str) -> str:
    lines = sh(f"nvidia-smi --query-gpu={field} --format=csv,noheader,nounits").splitlines()
    return lines[0].strip() if lines else ""


def provenance(argv) -> dict:
    nvcc = sh("nvcc --version | tail -2 | head -1")
    return {
        "gpu_name": torch.cuda.get_device_name(),
        "sm_clock_mhz": smi("clocks.sm"),
        "sm_clock_max_mhz": smi("clocks.max.sm"),
        "power_limit_w": smi("power.limit"),
        "driver": smi("driver_version"),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "nvcc": nvcc,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in ["python3"] + argv),
    }


# ---------------------------------------------------------------------------------------------------------------
# tensors

def guarded(shape, dtype, fill=None, gen=None):
    """A contiguous tensor of `shape` followed by GUARD NaNs in the same allocation; returns (view, buffer)."""
    n = math.prod(shape)
    buf = torch.full((n + GUARD,), float("nan"), dtype=dtype, device="cuda")
    if fill == "randn":
        buf[:n] = torch.randn(n, generator=gen, device="cuda", dtype=torch.float32).to(dtype)
    return buf[:n].view(shape), buf


def fresh_qkv(shape, dtype, seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return [guarded(shape, dtype, "randn", g) for _ in range(3)]


def ref_attention(q, k, v, causal):
    """float64 reference through SDPA (math backend) on upcast inputs."""
    return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)


def rel_err(out, ref) -> float:
    o = out.double()
    if not torch.isfinite(o).all():
        return float("nan")
    return float(torch.linalg.vector_norm(o - ref) / torch.linalg.vector_norm(ref))


def heads_to_check(B, H):
    sel = [(0, 0)]
    if (B - 1, H - 1) != (0, 0):
        sel.append((B - 1, H - 1))
    return sel


def check_output(q, k, v, o, obuf, causal, all_heads: bool) -> dict:
    """Compare o with the float64 reference; o must be fully written and obuf's guard still NaN."""
    n = o.numel()
    guard_ok = bool(torch.isnan(obuf[n:]).all())
    unwritten = int(torch.isnan(o).sum())
    if all_heads:
        err = rel_err(o, ref_attention(q, k, v, causal))
    else:
        errs = []
        for b, h in heads_to_check(q.shape[0], q.shape[1]):
            sl = (slice(b, b + 1), slice(h, h + 1))
            errs.append(rel_err(o[sl], ref_attention(q[sl], k[sl], v[sl], causal)))
        err = max(errs) if all(e == e for e in errs) else float("nan")
        if unwritten:
            err = float("nan")
    return {"rel_err": err, "guard_ok": guard_ok, "unwritten": unwritten}


def passed(res: dict, dt: str) -> bool:
    return res["guard_ok"] and res["unwritten"] == 0 and res["rel_err"] <= TOL[dt]   # NaN fails the <=


# ---------------------------------------------------------------------------------------------------------------
# runners

def fa2_tc_fn(ext, inst, causal):
    _, br, bc, w = inst
    return lambda q, k, v, o: ext.fa2_tc_forward(q, k, v, o, br, bc, w, causal)


def sdpa_fn(backend, causal):
    """SDPA as checked: its result copied into the poisoned output."""
    from torch.nn.attention import sdpa_kernel

    def run(q, k, v, o):
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        o.copy_(out)
    return run


def sdpa_time_fn(backend, causal):
    """SDPA as timed: the call alone (its own output allocation, from the caching allocator)."""
    from torch.nn.attention import sdpa_kernel

    def run(q, k, v, o):
        with sdpa_kernel(backend):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


# ---------------------------------------------------------------------------------------------------------------
# modes

def mode_info(ext) -> list[dict]:
    rows = []
    for inst in ext.fa2_tc_instances():
        d, br, bc, w = inst
        for dt, code in (("fp16", 0), ("bf16", 1)):
            a = ext.fa2_tc_attributes(d, br, bc, w, code)
            rows.append({"d": d, "Br": br, "Bc": bc, "warps": w, "dtype": dt, **a,
                         "blocks_per_sm": ext.fa2_tc_max_blocks_per_sm(d, br, bc, w, code)})
    print(f"{'d':>4} {'Br':>4} {'Bc':>4} {'w':>2} {'dtype':>5} {'regs':>4} {'smem':>7} {'local':>5} {'blk/SM':>6}")
    for r in rows:
        print(f"{r['d']:>4} {r['Br']:>4} {r['Bc']:>4} {r['warps']:>2} {r['dtype']:>5} {r['regs_per_thread']:>4} "
              f"{r['dynamic_smem_bytes']:>7} {r['local_bytes']:>5} {r['blocks_per_sm']:>6}")
    return rows


def mode_check(ext, ns, B=2, H=3, seed0=1000) -> dict:
    insts = ext.fa2_tc_instances()
    results, worst, fails = [], {"fp16": 0.0, "bf16": 0.0}, 0
    seed = seed0
    t0 = time.time()
    for inst in insts:
        d, br, bc, w = inst
        for dt in DTYPES:
            for causal in (False, True):
                for N in ns:
                    seed += 1
                    (q, _), (k, _), (v, _) = fresh_qkv((B, H, N, d), DTYPES[dt], seed)
                    o, obuf = guarded((B, H, N, d), DTYPES[dt])
                    fa2_tc_fn(ext, inst, causal)(q, k, v, o)
                    torch.cuda.synchronize()
                    res = check_output(q, k, v, o, obuf, causal, all_heads=True)
                    ok = passed(res, dt)
                    fails += not ok
                    if res["rel_err"] == res["rel_err"]:
                        worst[dt] = max(worst[dt], res["rel_err"])
                    results.append({"d": d, "Br": br, "Bc": bc, "warps": w, "dtype": dt, "causal": causal,
                                    "B": B, "H": H, "N": N, "seed": seed, "ok": ok, **res})
                    if not ok:
                        print(f"FAIL d={d} {br}x{bc}x{w} {dt} causal={causal} N={N}: {res}", flush=True)
    # the launcher refuses what is not compiled, naming it
    try:
        q = torch.zeros(1, 1, 8, 64, dtype=torch.float16, device="cuda")
        ext.fa2_tc_forward(q, q, q, torch.empty_like(q), 96, 64, 4, False)
        refused = False
    except RuntimeError as exc:
        refused = "no compiled instance" in str(exc)
    print(f"check: {len(results)} runs, {fails} failed, worst rel err fp16 {worst['fp16']:.2e} "
          f"(limit {TOL['fp16']}), bf16 {worst['bf16']:.2e} (limit {TOL['bf16']}); unknown instance refused: "
          f"{refused}; {time.time() - t0:.0f} s", flush=True)
    return {"tolerance": TOL, "worst_rel_err": worst, "failed": fails, "unknown_instance_refused": refused,
            "runs": results}


def bench_shapes(dtypes, causals, ds, ns, tokens):
    for dt in dtypes:
        for causal in causals:
            for d in ds:
                for N in ns:
                    B = max(1, tokens // (H_BENCH * N))
                    yield dt, causal, d, N, B, H_BENCH


def mode_bench(ext, args, on_row=None) -> dict:
    from torch.nn.attention import SDPBackend

    from perfmodel.measure.bench import Bencher

    bencher = Bencher(torch)              # as perfmodel measure times: L2 flushed, spins measure the clock
    insts = ext.fa2_tc_instances()
    rows = []
    seed = 5000
    causals = {"both": (False, True), "no": (False,), "yes": (True,)}[args.causal]
    for dt, causal, d, N, B, H in bench_shapes(args.dtypes, causals, args.ds, args.ns, args.tokens):
        shape = (B, H, N, d)
        flops = 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)
        seed += 1
        (q, _), (k, _), (v, _) = fresh_qkv(shape, DTYPES[dt], seed)
        o, obuf = guarded(shape, DTYPES[dt])
        per_inst, errs = {}, {}
        for inst in [i for i in insts if i[0] == d]:
            tile = f"{inst[1]}x{inst[2]}x{inst[3]}"
            fn = fa2_tc_fn(ext, inst, causal)
            # fresh inputs and a poisoned output for this instance's check
            seed += 1
            (qc, _), (kc, _), (vc, _) = fresh_qkv(shape, DTYPES[dt], seed)
            o.fill_(float("nan"))
            fn(qc, kc, vc, o)
            torch.cuda.synchronize()
            res = check_output(qc, kc, vc, o, obuf, causal, all_heads=False)
            del qc, kc, vc
            errs[tile] = res["rel_err"]
            if not passed(res, dt):
                print(f"FAIL d={d} {tile} {dt} causal={causal} N={N}: {res}", flush=True)
                per_inst[tile] = None
                continue
            per_inst[tile] = bencher.run(lambda fn=fn, a=(q, k, v, o): fn(*a), warmup=args.warmup,
                                         min_runs=args.inst_runs, max_runs=args.inst_runs).median_ms
        timed = {t: ms for t, ms in per_inst.items() if ms is not None}
        best = min(timed, key=timed.get) if timed else None
        row = {"dtype": dt, "causal": causal, "d": d, "N": N, "B": B, "H": H, "flops": flops}
        # the best instance and SDPA's backends, each checked, then timed interleaved (run r of each back to
        # back) so that all three see the same clock and power state
        timed_fns = {}
        if best:
            br, bc, w = (int(x) for x in best.split("x"))
            timed_fns["fa2_tc"] = fa2_tc_fn(ext, (d, br, bc, w), causal)
            row.update(fa2_tc_tile=[br, bc, w], fa2_tc_rel_err=errs[best])
        else:
            row.update(fa2_tc_ms=None, fa2_tc_tile=None, fa2_tc_rel_err=None)
        for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                sdpa_fn(backend, causal)(q, k, v, o.fill_(float("nan")))
                torch.cuda.synchronize()
                res = check_output(q, k, v, o, obuf, causal, all_heads=False)
                row[f"{name}_rel_err"] = res["rel_err"]
                if passed(res, dt):
                    timed_fns[name] = sdpa_time_fn(backend, causal)
                else:
                    row[f"{name}_ms"] = None
                    row[f"{name}_error"] = f"check failed: {res}"
            except RuntimeError as exc:
                row[f"{name}_ms"] = None
                row[f"{name}_error"] = str(exc).splitlines()[0][:200]
        timings = bencher.interleaved({name: (lambda f=f, a=(q, k, v, o): f(*a)) for name, f in timed_fns.items()},
                                      runs=args.runs, warmup=args.warmup)
        for name, t in timings.items():
            row[f"{name}_ms"], row[f"{name}_p20_ms"], row[f"{name}_p80_ms"] = t.median_ms, t.p20_ms, t.p80_ms
            row[f"{name}_clock_mhz"] = [t.clock_before_mhz, t.clock_after_mhz]
        row["sm_clock_mhz_after"] = smi("clocks.sm")
        torch.cuda.empty_cache()
        for name in ("fa2_tc", "sdpa_flash", "sdpa_cudnn"):
            ms = row.get(f"{name}_ms")
            row[f"{name}_tflops"] = flops / (ms * 1e-3) / 1e12 if ms else None
        row["ratio_to_flash"] = (row["sdpa_flash_ms"] / row["fa2_tc_ms"]
                                 if row.get("sdpa_flash_ms") and row.get("fa2_tc_ms") else None)
        row["fa2_tc_instances_ms"] = per_inst
        row["fa2_tc_instances_rel_err"] = errs
        rows.append(row)
        print(fmt_row(row), flush=True)
        if on_row:
            on_row(rows)   # the file is rewritten after every row, so a run cut short keeps what it measured
        del q, k, v, o, obuf, timings
        torch.cuda.empty_cache()
    return {"rows": rows}


def fmt_row(r) -> str:
    def f(x, p=1):
        return "-" if x is None else f"{x:.{p}f}"
    tile = "x".join(map(str, r["fa2_tc_tile"])) if r.get("fa2_tc_tile") else "-"
    return (f"{r['dtype']:>4} {'causal' if r['causal'] else 'full':>6} d={r['d']:<3} N={r['N']:<5} B={r['B']:<3} "
            f"fa2_tc {f(r.get('fa2_tc_tflops'))} ({tile}) flash {f(r.get('sdpa_flash_tflops'))} "
            f"cudnn {f(r.get('sdpa_cudnn_tflops'))} TFLOP/s  fa2_tc/flash {f(r.get('ratio_to_flash'), 3)}")


def table(rows) -> str:
    head = (f"{'dtype':>5} {'mask':>6} {'d':>3} {'N':>5} {'B':>3} {'H':>2} | {'fa2_tc ms':>9} {'tile':>10} "
            f"{'TF/s':>5} | {'flash ms':>8} {'TF/s':>5} | {'cudnn ms':>8} {'TF/s':>5} | {'tc/flash':>8}")
    out = [head, "-" * len(head)]
    for r in rows:
        def f(x, p=2, w=8):
            return f"{'-':>{w}}" if x is None else f"{x:>{w}.{p}f}"
        tile = "x".join(map(str, r["fa2_tc_tile"])) if r.get("fa2_tc_tile") else "-"
        out.append(f"{r['dtype']:>5} {'causal' if r['causal'] else 'full':>6} {r['d']:>3} {r['N']:>5} {r['B']:>3} "
                   f"{r['H']:>2} | {f(r.get('fa2_tc_ms'), 3, 9)} {tile:>10} {f(r.get('fa2_tc_tflops'), 0, 5)} | "
                   f"{f(r.get('sdpa_flash_ms'), 3)} {f(r.get('sdpa_flash_tflops'), 0, 5)} | "
                   f"{f(r.get('sdpa_cudnn_ms'), 3)} {f(r.get('sdpa_cudnn_tflops'), 0, 5)} | "
                   f"{f(r.get('ratio_to_flash'), 3)}")
    return "\n".join(out)


def mode_sass(ext, sass_path: Path, summary_path: Path, keep_ds=(64, 128)) -> None:
    """cuobjdump the built extension; write the fp16 fa2_tc kernels of head dims keep_ds (encodings stripped) and
    an opcode histogram of every fa2_tc kernel."""
    so = ext.__file__
    txt = subprocess.run(["cuobjdump", "--dump-sass", so], capture_output=True, text=True, timeout=300).stdout
    funcs = sass_loops.fa2_tc_functions(txt)
    summary = []
    for name, lines in funcs.items():
        m = sass_loops.FA2TC_NAME.search(name)
        dt = "fp16" if m.group(1) == "6__half" else "bf16"
        d, br, bc, w = (int(m.group(i)) for i in range(2, 6))
        ops = {}
        for ln in lines:
            mm = re.match(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", ln)
            if mm:
                ops[mm.group(2)] = ops.get(mm.group(2), 0) + 1
        summary.append({"d": d, "Br": br, "Bc": bc, "warps": w, "dtype": dt, "instructions": sum(ops.values()),
                        "opcodes": dict(sorted(ops.items(), key=lambda kv: -kv[1]))})
    sass_loops.write_fa2_tc_listing(funcs, sass_path, f"cuobjdump --dump-sass {Path(so).name}", keep_ds)
    summary_path.write_text(json.dumps(sorted(summary, key=lambda r: (r["dtype"], r["d"], r["Br"], r["Bc"],
                                                                      r["warps"])), indent=1) + "\n")
    print(f"sass: {len(funcs)} fa2_tc kernels; wrote {sass_path} and {summary_path}", flush=True)


def mode_one(ext, args) -> None:
    """Run one fa2_tc configuration args.repeat times (for a profiler), after a correctness check."""
    d, (br, bc, w) = args.one_d, args.one_tile
    shape = (args.one_b, args.one_h, args.one_n, d)
    causal = args.causal == "yes"
    (q, _), (k, _), (v, _) = fresh_qkv(shape, DTYPES[args.dtypes[0]], 7)
    o, obuf = guarded(shape, DTYPES[args.dtypes[0]])
    fn = fa2_tc_fn(ext, (d, br, bc, w), causal)
    fn(q, k, v, o)
    torch.cuda.synchronize()
    res = check_output(q, k, v, o, obuf, causal, all_heads=False)
    for _ in range(args.repeat):
        fn(q, k, v, o)
    torch.cuda.synchronize()
    print(f"one: d={d} {br}x{bc}x{w} {args.dtypes[0]} causal={causal} shape={shape}: {res}", flush=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["info", "check", "bench", "sass", "all", "one"])
    p.add_argument("--out", help="JSON output file (info, check, bench)")
    p.add_argument("--out-dir", help="all, sass: folder for fa2_tc_instances.json, fa2_tc_check.json, "
                   "fa2_tc_vs_sdpa.json, fa2_tc.sass, fa2_tc_sass_summary.json")
    p.add_argument("--check-ns", type=int, nargs="+", default=[1, 77, 200, 1000, 1024])
    p.add_argument("--dtypes", nargs="+", default=["fp16", "bf16"], choices=list(DTYPES))
    p.add_argument("--causal", default="both", choices=["both", "no", "yes"])
    p.add_argument("--ds", type=int, nargs="+", default=[64, 128])
    p.add_argument("--ns", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    p.add_argument("--tokens", type=int, default=16 * 16 * 8192, help="B*H*N of each benchmark shape")
    p.add_argument("--runs", type=int, default=30, help="timed runs of the best instance and of SDPA")
    p.add_argument("--inst-runs", type=int, default=20, help="timed runs of each instance in the sweep")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--one-d", type=int, default=128, help="one: head dim")
    p.add_argument("--one-tile", type=int, nargs=3, default=[128, 64, 4], metavar=("BR", "BC", "WARPS"))
    p.add_argument("--one-n", type=int, default=4096)
    p.add_argument("--one-b", type=int, default=4)
    p.add_argument("--one-h", type=int, default=16)
    p.add_argument("--repeat", type=int, default=2, help="one: launches after the checked one")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    t0 = time.time()
    ext = build.load(verbose=args.verbose)
    print(f"build/load: {time.time() - t0:.0f} s; {len(ext.fa2_tc_instances())} instances", flush=True)
    prov = provenance([sys.argv[0]] + argv)
    out_dir = Path(args.out_dir) if args.out_dir else None
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)

    def out_path(name):
        return Path(args.out) if args.out and args.mode != "all" else (out_dir or Path(".")) / name

    def write(name, obj):
        path = out_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj, indent=1) + "\n")
        print(f"wrote {path}", flush=True)

    rc = 0
    if args.mode == "one":
        mode_one(ext, args)
        return 0
    if args.mode in ("sass", "all"):
        mode_sass(ext, (out_dir or Path(".")) / "fa2_tc.sass", (out_dir or Path(".")) / "fa2_tc_sass_summary.json")
    if args.mode in ("info", "all"):
        write("fa2_tc_instances.json", {"gpu": prov["gpu_name"], "provenance": prov, "instances": mode_info(ext)})
    if args.mode in ("check", "all"):
        res = mode_check(ext, args.check_ns)
        write("fa2_tc_check.json", {"gpu": prov["gpu_name"], "provenance": prov, **res})
        rc |= 1 if res["failed"] else 0
    if args.mode in ("bench", "all"):
        method = {"tokens_B_H_N": args.tokens, "H": H_BENCH, "runs": args.runs, "inst_runs": args.inst_runs,
                  "warmup": args.warmup, "tolerance": TOL, "l2_flush": True,
                  "statistic": "median of CUDA-event times per run, every run prepared as perfmodel measure's "
                               "(L2 flushed, a head-start spin that reads the SM clock before it, one after): "
                               "the instances one by one, then the best instance, flash and cuDNN interleaved "
                               "(run r of each before run r + 1 of any; perfmodel.measure.bench.Bencher)"}

        def save(rows, quiet=True):
            obj = {"gpu": prov["gpu_name"], "provenance": {**prov, "sm_clock_mhz_after": smi("clocks.sm")},
                   "method": method, "rows": rows}
            path = out_path("fa2_tc_vs_sdpa.json")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(obj, indent=1) + "\n")
            if not quiet:
                print(f"wrote {path}", flush=True)
        res = mode_bench(ext, args, on_row=save)
        save(res["rows"], quiet=False)
        print(table(res["rows"]))
    return rc


if __name__ == "__main__":
    sys.exit(main())
