"""The one problem type: (B, H, Hkv, Nq, Nk, d, dtype, causal, mode) through the API, sweeps, the CSV schema, the
training split and the GPU specs; what a kernel lacks is one line naming the kernels that have it."""

import json

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

import toy_kernel  # noqa: F401  (registers the guide's toy kernels)
from perfmodel import api
from perfmodel.cli import main
from perfmodel.errors import InputError
from perfmodel.evaluation import dataset, fit
from perfmodel.shape import AttentionShape, make_shape


def test_n_sets_both_lengths_and_hkv_defaults_to_h():
    s = make_shape(2, 8, 512, 64, "fp16")
    assert (s.Nq, s.Nk, s.Hkv, s.mode) == (512, 512, 8, "fwd")
    s = make_shape(2, 8, 512, 64, "fp16", Nq=1)
    assert (s.Nq, s.Nk) == (1, 512)
    with pytest.raises(InputError, match="give the sequence length"):
        make_shape(2, 8, None, 64, Nk=512)


def test_each_mode_counts_its_flops_and_its_tensors():
    s = make_shape(1, 32, None, 128, "bf16", Hkv=8, Nq=16, Nk=4096)
    q, kv = 32 * 16 * 128 * 2, 8 * 4096 * 128 * 2
    assert s.tensor_bytes() == 2 * q + 2 * kv
    assert s.with_mode("bwd").tensor_bytes() == 4 * q + 4 * kv + 32 * 16 * 4
    assert s.with_mode("fwd_bwd").useful_flops() == 3.5 * s.forward_flops()
    assert s.forward_flops() == 4 * 32 * 16 * 4096 * 128


@pytest.mark.parametrize("text", ["6_4", "64.000000000000001", "0x40", "1.5", "", "nan"])
def test_sizes_are_read_as_written(text):
    with pytest.raises(InputError, match="must be an integer"):
        make_shape(1, 1, text, 64)


def test_a_sweep_vectorises_over_heads_and_both_lengths():
    r = api.sweep("h100", "toy-gqa", H=32, Hkv=[8, 32, 5], Nq=[1, 16], Nk=[1024, 4096], d=64)
    assert r.shape_axes == ("B", "H", "Hkv", "Nq", "Nk", "d")
    assert r.time_s.shape[:6] == (1, 1, 3, 2, 2, 1)
    assert np.isinf(r.time_s[:, :, 2]).all() and np.isfinite(r.time_s[:, :, :2]).all()   # 32 % 5 != 0: no fit
    one = api.predict("h100", "toy-gqa", H=32, Hkv=8, Nq=16, Nk=4096, d=64, Br=64, Bc=64)
    tile = tuple(r.values[a].index(64) for a in r.tile_axes)
    assert r.time_s[(0, 0, 0, 1, 1, 0) + tile] == pytest.approx(one.time_s, rel=1e-6)
    plain = api.sweep("h100", "toy", N=[512, 1024], d=64)
    assert plain.shape_axes == ("B", "H", "N", "d") and plain.time_s.shape[2] == 2


