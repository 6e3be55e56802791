"""The model against published FlashAttention-2 throughput on the A100 80GB SXM4, which nothing here measures, and the
H100 80GB SXM5, measured here for the forward only. Every figure below is a bar label of a published chart, with its
source; nothing is fitted to them. The shapes are FlashAttention's benchmark convention: batch x seqlen = 16k tokens,
hidden dim 2048 (H = 2048/d), d 64 and 128, causal and not, seqlen 512-16k, fp16. TFLOP/s by the same convention, for
the published bars and the predictions alike: the forward 4 B H N^2 d (halved when causal), the backward 2.5x it,
forward plus backward 3.5x.

The kernel is `sdpa-flash`: PyTorch's vendored copy of the FlashAttention-2 source the publications ran (its tiles,
forward and backward, are the library's launch templates, the same at d 64 and 128 on sm_80 as in FlashAttention 2.0,
Dao-AILab/flash-attention@4f285b3). `fa2_tc` is this project's own kernel, a re-implementation with its own tiles.

The backward's path costs are fitted on the H200's backward rows only (`fa2_tc:bwd` in gpus/calibration/h200.yaml); the
H100 and A100 calibrations lack that fit, so their bwd and fwd_bwd predictions price the backward on the probe's costs.
Beside each such prediction is the one with the H200's fit carried as fits carry between GPUs (whole to the same SM,
scaled to another: calibration.carried_fits), to show how much of the difference that fit holds.

Writes examples/benchmarks/published_fa2.json (docs/accuracy.md's table, tests/evaluation/test_published_fa2.py).
Run from the repository root: python examples/published_fa2.py
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

import perfmodel
from perfmodel.api import configure
from perfmodel.evaluation import dataset
from perfmodel.hw import calibration, gpu as gpu_mod
from perfmodel.model import engine
from perfmodel.shape import MODE_FLOPS

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "examples" / "benchmarks" / "published_fa2.json"
# SDPA flash timed on this project's H100 (forward, fp16 and bf16): a published shape found there is quoted beside it
MEASURED = {"h100-sxm": ROOT / "examples" / "measurements" / "h100" / "sdpa-flash.csv"}
KERNEL, DTYPE, TOKENS, HIDDEN = "sdpa-flash", "fp16", 16384, 2048
SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)

FA2, FA3 = "https://arxiv.org/abs/2307.08691", "https://arxiv.org/abs/2407.08608"
REPO = "Dao-AILab/flash-attention"
# key -> the figure, its paper, and where its labels were read
SOURCES = {
    "fa2-fig4": {"figure": "FlashAttention-2, Fig. 4", "url": FA2,
                 "detail": "Tri Dao, FlashAttention-2, arXiv 2307.08691v1, Figure 4 (A100 80GB SXM4, forward + "
                           f"backward), FlashAttention-2 bars; the same chart is {REPO} "
                           "assets/flash2_a100_fwd_bwd_benchmark.png @ 4f285b3 (the README's A100 figure, FP16/BF16), "
                           "labels read off that image"},
    "fa2-fig7": {"figure": "FlashAttention-2, Fig. 7", "url": FA2,
                 "detail": "Tri Dao, FlashAttention-2, arXiv 2307.08691v1, Figure 7 (H100 80GB SXM5, forward + "
                           f"backward), FlashAttention-2 bars; the same chart is {REPO} "
                           "assets/flash2_h100_fwd_bwd_benchmark.png @ 4f285b3, labels read off that image"},
    "fa3-fig5": {"figure": "FlashAttention-3, Fig. 5", "url": FA3,
                 "detail": "Shah et al., FlashAttention-3, arXiv 2407.08608v2, Figure 5 (H100 80GB SXM5, forward, "
                           "FP16 inputs per its Section 4.1), the FlashAttention-2 bars (orange); the same chart is "
                           f"{REPO} assets/flash3_fp16_fwd.png @ 7ef2484, labels read off that image and found again "
                           "in the PDF's text layer"},
    "fa3-fig6": {"figure": "FlashAttention-3, Fig. 6", "url": FA3,
                 "detail": "Shah et al., FlashAttention-3, arXiv 2407.08608v2, Figure 6 (H100 80GB SXM5, backward, "
                           "FP16), the FlashAttention-2 bars; labels from the PDF's text layer (a pdftotext extraction "
                           "of v2), each group's second bar after standard attention by its place in the layout, the "
                           "lowest of the group's three FlashAttention bars; no image of the figure was found"},
}
# gpu, mode, d, causal, source, panel, published TFLOP/s at SEQLENS (None: no figure taken, see LEFT_OUT)
PUBLISHED = (
    ("a100-80gb", "fwd_bwd", 64, False, "fa2-fig4", "(a)", (132, None, 162, 171, 175, 176)),
    ("a100-80gb", "fwd_bwd", 128, False, "fa2-fig4", "(b)", (None, None, 187, 196, 201, 203)),
    ("a100-80gb", "fwd_bwd", 64, True, "fa2-fig4", "(c)", (88, 119, 140, 156, 165, 171)),
    ("a100-80gb", "fwd_bwd", 128, True, "fa2-fig4", "(d)", (99, 133, 155, 173, 182, 189)),
    ("h100-sxm", "fwd_bwd", 64, False, "fa2-fig7", "(a)", (215, 254, 274, 288, 294, 296)),
    ("h100-sxm", "fwd_bwd", 128, False, "fa2-fig7", "(b)", (248, 294, 320, 326, 335, 338)),
    ("h100-sxm", "fwd_bwd", 64, True, "fa2-fig7", "(c)", (141, 192, 232, 257, 273, 284)),
    ("h100-sxm", "fwd_bwd", 128, True, "fa2-fig7", "(d)", (163, 221, 265, 294, 308, 328)),
    ("h100-sxm", "fwd", 64, False, "fa3-fig5", "(a)", (282, 306, 318, 321, 322, 324)),
    ("h100-sxm", "fwd", 64, True, "fa3-fig5", "(b)", (180, 229, 262, 284, 295, 299)),
    ("h100-sxm", "fwd", 128, False, "fa3-fig5", "(c)", (309, 350, 362, 368, 370, 370)),
    ("h100-sxm", "fwd", 128, True, "fa3-fig5", "(d)", (191, 260, 298, 319, 333, 335)),
    ("h100-sxm", "bwd", 64, False, "fa3-fig6", "(a)", (198, 238, 264, 279, 287, 291)),
    ("h100-sxm", "bwd", 128, False, "fa3-fig6", "(b)", (214, 260, 291, 310, 318, 322)),
)
LEFT_OUT = ("fa2-fig4 (a) 1k and (b) 512 and 1k: the labels lie under the legend and are not legible; the A100's "
            "forward-only and backward-only bars (FlashAttention-2 paper, Figures 5 and 6) were found only as "
            "images not available here, or as third-party transcriptions, and are not used")


def fa_flops(B: int, H: int, N: int, d: int, causal: bool, mode: str) -> float:
    """FlashAttention's benchmark convention (benchmarks/benchmark_flash_attention.py, flops())."""
    return MODE_FLOPS[mode] * 4 * B * H * N * N * d / (2 if causal else 1)


