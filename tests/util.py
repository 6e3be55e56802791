"""Shortcuts for tests: one kernel evaluation from plain numbers."""

from perfmodel.hw import calibration, gpu
from perfmodel.kernels import get
from perfmodel.model import engine
from perfmodel.shape import AttentionShape

H100 = gpu.resolve("h100")


def evaluate(name, B, H, N, d, spec=H100, cal=None, regs=None, dtype="fp32", causal=False, **tiles):
    """engine.Prediction of kernel ``name`` (tile fields it lacks, such as fa1's threads, are dropped)."""
    k = get(name)
    cal = cal or calibration.resolve(spec)
    t = k.Tiles(**{f: v for f, v in tiles.items() if f in k.Tiles.fields()})
    return engine.evaluate(spec, k, AttentionShape(B, H, N, d, dtype, causal), t, cal, regs=regs)


def counts(name, B, H, N, d, **tiles):
    return evaluate(name, B, H, N, d, **tiles).counts
