"""Shortcuts for tests: one kernel evaluation from plain numbers, the SDPA presets' tiles, the committed rows'
provenance, a script of examples/ loaded, a committed record compared with what its script computes now."""

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path

from perfmodel.hw import calibration, gpu
from perfmodel.kernels import get
from perfmodel.model import engine
from perfmodel.shape import AttentionShape

H100 = gpu.resolve("h100")
# what every committed tensor-core row carries: the GPU it was timed on, its provenance, and the largest relative
# error of its check against float64 by dtype
GPU_NAME = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200"}
PROVENANCE = ["gpu_name", "sm_clock_mhz_before", "sm_clock_mhz_after", "driver", "torch", "nvcc", "date", "command"]
TOL = {"fp16": 2e-3, "bf16": 1.5e-2}


def evaluate(name, B, H, N, d, spec=H100, cal=None, regs=None, dtype="fp32", causal=False, **tiles):
    """engine.Prediction of kernel ``name`` (tile fields it lacks, such as fa1's threads, are dropped)."""
    k = get(name)
    cal = cal or calibration.resolve(spec)
    t = k.Tiles(**{f: v for f, v in tiles.items() if f in k.Tiles.fields()})
    return engine.evaluate(spec, k, AttentionShape(B, H, N, d, dtype, causal), t, cal, regs=regs)


def counts(name, B, H, N, d, **tiles):
    return evaluate(name, B, H, N, d, **tiles).counts


@lru_cache(maxsize=None)
def script(name, folder="examples"):
    """A module of examples/ (or another folder of scripts, not packages, named from the repository root), loaded
    from its file: ``script("tile_advice").advice(...)``. Its imports of the folder's other scripts resolve as when
    it is run (``python3 FOLDER/NAME.py`` puts FOLDER on the path)."""
    scripts = Path(__file__).resolve().parent.parent / folder
    if str(scripts) not in sys.path:
        sys.path.append(str(scripts))
    path = scripts / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _flat(d, prefix=""):
    for k, v in (enumerate(d) if isinstance(d, list) else d.items()):
        if isinstance(v, (dict, list)):
            yield from _flat(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def assert_same_record(recorded: dict, now: dict, rel: float = 1e-5):
    """A committed benchmark record is what its script computes now: the same keys at every level (and items of
    every list), floats to ``rel`` relative (1e-5 by default: the model computes in float32, whose last digits differ
    between numpy builds, and an error of a few percent carries a prediction's relative difference 30-fold),
    everything else equal."""
    import pytest

    recorded, now = dict(_flat(recorded)), dict(_flat(now))
    assert recorded.keys() == now.keys()
    for k, v in now.items():
        assert recorded[k] == (pytest.approx(v, rel=rel) if isinstance(v, float) else v), k


def on_h100(kernel, sh):
    """(H100 spec, the kernel, the tiles it launches for problem ``sh``)."""
    spec = gpu.resolve("h100")
    k = get(kernel)
    return spec, k, k.resolve(spec, sh, k.default_tiles(sh, spec))


def one_line(r) -> str:
    """The one line a command answered a bad input with (a CliRunner result): exit status 2 and ``error: ...``."""
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]
