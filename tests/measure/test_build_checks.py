"""The toolchain checks of the JIT build, without a GPU: stale locks, CUDA version agreement, missing tools."""

import os
import time
import types

import pytest

from perfmodel.errors import InputError
from perfmodel.measure import build


def test_stale_lock_is_removed_and_a_fresh_one_kept(tmp_path, capsys):
    lock = tmp_path / "lock"
    lock.write_text("")
    build._clear_stale_lock(tmp_path)
    assert lock.exists()                                   # a build may be running: leave it
    old = time.time() - build.STALE_LOCK_S - 5
    os.utime(lock, (old, old))
    build._clear_stale_lock(tmp_path)
    assert not lock.exists()
    assert "stale build lock" in capsys.readouterr().err


def _fake_torch(cuda):
    return types.SimpleNamespace(version=types.SimpleNamespace(cuda=cuda))


def test_cuda_major_versions_must_agree(monkeypatch):
    monkeypatch.setattr(build, "nvcc_version", lambda: "13.0")
    monkeypatch.setattr(build.shutil, "which", lambda name: "/usr/bin/" + name)
    assert build.check_toolchain(_fake_torch("13.0"))["nvcc"] == "13.0"
    with pytest.raises(InputError, match="built with CUDA 12.4 but nvcc is 13.0"):
        build.check_toolchain(_fake_torch("12.4"))
    with pytest.raises(InputError, match="no CUDA support"):
        build.check_toolchain(_fake_torch(None))


def test_missing_ninja_and_nvcc(monkeypatch):
    monkeypatch.setattr(build, "nvcc_version", lambda: "13.0")
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    with pytest.raises(InputError, match="ninja not found"):
        build.check_toolchain(_fake_torch("13.0"))
    monkeypatch.undo()
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(build.Path, "exists", lambda self: False)
    with pytest.raises(InputError, match="nvcc not found"):
        build.nvcc_version()


def _fake_extension_builder(monkeypatch, capability=(9, 0)):
    """build.load_single against a fake torch and cpp_extension; returns the keyword arguments load() got."""
    import sys

    got = {}
    ext = types.SimpleNamespace(load=lambda **kw: got.update(kw) or "module")
    fake = types.SimpleNamespace(__version__="2.11.0", version=types.SimpleNamespace(cuda="13.0"),
                                 cuda=types.SimpleNamespace(get_device_capability=lambda: capability),
                                 utils=types.SimpleNamespace(cpp_extension=ext))
    monkeypatch.setattr(build, "require_torch", lambda: fake)
    monkeypatch.setattr(build, "check_toolchain", lambda torch: {"nvcc": "13.0"})
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "torch.utils", fake.utils)
    monkeypatch.setitem(sys.modules, "torch.utils.cpp_extension", ext)
    return got


def test_single_source_builds_name_this_gpus_target(monkeypatch, tmp_path):
    # the extension builder adds no target once a flag contains "arch" (an include path under research/ does): nvcc's
    # default (sm_75) compiled a kernel guarded by __CUDA_ARCH__ >= 800 to an empty body
    monkeypatch.setenv("PERFMODEL_BUILD_DIR", str(tmp_path))
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k() {}\n")
    got = _fake_extension_builder(monkeypatch)
    build.load_single(src, "t")
    assert "-gencode=arch=compute_90,code=sm_90" in got["extra_cuda_cflags"]
    build.load_single(src, "t", arch="9.0a")
    assert "-gencode=arch=compute_90a,code=sm_90a" in got["extra_cuda_cflags"]
