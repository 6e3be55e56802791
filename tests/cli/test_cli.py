"""The command line: output, --json keys, and one-line errors with exit code 2 for bad input."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfmodel.cli import main

PRED = ["predict", "--gpu", "rtx3090", "--N", "512", "--Br", "32", "--Bc", "32"]


def run(args):
    r = CliRunner().invoke(main, args, env={"NO_COLOR": "1", "COLUMNS": "140"})
    return r.exit_code, r.output, r.stderr if hasattr(r, "stderr") else ""


def test_predict_table():
    code, out, _ = run(PRED)
    assert code == 0
    for needle in ("fa1 on NVIDIA GeForce RTX 3090", "DRAM bytes", "L2 bytes", "shared-memory bytes",
                   "FLOP/byte", "predicted time:", "bound:", "roofline time:", "bank conflicts"):
        assert needle in out


def test_readme_quick_start_output_is_what_predict_prints():
    """The README's quick-start block shows this command's output: its work, launch, resource, time and basis lines
    are what predict prints now (the block had gone stale once)."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("```text\nfa1 on NVIDIA GeForce RTX 3090")
    block = readme[start + len("```text\n"):readme.index("```", start + 7)]
    code, out, _ = run(PRED)
    assert code == 0
    keys = ("FLOPs", "DRAM bytes", "L2 bytes", "shared", "launch:", "latency", "smem", "issue", "fp32", "sfu",
            "l2 ", "dram ", "predicted time:", "constants:", "note:", "not measured", "measured on")
    def pick(text):
        """The key lines, each with the lines the README wraps under it (indented two spaces) joined back."""
        lines = []
        for l in text.splitlines():
            if l.startswith("  ") and not l.startswith("   ") and lines:
                lines[-1] += " " + l.strip()
            else:
                lines.append(l)
        return [" ".join(l.split()) for l in lines if l.strip().startswith(keys)]

    printed = " ".join(out.split())                # the terminal wraps long lines where it likes
    shown = pick(block)
    assert len(shown) == len(pick(out)) and all(line in printed for line in shown), (shown, printed)


@pytest.mark.parametrize("extra", [[], ["--model", "seed"], ["--kernel", "fa2"], ["--kernel", "fa2", "--pad", "0"]])
def test_predict_json_keys(extra):
    code, out, _ = run(PRED + ["--json"] + extra)
    assert code == 0
    d = json.loads(out)
    for k in ("gpu", "kernel", "params", "flops", "bytes", "smem_wavefronts", "time_s", "times_s", "bound",
              "roofline_time_s"):
        assert k in d
    assert set(d["bytes"]) >= {"dram", "l2", "smem"}
    assert d["time_s"] > 0 and d["bound"] in d["times_s"]
    assert d["time_s"] >= d["roofline_time_s"]


def test_predict_seed_matches_the_seed_module():
    _, out, _ = run(PRED + ["--json", "--model", "seed"])
    d = json.loads(out)
    assert d["model"] == "seed" and d["bound"] == "l1"


def test_gpus_list_and_show():
    code, out, _ = run(["gpus"])
    assert code == 0 and "h100-sxm" in out and "rtx3090" in out
    code, out, _ = run(["gpus", "show", "h100"])
    assert code == 0 and "sm_count" in out and "132" in out and "sources:" in out
    code, out, _ = run(["gpus", "--json"])
    assert {g["key"] for g in json.loads(out)} >= {"h100-sxm", "gtx1080"}


@pytest.mark.parametrize("args,needle", [
    (["--N", "0"], "N must be positive, got 0"),
    (["--N", "-5"], "N must be positive, got -5"),
    (["--N", "abc"], "N must be an integer, got 'abc'"),
    (["--N", "1.5"], "N must be an integer, got '1.5'"),
    (["--N", "9223372036854775808"], "N = 9223372036854775808 is too large"),
    (["--B", "0"], "B must be positive"),
    (["--d", "0"], "d must be positive"),
    (["--Br", "128", "--Bc", "128", "--d", "256"], "needs 458752 B of shared memory per block; NVIDIA GeForce RTX "
                                                   "3090 allows at most 101376 B"),
    (["--Br", "2048"], "fa1: 2048 threads per block; NVIDIA GeForce RTX 3090 allows at most 1024"),
    (["--kernel", "fa2", "--threads", "2048"], "fa2: 2048 threads per block"),
    (["--threads", "64"], "kernel fa1 has no tile parameter 'threads'"),
    (["--regs", "0"], "regs must be positive"),
    (["--regs", "300"], "allows at most 255 per thread"),
    (["--kernel", "fa2", "--threads", "100"], "multiple of 32"),
    (["--kernel", "fa3"], "unknown kernel 'fa3'; known: fa1, fa2"),
    (["--dtype", "bf16"], "fp32 only"),
    (["--gpu", "v100"], "unknown GPU 'v100'; known:"),
    (["--gpu", "/nonexistent/x.yaml"], "GPU spec file not found: /nonexistent/x.yaml"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    base = {"--gpu": "rtx3090", "--N": "512", "--Br": "32", "--Bc": "32"}
    extra = []
    i = 0
    while i < len(args):
        if args[i] in base:
            base[args[i]] = args[i + 1]
        else:
            extra += args[i:i + 2]
        i += 2
    argv = ["predict"] + [x for kv in base.items() for x in kv] + extra
    code, out, _ = run(argv)
    assert code == 2, out
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], out
    assert "Traceback" not in out


def test_malformed_yaml_is_one_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: [oops\n")
    code, out, _ = run(["predict", "--gpu", str(p), "--N", "64", "--Br", "16", "--Bc", "16"])
    assert code == 2 and out.strip().startswith("error: ") and "malformed YAML" in out and len(out.strip().splitlines()) == 1


def test_a_measured_row_the_kernel_cannot_run_is_refused(tmp_path):
    """A row whose tiles the kernel cannot run (no compiled instance: not a measurement of it) is a one-line error
    naming its file and line, not a prediction scored against it."""
    src = Path("examples/measurements/h100/fa2_tc.csv").read_text().splitlines()
    cells = src[1].split(",")
    cells[5] = "7"                                                  # Br
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([src[0], src[1], ",".join(cells)]) + "\n")
    code, out, _ = run(["validate", "--split", "all", str(bad)])
    assert code == 2 and out.startswith("error: 1 of 2 fa2_tc rows cannot run") and f"{bad}, line 3" in out, out
    assert "no compiled instance for Br=7" in out and len(out.strip().splitlines()) == 1


def test_unreadable_yaml_is_one_line(tmp_path):
    p = tmp_path / "dir.yaml"
    p.mkdir()
    code, out, _ = run(["gpus", "show", str(p)])
    assert code == 2 and out.startswith("error: GPU spec file") and "is a folder" in out


def test_missing_option_is_one_line():
    """It names the option (click 8.3+ took an explicit default of None as given and let --N through as None)."""
    code, out, _ = run(["predict", "--gpu", "h100", "--Br", "32", "--Bc", "32"])
    assert code == 2 and out.startswith("error: ") and len(out.strip().splitlines()) == 1
    assert "--N" in out


def test_measure_without_torch_or_gpu_is_one_line(tmp_path):
    code, out, _ = run(["measure", "--kernel", "fa1", "--grid", "examples/grids/seed.yaml", "--out",
                        str(tmp_path / "x.csv")])
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        pytest.skip("a GPU is present")
    assert code == 2 and out.startswith("error: ") and len(out.strip().splitlines()) == 1


@pytest.mark.parametrize("args,needle", [
    (["predict", "--gpu", "gtx1080", "--kernel", "fa2_tc", "--dtype", "fp16", "--N", "512", "--d", "128"],
     "needs fp16/bf16 tensor cores"),
    (["predict", "--gpu", "a100", "--kernel", "sdpa-cudnn", "--dtype", "fp16", "--N", "512", "--d", "64"],
     "models cuDNN's Hopper kernel"),
    (["predict", "--gpu", "h100", "--kernel", "sdpa-flash", "--dtype", "fp16", "--N", "512", "--d", "512"],
     "must be a multiple of 8, at most 256"),
    (["predict", "--gpu", "h100", "--kernel", "fa2_tc", "--dtype", "fp16", "--N", "512", "--d", "96"],
     "no compiled instance"),
    (["sweep", "--gpu", "h100", "--kernel", "fa2", "--threads", "33"], "none of the"),
    # a library kernel's tiles given by hand: what FlashAttention's loop nest can hold (4 or 8 warps of 16-row slices,
    # whole 16-key k-steps)
    *((["predict", "--gpu", "h100", "--kernel", k, "--N", "4096", "--B", "8", f"--{f}", v], needle) for k, f, v, needle in (
        ("sdpa-flash", "Br", "7", "Br must be a multiple of 16 x warps"),
        ("sdpa-flash", "Bc", "40", "Bc must be a multiple of 16"),
        ("sdpa-flash", "warps", "3", "run 4 or 8 warps"),
        ("sdpa-cudnn", "Br", "64", "Br=64, Bc=128, warps=8, d=32: Br must be a multiple of 16 x warps"))),
    # nothing of a sweep fits: the limit the nearest configuration breaks (here every compiled tile needs more memory
    # than the GPU has), not the first configuration's (a tile with no compiled instance)
    (["sweep", "--gpu", "h100", "--kernel", "fa2_tc", "--best", "--N", "100000000"],
     "take 95.4 GiB; NVIDIA H100 80GB HBM3 has 80 GiB"),
    # impossible sizes: tensors beyond the device's memory, grids beyond CUDA's limits (the kernels' own grids)
    (["predict", "--gpu", "h100", "--kernel", "fa2_tc", "--dtype", "fp16", "--N", "1e9", "--d", "64"],
     "take 1,907.3 GiB; NVIDIA H100 80GB HBM3 has 80 GiB"),
    (["predict", "--gpu", "gtx1080", "--B", "1", "--H", "64", "--N", "1048576", "--d", "64"], "has 8 GiB"),
    (["predict", "--gpu", "h100", "--kernel", "fa2", "--B", "300", "--H", "300", "--N", "64", "--d", "64"],
     "grid 2 x 90000 x 1 (x, y, z) exceeds CUDA's limits"),
    (["predict", "--gpu", "h100", "--kernel", "fa2_tc", "--dtype", "fp16", "--B", "70000", "--H", "1", "--N", "128",
      "--d", "64"], "grid 1 x 1 x 70000"),
    (["predict", "--gpu", "h100", "--kernel", "sdpa-flash", "--dtype", "fp16", "--B", "1", "--H", "70000", "--N", "64",
      "--d", "64"], "grid 1 x 1 x 70000"),
    (["sweep", "--gpu", "h100", "--N", "1:1000000:1"], "more than 100000 values"),
    (["sweep", "--gpu", "h100", "--csv", "--json"], "choose one"),
    (["validate", "--gpu", "gtx1080", "examples/measurements/h100/fa2.csv"], "cannot run on NVIDIA GeForce GTX 1080"),
    (["fit", "examples/measurements/h100/fa2_tc.csv", "--kernel", "fa2_tc", "--calibration", "c.yaml",
      "--ranking-share", "1"], "'--ranking-share': 1.0 is not in the range 0<=x<1"),
])
def test_more_bad_input_is_one_line(args, needle):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output


def test_bare_command_prints_help_and_exits_0():
    r = CliRunner().invoke(main, [])
    assert r.exit_code == 0 and "Commands:" in r.output and "predict" in r.output


def test_fit_from_refuses_a_bad_target(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("values: {}\npath_fits: [1, 2]\n")
    r = CliRunner().invoke(main, ["fit", "--from", "gpus/calibration/h100-sxm.yaml", "--kernel", "fa2",
                                  "--calibration", str(bad)])
    assert r.exit_code == 2 and "path_fits" in r.stderr


def test_user_gpu_folder_and_gpus_new(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFMODEL_GPU_PATH", str(tmp_path))
    r = CliRunner().invoke(main, ["gpus", "new", "my4090", "--from", "rtx3090", "--dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "my4090.yaml").read_text().replace("aliases: []", "aliases: [mine]")
    (tmp_path / "my4090.yaml").write_text(text)
    r = CliRunner().invoke(main, ["predict", "--gpu", "mine", "--N", "512", "--Br", "32", "--Bc", "32", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["gpu"] == "my4090"
    r = CliRunner().invoke(main, ["gpus", "new", "h100-sxm", "--from", "rtx3090", "--dir", str(tmp_path)])
    assert r.exit_code == 2 and "built-in GPU h100-sxm" in r.stderr


@pytest.mark.parametrize("kernel", ["sdpa-flash", "sdpa-cudnn"])
def test_fit_refuses_a_library_kernel(tmp_path, kernel):
    """Nothing may be fitted to PyTorch's kernels' timings: fit refuses, one line, exit 2, the file untouched."""
    cal = tmp_path / "c.yaml"
    cal.write_text(open("gpus/calibration/h100-sxm.yaml").read())
    before = cal.read_text()
    r = CliRunner().invoke(main, ["fit", f"examples/measurements/h100/{kernel}.csv", "--kernel", kernel,
                                  "--calibration", str(cal)])
    assert r.exit_code == 2 and "nothing is fitted to its timings" in r.stderr
    assert cal.read_text() == before


def test_predict_names_a_queued_combine_kernel():
    """A split-KV flash launch (a small grid) reports the combine kernel it queues, in the table and in --json, its
    time inside the total; a launch that fills the GPU queues none."""
    small = ["predict", "--gpu", "h100", "--kernel", "sdpa-flash", "--B", "1", "--H", "16", "--N", "512", "--d", "128",
             "--dtype", "fp16"]
    code, out, _ = run(small)
    assert code == 0 and "launch 2, sdpa-flash:combine: 2048 blocks × 128 threads" in out
    d = json.loads(run(small + ["--json"])[1])
    main_launch, q = d["launches"]
    assert main_launch["kernel"] == "sdpa-flash" and q["kernel"] == "sdpa-flash:combine"
    assert q["grid_blocks"] == 2048 and 0 < q["time_s"] < d["time_s"]
    assert abs(main_launch["time_s"] + q["time_s"] - d["time_s"]) < 1e-12
    big = json.loads(run([("16" if a == "1" else a) for a in small] + ["--json"])[1])      # B = 16: no split
    assert big["params"]["B"] == 16 and [x["kernel"] for x in big["launches"]] == ["sdpa-flash"]


def test_a_split_kv_launch_says_its_tiles_replace_the_ones_given():
    """Where PyTorch's heuristic picks split-KV (a small grid), its kernel's own tiles run: a note says so, naming
    the tiles asked for; a grid that fills the GPU runs the tiles given, without a note."""
    small = ["predict", "--gpu", "h100", "--kernel", "sdpa-flash", "--B", "1", "--H", "16", "--N", "512", "--d", "128",
             "--Br", "128", "--Bc", "32", "--json"]
    d = json.loads(run(small)[1])
    assert (d["params"]["Br"], d["params"]["Bc"]) == (64, 128)
    (note,) = d["notes"]
    assert "split-KV kernel with" in note and "64x128/4w (not 128x32/4w)" in note
    big = json.loads(run([("16" if a == "1" else a) for a in small])[1])
    assert (big["params"]["Br"], big["params"]["Bc"], big["notes"]) == (128, 32, [])


def test_device_memory_limit_counts_each_kernels_buffers():
    """Q, K, V and O, plus fa1's l and m and SDPA flash's log-sum-exps and split-KV partials (fp32): a problem just
    inside the memory with Q, K, V and O alone is refused once the kernel's own buffers are added."""
    from perfmodel.hw.gpu import resolve as load_builtin
    from perfmodel.kernels import get
    from perfmodel.shape import make_shape

    gpu = load_builtin("gtx1080")
    shape = make_shape(1, 1, 2 ** 24, 32)                     # Q, K, V, O: 8 GiB in fp32, exactly the memory
    fa1 = get("fa1")
    tiles = fa1.make_tiles(shape, gpu)
    assert fa1.device_bytes(shape, tiles) == 8 * 2 ** 30 + 2 * 4 * 2 ** 24
    assert "take 8.1 GiB" in fa1.why_not(gpu, shape, tiles)
    flash = get("sdpa-flash")
    s = make_shape(1, 8, 512, 64, "fp16")
    t = flash.resolve(load_builtin("h100"), s, flash.make_tiles(s, load_builtin("h100")))
    # a split-KV launch: (Q tiles, splits, B*H), the grid PyTorch launched for this problem on the H100
    # (research/data/h100/sdpa_kernels.json: [8, 2, 8])
    assert [int(g) for g in flash.grid_dims(s, t)] == [8, 2, 8]
    assert flash.buffer_bytes(s, t) == 4 * 8 * 512 * (1 + int(t.splits) * 65)


@pytest.mark.parametrize("kernel,dtype", [("fa1", "fp32"), ("fa2", "fp32"), ("fa2_tc", "fp16"),
                                          ("sdpa-flash", "fp16"), ("sdpa-cudnn", "fp16")])
def test_dtype_defaults_to_the_kernels_first(kernel, dtype):
    """Without --dtype, predict and sweep run the kernel's first element type (a tensor-core kernel no longer fails
    on fp32, a default it cannot run); the same prediction as naming it."""
    base = ["predict", "--gpu", "h100", "--kernel", kernel, "--N", "1024", "--d", "64", "--json"]
    code, out, _ = run(base)
    assert code == 0, out
    d = json.loads(out)
    assert d["params"]["dtype"] == dtype
    code, named, _ = run(base + ["--dtype", dtype])
    assert code == 0 and json.loads(named)["time_s"] == d["time_s"]
    r = CliRunner().invoke(main, ["sweep", "--gpu", "h100", "--kernel", kernel, "--N", "1024", "--d", "64", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["dtype"] == dtype


def test_a_dtype_the_kernel_cannot_run_is_still_refused():
    code, out, _ = run(["predict", "--gpu", "h100", "--kernel", "fa2_tc", "--N", "512", "--dtype", "fp32"])
    assert code == 2 and out.strip().startswith("error: kernel fa2_tc runs fp16/bf16 only, not fp32; kernels that "
                                                "do: fa1, fa2")


@pytest.mark.parametrize("kernel,calfile,extra,needle", [
    ("fa2_tc", "h200.yaml", [], "holds no path costs of fa2_tc fitted on its own rows"),
    ("fa2", "h100-sxm.yaml", [], "fa2 fits nothing after its path costs"),
    ("fa2_tc", "h100-sxm.yaml", ["--from", "gpus/calibration/h100-sxm.yaml"], "no --after-only"),
])
def test_fit_after_only_refuses_what_it_cannot_hold(tmp_path, kernel, calfile, extra, needle):
    """--after-only holds a calibration's own fit: not a carried one (the H200's), not a kernel with nothing fitted
    after its path costs, not with --from."""
    import shutil

    target = tmp_path / calfile
    shutil.copy(f"gpus/calibration/{calfile}", target)
    data = [] if extra else [f"examples/measurements/h100/{kernel}.csv"]
    r = CliRunner().invoke(main, ["fit", *data, "--kernel", kernel, "--calibration", str(target), "--after-only",
                                  *extra])
    assert r.exit_code == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output


def test_predict_says_how_the_kernel_fared_against_measurements():
    """Beside each prediction, the kernel's error on the committed measurements (perfmodel/evaluation/
    measured_accuracy.json, which is examples/accuracy.json's shipped configuration): this GPU's where it was
    measured, the measured GPUs' otherwise, and a plain word for a kernel never measured."""
    from perfmodel.evaluation import advice

    rec = json.loads((Path(__file__).resolve().parents[2] / "examples" / "accuracy.json").read_text())
    assert json.loads(advice.MEASURED.read_text()) == advice.measured_table(rec)
    h100 = rec["tensor_core"]["fa2_tc/h100-sxm"]
    _, out, _ = run(["predict", "--gpu", "h100", "--kernel", "fa2_tc", "--N", "1024", "--d", "64", "--json"])
    acc = json.loads(out)["measured_accuracy"]
    assert acc["this_gpu"] == {"mape": round(h100["mape"], 2), "max_ape": round(h100["max_ape"], 1),
                               "rows": h100["n"], "split": "test"}
    assert set(acc["gpus"]) == {"h100-sxm", "h200"}
    _, out, _ = run(["predict", "--gpu", "a100", "--kernel", "fa2_tc", "--N", "1024", "--d", "64", "--json"])
    assert json.loads(out)["measured_accuracy"]["this_gpu"] is None
    _, out, _ = run(["predict", "--gpu", "h100", "--kernel", "sdpa-cudnn", "--N", "1024", "--d", "64"])
    assert "measured on this GPU:" in out and "none of them fitted to" in out and "not this one" not in out
    # with a calibration of one's own, the figures are the shipped calibration's, and the line says so
    own = Path(__file__).resolve().parents[2] / "examples" / "measurements" / "h100" / "probe-calibration.yaml"
    _, out, _ = run(["predict", "--gpu", "h100", "--kernel", "sdpa-cudnn", "--N", "1024", "--d", "64",
                     "--calibration", str(own)])
    assert "with its shipped calibration, not this one" in " ".join(out.split())
    import toy_kernel  # noqa: F401  (registers "toy", a kernel in one file that nothing has measured)

    _, out, _ = run(["predict", "--gpu", "h100", "--kernel", "toy", "--N", "1024", "--d", "64"])
    assert "toy has not been measured" in out
