"""JIT build of the bundled CUDA sources through torch.utils.cpp_extension, with the checks users need:
torch, a CUDA device, nvcc and ninja present; torch's CUDA major version equal to nvcc's; a stale build lock
(left by a killed build) detected and cleared; one cached build per source hash and architecture."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

from perfmodel.errors import InputError

SOURCES = ["binding.cpp", "fa1.cu", "fa2.cu", "fa2_tc.cu", "fa2_tc_bwd.cu"]     # the kernels' module, in csrc_dir()
HEADERS = ["binding_check.h", "fa2_tc_ptx.cuh", "sm_timer.cuh"]     # included by the sources: part of the build's hash
PROBE_SOURCES = ["binding.cpp", "probe.cu"]     # `perfmodel probe`'s microbenchmarks, in probe_csrc_dir()
PROBE_HEADERS = ["probe_mma.cuh"]               # and the kernels' sm_timer.cuh (csrc_dir() is on its include path)
CUDA_FLAGS = ["-O3", "-lineinfo"]
STALE_LOCK_S = 600   # a build of these sources takes well under this


def csrc_dir() -> Path:
    """The kernels' CUDA sources."""
    return Path(str(resources.files("perfmodel.kernels"))) / "csrc"


def probe_csrc_dir() -> Path:
    """The CUDA sources of `perfmodel probe`'s microbenchmarks."""
    return Path(str(resources.files("perfmodel.measure"))) / "probe_csrc"


def require_torch():
    try:
        import torch
    except ImportError:
        raise InputError('torch is not installed; install the GPU extra: pip install -e ".[gpu]" (in the perfmodel checkout)') from None
    if not torch.cuda.is_available():
        raise InputError("no CUDA device is available to torch")
    return torch


def nvcc_version() -> str:
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = shutil.which("nvcc") or (str(Path(cuda_home) / "bin" / "nvcc") if cuda_home else None)
    if nvcc is None and Path("/usr/local/cuda/bin/nvcc").exists():
        nvcc = "/usr/local/cuda/bin/nvcc"
    if nvcc is None or not Path(nvcc).exists():
        raise InputError("nvcc not found (put the CUDA toolkit's bin on PATH or set CUDA_HOME)")
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+\.\d+)", out)
    if not m:
        raise InputError(f"cannot read the version of {nvcc}")
    return m.group(1)


def check_toolchain(torch) -> dict:
    nvcc = nvcc_version()
    if shutil.which("ninja") is None:
        raise InputError("ninja not found; torch's JIT build needs it (pip install ninja)")
    tcuda = torch.version.cuda
    if tcuda is None:
        raise InputError("this torch build has no CUDA support")
    if tcuda.split(".")[0] != nvcc.split(".")[0]:
        raise InputError(f"torch was built with CUDA {tcuda} but nvcc is {nvcc}; the major versions must match")
    return {"nvcc": nvcc, "torch_cuda": tcuda}


def _clear_stale_lock(build_dir: Path) -> None:
    lock = build_dir / "lock"
    if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_S:
        print(f"perfmodel: removing a stale build lock left by an interrupted build: {lock}", file=sys.stderr)
        lock.unlink(missing_ok=True)


_MODULES: dict = {}


def _load_module(prefix: str, sources: list, headers: list, include_dirs: list, what: str, verbose: bool):
    """Build (or reuse) and import one extension module of ``sources`` (``headers``: files they include, part of
    the build's hash), for this GPU's architecture, named ``prefix``_<hash>."""
    if prefix in _MODULES:
        return _MODULES[prefix]
    torch = require_torch()
    check_toolchain(torch)
    from torch.utils import cpp_extension

    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}.{minor}"
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    h = hashlib.sha256()
    for p in list(sources) + list(headers):
        h.update(p.read_bytes())
    h.update(" ".join(CUDA_FLAGS + [arch, torch.__version__]).encode())
    name = f"{prefix}_{h.hexdigest()[:12]}"
    root = Path(os.environ.get("PERFMODEL_BUILD_DIR", Path.home() / ".cache" / "perfmodel"))
    build_dir = root / name
    build_dir.mkdir(parents=True, exist_ok=True)
    _clear_stale_lock(build_dir)
    try:
        module = cpp_extension.load(name=name, sources=[str(p) for p in sources], extra_cuda_cflags=CUDA_FLAGS,
                                    extra_include_paths=[str(d) for d in include_dirs],
                                    build_directory=str(build_dir), verbose=verbose)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"building the {what} failed: {first} (rerun with --verbose for the log)") from None
    _MODULES[prefix] = module
    return module


def load(verbose: bool = False):
    """Build (or reuse) and import the kernels' extension module."""
    return _load_module("perfmodel_kernels", [csrc_dir() / s for s in SOURCES], [csrc_dir() / s for s in HEADERS],
                        [], "CUDA kernels", verbose)


def load_probe(verbose: bool = False):
    """Build (or reuse) and import the extension module of `perfmodel probe`'s microbenchmarks (probe_dot,
    probe_chase, probe_mma, ...), apart from the kernels'."""
    probe = probe_csrc_dir()
    return _load_module("perfmodel_probe", [probe / s for s in PROBE_SOURCES],
                        [probe / s for s in PROBE_HEADERS] + [csrc_dir() / s for s in HEADERS], [csrc_dir()],
                        "probe's microbenchmarks", verbose)


def load_single(source, tag: str, deps=(), arch: str | None = None):
    """Build (or reuse) one CUDA source as its own extension module: `perfmodel probe`'s shared-read launch
    (probe_csrc/probe_share.cu), and the probes and traces kept out of the other modules. ``source`` and ``deps``
    (files it includes, part of the build's hash) are paths; the folders that hold them are on the include path.
    ``arch``: a TORCH_CUDA_ARCH_LIST value (e.g. "9.0a"), else this GPU's. Returns (torch, toolchain facts,
    module)."""
    torch = require_torch()
    tool = check_toolchain(torch)
    from torch.utils import cpp_extension

    # the target named on nvcc's line: the extension builder adds none of its own once any flag contains "arch",
    # which an include path under research/ does, and nvcc then built for its default (sm_75 with CUDA 13), where a
    # kernel guarded by __CUDA_ARCH__ >= 800 ran an empty body
    arch = arch or "{}.{}".format(*torch.cuda.get_device_capability())
    sm = arch.replace(".", "")
    target = f"-gencode=arch=compute_{sm},code=sm_{sm}"
    paths = [Path(source), *(Path(d) for d in deps)]
    include = [f"-I{d}" for d in dict.fromkeys(p.parent for p in paths)]
    h = hashlib.sha256(b"".join(p.read_bytes() for p in paths) + (target + torch.__version__).encode()).hexdigest()[:12]
    root = Path(os.environ.get("PERFMODEL_BUILD_DIR", Path.home() / ".cache" / "perfmodel")) / f"{tag}_{h}"
    root.mkdir(parents=True, exist_ok=True)
    _clear_stale_lock(root)
    ext = cpp_extension.load(name=f"perfmodel_{tag}_{h}", sources=[str(paths[0])], build_directory=str(root),
                             extra_cuda_cflags=["-O3", "-std=c++17", target, *include], verbose=False)
    return torch, tool, ext
