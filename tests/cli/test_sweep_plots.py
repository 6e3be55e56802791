"""Sweeps, --best, the benchmark, and every figure command (headless)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.errors import InputError
from perfmodel.evaluation import sweep
from perfmodel.hw import calibration, gpu
from perfmodel.kernels import get
from perfmodel.shape import AttentionShape

H100 = gpu.resolve("h100")
MAGIC = {".png": b"\x89PNG", ".pdf": b"%PDF", ".svg": b"<?xml"}


def run(args):
    r = CliRunner().invoke(main, args, env={"NO_COLOR": "1"})
    return r.exit_code, r.output


def run_json(args):
    r = CliRunner().invoke(main, args, env={"NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("text,vals", [("64", [64]), ("16,32, 64", [16, 32, 64]), ("128:8192:x2", [128, 256, 512, 1024,
                                       2048, 4096, 8192]), ("16:64:16", [16, 32, 48, 64]), ("16:64:+24", [16, 40, 64])])
def test_parse_values(text, vals):
    assert sweep.parse_values("N", text) == vals


@pytest.mark.parametrize("text", ["", "a", "1:2", "4:64:x1", "0,4", "16:8:0"])
def test_parse_values_rejects(text):
    with pytest.raises(InputError):
        sweep.parse_values("N", text)


@pytest.mark.parametrize("kernel", ["fa1", "fa2"])
def test_sweep_rows_equal_predict(kernel):
    rows = run_json(["sweep", "--gpu", "h100", "--kernel", kernel, "--B", "1,2", "--N", "100,512", "--d", "32,64",
                     "--Br", "16,48", "--Bc", "32,64", "--json"])["rows"]
    assert len(rows) == 2 * 2 * 2 * 2 * 2
    for r in rows[::3]:
        args = ["predict", "--gpu", "h100", "--kernel", kernel, "--json"] + \
            [x for k in ("B", "H", "N", "d", "Br", "Bc") for x in (f"--{k}", str(r[k]))]
        if kernel == "fa2":
            args += ["--threads", str(r["threads"]), "--pad", str(r["pad"])]
        p = run_json(args)
        assert p["time_s"] == pytest.approx(r["time_s"], rel=1e-6)
        assert p["bound"] == r["bound"]


def test_best_never_picks_a_tile_that_does_not_fit():
    cal = calibration.resolve(H100)
    res = sweep.run(H100, get("fa2"), cal, {"B": [1], "H": [8], "N": [512, 4096], "d": [64, 128],
                                        "Br": [16, 64, 128, 256], "Bc": [32, 128, 256], "threads": [64, 256],
                                        "pad": [0, 1]})
    assert not res.fits.all()                         # some tiles exceed 227 KB here
    best = res.best()
    assert len(best) == 4
    for p, t, _ in best:
        k = get("fa2")
        assert k.fits(H100, AttentionShape(p["B"], p["H"], p["N"], p["d"]),
                      k.Tiles(p["Br"], p["Bc"], p["threads"], p["pad"]))
        same = res.time_s[0, 0, res.values["N"].index(p["N"]), res.values["d"].index(p["d"])]
        assert t == pytest.approx(np.min(same[np.isfinite(same)]))


def test_fa1_sweep_has_only_fa1s_tile_axes():
    rows = run_json(["sweep", "--gpu", "h100", "--kernel", "fa1", "--Br", "16,64", "--Bc", "32", "--json"])["rows"]
    assert {(r["Br"], r["Bc"]) for r in rows} == {(16, 32), (64, 32)}
    assert all(set(r) == {"B", "H", "N", "d", "Br", "Bc", "time_s", "bound"} for r in rows)
    code, out = run(["sweep", "--gpu", "h100", "--kernel", "fa1", "--threads", "64"])
    assert code == 2 and "fa1 has no tile parameter 'threads'" in out


@pytest.mark.parametrize("kernel", ["fa1", "fa2"])
def test_benchmark_sweeps_a_million_configurations_and_times_them(kernel):
    r = sweep.benchmark(H100, calibration.resolve(H100), get(kernel), repeats=1)
    assert 1_000_000 <= r["configurations"] <= 1_100_000
    assert r["per_second"] == pytest.approx(r["configurations"] / r["seconds"])


@pytest.mark.parametrize("ext", [".png", ".svg", ".pdf"])
def test_figure_commands_write_files(tmp_path, ext):
    out = {n: tmp_path / f"{n}{ext}" for n in ("roof", "val", "scal", "heat")}
    cmds = [
        ["roofline", "--gpu", "h100", "--N", "4096", "--Br", "64", "--Bc", "64", "-o", str(out["roof"])],
        ["plot", "validation", "examples/measurements/h100/fa1.csv", "-o", str(out["val"])],
        ["plot", "scaling", "examples/measurements/h100/fa2.csv", "--kernel", "fa2", "-o", str(out["scal"])],
        ["sweep", "--gpu", "h100", "--N", "1024", "--Br", "16,32", "--Bc", "16,32", "-o", str(out["heat"])],
    ]
    for c in cmds:
        code, text = run(c)
        assert code == 0, text
    for p in out.values():
        data = p.read_bytes()
        assert len(data) > 1000 and data[:5].startswith(MAGIC[ext][:4]) or (ext == ".svg" and b"<svg" in data[:400])


def test_roofline_with_measured_points(tmp_path):
    p = tmp_path / "r.png"
    code, text = run(["roofline", "--gpu", "h100", "--kernel", "fa2", "--N", "1024", "--Br", "32,64", "--Bc", "64",
                      "--measured", "examples/measurements/h100/fa2.csv", "-o", str(p)])
    assert code == 0 and "2 measured" in text and p.stat().st_size > 1000


@pytest.mark.parametrize("args,needle", [
    (["roofline", "--gpu", "h100", "--N", "512", "--Br", "32", "--Bc", "32", "-o", "x.jpg"], "use a .png, .svg or .pdf"),
    (["roofline", "--gpu", "h100", "--N", "512", "--Br", "32", "--Bc", "32", "-o", "/nonexistent/x.png"], "does not exist"),
    (["roofline", "--gpu", "h100", "--N", "64:8192:x2", "--Br", "16,32", "--Bc", "32", "-o", "x.png"], "at most 12"),
    (["sweep", "--gpu", "h100", "--N", "1:10:x1"], "cannot read"),
    (["plot", "scaling", "examples/measurements/h100/fa1.csv", "--d", "7", "-o", "x.png"], "no fa1 rows"),
])
def test_bad_figure_input(args, needle):
    code, out = run(args)
    assert code == 2 and out.startswith("error: ") and needle in out and len(out.strip().splitlines()) == 1


def test_sweep_best_names_the_runner_up():
    out = run_json(["sweep", "--gpu", "h100", "--kernel", "fa2_tc", "--B", "4", "--H", "16", "--N", "8192",
                    "--d", "128", "--dtype", "fp16", "--best", "--json"])
    (row,) = out["rows"]
    assert row["runner_up"]["time_s"] >= row["time_s"]
    assert (row["runner_up"]["Br"], row["runner_up"]["Bc"], row["runner_up"]["warps"]) != (
        row["Br"], row["Bc"], row["warps"])
    # beside the margin, how often the recorded picks at that margin were the measured fastest
    from perfmodel.evaluation import advice

    from perfmodel.kernels import get

    share, problems = advice.pick_best(get("fa2_tc"), row["runner_up"]["time_s"] / row["time_s"] - 1)
    assert row["pick_measured_best"] == {"share": share, "problems": problems}
    assert "H100" in out["pick_measured_best_source"]
    other = run_json(["sweep", "--gpu", "h100", "--kernel", "fa2", "--B", "1", "--H", "8", "--N", "512", "--d", "64",
                      "--best", "--json"])
    assert other["rows"][0]["pick_measured_best"] is None        # no measured picks of fa2's tiles to judge by
