"""Issue 61: bad spec files, special files, numbers, output errors, API types, validate --json, 80 columns; and a
generated campaign over the API, environment variables, special files and interrupted writes."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from perfmodel import api
from perfmodel.cli import main
from perfmodel.errors import InputError, read_text
from perfmodel.io import write_atomic
from util import one_line

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture
def bad_folder(tmp_path):
    """A spec folder with one of every kind of bad file beside a good one."""
    (tmp_path / "malformed.yaml").write_text("name: [\n")
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    (tmp_path / "folder.yaml").mkdir()
    os.mkfifo(tmp_path / "fifo.yaml")
    assert CliRunner().invoke(main, ["gpus", "new", "mine", "--from", "rtx3090", "--dir", str(tmp_path)]).exit_code == 0
    return tmp_path


def test_one_bad_spec_file_warns_and_every_other_name_works(bad_folder):
    env = {"PERFMODEL_GPU_PATH": str(bad_folder)}
    for gpu in ("rtx3090", "mine"):
        r = CliRunner().invoke(main, ["predict", "--gpu", gpu, "--N", "512", "--json"], env=env)
        assert r.exit_code == 0, r.output
        warnings = r.stderr.splitlines()
        assert len(warnings) == 4 and all(w.startswith("warning: GPU spec skipped: ") for w in warnings)
        for name in ("malformed", "loop", "folder", "fifo"):
            assert sum(name in w for w in warnings) == 1
    r = CliRunner().invoke(main, ["gpus", "--json"], env=env)
    assert r.exit_code == 0 and {g["key"] for g in json.loads(r.stdout)} >= {"mine", "rtx3090"}
    one_line(CliRunner().invoke(main, ["predict", "--gpu", "malformed", "--N", "512"], env=env))


def test_special_files_are_answered_in_one_line_without_hanging(tmp_path):
    fifo = tmp_path / "f.csv"
    os.mkfifo(fifo)
    for args in (["predict", "--gpu", "/dev/zero", "--N", "512"], ["validate", str(fifo)],
                 ["predict", "--gpu", "h100", "--N", "512", "--calibration", str(fifo)],
                 ["measure", "--grid", str(fifo), "--out", str(tmp_path / "m.csv")]):
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("r", CliRunner().invoke(main, args)), daemon=True)
        t.start()
        t.join(20)
        assert not t.is_alive(), f"hangs: {args}"
        one_line(box["r"])


def test_read_text_caps_streams_without_a_size():
    with pytest.raises(InputError, match="too large"):
        read_text("/dev/zero", "file")
    r = subprocess.run([sys.executable, "-c", "from perfmodel.errors import read_text; print(len(read_text("
                        "'/dev/stdin', 'x')))"], input="a,b\n1,2\n", capture_output=True, text=True)
    assert r.stdout.strip() == "8"


@pytest.mark.parametrize("value", ["6_4", "٣", "64.000000000000001", "1e3", "0x40", "1:2_0:x2"])
def test_sweep_ranges_read_integers_strictly(value):
    assert "cannot read" in one_line(CliRunner().invoke(main, ["sweep", "--gpu", "h100", "--N", value]))


def test_sweep_to_the_largest_length_is_quiet_and_finite():
    r = CliRunner().invoke(main, ["sweep", "--gpu", "h100", "--N", "1:2147483647:x2", "--json"])
    assert r.exit_code == 0 and "Warning" not in r.stderr and "invalid value" not in r.stderr
    json.loads(r.stdout, parse_constant=lambda c: pytest.fail(c))


def test_csv_cells_read_integers_strictly(tmp_path):
    text = Path("examples/measurements/h100/fa1.csv").read_text().splitlines()
    head, row = text[0], text[1].split(",")
    row[head.split(",").index("N")] = "5_12"
    (tmp_path / "m.csv").write_text(head + "\n" + ",".join(row) + "\n")
    assert "not an integer" in one_line(CliRunner().invoke(main, ["validate", str(tmp_path / "m.csv")]))


def test_a_grid_is_counted_before_it_is_expanded(tmp_path):
    g = tmp_path / "g.yaml"
    g.write_text("kernel: fa1\nsets:\n  - N: [" + ",".join(str(64 * i) for i in range(1, 200)) + "]\n"
                 "    B: [" + ",".join(map(str, range(1, 100))) + "]\n    H: [" + ",".join(map(str, range(1, 100)))
                 + "]\n")
    assert "more than" in one_line(CliRunner().invoke(main, ["measure", "--grid", str(g), "--out",
                                                                str(tmp_path / "m.csv")]))


@pytest.mark.parametrize("target", ["/dev/full", "/proc/version", "DIR/x" * 0 + "NOFOLDER/x.png", "LONG"])
def test_outputs_that_cannot_be_written_are_one_line(tmp_path, target):
    target = {"NOFOLDER/x.png": str(tmp_path / "no" / "x.png"), "LONG": str(tmp_path / ("a" * 300 + ".png"))}.get(
        target, target)
    one_line(CliRunner().invoke(main, ["sweep", "--gpu", "h100", "--N", "512", "-o",
                                        target if target.endswith(".png") else target]))
    one_line(CliRunner().invoke(main, ["bench", "--gpu", "h100", "--record", target]))


def test_stdout_errors_and_odd_environments_are_one_line():
    r = subprocess.run(f"{sys.executable} -m perfmodel gpus --json > /dev/full", shell=True, capture_output=True,
                       text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    r = subprocess.run([sys.executable, "-m", "perfmodel", "predict", "--gpu", "h100", "--N", "512"], env=env,
                       capture_output=True)
    assert r.returncode == 0 and r.stdout.isascii() and b"Traceback" not in r.stderr
    env = dict(os.environ, MPLBACKEND="nonexistent")
    r = subprocess.run([sys.executable, "-m", "perfmodel", "sweep", "--gpu", "h100", "--N", "512", "-o",
                        "/dev/null/x.png"], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.parametrize("bad", [123, True, b"gpus/calibration/h100-sxm.yaml", 1.5, ["a"]])
def test_the_api_answers_wrong_types_with_input_error(bad):
    for f in (api.predict, api.sweep):
        with pytest.raises(InputError):
            f("h100", calibration=bad)
    with pytest.raises(InputError):
        api.predict(bad)


def test_the_api_takes_paths():
    a = api.predict(Path("gpus/h100-sxm.yaml"), calibration=Path("gpus/calibration/h100-sxm.yaml"))
    assert a.time_s == api.predict("h100").time_s


def test_validate_json_keeps_every_group():
    r = CliRunner().invoke(main, ["validate", "examples/measurements/h100/fa1.csv",
                                  "examples/measurements/h200/fa1.csv", "--gpu", "h100", "--json"])
    assert r.exit_code == 0 and len(json.loads(r.stdout)) == 2


ENV80 = {"COLUMNS": "80"}


@pytest.mark.parametrize("args", [["gpus"], ["validate", "examples/measurements/h100/fa1.csv",
                                             "examples/measurements/h100/fa2_tc.csv", "--baselines"],
                                  ["predict", "--gpu", "h100", "--N", "512"], ["bench", "--gpu", "h100"],
                                  ["sweep", "--gpu", "h100", "--N", "512"]])
def test_tables_fit_80_columns_whole(args):
    r = CliRunner().invoke(main, args, env=ENV80)
    assert r.exit_code == 0, r.output
    assert max(len(l) for l in r.stdout.splitlines()) <= 80
    assert "…" not in r.stdout


def test_gpus_at_80_columns_names_every_gpu_whole():
    r = CliRunner().invoke(main, ["gpus"], env=ENV80)
    for name in ("GeForce RTX 3090", "A100-SXM4-80GB", "h100-pcie", "rtx-3090"):
        assert name in r.stdout


def test_validate_prints_large_errors_as_ratios():
    r = CliRunner().invoke(main, ["validate", "examples/measurements/h100/fa2_tc.csv", "--baselines"], env=ENV80)
    assert "seed MAPE" in r.stdout and "x " in r.stdout and "%" in r.stdout
    r = CliRunner().invoke(main, ["validate", "examples/measurements/h100/fa2_tc.csv"], env=ENV80)
    assert "seed MAPE" not in r.stdout


def test_plot_scaling_reads_the_kernel_from_the_file(tmp_path):
    r = CliRunner().invoke(main, ["plot", "scaling", "examples/measurements/h100/fa2_tc.csv", "-o",
                                  str(tmp_path / "x.png")])
    assert "Traceback" not in r.output and r.exit_code in (0, 2)
    if r.exit_code == 2:
        one_line(r)
    r = CliRunner().invoke(main, ["plot", "scaling", "examples/measurements/h100/fa1.csv", "-o",
                                  str(tmp_path / "y.png")])
    assert r.exit_code == 0 and (tmp_path / "y.png").stat().st_size > 0


def test_bench_prints_a_table_and_json_on_request():
    r = CliRunner().invoke(main, ["bench", "--gpu", "h100"], env=ENV80)
    assert r.exit_code == 0 and "configurations" in r.stdout and not r.stdout.lstrip().startswith("{")
    r = CliRunner().invoke(main, ["bench", "--gpu", "h100", "--json"])
    assert json.loads(r.stdout)["configurations"] > 0


# --- a generated campaign ----------------------------------------------------------------------------------------

ODD = st.one_of(st.integers(-3, 10 ** 12), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                st.binary(max_size=8), st.text(max_size=8), st.none(), st.lists(st.integers(), max_size=2),
                st.lists(st.lists(st.integers(1, 4096), max_size=3), max_size=3), st.just(np.array([[64, 128]])),
                st.just(Path("gpus/h100-sxm.yaml")), st.just(Path("/nonexistent.yaml")), st.just(Path("/dev/zero")))


@SETTINGS
@given(gpu=ODD, calibration=ODD, N=ODD, Br=ODD, causal=ODD, dtype=ODD)
def test_api_arguments_of_any_type_are_answered_or_refused(gpu, calibration, N, Br, causal, dtype):
    for f in (api.predict, lambda **kw: api.sweep(**{k: v for k, v in kw.items()})):
        try:
            f(gpu=gpu if gpu is not None else "h100", calibration=calibration, N=N, Br=Br, causal=causal,
              dtype=dtype)
        except InputError as exc:
            assert "\n" not in str(exc)


ENV_VALUES = st.sampled_from(["", ":", "/nonexistent", "/dev/zero", "/dev/null", "/proc", "::/tmp::", "\x01",
                              "a" * 5000, "/etc/passwd", "gpus", "tests/data"])


@SETTINGS
@given(path=ENV_VALUES, xdg=ENV_VALUES, columns=st.sampled_from(["", "0", "-5", "abc", "80", "10000", "20"]),
       mpl=st.sampled_from(["", "nonexistent", "agg", "TkAgg"]))
def test_environment_variables_never_break_a_command(path, xdg, columns, mpl):
    env = {"PERFMODEL_GPU_PATH": path, "XDG_CONFIG_HOME": xdg, "COLUMNS": columns, "MPLBACKEND": mpl}
    r = CliRunner().invoke(main, ["predict", "--gpu", "rtx3090", "--N", "512"], env=env)
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    r = CliRunner().invoke(main, ["gpus"], env=env)
    assert r.exit_code == 0, r.output


@SETTINGS
@given(data=st.binary(max_size=4000), cut=st.integers(0, 4000))
def test_an_interrupted_atomic_write_leaves_the_old_bytes(tmp_path_factory, data, cut):
    folder = tmp_path_factory.mktemp("w")
    f = folder / "keep.bin"
    f.write_bytes(data)

    def interrupted(out):
        out.write(os.urandom(cut))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(f, interrupted)
    assert f.read_bytes() == data and os.listdir(folder) == ["keep.bin"]


@SETTINGS
@given(kind=st.sampled_from(["fifo", "folder", "loop", "empty", "binary", "bom", "huge-line"]),
       command=st.sampled_from(["validate", "gpu", "calibration", "grid"]))
def test_special_files_as_every_input(tmp_path_factory, kind, command):
    folder = tmp_path_factory.mktemp("s")
    p = folder / "in.yaml"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "folder":
        p.mkdir()
    elif kind == "loop":
        p.symlink_to(p)
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "binary":
        p.write_bytes(bytes(range(256)))
    elif kind == "bom":
        p.write_bytes(b"\xef\xbb\xbfname: x\n")
    else:
        p.write_bytes(b"a" * 100_000)
    args = {"validate": ["validate", str(p)], "gpu": ["predict", "--gpu", str(p), "--N", "512"],
            "calibration": ["predict", "--gpu", "h100", "--N", "512", "--calibration", str(p)],
            "grid": ["measure", "--grid", str(p), "--out", str(folder / "m.csv")]}[command]
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", CliRunner().invoke(main, args)), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), args
    one_line(box["r"])
