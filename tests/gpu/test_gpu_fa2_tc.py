"""On a machine with CUDA, torch and nvcc: the tensor-core kernel fa2_tc builds and matches a float64 reference
(fp16 and bf16, causal and not, N not a multiple of the tiles), writes every output element and nothing past it,
and refuses instances that are not compiled. Skipped elsewhere (CI has no GPU)."""

import math

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]

import torch.nn.functional as F  # noqa: E402

from perfmodel.measure import build  # noqa: E402

TOL = {torch.float16: 2e-3, torch.bfloat16: 1.5e-2}
GUARD = 1024
FA2_DEFAULTS = [(64, 128, 128, 4), (128, 128, 64, 4)]


@pytest.fixture(scope="module")
def ext():
    return build.load()


def _guarded(shape, dtype, gen=None):
    n = math.prod(shape)
    buf = torch.full((n + GUARD,), float("nan"), dtype=dtype, device="cuda")
    if gen is not None:
        buf[:n] = torch.randn(n, generator=gen, device="cuda").to(dtype)
    return buf[:n].view(shape), buf


def _run_and_check(ext, inst, dtype, causal, B, H, N, seed):
    d, br, bc, w = inst
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    q, k, v = (_guarded((B, H, N, d), dtype, g)[0] for _ in range(3))
    o, obuf = _guarded((B, H, N, d), dtype)
    ext.fa2_tc_forward(q, k, v, o, br, bc, w, causal)
    torch.cuda.synchronize()
    assert torch.isnan(obuf[o.numel():]).all(), "wrote past the output"
    assert not torch.isnan(o).any(), "left output elements unwritten"
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    err = float(torch.linalg.vector_norm(o.double() - ref) / torch.linalg.vector_norm(ref))
    assert err <= TOL[dtype], f"rel err {err:.2e} > {TOL[dtype]} for {inst} {dtype} causal={causal} N={N}"
    return err


def test_instances_cover_fa2_defaults(ext):
    insts = [tuple(i) for i in ext.fa2_tc_instances()]
    for inst in FA2_DEFAULTS:
        assert inst in insts
    assert len({i[0] for i in insts}) >= 2 and len(insts) >= 12


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("N", [1, 77, 200, 256])
def test_default_tiles_match_float64_reference(ext, dtype, causal, N):
    for i, inst in enumerate(FA2_DEFAULTS):
        _run_and_check(ext, inst, dtype, causal, 2, 3, N, seed=100 * N + 10 * i + causal)


@pytest.mark.parametrize("causal", [False, True])
def test_every_instance_matches_reference(ext, causal):
    for i, inst in enumerate(ext.fa2_tc_instances()):
        for dtype in (torch.float16, torch.bfloat16):
            _run_and_check(ext, tuple(inst), dtype, causal, 1, 2, 131, seed=7 * i + causal)


def test_attributes_and_occupancy(ext):
    for d, br, bc, w in FA2_DEFAULTS:
        for dtype in (0, 1, "fp16", "bf16"):
            a = ext.fa2_tc_attributes(d, br, bc, w, dtype)
            assert 0 < a["regs_per_thread"] <= 255
            assert a["dynamic_smem_bytes"] == (br + 2 * bc) * d * 2
            assert ext.fa2_tc_max_blocks_per_sm(d, br, bc, w, dtype) >= 1


def test_refuses_unknown_instance_and_bad_tensors(ext):
    q = torch.randn(1, 1, 16, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(RuntimeError, match="no compiled instance"):
        ext.fa2_tc_forward(q, q, q, torch.empty_like(q), 96, 64, 4, False)
    with pytest.raises(RuntimeError):
        ext.fa2_tc_forward(q.float(), q.float(), q.float(), torch.empty_like(q.float()), 128, 128, 4, False)
    with pytest.raises(RuntimeError):
        ext.fa2_tc_forward(q, q, q.to(torch.bfloat16), torch.empty_like(q), 128, 128, 4, False)
    with pytest.raises(RuntimeError):
        ext.fa2_tc_forward(q.transpose(2, 3), q, q, torch.empty_like(q), 128, 128, 4, False)
