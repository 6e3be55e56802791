"""On a machine with CUDA, torch and nvcc: fa2_tc's inference forward (grouped K/V heads, Nq != Nk with
bottom-right causal, LSE, split-KV with its combine kernel) matches a float64 reference on fresh random inputs
with a poisoned output, and the binding refuses bad arguments. The cases and checks are those of
fa2_tc_infer_check.py beside this file (its --quick set). Skipped elsewhere (CI has no GPU)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa2_tc_infer_check as chk  # noqa: E402


@pytest.fixture(scope="module")
def ext():
    return chk.load()


def test_cases_match_reference(ext):
    failures = []
    for label, kw in chk.cases(quick=True, seed=59):
        r = chk.run_case(ext, **kw)
        if not r["ok"]:
            failures.append(f"{label} {kw}: {r['note']}")
    assert not failures, "\n".join(failures)


def test_refusals(ext):
    res = chk.check_errors_isolated()     # in a child process: see check_errors_isolated
    assert all(ok for _, ok in res), res
