#!/usr/bin/env python3
"""GPU check and bench of fa2_tc's inference forward (issue 59): grouped K/V heads, Nq != Nk with bottom-right
causal, the optional LSE output and the split-KV path with its combine kernel.

Standalone: builds the extension from this checkout's csrc (the measured build's sources and flags, as
perfmodel/measure/build.py has them, for this GPU's architecture alone), then

  * checks fa2_tc_forward against a float64 reference on fresh random inputs, its output poisoned (NaN-filled,
    with a NaN guard past its end): relative error ||O - ref|| / ||ref|| within the fa2_tc tolerances (fp16 2e-3,
    bf16 1.5e-2, perfmodel/measure/runner.py), every element written, nothing past the end; rows that see no key
    exactly 0; LSE within 2e-3 absolute of the reference's logsumexp and +inf on rows that see no key;
  * times decode shapes (B 1 and 32, H 32, Hkv 8, Nq 1, Nk 4k and 32k, d 128, bf16) with CUDA events, warm-up
    and an L2 flush before every run (as perfmodel/measure/bench.py does), beside PyTorch's SDPA flash backend
    (enable_gqa=True) on the same inputs.

Usage: python3 tests/gpu/fa2_tc_infer_check.py [--no-bench] [--quick] [--verbose]
tests/gpu/test_fa2_tc_infer.py runs the correctness part through the same functions.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
CUDA_FLAGS = ["-O3", "-lineinfo"]
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.5e-2}
LSE_TOL = 2e-3
GUARD = 1024

_EXT = None


def load(verbose: bool = False):
    """The kernels' extension module as perfmodel builds it (perfmodel.measure.build.load)."""
    global _EXT
    if _EXT is None:
        sys.path.insert(0, str(ROOT))
        from perfmodel.measure import build

        t0 = time.time()
        _EXT = build.load(verbose=verbose)
        print(f"extension ready in {time.time() - t0:.0f} s", flush=True)
    return _EXT


# ---------------------------------------------------------------------------------------------------------------
# correctness

def guarded(shape, dtype, fill=float("nan")):
    """A tensor of ``shape`` filled with ``fill``, followed in memory by GUARD NaN elements; (view, buffer)."""
    n = math.prod(shape)
    buf = torch.full((n + GUARD,), float("nan"), dtype=dtype, device="cuda")
    buf[:n] = fill
    return buf[:n].view(shape), buf


def reference(q, k, v, causal):
    """float64 (O, LSE) with PyTorch's enable_gqa grouping and causal_lower_right; rows that see no key: O = 0,
    LSE = -inf."""
    B, H, Nq, d = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    g = H // Hkv
    outs, lses = [], []
    for b in range(B):                    # one batch element at a time bounds the float64 scores' memory
        qd = q[b].double()
        kd = k[b].double().repeat_interleave(g, dim=0)
        vd = v[b].double().repeat_interleave(g, dim=0)
        s = qd @ kd.transpose(-1, -2) / math.sqrt(d)
        if causal:
            i = torch.arange(Nq, device=q.device)[:, None]
            j = torch.arange(Nk, device=q.device)[None, :]
            s.masked_fill_(j > i + (Nk - Nq), float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse[..., None].clamp_min(-1e300))
        p = torch.nan_to_num(p, nan=0.0)
        outs.append(p @ vd)
        lses.append(lse)
        del s, p, kd, vd
    return torch.stack(outs), torch.stack(lses)


