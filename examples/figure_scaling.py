"""README figures: seed 000's two plots (time vs N at 32x32 tiles, time vs tiles at N = 512) for fa1 and fa2 on
the H100, model, seed model and measurement together. Run from the repository root: python examples/figure_scaling.py"""
import subprocess

for kernel in ("fa1", "fa2"):
    subprocess.run(["perfmodel", "plot", "scaling", f"examples/measurements/h100/{kernel}.csv", "--kernel", kernel,
                    "-o", f"examples/figures/scaling_{kernel}.png"], check=True)
