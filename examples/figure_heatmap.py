"""README figure: predicted fa2 time over (Br, Bc) on the H100 for B=4, H=16, N=4096, d=64, best threads/pad.
Run from the repository root: python examples/figure_heatmap.py"""
import subprocess

subprocess.run(["perfmodel", "sweep", "--gpu", "h100", "--kernel", "fa2", "--B", "4", "--H", "16", "--N", "4096",
                "--d", "64", "--Br", "16,32,64,128", "--Bc", "16,32,64,128", "--threads", "64,128,256",
                "--pad", "0,1", "--best", "-o", "examples/figures/heatmap_fa2.png"], check=True)