def run_case(ext, *, d, Br, Bc, warps, dtype, B, H, Hkv, Nq, Nk, causal, splits=1, want_lse=False, seed=0,
             old_signature=False):
    """One fa2_tc_forward call on fresh inputs against the float64 reference. Returns a dict: err (relative
    norm error of O, inf if an element was left unwritten), lse_err (max abs error on rows that see a key),
    ok, and a note on what failed."""
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    q = torch.randn((B, H, Nq, d), generator=g, device="cuda").to(dtype)
    k = torch.randn((B, Hkv, Nk, d), generator=g, device="cuda").to(dtype)
    v = torch.randn((B, Hkv, Nk, d), generator=g, device="cuda").to(dtype)
    o, obuf = guarded((B, H, Nq, d), dtype)
    lse = lbuf = None
    if want_lse:
        lse, lbuf = guarded((B, H, Nq), torch.float32)
    kw = {}
    if splits > 1:
        kw["o_part"] = torch.full((splits, B, H, Nq, d), float("nan"), device="cuda")
        kw["lse_part"] = torch.full((splits, B, H, Nq), float("nan"), device="cuda")
    if old_signature:
        ext.fa2_tc_forward(q, k, v, o, Br, Bc, warps, causal)
    else:
        ext.fa2_tc_forward(q, k, v, o, Br, Bc, warps, causal, splits=splits, lse=lse, **kw)
    torch.cuda.synchronize()
    notes = []
    if not bool(torch.isnan(obuf[o.numel():]).all()):
        notes.append("O guard overwritten")
    if lbuf is not None and not bool(torch.isnan(lbuf[lse.numel():]).all()):
        notes.append("LSE guard overwritten")
    ref, ref_lse = reference(q, k, v, causal)
    if bool(torch.isnan(o).any()):
        err = float("inf")
        notes.append(f"{int(torch.isnan(o).sum())} O elements unwritten/NaN")
    else:
        den = torch.linalg.vector_norm(ref)
        err = float(torch.linalg.vector_norm(o.double() - ref) / (den if den > 0 else 1.0))
    empty = torch.isinf(ref_lse)                       # rows that see no key (ref LSE = -inf)
    if bool(empty.any()) and not bool((o[empty] == 0).all()):
        notes.append("a row that sees no key is not 0")
    lse_err = None
    if lse is not None:
        seen = ~empty
        lse_err = float((lse[seen].double() - ref_lse[seen]).abs().max()) if bool(seen.any()) else 0.0
        if not math.isfinite(lse_err) or lse_err > LSE_TOL:
            notes.append(f"LSE error {lse_err:.3g}")
        if bool(empty.any()) and not bool((lse[empty] == float("inf")).all()):
            notes.append("LSE of a row that sees no key is not +inf")
    if not err <= TOL[dtype]:
        notes.append(f"O error {err:.3g} > {TOL[dtype]:g}")
    return {"err": err, "lse_err": lse_err, "ok": not notes, "note": "; ".join(notes)}


