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

SOURCES = ["binding.cpp", "fa1.cu", "fa2.cu", "fa2_tc.cu", "fa2_tc_bwd.cu", "probe.cu"]
HEADERS = ["probe_mma.cuh", "sm_timer.cuh"]     # included by the sources: part of the build's hash
CUDA_FLAGS = ["-O3", "-lineinfo"]
STALE_LOCK_S = 600   # a build of these sources takes well under this


def csrc_dir() -> Path:
    return Path(str(resources.files("perfmodel.kernels"))) / "csrc"


def require_torch():
    try:
        import torch
    except ImportError:
        raise InputError("torch is not installed; install the GPU extra: pip install 'perfmodel[gpu]'") from None
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


_MODULE = None


def load(verbose: bool = False):
    """Build (or reuse) and import the kernels' extension module."""
    global _MODULE
    if _MODULE is not None:
        return _MODULE
    torch = require_torch()
    check_toolchain(torch)
    from torch.utils import cpp_extension

    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}.{minor}"
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    src = [csrc_dir() / s for s in SOURCES]
    h = hashlib.sha256()
    for p in src + [csrc_dir() / s for s in HEADERS]:
        h.update(p.read_bytes())
    h.update(" ".join(CUDA_FLAGS + [arch, torch.__version__]).encode())
    name = f"perfmodel_kernels_{h.hexdigest()[:12]}"
    root = Path(os.environ.get("PERFMODEL_BUILD_DIR", Path.home() / ".cache" / "perfmodel"))
    build_dir = root / name
    build_dir.mkdir(parents=True, exist_ok=True)
    _clear_stale_lock(build_dir)
    try:
        _MODULE = cpp_extension.load(name=name, sources=[str(p) for p in src], extra_cuda_cflags=CUDA_FLAGS,
                                     build_directory=str(build_dir), verbose=verbose)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"building the CUDA kernels failed: {first} (rerun with --verbose for the log)") from None
    return _MODULE


def load_single(source: str, tag: str, deps=(), arch: str | None = None):
    """Build (or reuse) one csrc source as its own extension module, for the scripts whose probes and traces stay
    out of the kernels' module (scripts/probe_wgmma.py, probe_dispatch.py, trace_fa2_tc.py). ``deps``: csrc files
    it includes (part of the build's hash); ``arch``: a TORCH_CUDA_ARCH_LIST value (e.g. "9.0a"), else this GPU's.
    Returns (torch, toolchain facts, module)."""
    torch = require_torch()
    tool = check_toolchain(torch)
    from torch.utils import cpp_extension

    if arch:
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    paths = [csrc_dir() / source, *(csrc_dir() / d for d in deps)]
    h = hashlib.sha256(b"".join(p.read_bytes() for p in paths) + torch.__version__.encode()).hexdigest()[:12]
    root = Path(os.environ.get("PERFMODEL_BUILD_DIR", Path.home() / ".cache" / "perfmodel")) / f"{tag}_{h}"
    root.mkdir(parents=True, exist_ok=True)
    _clear_stale_lock(root)
    ext = cpp_extension.load(name=f"perfmodel_{tag}_{h}", sources=[str(paths[0])], build_directory=str(root),
                             extra_cuda_cflags=["-O3", "-std=c++17", f"-I{csrc_dir()}"], verbose=False)
    return torch, tool, ext
