"""README figure: predicted vs measured for both kernels on the held-out H100 rows, ours and the seed model's.
Run from the repository root: python examples/figure_validation.py"""
import subprocess

subprocess.run(["perfmodel", "plot", "validation", "examples/measurements/h100/fa1.csv",
                "examples/measurements/h100/fa2.csv", "-o", "examples/figures/validation.png"], check=True)