def cases(quick: bool = False, seed: int = 0):
    """The correctness cases: (label, kwargs of run_case)."""
    rnd = random.Random(seed)
    inst = [tuple(i) for i in load().fa2_tc_splitkv_instances()]
    d128 = [i for i in inst if i[0] == 128]
    dts = [torch.float16, torch.bfloat16]
    out = []

    def add(label, i, **kw):
        d, Br, Bc, w = i
        out.append((label, dict(d=d, Br=Br, Bc=Bc, warps=w, seed=rnd.randrange(1 << 30), **kw)))

    # today's square problem through the positional (old) signature and today's kernel, and with LSE (ext kernel)
    for causal in (False, True):
        add("square-old-signature", (128, 128, 64, 4), dtype=torch.float16, B=2, H=3, Hkv=3, Nq=333, Nk=333,
            causal=causal, old_signature=True)
        add("square+lse", (64, 128, 128, 4), dtype=torch.bfloat16, B=2, H=3, Hkv=3, Nq=333, Nk=333,
            causal=causal, want_lse=True)
    # grouped K/V heads, square and not
    for Hkv in (8, 4, 1):
        for causal in (False, True):
            for dt in dts:
                add(f"gqa H32/Hkv{Hkv}", rnd.choice(inst), dtype=dt, B=1, H=32, Hkv=Hkv, Nq=257, Nk=257,
                    causal=causal, want_lse=rnd.random() < 0.5)
    # decode: short queries against long ragged key ranges, splits from 1 to past the number of KV tiles
    nks = [1000, 4097, 12345, 39999] if not quick else [1000, 12345]
    for nq in (1, 4, 16, 128):
        for nk in nks:
            for dt in dts:
                i = rnd.choice(d128 if nq == 1 else inst)
                tiles = -(-nk // i[2])
                for splits in sorted({1, rnd.choice([2, 3, 5, 8]), min(tiles + 5, 200)} if not quick else {1, 3}):
                    add(f"decode Nq{nq} Nk{nk} s{splits}", i, dtype=dt, B=rnd.choice([1, 2]), H=32,
                        Hkv=rnd.choice([8, 4, 1, 32]), Nq=nq, Nk=nk, causal=rnd.random() < 0.5, splits=splits,
                        want_lse=rnd.random() < 0.5)
    # cross-attention: Nq < Nk and Nq > Nk (causal: the first Nq - Nk rows see no key)
    for nq, nk in ((300, 1000), (1000, 300), (129, 64), (77, 5)):
        for causal in (False, True):
            for dt in dts:
                for i in (inst if not quick else inst[:2]):
                    add(f"cross Nq{nq} Nk{nk}", i, dtype=dt, B=2, H=4, Hkv=2, Nq=nq, Nk=nk, causal=causal,
                        splits=rnd.choice([1, 1, 2, 7, 40]), want_lse=rnd.random() < 0.7)
    return out


def check_errors(ext):
    """The binding's refusals: (label, passed)."""
    res = []
    q = torch.randn(1, 4, 16, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(1, 2, 32, 64, device="cuda", dtype=torch.float16)
    o = torch.empty_like(q)

    def refuses(label, fn, text):
        try:
            fn()
        except RuntimeError as e:
            res.append((label, text in str(e)))
            if text not in str(e):
                print(f"  {label}: unexpected message: {e}")
            return
        res.append((label, False))

    refuses("splits without workspaces", lambda: ext.fa2_tc_forward(q, k, k, o, 64, 128, 4, False, splits=2),
            "o_part")
    refuses("H not a multiple of Hkv", lambda: ext.fa2_tc_forward(
        q, torch.randn(1, 3, 32, 64, device="cuda", dtype=torch.float16),
        torch.randn(1, 3, 32, 64, device="cuda", dtype=torch.float16), o, 64, 128, 4, False), "multiple")
    refuses("V shape != K shape", lambda: ext.fa2_tc_forward(q, k, k[:, :, :16].contiguous(), o, 64, 128, 4, False),
            "V has")
    refuses("lse dtype", lambda: ext.fa2_tc_forward(q, k, k, o, 64, 128, 4, False,
                                                   lse=torch.empty(1, 4, 16, device="cuda", dtype=torch.float16)),
            "float32")
    refuses("grouped heads on a non-ext instance", lambda: ext.fa2_tc_forward(q, k, k, o, 128, 32, 4, False),
            "fa2_tc_splitkv_instances")
    return res


def describe(label, kw):
    return f"{label:28s} d{kw['d']} {kw['Br']}x{kw['Bc']}x{kw['warps']} B{kw['B']} H{kw['H']}/{kw['Hkv']} " \
           f"Nq{kw['Nq']} Nk{kw['Nk']} causal{int(kw['causal'])} splits{kw.get('splits', 1)} " \
           f"lse{int(kw.get('want_lse', False))} {str(kw['dtype']).split('.')[-1]}"


def check_errors_isolated():
    """check_errors in a child process (the extension is already built and cached), so that a refusal that ends
    the process is one failed check, not the end of the run. On the H200 image (torch 2.11.0+cu130) a TORCH_CHECK
    whose message torch formats from several arguments did so (SIGSEGV); the bindings now format their messages
    themselves (csrc/binding_check.h)."""
    import json
    import subprocess
    code = ("import json, sys; sys.path.insert(0, %r); import fa2_tc_infer_check as c; "
            "print('RESULT ' + json.dumps(c.check_errors(c.load())))" % str(Path(__file__).resolve().parent))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        print(f"  refusals: child process ended with {p.returncode}; {p.stderr.strip().splitlines()[-1:]} ")
        return [(f"refusals (child exit {p.returncode})", False)]
    return [tuple(x) for x in json.loads(line[7:])]


def correctness(quick: bool = False, seed: int = 0, verbose: bool = False, only: str | None = None,
                refusals: bool = True) -> tuple[int, int, list]:
    """Run every case (those whose label starts with ``only``, if given); returns (passed, total, failures)."""
    ext = load()
    fails, n_ok, worst = [], 0, {}
    todo = [(lb, kw) for lb, kw in cases(quick, seed) if only is None or lb.startswith(only)]
    t0 = time.time()
    for label, kw in todo:
        if verbose:
            print(f"  run  {describe(label, kw)}", flush=True)
        r = run_case(ext, **kw)
        key = (label.split()[0], str(kw["dtype"]).split(".")[-1])
        worst[key] = max(worst.get(key, 0.0), r["err"])
        if r["lse_err"] is not None:
            worst[key + ("lse",)] = max(worst.get(key + ("lse",), 0.0), r["lse_err"])
        if r["ok"]:
            n_ok += 1
        else:
            fails.append((label, kw, r))
        if verbose or not r["ok"]:
            print(f"  {'ok  ' if r['ok'] else 'FAIL'} {describe(label, kw)}: err {r['err']:.2e}"
                  + (f" lse {r['lse_err']:.1e}" if r["lse_err"] is not None else "") + (f"  {r['note']}" if
                                                                                       r["note"] else ""))
    errs = check_errors_isolated() if refusals else []
    for label, ok in errs:
        if ok:
            n_ok += 1
        else:
            fails.append((label, {}, {"note": "not refused with the expected message"}))
    print(f"correctness: {n_ok} passed, {len(todo) + len(errs) - n_ok} failed "
          f"({len(todo)} cases, {len(errs)} refusals, {time.time() - t0:.0f} s)")
    for key in sorted(worst, key=str):
        print(f"  worst {' '.join(key):28s} {worst[key]:.2e}")
    return n_ok, len(todo) + len(errs), fails


# ---------------------------------------------------------------------------------------------------------------
# bench

def timer():
    """Median ms of a call, each run after an L2 flush with a head start (perfmodel's own bench)."""
    load()                                          # puts the checkout on sys.path
    from perfmodel.measure.bench import Bencher

    b = Bencher(torch)
    return lambda fn: b.run(fn, min_runs=20).median_ms


def bench():
    ext = load()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    from perfmodel.kernels.fa2_tc import num_splits

    time_ms = timer()
    d, Br, Bc, w = 128, 64, 128, 4
    H, Hkv, dt = 32, 8, torch.bfloat16
    print(f"decode bench: H {H}, Hkv {Hkv}, Nq 1, d {d}, bf16; fa2_tc {d} {Br}x{Bc}x{w} (query heads of a K/V head "
          f"folded into one tile); median of 20 or more runs, L2 flushed before each; {sms} SMs")
    print(f"{'B':>3} {'Nk':>6} {'splits':>6} {'fa2_tc us':>10} {'GB/s':>6} {'sdpa flash us':>13} {'ratio':>6}")
    for B in (1, 32):
        for Nk in (4096, 32768):
            q = torch.randn(B, H, 1, d, device="cuda", dtype=dt)
            k = torch.randn(B, Hkv, Nk, d, device="cuda", dtype=dt)
            v = torch.randn(B, Hkv, Nk, d, device="cuda", dtype=dt)
            o = torch.empty_like(q)
            g = H // Hkv
            mblocks = -(-g // Br)
            heur = int(num_splits(B * Hkv * mblocks, 2 * sms, -(-Nk // Bc)))
            try:
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                    t_sdpa = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
            except RuntimeError as e:
                ref, t_sdpa = None, float("nan")
                print(f"  sdpa flash unavailable: {str(e).splitlines()[0]}")
            bytes_kv = 2 * B * Hkv * Nk * d * 2
            for splits in sorted({1, heur, min(2 * heur, 128)}):
                kw = {}
                if splits > 1:
                    kw = dict(o_part=torch.empty(splits, B, H, 1, d, device="cuda"),
                              lse_part=torch.empty(splits, B, H, 1, device="cuda"))
                fn = lambda: ext.fa2_tc_forward(q, k, v, o, Br, Bc, w, False, splits=splits, **kw)
                fn()
                if ref is not None:
                    err = float(torch.linalg.vector_norm(o.double() - ref.double()) /
                                torch.linalg.vector_norm(ref.double()))
                    if not err < TOL[dt]:
                        print(f"  WARNING: fa2_tc (splits {splits}) and sdpa flash differ: relative error {err:.3g}")
                t = time_ms(fn)
                tag = "*" if splits == heur else " "
                print(f"{B:>3} {Nk:>6} {splits:>5}{tag} {t * 1e3:>10.1f} {bytes_kv / t / 1e6:>6.0f} "
                      f"{t_sdpa * 1e3:>13.1f} {t / t_sdpa:>6.2f}")
    print("(* = FA2's num_splits_heuristic for the folded problem; GB/s: K and V bytes over fa2_tc's time)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--quick", action="store_true", help="fewer correctness cases")
    ap.add_argument("--verbose", action="store_true", help="print every case")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--only", help="run the cases whose label starts with this (e.g. gqa, decode, cross, square)")
    ap.add_argument("--no-check", action="store_true", help="bench only")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, seed {a.seed}")
    load(verbose=False)
    n_ok = n = 0
    if not a.no_check:
        n_ok, n, fails = correctness(a.quick, a.seed, a.verbose, a.only, refusals=a.only in (None, "refusals"))
    if not a.no_bench:
        bench()
    sys.exit(0 if n_ok == n else 1)


if __name__ == "__main__":
    main()
