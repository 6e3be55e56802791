"""README figure: predicted (dashed, x) and measured (solid, o) TFLOP/s against N for fa2_tc, SDPA flash and SDPA
cuDNN on the H100, fp16, d = 128, causal and not, from the one run that timed all three on the same inputs
(examples/benchmarks/fa2_tc_vs_sdpa.json). Run from the repository root: python examples/figure_tensorcore.py"""
import json

from perfmodel import api, plot

rows = json.load(open("examples/benchmarks/fa2_tc_vs_sdpa.json"))["rows"]
panels = []
for causal in (False, True):
    sel = sorted((r for r in rows if r["dtype"] == "fp16" and r["d"] == 128 and r["causal"] == causal),
                 key=lambda r: r["N"])
    series = []
    for kernel, col in (("fa2_tc", "fa2_tc_ms"), ("sdpa-flash", "sdpa_flash_ms"), ("sdpa-cudnn", "sdpa_cudnn_ms")):
        flops = [api.predict("h100", kernel, B=r["B"], H=r["H"], N=r["N"], d=128, dtype="fp16", causal=causal,
                             **({"Br": r["fa2_tc_tile"][0], "Bc": r["fa2_tc_tile"][1], "warps": r["fa2_tc_tile"][2]}
                                if kernel == "fa2_tc" else {})) for r in sel]
        useful = [float(p.prediction.shape.useful_flops()) for p in flops]
        Ns = [r["N"] for r in sel]
        series.append({"kernel": kernel, "label": f"{kernel} measured", "N": Ns, "measured": True,
                       "tflops": [u / (r[col] * 1e-3) / 1e12 for u, r in zip(useful, sel)]})
        series.append({"kernel": kernel, "label": f"{kernel} predicted", "N": Ns, "measured": False,
                       "tflops": [u / p.time_s / 1e12 for u, p in zip(useful, flops)]})
    panels.append({"title": ("causal" if causal else "non-causal") + ", fp16, d = 128", "series": series})
fig = plot.throughput_vs_n(panels, "tensor-core attention on the H100: predicted vs measured")
plot.save(fig, "examples/figures/tensorcore_h100.png")
print("wrote examples/figures/tensorcore_h100.png")
