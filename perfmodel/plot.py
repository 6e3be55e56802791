"""Figures (matplotlib, headless). Functions take prepared data and return a Figure; the CLI saves it."""

from __future__ import annotations

import os
import sys

if "matplotlib" not in sys.modules:
    os.environ["MPLBACKEND"] = "Agg"        # files only: a user's MPLBACKEND (even an unknown one) plays no part
import matplotlib  # noqa: E402

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from perfmodel.report import si  # noqa: E402

# memory ceilings in greys, told apart by line style, so that no configuration's colour is also a ceiling's
LEVEL_STYLE = {"dram": ("DRAM reads", "-", "o"), "l2": ("L2", "--", "s"), "smem": ("shared memory", ":", "^")}
CEILING_COLOR = "dimgray"

# configurations: twelve colours apart from one another and from the grey ceilings (sweeps.MAX_ROOFLINE_POINTS)
CONFIG_COLORS = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324",
                 "#800000", "#808000", "#000075", "#469990"]


def roofline(ceil, points: list[dict], title: str, dtype: str = "fp32"):
    """Hierarchical roofline. ``ceil``: hw.ceilings.Ceilings (its basis is named in the title, the FP32 ceiling's
    own in its label). ``points``: dicts with label, flops, bytes {level: bytes}, time_s, and optionally
    measured_s. Each point is drawn at its intensity for every memory level; a measured time as a larger hollow
    marker joined to the prediction. The axes span the points and the ceilings' ridge points."""
    fig, ax = plt.subplots(figsize=(11, 6))
    ceilings = {"dram": ceil.dram_bps, "l2": ceil.l2_bps, "smem": ceil.smem_bps}
    peak = ceil.compute_flops(dtype)
    intens = [p["flops"] / b for p in points for b in p["bytes"].values() if b > 0]
    perf = [p["flops"] / t for p in points for t in (p["time_s"], p.get("measured_s")) if t]
    ridges = [peak / bw for bw in ceilings.values()]
    lo, hi = min(intens + ridges) / 3, max(intens + ridges) * 3
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    for level, bw in ceilings.items():
        name, ls, _ = LEVEL_STYLE[level]
        ax.plot(x, np.minimum(x * bw, peak), color=CEILING_COLOR, ls=ls, lw=1.6, label=f"{name} {si(bw, 'B/s')}")
    ax.axhline(ceil.fp32_flops, color="black", lw=1.6,
               label=f"FP32 {si(ceil.fp32_flops, 'FLOP/s')}" + (f"\n= {ceil.fp32_basis}" if ceil.fp32_basis else ""))
    if peak != ceil.fp32_flops:
        ax.axhline(peak, color="black", lw=1.6, ls="-.", label=f"tensor {dtype} {si(peak, 'FLOP/s')} (datasheet)")
    for i, p in enumerate(points):
        c = CONFIG_COLORS[i % len(CONFIG_COLORS)]
        for level, b in p["bytes"].items():
            if b <= 0:
                continue
            _, _, marker = LEVEL_STYLE[level]
            ai = p["flops"] / b
            y = p["flops"] / p["time_s"]
            # the prediction small and on top, the measurement a larger open ring: both show where they meet
            ax.scatter([ai], [y], marker=marker, color=c, edgecolor="black", lw=0.6, zorder=5, s=40)
            if p.get("measured_s"):
                ym = p["flops"] / p["measured_s"]
                ax.plot([ai, ai], [y, ym], color=c, lw=1.2, zorder=3)
                ax.scatter([ai], [ym], marker=marker, facecolor="none", edgecolor=c, zorder=4, s=150, lw=2.2)
        ax.plot([], [], color=c, lw=6, label=p["label"])
    ax.scatter([], [], marker="o", color="dimgray", edgecolor="black", label="predicted (filled)")
    if any(p.get("measured_s") for p in points):
        ax.scatter([], [], marker="o", facecolor="none", edgecolor="black", lw=2.2, s=80,
                   label="measured (open ring, joined)")
    ax.scatter([], [], marker="o", color="white", edgecolor="white", label="at DRAM / L2 / shared: ○ □ △")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(perf + [peak]) / 6, max(perf + [peak, ceil.fp32_flops]) * 2)
    ax.set_xlabel("arithmetic intensity (FLOP/byte) at each memory level")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(title + f"\nceilings: {ceil.basis}", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


GPU_MARKERS = "osD^vP*X"                    # one per GPU: hollow shapes that stay apart where points overlap


def _log_span(values, pad=1.6):
    """(lo, hi) of the finite positive ``values``, widened by ``pad`` on a log axis."""
    v = np.concatenate([np.ravel(x) for x in values])
    v = v[np.isfinite(v) & (v > 0)]
    return (v.min() / pad, v.max() * pad) if v.size else (1e-6, 1.0)


def validation(groups: list[dict], title: str):
    """Predicted against measured, in three panels: perfmodel's times, perfmodel's error in percent, and the seed
    model's times on axes of their own (its errors run to thousands of times, so that on shared axes they
    would squeeze ours onto the diagonal). ``groups``: dicts with label, gpu, measured_s, predicted_s, seed_s,
    mape, seed_mape (percent). One colour per group and one hollow marker shape per GPU, so that GPUs drawn over
    one another both stay visible."""
    from perfmodel.report import error_pct

    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(17, 5.6))
    cmap = plt.get_cmap("tab10")
    markers = {g: GPU_MARKERS[i % len(GPU_MARKERS)] for i, g in enumerate(dict.fromkeys(x["gpu"] for x in groups))}

    def diagonal(ax, lo, hi):
        x = np.array([lo, hi])
        ax.plot(x, x, color="black", lw=1, zorder=1)
        ax.fill_between(x, x / 1.1, x * 1.1, color="tab:green", alpha=0.18, lw=0, zorder=0)
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured time (s)")
        ax.grid(True, which="both", alpha=0.25)

    lo, hi = _log_span([g[k] for g in groups for k in ("measured_s", "predicted_s")])
    diagonal(a1, lo, hi)
    slo, shi = _log_span([g[k] for g in groups for k in ("measured_s", "seed_s")])
    diagonal(a3, slo, shi)
    worst, rng, CHUNKS = 10.0, np.random.default_rng(0), 16
    # each group's points in CHUNKS random slices, drawn in turn with the other groups': none lies wholly on top
    draws = []
    for i, g in enumerate(groups):
        style = dict(marker=markers[g["gpu"]], facecolors="none", edgecolors=cmap(i % 10), s=22, lw=0.9,
                     alpha=0.85, zorder=2)
        meas, pred = np.asarray(g["measured_s"], float), np.asarray(g["predicted_s"], float)
        seed_s = np.asarray(g["seed_s"], float)
        err = (pred / meas - 1) * 100
        worst = max(worst, float(np.nanmax(np.abs(err), initial=0)))
        for j, part in enumerate(np.array_split(rng.permutation(len(meas)), CHUNKS)):
            draws.append((j, i, style, meas[part], pred[part], err[part], seed_s[part]))
        a1.scatter([], [], label=f"{g['label']}: MAPE {error_pct(g['mape'])}", **style)
        a3.scatter([], [], label=f"{g['label']}: MAPE {error_pct(g['seed_mape'])}", **style)
    for _, _, style, meas, pred, err, seed_s in sorted(draws, key=lambda d: d[:2]):
        a1.scatter(meas, pred, **style)
        a2.scatter(meas, err, **style)
        a3.scatter(meas, seed_s, **style)
    a1.set(ylabel="predicted time (s)", title="perfmodel: predicted against measured")
    a2.axhspan(-10, 10, color="tab:green", alpha=0.18, lw=0)
    a2.axhline(0, color="black", lw=1)
    a2.set(xscale="log", xlim=(lo, hi), ylim=(-worst * 1.1, worst * 1.1), xlabel="measured time (s)",
           ylabel="predicted / measured - 1 (%)", title="perfmodel's error (green: within 10%)")
    a2.grid(True, which="both", alpha=0.25)
    a3.set(ylabel="seed model's predicted time (s)", title="seed model, on axes of its own")
    for ax in (a1, a3):
        ax.legend(fontsize=7.5, loc="upper left", framealpha=0.85)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def scaling(n_panel: dict, tile_panel: dict, title: str):
    """Two panels, as in seed 000: time vs N at fixed tiles, and time vs tile configuration at fixed N.
    Each panel dict: x (values or labels), model_s, seed_s, measured_s (NaN where not measured), xlabel."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    a1.plot(n_panel["x"], n_panel["model_s"], "o-", color="tab:blue", label="perfmodel")
    a1.plot(n_panel["x"], n_panel["seed_s"], "x--", color="tab:gray", label="seed model")
    a1.plot(n_panel["x"], n_panel["measured_s"], "s", color="tab:red", label="measured")
    a1.set_xscale("log", base=2)
    a1.set_yscale("log")
    a1.set_xlabel(n_panel["xlabel"])
    a1.set_ylabel("time (s)")
    a1.grid(True, which="both", alpha=0.25)
    a1.legend(fontsize=8)
    idx = np.arange(len(tile_panel["x"]))
    # points, not bars: bar lengths on a log axis start at an arbitrary floor and mislead
    a2.plot(idx, tile_panel["model_s"], "o", color="tab:blue", label="perfmodel")
    a2.plot(idx, tile_panel["seed_s"], "x", color="tab:gray", label="seed model")
    a2.plot(idx, tile_panel["measured_s"], "s", mfc="none", color="tab:red", label="measured")
    a2.set_xticks(idx, tile_panel["x"], rotation=30, ha="right", fontsize=8)
    a2.set_yscale("log")
    a2.set_xlabel(tile_panel["xlabel"])
    a2.set_ylabel("time (s)")
    a2.grid(True, axis="y", which="both", alpha=0.25)
    a2.legend(fontsize=8, loc="best", framealpha=0.85)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def heatmap(time_s: np.ndarray, brs: list[int], bcs: list[int], title: str, aggregated=(), unfit: str = ""):
    """Predicted time over (Br, Bc); cells where no tile fits hatched grey and named in the legend, with
    ``unfit`` (why, one line) under it. ``aggregated``: the other tile fields over which each cell shows the
    fastest value (said in the title). The colour bar's unit follows the times (us, ms or s)."""
    import textwrap

    from matplotlib.patches import Patch, Rectangle

    fig, ax = plt.subplots(figsize=(7, 6.2))
    t = np.where(np.isfinite(time_s), time_s, np.nan)
    top = np.nanmax(t) if np.isfinite(t).any() else 1.0
    unit, scale = next((u, f) for u, f in (("s", 1.0), ("ms", 1e3), ("µs", 1e6)) if top * f >= 1 or u == "µs")
    im = ax.imshow(t * scale, origin="lower", cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(bcs)), bcs)
    ax.set_yticks(range(len(brs)), brs)
    ax.set_xlabel("Bc")
    ax.set_ylabel("Br")
    handles = []
    for i in range(len(brs)):
        for j in range(len(bcs)):
            if np.isfinite(t[i, j]):
                r, g, b, _ = im.cmap(im.norm(t[i, j] * scale))
                ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
                ax.text(j, i, si(t[i, j], "s", 3), ha="center", va="center", fontsize=7, color=ink)
            else:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="0.88", edgecolor="0.45", hatch="///",
                                       lw=0))
    if np.isfinite(t).any():
        i, j = np.unravel_index(np.nanargmin(t), t.shape)
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="red", lw=2.5))
        handles.append(Patch(fill=False, ec="red", lw=2.5, label="fastest"))
    if not np.isfinite(t).all():
        handles.append(Patch(facecolor="0.88", edgecolor="0.45", hatch="///", label="no tile fits the GPU"))
    fig.colorbar(im, ax=ax, label=f"predicted time ({unit})")
    if aggregated:
        title += f"\neach cell: the fastest over {', '.join(aggregated)}"
    ax.set_title(title, fontsize=10)
    if handles:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=len(handles), fontsize=8,
                  frameon=False)
    if unfit and not np.isfinite(t).all():
        fig.text(0.02, 0.01, "\n".join(textwrap.wrap("no tile fits: " + unfit, 110, max_lines=3)), fontsize=6.5,
                 va="bottom", color="0.3")
    fig.tight_layout(rect=(0, 0.05 if unfit else 0, 1, 1))
    return fig


def save(fig, path: str) -> None:
    """Write the figure to a temporary file beside ``path`` and rename it over (perfmodel.io.write_atomic): a
    failure leaves an existing figure whole."""
    from pathlib import Path

    from perfmodel.io import write_atomic

    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    try:
        write_atomic(path, lambda f: fig.savefig(f, format=fmt, dpi=130, bbox_inches="tight"), "figure")
    finally:
        plt.close(fig)


def throughput_vs_n(panels: list[dict], title: str, xlabel: str = "N (B*H*N fixed)"):
    """TFLOP/s against N, one panel per dict (title, series: [{label, N, tflops, measured (bool)}])."""
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.6), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, panel in zip(axes[0], panels):
        colors = {}
        for s in panel["series"]:
            c = colors.setdefault(s["kernel"], cmap(len(colors)))
            style = dict(marker="o", ls="-", color=c) if s["measured"] else dict(marker="x", ls="--", color=c)
            ax.plot(s["N"], s["tflops"], label=s["label"], **style)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("TFLOP/s (useful FLOPs)")
        ax.set_title(panel["title"], fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=7.5)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
