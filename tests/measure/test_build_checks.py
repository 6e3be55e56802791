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
