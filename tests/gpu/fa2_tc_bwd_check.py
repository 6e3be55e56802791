"""GPU check and bench of the bundled tensor-core backward fa2_tc_bwd (perfmodel/kernels/csrc/fa2_tc_bwd.cu).

Standalone: builds a small extension from this checkout's csrc with torch.utils.cpp_extension.load -- fa2_tc_bwd.cu
and a binding made of binding.cpp's fa2_tc_bwd block (the text between its "fa2_tc_bwd (begin)" and "(end)"
markers, so the code checked here is the committed binding's), for this GPU's architecture only. ``--full`` loads
the whole kernels' module through perfmodel.measure.build instead.

check: for every compiled instance, fp16 and bf16, causal and not, H == Hkv and grouped (H 8, Hkv 2 and 1),
Nq == Nk and Nq != Nk both ways, ragged lengths (1000, 777): dQ, dK, dV against float64 autograd of the same
function (bottom-right causal mask; rows that see no key give zero output and zero gradient), on fresh random inputs,
with NaN-poisoned outputs and workspaces and a NaN guard after each output (nothing left unwritten, nothing written
past the end). O and LSE come from torch in float32 from the same inputs (O cast to the input dtype), as the
forward's LSE output is not in this kernel set yet. Error: ||x - ref|| / ||ref|| over the whole tensor. Tolerance:
the forward's (perfmodel/measure/runner.py: fp16 2e-3, bf16 1.5e-2), times (L / 1024) ** 0.25 for reduction
lengths L above 1024 (L = Nk for dQ, G * Nq for dK and dV): P and dS are rounded to the input dtype before their
GEMMs, but the rounding errors are independent, so the relative error of a length-L sum grows at most slowly with
L. The first H200 run (fp32 accumulation) stayed under a fifth of it: fp16 <= 3.2e-4, bf16 <= 2.6e-3.

bench: B*N = 16k, hidden 2048 (H = 2048 / d), d 64 and 128, N 512..8k, causal and not, bf16; every compiled instance
of the head dimension beside SDPA's flash backend backward (torch.autograd.grad on the output of
scaled_dot_product_attention under sdpa_kernel(FLASH_ATTENTION), forward run once outside the timing). Each timed
run: L2 flushed (256 MB written), a head-start spin so the host's launch work is done before the start event,
CUDA events around the call; median of the runs. ours = the three launches (preprocess, main, convert).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "perfmodel" / "kernels" / "csrc"
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.5e-2}
GUARD = 1024
# (B, H, Hkv, Nq, Nk)
CONFIGS = [
    (2, 4, 4, 1000, 1000),
    (1, 8, 2, 777, 1000),
    (2, 8, 1, 1000, 777),
    (1, 2, 2, 256, 256),
]
# --small (e.g. under compute-sanitizer): fp16 only, short ragged sequences
CONFIGS_SMALL = [(1, 4, 2, 200, 333), (1, 2, 1, 333, 200)]


def build(full: bool = False, verbose: bool = False):
    if full:
        sys.path.insert(0, str(ROOT))
        from perfmodel.measure import build as pbuild
        return pbuild.load(verbose=verbose)
    from torch.utils import cpp_extension
    import hashlib

    major, minor = torch.cuda.get_device_capability()
    os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
    text = (CSRC / "binding.cpp").read_text()
    m = re.search(r"^// ---- fa2_tc_bwd \(begin\).*?^// ---- fa2_tc_bwd \(end\) ----$", text, re.S | re.M)
    if not m:
        raise RuntimeError("binding.cpp has no fa2_tc_bwd block")
    src = ("#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAGuard.h>\n"
           "#include <cuda_runtime.h>\n#include <array>\n#include <vector>\n\n#include \"binding_check.h\"\n\n"
           + m.group(0) +
           "\n\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, mod) { fa2_tc_bwd_defs(mod); }\n")
    cu = CSRC / "fa2_tc_bwd.cu"
    check = (CSRC / "binding_check.h").read_text()
    h = hashlib.sha256((src + check + cu.read_text() + torch.__version__ + f"{major}.{minor}").encode()).hexdigest()[:12]
    bdir = Path(os.environ.get("PERFMODEL_BUILD_DIR", Path.home() / ".cache" / "perfmodel")) / f"fa2_tc_bwd_{h}"
    bdir.mkdir(parents=True, exist_ok=True)
    (bdir / "fa2_tc_bwd_binding.cpp").write_text(src)
    t0 = time.time()
    ext = cpp_extension.load(name=f"fa2_tc_bwd_{h}", sources=[str(bdir / "fa2_tc_bwd_binding.cpp"), str(cu)],
                             extra_cuda_cflags=["-O3", "-lineinfo", "-std=c++17"], build_directory=str(bdir),
                             extra_include_paths=[str(CSRC)],
                             verbose=verbose)
    print(f"built in {time.time() - t0:.1f} s ({bdir})", flush=True)
    return ext


def causal_mask(Nq, Nk, device):
    i = torch.arange(Nq, device=device)[:, None]
    j = torch.arange(Nk, device=device)[None, :]
    return j > i + (Nk - Nq)  # True = hidden


def forward_f32(q, k, v, causal):
    """O (input dtype) and LSE (fp32, natural log; +inf where a row sees no key) in float32 math."""
    G = q.shape[1] // k.shape[1]
    d = q.shape[-1]
    kf = k.float().repeat_interleave(G, dim=1)
    vf = v.float().repeat_interleave(G, dim=1)
    O = torch.empty_like(q)
    LSE = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    mask = causal_mask(q.shape[2], k.shape[2], q.device) if causal else None
    for b in range(q.shape[0]):  # one batch at a time bounds the score matrix's memory
        s = (q[b].float() @ kf[b].transpose(-1, -2)) / math.sqrt(d)
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        lse = torch.where(torch.isneginf(lse), torch.full_like(lse, float("inf")), lse)
        p = torch.exp(s - lse[..., None])
        O[b] = (p @ vf[b]).to(q.dtype)
        LSE[b] = lse
    return O, LSE


def reference(q, k, v, dO, causal):
    """dQ, dK, dV by float64 autograd; K/V heads expanded over the group (autograd sums the group)."""
    G = q.shape[1] // k.shape[1]
    d = q.shape[-1]
    q64, k64, v64 = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    kk = k64.repeat_interleave(G, dim=1)
    vv = v64.repeat_interleave(G, dim=1)
    s = (q64 @ kk.transpose(-1, -2)) / math.sqrt(d)
    if causal:
        mask = causal_mask(q.shape[2], k.shape[2], q.device)
        full = mask.all(dim=-1)[:, None]  # rows that see no key
        s = s.masked_fill(mask, float("-inf")).masked_fill(full, 0.0)
        p = torch.softmax(s, dim=-1).masked_fill(full, 0.0)
    else:
        p = torch.softmax(s, dim=-1)
    o = p @ vv
    return torch.autograd.grad(o, (q64, k64, v64), dO.double())


def guarded(shape, dtype):
    n = math.prod(shape)
    buf = torch.full((n + GUARD,), float("nan"), dtype=dtype, device="cuda")
    return buf[:n].view(shape), buf


def run_ours(ext, inst, q, k, v, O, LSE, dO, causal, poison=True):
    d, bc, br, w = inst
    B, H, Nq, _ = q.shape
    mk = guarded if poison else (lambda s, t: (torch.empty(s, dtype=t, device="cuda"), None))
    dq, dqb = mk(tuple(q.shape), q.dtype)
    dk, dkb = mk(tuple(k.shape), q.dtype)
    dv, dvb = mk(tuple(k.shape), q.dtype)
    acc = torch.full(tuple(q.shape), float("nan"), dtype=torch.float32, device="cuda")
    D = torch.full((B, H, Nq), float("nan"), dtype=torch.float32, device="cuda")
    ext.fa2_tc_backward(q, k, v, O, dO, LSE, dq, dk, dv, acc, D, bc, br, w, causal)
    return (dq, dk, dv), (dqb, dkb, dvb)


def check(ext, only_d=None, seed=0, small=False):
    insts = [tuple(i) for i in ext.fa2_tc_bwd_instances()]
    if only_d:
        insts = [i for i in insts if i[0] in only_d]
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    rows, fails = [], []
    worst = {}
    for d in sorted({i[0] for i in insts}):
        for dtype in (torch.float16,) if small else (torch.float16, torch.bfloat16):
            for causal in (False, True):
                for (B, H, Hkv, Nq, Nk) in CONFIGS_SMALL if small else CONFIGS:
                    q = torch.randn(B, H, Nq, d, generator=g, device="cuda").to(dtype)
                    k = torch.randn(B, Hkv, Nk, d, generator=g, device="cuda").to(dtype)
                    v = torch.randn(B, Hkv, Nk, d, generator=g, device="cuda").to(dtype)
                    dO = torch.randn(B, H, Nq, d, generator=g, device="cuda").to(dtype)
                    O, LSE = forward_f32(q, k, v, causal)
                    ref = reference(q, k, v, dO, causal)
                    G = H // Hkv
                    lens = (Nk, G * Nq, G * Nq)
                    for inst in (i for i in insts if i[0] == d):
                        outs, bufs = run_ours(ext, inst, q, k, v, O, LSE, dO, causal)
                        torch.cuda.synchronize()
                        errs, ok, why = [], True, []
                        for name, o, b, r, L in zip(("dQ", "dK", "dV"), outs, bufs, ref, lens):
                            tol = TOL[dtype] * max(1.0, (L / 1024) ** 0.25)
                            if torch.isnan(o).any():
                                ok = False
                                why.append(f"{name} unwritten/NaN ({int(torch.isnan(o).sum())})")
                            if not torch.isnan(b[o.numel():]).all():
                                ok = False
                                why.append(f"{name} written past the end")
                            e = float(torch.linalg.vector_norm(o.double() - r) / torch.linalg.vector_norm(r))
                            errs.append(e)
                            if not e <= tol:
                                ok = False
                                why.append(f"{name} err {e:.2e} > {tol:.2e}")
                            key = (str(dtype).split(".")[-1], name)
                            worst[key] = max(worst.get(key, 0.0), e / tol if e == e else float("inf"))
                        row = (inst, str(dtype).split(".")[-1], causal, (B, H, Hkv, Nq, Nk), errs, ok)
                        rows.append(row)
                        if not ok:
                            fails.append((row, why))
                            print(f"FAIL {inst} {row[1]} causal={causal} {row[3]}: {'; '.join(why)}", flush=True)
    print(f"\ncheck: {len(rows) - len(fails)}/{len(rows)} passed "
          f"(tolerance: the forward's x max(1, (L/1024)^0.25); fp16 base {TOL[torch.float16]:.0e}, "
          f"bf16 {TOL[torch.bfloat16]:.0e})")
    print("largest error / tolerance:", ", ".join(f"{a} {b} {v:.2f}" for (a, b), v in sorted(worst.items())))
    for dtype in ("float16", "bfloat16"):
        es = [r[4] for r in rows if r[1] == dtype]
        if es:
            print(f"  {dtype}: max rel err dQ {max(e[0] for e in es):.2e}, dK {max(e[1] for e in es):.2e}, "
                  f"dV {max(e[2] for e in es):.2e}")
    return rows, fails


def timer():
    """Median ms of a call, each run after an L2 flush with a head start (perfmodel's own bench)."""
    sys.path.insert(0, str(ROOT))
    from perfmodel.measure.bench import Bencher

    b = Bencher(torch)
    return lambda fn, reps=20: b.run(fn, min_runs=reps).median_ms


def bench(ext, ds=(64, 128), Ns=(512, 1024, 2048, 4096, 8192), reps=20):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    time_ms = timer()
    dtype = torch.bfloat16
    table = []
    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    for d in ds:
        insts = [tuple(i) for i in ext.fa2_tc_bwd_instances() if i[0] == d]
        H = 2048 // d
        for N in Ns:
            B = 16384 // N
            for causal in (False, True):
                q = torch.randn(B, H, N, d, generator=g, device="cuda").to(dtype)
                k = torch.randn(B, H, N, d, generator=g, device="cuda").to(dtype)
                v = torch.randn(B, H, N, d, generator=g, device="cuda").to(dtype)
                dO = torch.randn(B, H, N, d, generator=g, device="cuda").to(dtype)
                O, LSE = forward_f32(q, k, v, causal)
                dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
                acc = torch.empty(q.shape, dtype=torch.float32, device="cuda")
                D = torch.empty(q.shape[:3], dtype=torch.float32, device="cuda")
                ours = {}
                for inst in insts:
                    _, bc, br, w = inst
                    ours[inst] = time_ms(lambda: ext.fa2_tc_backward(q, k, v, O, dO, LSE, dq, dk, dv, acc, D,
                                                                   bc, br, w, causal), reps=reps)
                qs, ks, vs = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    out = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
                t_sdpa = time_ms(lambda: torch.autograd.grad(out, (qs, ks, vs), dO, retain_graph=True), reps=reps)
                flops = 10.0 * B * H * N * N * d * (0.5 if causal else 1.0)
                best = min(ours, key=ours.get)
                table.append((d, N, B, H, causal, t_sdpa, ours, best, flops))
                del out, qs, ks, vs
                print(f"d={d} N={N} causal={int(causal)}: sdpa {t_sdpa:.3f} ms, best {best[1:]} "
                      f"{ours[best]:.3f} ms, ratio {t_sdpa / ours[best]:.2f}", flush=True)
    print("\nbackward time (ms, median), bf16, B*N = 16k, H = 2048/d; ratio = SDPA flash / ours (>= 0.9 is the goal);"
          " TFLOP/s at 10*B*H*N^2*d (x0.5 causal)")
    for d in ds:
        insts = [tuple(i) for i in ext.fa2_tc_bwd_instances() if i[0] == d]
        hdr = " ".join(f"{'%dx%dx%d' % i[1:]:>12s}" for i in insts)
        print(f"\n d   N     B  H  causal  sdpa_ms {hdr}  best           ratio  TF/s(ours) TF/s(sdpa)")
        for (dd, N, B, H, causal, ts, ours, best, flops) in table:
            if dd != d:
                continue
            cols = " ".join(f"{ours[i]:12.3f}" for i in insts)
            print(f"{d:3d} {N:5d} {B:3d} {H:3d} {int(causal):4d} {ts:9.3f} {cols}  {'%dx%dx%d' % best[1:]:12s} "
                  f"{ts / ours[best]:6.2f} {flops / ours[best] / 1e9:10.0f} {flops / ts / 1e9:10.0f}")
    return table


def attributes(ext):
    print("\ninstance (d, Bc, Br, warps): registers, local (spill) bytes, dynamic smem bytes (fp16 / bf16)")
    for inst in ext.fa2_tc_bwd_instances():
        a = [ext.fa2_tc_bwd_attributes(*inst, dt) for dt in ("fp16", "bf16")]
        print(f"  {tuple(inst)}: regs {a[0]['regs_per_thread']}/{a[1]['regs_per_thread']}, local "
              f"{a[0]['local_bytes']}/{a[1]['local_bytes']}, smem {a[0]['dynamic_smem_bytes']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", nargs="?", default="all", choices=["check", "bench", "all"])
    ap.add_argument("--full", action="store_true", help="load the whole kernels' module (perfmodel.measure.build)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--small", action="store_true", help="check: fp16 and short sequences only (for compute-sanitizer)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 2
    print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), flush=True)
    ext = build(args.full, args.verbose)
    attributes(ext)
    rc = 0
    if args.what in ("check", "all"):
        _, fails = check(ext, small=args.small)
        rc = 1 if fails else 0
    if args.what in ("bench", "all"):
        bench(ext, reps=args.reps)
    return rc


if __name__ == "__main__":
    sys.exit(main())
