"""Figures of the H200's inference and training workloads, predicted beside measured (examples/measurements/h200/):

* examples/figures/decode_h200.png: a decode step's time (one query, d = 128, bf16) against the KV length for
  fa2_tc, SDPA flash and cuDNN, for 32 and 8 K/V heads (32 query heads) and batch 1 and 32; lines predicted,
  markers measured.
* examples/figures/backward_h200.png: TFLOP/s (FlashAttention's convention: 2.5x and 3.5x the forward's FLOPs) of
  the forward, the backward and forward plus backward against N at FlashAttention's benchmark shapes (B x N = 16k,
  32 heads of d = 64 and 16 of d = 128, causal), for the three kernels; lines predicted, markers measured.

Run from the repository root: python examples/figure_workloads.py
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from perfmodel import api, plot  # noqa: E402
from perfmodel.evaluation import dataset  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "measurements" / "h200"
KERNELS = {"fa2_tc": "C0", "sdpa-flash": "C1", "sdpa-cudnn": "C2"}


def measured(kernel: str, part: str, **want) -> list[tuple]:
    (ms,) = dataset.load([DATA / f"{kernel}.{part}.csv"])
    c = ms.cols
    keep = np.ones(len(ms), bool)
    for k, v in want.items():
        keep &= (ms.mode == v) if k == "mode" else (ms.causal == v) if k == "causal" else (c[k] == v)
    return [({a: int(c[a][i]) for a in ("B", "H", "Hkv", "Nq", "Nk", "d")}, float(ms.measured_s[i]))
            for i in np.flatnonzero(keep)]


def decode() -> None:
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
    nks = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
    for ax, (hkv, B) in zip(axes.ravel(), [(32, 1), (32, 32), (8, 1), (8, 32)]):
        for kernel, color in KERNELS.items():
            t = [api.predict("h200", kernel, B=B, H=32, Hkv=hkv, Nq=1, Nk=nk, d=128, dtype="bf16").time_s
                 for nk in nks]
            ax.plot(nks, np.array(t) * 1e6, color=color, label=f"{kernel} predicted")
            pts = sorted((p["Nk"], s) for p, s in measured(kernel, "infer", B=B, H=32, Hkv=hkv, Nq=1, d=128))
            if pts:
                ax.plot(*zip(*[(n, s * 1e6) for n, s in pts]), "o", color=color, mfc="none",
                        label=f"{kernel} measured")
        ax.set(xscale="log", yscale="log", title=f"B={B}, H=32, Hkv={hkv}", xlabel="KV length (keys)",
               ylabel="time (µs)")
        ax.grid(alpha=0.3, which="both")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("Decode step on the H200 (one query, d = 128, bf16): predicted lines, measured markers")
    fig.tight_layout()
    plot.save(fig, str(ROOT / "examples" / "figures" / "decode_h200.png"))


def backward() -> None:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    ns = [512, 1024, 2048, 4096, 8192]
    for ax, (d, H) in zip(axes, [(64, 32), (128, 16)]):
        for kernel, color in KERNELS.items():
            for mode, style in (("fwd", ":"), ("bwd", "-"), ("fwd_bwd", "--")):
                rate = []
                for n in ns:
                    r = api.predict("h200", kernel, B=16384 // n, H=H, N=n, d=d, dtype="bf16", causal=True,
                                    mode=mode).prediction
                    rate.append(float(np.asarray(r.shape.useful_flops() / r.time_s)) / 1e12)
                ax.plot(ns, rate, style, color=color, label=f"{kernel} {mode}")
                part = "infer" if mode == "fwd" else "bwd"
                pts = []
                for n in ns:
                    for p, s in measured(kernel, part, B=16384 // n, H=H, Hkv=H, Nq=n, d=d, causal=True, mode=mode):
                        shape = api.configure(kernel, p["B"], p["H"], n, d, "bf16", True, mode=mode)[1]
                        pts.append((n, float(shape.useful_flops()) / s / 1e12))
                if pts:
                    ax.plot(*zip(*sorted(pts)), {"fwd": "s", "bwd": "o", "fwd_bwd": "^"}[mode], color=color,
                            mfc="none", ms=5)
        ax.set(xscale="log", title=f"d = {d}, H = {H}, B x N = 16k, causal", xlabel="N", ylabel="TFLOP/s")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7, ncol=3)
    fig.suptitle("Training on the H200 (bf16): forward (dotted, squares), backward (solid, circles), both (dashed, "
                 "triangles); lines predicted, markers measured")
    fig.tight_layout()
    plot.save(fig, str(ROOT / "examples" / "figures" / "backward_h200.png"))


if __name__ == "__main__":
    decode()
    backward()
    print("wrote examples/figures/decode_h200.png, examples/figures/backward_h200.png")
