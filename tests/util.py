"""Shortcuts for tests: one kernel evaluation from plain numbers; the committed Nsight Compute exports and ptxas
records, read."""

import csv
import importlib.util
import io
import re
import sys
import tarfile
from functools import lru_cache
from pathlib import Path

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


def fa2_tc_ptxas(path):
    """{(d, Br, Bc, warps): {registers}} of each fa2_tc instance in a ptxas -v record (fp16 and bf16 together)."""
    out, cur = {}, None
    for line in Path(path).read_text().splitlines():
        m = re.search(r"fa2_tc_kernelI\w+?Li(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E", line)
        if "Compiling entry" in line and m:
            cur = tuple(map(int, m.groups()))
        used = re.search(r"Used (\d+) registers", line)
        if used and cur:
            out.setdefault(cur, set()).add(int(used.group(1)))
            cur = None
    return out


def ncu_sass(tarball, tag):
    """(header, instruction rows) of ``sass_<tag>.csv`` in a committed tarball of Nsight Compute source-page
    exports (research/scripts/ncu_sdpa_sass.sh): its first line names the kernel, its second the columns."""
    with tarfile.open(tarball) as tar:
        rows = list(csv.reader(io.StringIO(tar.extractfile(f"sass_{tag}.csv").read().decode())))
    return rows[1], rows[2:]


def ncu_details(lines):
    """The metric rows of an Nsight Compute ``--page details --csv`` export, given as lines (ncu's own messages,
    which do not start with a quote, are skipped)."""
    return list(csv.DictReader(line for line in lines if line.startswith('"')))


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
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flat(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def assert_same_record(recorded: dict, now: dict):
    """A committed benchmark record is what its script computes now: the same keys at every level, floats to
    1e-5 relative (the model computes in float32, whose last digits differ between numpy builds, and an error of a
    few percent carries a prediction's relative difference 30-fold), everything else equal."""
    import pytest

    recorded, now = dict(_flat(recorded)), dict(_flat(now))
    assert recorded.keys() == now.keys()
    for k, v in now.items():
        assert recorded[k] == (pytest.approx(v, rel=1e-5) if isinstance(v, float) else v), k


def on_h100(kernel, sh):
    """(H100 spec, the kernel, the tiles it launches for problem ``sh``)."""
    spec = gpu.resolve("h100")
    k = get(kernel)
    return spec, k, k.resolve(spec, sh, k.default_tiles(sh, spec))
