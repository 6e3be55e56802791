"""On a machine with CUDA, torch and nvcc: the bundled kernels build, are correct, and measure resumes.
Skipped elsewhere (CI has no GPU)."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]

from perfmodel import api  # noqa: E402
from perfmodel.measure import build, grid, runner  # noqa: E402


def _config(kernel, B, H, N, d, Br, Bc):
    k, shape, tiles = api.configure(kernel, B, H, N, d, Br=Br, Bc=Bc)
    return grid.Config(kernel, shape, tiles)


@pytest.mark.parametrize("kernel,args", [("fa1", (1, 2, 77, 24, 32, 20)), ("fa1", (2, 1, 40, 64, 16, 64)),
                                         ("fa2", (1, 2, 77, 24, 32, 20)), ("fa2", (2, 1, 130, 128, 64, 32))])
def test_kernels_match_float64_reference(kernel, args):
    ext = build.load()
    cfg = _config(kernel, *args)
    r = api.configure(kernel, *args[:4], Br=args[4], Bc=args[5])[0].runner(torch, ext, cfg.shape, cfg.tiles)
    for seed in (1, 2):
        assert runner.check_correct(torch, r, seed) <= r.tolerance


def test_measure_appends_and_resumes(tmp_path):
    cfgs = [_config("fa2", 1, 1, n, 32, 32, 32) for n in (64, 96)]
    out = tmp_path / "m.csv"
    s1 = runner.measure(cfgs, out, api.load_gpu("h100"))
    s2 = runner.measure(cfgs, out, api.load_gpu("h100"))
    assert s1["measured"] == 2 and s2["measured"] == 0 and s2["already"] == 2
    assert len(runner.read_rows(out)) == 2