def measured_here() -> dict:
    """(gpu, B, H, N, d, dtype, causal, mode) -> seconds, the median over a problem's rows in MEASURED's datasets."""
    times: dict = {}
    for gpu, path in MEASURED.items():
        (ms,) = dataset.load([path])
        for (B, H, Hkv, Nq, Nk, d, dtype, causal, mode), t in zip(ms.problems(), ms.measured_s):
            if H == Hkv and Nq == Nk:
                times.setdefault((gpu, B, H, Nq, d, dtype, causal, mode), []).append(float(t))
    return {k: float(np.median(v)) for k, v in times.items()}


def with_h200_backward_fit(gpu: str):
    """(spec, the GPU's calibration with the H200's backward path fit added, carried as its architecture file carries
    fits: whole to the same SM, scaled to another)."""
    spec = gpu_mod.resolve(gpu)
    cal = calibration.resolve(spec)
    how = "path_fits_from" if spec.sm == "sm_90" else "scaled_fits_from"
    fit = calibration.carried_fits(spec, {how: "h200"}, cal.path_cycles)["fa2_tc:bwd"]
    return spec, dataclasses.replace(cal, path_fits={**cal.path_fits, "fa2_tc:bwd": fit})


def rows() -> list[dict]:
    """One row per published figure: the shape, the figure and its source, the model's prediction (for bwd and
    fwd_bwd also with the H200's backward fit, else None), and SDPA flash's TFLOP/s where this project timed the same
    shape on the same GPU (None elsewhere)."""
    here = measured_here()
    out = []
    for gpu, mode, d, causal, source, panel, values in PUBLISHED:
        spec, fitted = with_h200_backward_fit(gpu)
        for N, published in zip(SEQLENS, values):
            if published is None:
                continue
            B, H = TOKENS // N, HIDDEN // d
            p = perfmodel.predict(gpu=gpu, kernel=KERNEL, B=B, H=H, N=N, d=d, dtype=DTYPE, causal=causal, mode=mode)
            tflops = fa_flops(B, H, N, d, causal, mode) / 1e12
            refit = None
            if mode != "fwd":
                refit = tflops / float(engine.evaluate(spec, *configure(KERNEL, B, H, N, d, DTYPE, causal, gpu=spec,
                                                                        mode=mode), fitted).time_s)
            measured = here.get((gpu, B, H, N, d, DTYPE, causal, mode))
            out.append({"gpu": gpu, "mode": mode, "B": B, "H": H, "N": N, "d": d, "causal": causal, "dtype": DTYPE,
                        "published_tflops": published, "source": source, "panel": panel,
                        "predicted_s": p.time_s, "predicted_tflops": tflops / p.time_s,
                        "ratio": tflops / p.time_s / published, "bound": p.bound,
                        "predicted_tflops_h200_bwd_fit": refit,
                        "measured_here_tflops": None if measured is None else tflops / measured})
    return out


