"""On a machine with CUDA, torch and nvcc: the tensor-core backward fa2_tc_bwd builds and its dQ, dK, dV match float64
autograd for every compiled instance (fp16 and bf16, causal and not, grouped K/V heads, Nq != Nk both ways, ragged
lengths), write every output element and nothing past it. The cases and tolerances are fa2_tc_bwd_check.py's.
Skipped elsewhere (CI has no GPU)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


def _check_module():
    path = Path(__file__).with_name("fa2_tc_bwd_check.py")
    spec = importlib.util.spec_from_file_location("fa2_tc_bwd_check", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def chk():
    return _check_module()


@pytest.fixture(scope="module")
def ext(chk):
    return chk.build()


def test_backward_matches_float64_autograd(chk, ext):
    rows, fails = chk.check(ext, seed=123)
    assert rows, "no instance was checked"
    assert not fails, "; ".join(f"{r[0]} {r[1]} causal={r[2]} {r[3]}: {', '.join(w)}" for r, w in fails[:5])


# The refusals run in a child process: on the lent H200 (torch 2.11), the first refused call (a failing TORCH_CHECK)
# segfaulted inside the pytest process, while the kernels themselves ran there under pytest and under
# compute-sanitizer without error; the cause was not found. A crash then fails this test instead of the session.
_REFUSALS = r"""
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("chk", sys.argv[1])
chk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chk)
ext = chk.build()
d = 64
q = torch.randn(1, 4, 128, d, device="cuda", dtype=torch.float16)
lse = torch.zeros(1, 4, 128, device="cuda")
acc = torch.zeros(q.shape, device="cuda")
inst = next(tuple(i) for i in ext.fa2_tc_bwd_instances() if i[0] == d)
def refused(match, k, *args):
    try:
        ext.fa2_tc_backward(q, k, k, q, q, lse, q.clone(), k.clone(), k.clone(), *args)
    except RuntimeError as e:
        assert match in str(e), (match, str(e))
        return
    raise AssertionError("not refused: " + match)
k3 = torch.randn(1, 3, 128, d, device="cuda", dtype=torch.float16)  # 4 % 3 != 0
k2 = torch.randn(1, 2, 128, d, device="cuda", dtype=torch.float16)
refused("multiple", k3, acc, lse.clone(), *inst[1:], False)
refused("no compiled instance", k2, acc, lse.clone(), 48, 48, 3, False)
refused("dQ_accum", k2, acc.half(), lse.clone(), *inst[1:], False)
print("REFUSED-OK")
"""


def test_refuses_uncompiled_instances_and_bad_shapes(ext):
    path = Path(__file__).with_name("fa2_tc_bwd_check.py")
    r = subprocess.run([sys.executable, "-c", _REFUSALS, str(path)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "REFUSED-OK" in r.stdout, f"rc {r.returncode}: {(r.stdout + r.stderr)[-2000:]}"
