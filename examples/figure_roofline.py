"""README figure: hierarchical roofline of fa2 on the H100 at four tile/problem points, predicted and measured.
Run from the repository root: python examples/figure_roofline.py"""
import subprocess

subprocess.run(["perfmodel", "roofline", "--gpu", "h100", "--kernel", "fa2", "--N", "1024,4096", "--Br", "32,64",
                "--Bc", "64", "--measured", "examples/measurements/h100/fa2.csv",
                "-o", "examples/figures/roofline.png"], check=True)
