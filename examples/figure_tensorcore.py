"""README figure: predicted (dashed, x) and measured (solid, o) TFLOP/s against N for fa2_tc (its default d = 128
tile, 128x64, 4 warps), SDPA flash and SDPA cuDNN on the H100, fp16, d = 128, B = 32, H = 16, causal and not: every
such row of the committed datasets (examples/measurements/h100/{fa2_tc,sdpa-flash,sdpa-cudnn}.csv), the ground
truth the accuracy tables score (fa2_tc's training-split rows included; nothing is fitted to SDPA's). Run from the
repository root: python examples/figure_tensorcore.py"""
from perfmodel import api, plot
from perfmodel.evaluation import dataset

B, H, D, TILE = 32, 16, 128, (128, 64, 4)


def rows(kernel, causal):
    """(N, measured ms) of the kernel's B x H, fp16, d = 128 rows (fa2_tc: its default tile), by N."""
    ms = dataset.load([f"examples/measurements/h100/{kernel}.csv"])[0]
    c = ms.cols
    keep = (c["B"] == B) & (c["H"] == H) & (c["d"] == D) & (ms.dtype == "fp16") & (ms.causal == causal)
    if kernel == "fa2_tc":
        keep &= (c["Br"] == TILE[0]) & (c["Bc"] == TILE[1]) & (c["threads"] == 32 * TILE[2])
    return sorted((int(n), float(t) * 1e3) for n, t in zip(c["N"][keep], ms.measured_s[keep]))


panels = []
for causal in (False, True):
    series = []
    for kernel in ("fa2_tc", "sdpa-flash", "sdpa-cudnn"):
        meas = rows(kernel, causal)
        tiles = dict(zip(("Br", "Bc", "warps"), TILE)) if kernel == "fa2_tc" else {}
        preds = [api.predict("h100", kernel, B=B, H=H, N=n, d=D, dtype="fp16", causal=causal, **tiles).prediction
                 for n, _ in meas]
        useful = [float(p.shape.useful_flops()) for p in preds]
        Ns = [n for n, _ in meas]
        series.append({"kernel": kernel, "label": f"{kernel} measured", "N": Ns, "measured": True,
                       "tflops": [u / (ms * 1e-3) / 1e12 for u, (_, ms) in zip(useful, meas)]})
        series.append({"kernel": kernel, "label": f"{kernel} predicted", "N": Ns, "measured": False,
                       "tflops": [u / float(p.time_s) / 1e12 for u, p in zip(useful, preds)]})
    panels.append({"title": ("causal" if causal else "non-causal") + f", fp16, d = {D}, B = {B}, H = {H}",
                   "series": series})
fig = plot.throughput_vs_n(panels, "tensor-core attention on the H100: predicted vs measured", xlabel="N")
plot.save(fig, "examples/figures/tensorcore_h100.png")
print("wrote examples/figures/tensorcore_h100.png")