def test_a_square_kernel_refuses_other_workloads_in_one_line():
    r = CliRunner().invoke(main, ["predict", "--gpu", "h100", "--kernel", "fa2", "--B", "2", "--H", "32",
                                  "--Hkv", "8", "--Nq", "1", "--Nk", "4096", "--d", "128"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "fa2 does not run grouped K/V heads" in r.output and "kernels that do: fa2_tc, sdpa-flash" in r.output
    with pytest.raises(InputError, match="does not run mode bwd"):
        api.predict(gpu="h200", kernel="fa1", B=1, H=32, N=4096, d=64, mode="bwd")
    with pytest.raises(InputError, match="Nq != Nk"):
        api.predict(gpu="h200", kernel="fa1", B=1, H=32, Nq=1, Nk=32768, d=64)


def test_the_csv_reads_both_schemas_and_keeps_the_old_split(tmp_path):
    """A file of the one-length schema reads as Hkv = H, Nq = Nk = N, mode fwd, and its rows keep their training
    split; a file of the new columns reads its own; a plain new row splits as its one-length twin."""
    old, new = tmp_path / "old.csv", tmp_path / "new.csv"
    with old.open("w") as f:
        f.write("kernel,B,H,N,d,Br,Bc,threads,pad,dtype,causal,median_ms,gpu_name\n")
        f.write("toy-gqa,1,8,512,64,64,64,64,0,fp32,0,1.0,NVIDIA H100 80GB HBM3\n")
    with new.open("w") as f:
        f.write("kernel,B,H,Hkv,Nq,Nk,d,Br,Bc,threads,pad,dtype,causal,mode,median_ms,gpu_name\n")
        f.write("toy-gqa,1,8,8,512,512,64,64,64,64,0,fp32,0,fwd,1.0,NVIDIA H100 80GB HBM3\n")
        f.write("toy-gqa,1,8,2,1,4096,64,64,64,64,0,fp32,0,fwd,1.0,NVIDIA H100 80GB HBM3\n")
    (a,) = dataset.load([old])
    assert (a.cols["Hkv"][0], a.cols["Nq"][0], a.cols["Nk"][0], a.mode[0]) == (8, 512, 512, "fwd")
    (b,) = dataset.load([new])
    assert b.cols["Hkv"].tolist() == [8, 2] and b.cols["Nq"].tolist() == [512, 1]
    assert dataset.split_key(a.rows[0]) == dataset.split_key(b.rows[0]) == "toy-gqa,1,8,512,64,64,64,64,0"
    assert fit.in_training_split(a.rows[0]) == fit.in_training_split(b.rows[0])
    assert dataset.split_key(b.rows[1]) == "toy-gqa,1,8,2,1,4096,64,64,64,64,0,1,fwd"


def test_the_committed_rows_keep_their_split():
    """The split of every committed row is the hash of its one-length key, as the calibrations record it."""
    import zlib

    for path in ("examples/measurements/h100/fa2_tc.csv", "examples/measurements/h200/sdpa-flash.csv"):
        (ms,) = dataset.load([path])
        for r in ms.rows[:200]:
            key = ",".join(str(r[k]).strip() for k in ("kernel", "B", "H", "N", "d", "Br", "Bc", "threads", "pad"))
            assert fit.in_training_split(r) == (zlib.crc32(key.encode()) % 4 == 0)


def _spec(tmp_path, **change):
    raw = yaml.safe_load(open("gpus/h100-sxm.yaml"))
    raw.update(change, name="my test GPU", aliases=[])
    p = tmp_path / "mine.yaml"
    p.write_text(yaml.safe_dump(raw))
    return str(p)


def test_a_newer_compute_capability_is_not_taken_for_an_older_one(tmp_path):
    """Capabilities compare as numbers: 10.0 is not 'older than sm_80' (it was, as strings); without constants of
    its own it is predicted on the nearest architecture's, and says so."""
    p = api.predict(_spec(tmp_path, compute_capability="10.0"), "fa2_tc", B=1, H=16, N=4096, d=128)
    assert p.time_s > 0
    assert "sm_90 constants assumed for sm_100" in p.prediction.constants


def test_an_architecture_that_is_not_nvidias_is_refused(tmp_path):
    for change in (dict(compute_capability="9.4"), dict(warp_size=64, max_warps_per_sm=32)):
        r = CliRunner().invoke(main, ["predict", "--gpu", _spec(tmp_path, **change), "--N", "512"])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
        assert "NVIDIA" in r.output, r.output


def test_a_misspelt_kernel_is_answered_with_the_name():
    r = CliRunner().invoke(main, ["predict", "--gpu", "h100", "--kernel", "sdpa_flash", "--N", "512"])
    assert r.exit_code == 2 and "did you mean 'sdpa-flash'" in r.output


def test_predict_json_gives_the_problem_and_what_it_achieves():
    r = CliRunner().invoke(main, ["predict", "--gpu", "h100", "--kernel", "fa2_tc", "--B", "4", "--H", "16",
                                  "--N", "4096", "--d", "128", "--dtype", "bf16", "--causal", "--json"])
    d = json.loads(r.stdout)
    assert {k: d["params"][k] for k in ("Hkv", "Nq", "Nk", "mode")} == dict(Hkv=16, Nq=4096, Nk=4096, mode="fwd")
    a = d["achieved"]
    assert a["tflops"] == pytest.approx(d["useful_flops"] / d["time_s"] / 1e12)
    assert 0 < a["tflops_share"] < 1 and 0 < a["gbps_share"] < 1