def pct(x) -> dict:
    """Mean and largest absolute, and mean signed, percentage difference of ratios ``x`` from 1."""
    d = 100 * (np.asarray(x, float) - 1)
    return {"mean_abs_pct": float(np.abs(d).mean()), "max_abs_pct": float(np.abs(d).max()), "mean_pct": float(d.mean())}


def summary(table: list[dict]) -> dict:
    """Per GPU and mode: how many figures, and the predicted TFLOP/s against the published (pct; a mean above 0:
    the model is faster), for bwd and fwd_bwd also with the H200's backward fit. Where this project timed the shape
    too: the published and the predicted TFLOP/s against the measured."""
    out = {}
    for key in dict.fromkeys((r["gpu"], r["mode"]) for r in table):
        group = [r for r in table if (r["gpu"], r["mode"]) == key]
        out["/".join(key)] = s = {"n": len(group), **pct([r["ratio"] for r in group])}
        if key[1] != "fwd":
            s["with_h200_bwd_fit"] = pct([r["predicted_tflops_h200_bwd_fit"] / r["published_tflops"] for r in group])
        here = [r for r in group if r["measured_here_tflops"] is not None]
        if here:
            s["measured_here"] = {
                "n": len(here),
                "published_over_measured": pct([r["published_tflops"] / r["measured_here_tflops"] for r in here]),
                "predicted_over_measured": pct([r["predicted_tflops"] / r["measured_here_tflops"] for r in here])}
    return out


def compute() -> dict:
    table = rows()
    return {"kernel": KERNEL, "rows": table, "summary": summary(table), "sources": SOURCES, "left_out": LEFT_OUT,
            "measured_here": {gpu: str(path.relative_to(ROOT)) for gpu, path in MEASURED.items()},
            "flops": "FlashAttention's: forward 4 B H N^2 d, halved when causal; bwd 2.5x, fwd_bwd 3.5x",
            "command": "python examples/published_fa2.py"}


if __name__ == "__main__":
    result = compute()
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{'gpu':10s} {'mode':8s} {'d':>4s} {'causal':6s} {'N':>6s} {'published':>9s} {'predicted':>9s} "
          f"{'ratio':>6s} {'here':>6s}  bound   source")
    for r in result["rows"]:
        here = r["measured_here_tflops"]
        print(f"{r['gpu']:10s} {r['mode']:8s} {r['d']:4d} {str(r['causal']):6s} {r['N']:6d} "
              f"{r['published_tflops']:9d} {r['predicted_tflops']:9.1f} {r['ratio']:6.3f} "
              f"{'' if here is None else f'{here:6.1f}':>6s}  {r['bound']:7s} {r['source']} {r['panel']}")
    for key, s in result["summary"].items():
        print(f"{key:18s} n={s['n']:2d} predicted against published: mean |difference| {s['mean_abs_pct']:4.1f}% "
              f"(largest {s['max_abs_pct']:4.1f}%), mean {s['mean_pct']:+5.1f}%")
        if "with_h200_bwd_fit" in s:
            f = s["with_h200_bwd_fit"]
            print(f"{'':18s}      with the H200's backward fit: mean |difference| {f['mean_abs_pct']:4.1f}% "
                  f"(largest {f['max_abs_pct']:4.1f}%), mean {f['mean_pct']:+5.1f}%")
        if "measured_here" in s:
            m = s["measured_here"]
            pub, pred = (m[k]["mean_pct"] for k in ("published_over_measured", "predicted_over_measured"))
            print(f"{'':18s} n={m['n']:2d} timed here too: published {pub:+5.1f}%, predicted {pred:+5.1f}% against "
                  "the measured")
