"""Issue 61, data loss: a failed or interrupted write leaves the user's file byte for byte; rewrites keep comments,
extra columns and neighbouring files; `gpus new` writes only a spec that loads, and never over one."""

import csv
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.errors import InputError
from perfmodel.io import set_yaml_entry, write_atomic
from perfmodel.measure import runner

CAL = Path("gpus/calibration/h100-sxm.yaml")


def _cli(*args, fsize=None, env=None):
    """perfmodel in a subprocess (a file-size limit applies to it alone)."""
    limit = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))) if fsize else None
    return subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True,
                          preexec_fn=limit, env=dict(os.environ, **(env or {})), timeout=120)


def _one_error_line(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr


def test_fit_under_a_file_size_limit_leaves_the_calibration_whole(tmp_path):
    cal = tmp_path / "c.yaml"
    shutil.copy(CAL, cal)
    before = cal.read_bytes()
    r = _cli("fit", "examples/measurements/h100/fa1.csv", "--kernel", "fa1", "--calibration", str(cal), fsize=4096)
    _one_error_line(r)
    assert cal.read_bytes() == before
    assert os.listdir(tmp_path) == ["c.yaml"]              # no temporary file left behind


def test_fit_from_under_a_file_size_limit_leaves_the_calibration_whole(tmp_path):
    cal = tmp_path / "c.yaml"
    shutil.copy("gpus/calibration/h200.yaml", cal)
    before = cal.read_bytes()
    r = _cli("fit", "--from", str(CAL), "--kernel", "fa1", "--calibration", str(cal), fsize=len(before) // 2)
    _one_error_line(r)
    assert cal.read_bytes() == before


def test_fit_keeps_every_comment(tmp_path):
    cal = tmp_path / "c.yaml"
    text = CAL.read_text()
    text = text.replace("provenance:\n", "provenance:   # inline on a top key\n  # indented comment\n", 1)
    text = text.replace("path_fits:\n", "# before path_fits\npath_fits:\n  # inside path_fits\n", 1)
    text = text.replace("  fa2:\n", "  # above fa2\n  fa2:  # fa2's note\n", 1)
    cal.write_text(text)
    r = CliRunner().invoke(main, ["fit", "--from", "gpus/calibration/h100-sxm.yaml", "--kernel", "fa2",
                                  "--calibration", str(cal)])
    assert r.exit_code == 0, r.output
    after = cal.read_text()
    comments = lambda t: [l.split("#", 1)[1] for l in t.splitlines() if "#" in l and "crc32" not in l]
    assert comments(after) == comments(text)
    assert yaml.safe_load(after)["path_fits"]["fa2"]["carried_over"]["from"] == "gpus/calibration/h100-sxm.yaml"
    # every line outside path_fits.fa2 is as it was
    head = text.index("  fa2:")
    assert after[:head] == text[:head]
    r = CliRunner().invoke(main, ["fit", "examples/measurements/h100/fa1.csv", "--kernel", "fa1",
                                  "--calibration", str(cal)])
    assert r.exit_code == 0, r.output
    assert comments(cal.read_text()) == comments(text)


def test_set_yaml_entry_edits_only_its_entry():
    text = "# top\na: 1  # inline\npath_fits:\n    # c1\n    fa1:   # on fa1\n        costs: {x: 1}\n    fa2: {y: 2}\nz: 3\n"
    out = set_yaml_entry(text, "path_fits", "fa1", {"costs": {"x": 5}})
    assert yaml.safe_load(out) == {"a": 1, "path_fits": {"fa1": {"costs": {"x": 5}}, "fa2": {"y": 2}}, "z": 3}
    assert "# on fa1" in out and "# c1" in out and "a: 1  # inline" in out
    out = set_yaml_entry("# only a comment\nvalues: {}\n", "path_fits", "fa1", {"costs": {}})
    assert out.startswith("# only a comment\nvalues: {}\n") and yaml.safe_load(out)["path_fits"] == {"fa1": {"costs": {}}}
    with pytest.raises(InputError):
        set_yaml_entry("path_fits: [1]\n", "path_fits", "fa1", {})


def test_write_atomic_keeps_the_old_file_when_the_writer_fails(tmp_path):
    f = tmp_path / "fig.png"
    f.write_bytes(b"old figure")

    def broken(out):
        out.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(f, broken)
    assert f.read_bytes() == b"old figure" and os.listdir(tmp_path) == ["fig.png"]
    link = tmp_path / "link.png"
    link.symlink_to(f)
    write_atomic(link, b"new")
    assert link.is_symlink() and f.read_bytes() == b"new"


def test_a_figure_that_fails_to_render_leaves_the_old_one(tmp_path, monkeypatch):
    from perfmodel import plot

    out = tmp_path / "h.png"
    out.write_bytes(b"previous")
    r = CliRunner().invoke(main, ["sweep", "--gpu", "h100", "--N", "512", "-o", str(out)])
    assert r.exit_code == 0 and out.read_bytes()[:4] == b"\x89PNG"
    out.write_bytes(b"previous")
    import matplotlib.figure

    def boom(self, f, **kw):
        f.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", boom)
    r = CliRunner().invoke(main, ["sweep", "--gpu", "h100", "--N", "512", "-o", str(out)])
    assert r.exit_code == 2 and "No space left" in r.stderr
    assert out.read_bytes() == b"previous" and os.listdir(tmp_path) == ["h.png"]
    del plot


def test_bench_record_under_a_file_size_limit_leaves_the_old_record(tmp_path):
    rec = tmp_path / "r.json"
    rec.write_text("{\"old\": true}\n" + " " * 5000)
    before = rec.read_bytes()
    r = _cli("bench", "--gpu", "h100", "--kernel", "fa1", "--record", str(rec), fsize=300)
    _one_error_line(r)
    assert rec.read_bytes() == before


@pytest.mark.parametrize("name", ["null", "yes", "0x10", "1.5", "true", "no"])
def test_gpus_new_writes_names_yaml_would_misread(tmp_path, name):
    r = CliRunner().invoke(main, ["gpus", "new", name, "--from", "rtx3090", "--dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["gpus", "--json"], env={"PERFMODEL_GPU_PATH": str(tmp_path)})
    assert r.exit_code == 0 and "warning" not in r.stderr, r.output
    r = CliRunner().invoke(main, ["gpus", "show", name, "--json"], env={"PERFMODEL_GPU_PATH": str(tmp_path)})
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("name", ["3090", "h100", "rtx-3090", "h100_sxm5"])
def test_gpus_new_refuses_a_name_a_built_in_answers_to(tmp_path, name):
    r = CliRunner().invoke(main, ["gpus", "new", name, "--from", "rtx3090", "--dir", str(tmp_path)])
    assert r.exit_code == 2 and "built-in" in r.stderr and os.listdir(tmp_path) == []


def test_gpus_new_never_overwrites_without_force(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("# my own work\n")
    before = mine.read_bytes()
    r = CliRunner().invoke(main, ["gpus", "new", "mine", "--from", "rtx3090", "--dir", str(tmp_path)])
    assert r.exit_code == 2 and "--force" in r.stderr and mine.read_bytes() == before
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious")
    (tmp_path / "link.yaml").symlink_to(target)
    r = CliRunner().invoke(main, ["gpus", "new", "link", "--from", "rtx3090", "--dir", str(tmp_path)])
    assert r.exit_code == 2 and target.read_text() == "precious"
    dangling = tmp_path / "dang.yaml"
    dangling.symlink_to(tmp_path / "nowhere")
    r = CliRunner().invoke(main, ["gpus", "new", "dang", "--from", "rtx3090", "--dir", str(tmp_path)])
    assert r.exit_code == 2 and not (tmp_path / "nowhere").exists()
    r = CliRunner().invoke(main, ["gpus", "new", "link", "--from", "rtx3090", "--dir", str(tmp_path), "--force"])
    assert r.exit_code == 0 and target.read_text() == "precious"        # the link is replaced, not its target
    r = CliRunner().invoke(main, ["gpus", "new", "mine", "--from", "rtx3090", "--dir", str(tmp_path), "--force"])
    assert r.exit_code == 0 and "rtx3090" in mine.read_text()


def test_gpus_new_writes_to_the_first_folder_of_the_gpu_path(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    r = CliRunner().invoke(main, ["gpus", "new", "mine", "--from", "rtx3090"],
                           env={"PERFMODEL_GPU_PATH": f"{a}:{b}"})
    assert r.exit_code == 0, r.output
    assert (a / "mine.yaml").is_file() and not b.exists()


# --- measure --out: resume ------------------------------------------------------------------------------------------

KEY = dict(kernel="fa1", B=1, H=4, Hkv=4, Nq=64, Nk=64, d=32, Br=16, Bc=16, threads=16, pad=0, dtype="fp32",
           causal=0, mode="fwd", l2_flush=1)


def _written(path, n=2):
    a = runner.Appender(path, runner.COLUMNS)
    for i in range(n):
        a.add(dict(KEY, Nq=64 << i, Nk=64 << i, median_ms="1.0", p20_ms="0.9", p80_ms="1.1"))
    a.close()


def test_a_half_written_last_row_is_cut_off_and_not_counted(tmp_path):
    out = tmp_path / "m.csv"
    _written(out)
    whole = out.read_bytes()
    out.write_bytes(whole + b"fa1,1,4,4,256,256,32,16")          # interrupted mid-row
    notes = []
    runner.prepare_output(out, note=notes.append)
    assert out.read_bytes() == whole and len(notes) == 1 and "half-written" in notes[0]
    assert len(runner.read_rows(out)) == 2


def test_a_last_row_without_a_newline_gets_one_before_the_next(tmp_path):
    out = tmp_path / "m.csv"
    _written(out)
    out.write_bytes(out.read_bytes().rstrip(b"\r\n"))
    a = runner.Appender(out, runner.COLUMNS)
    a.add(dict(KEY, Nq=512, Nk=512, median_ms="3.0"))
    a.close()
    assert [r["Nq"] for r in runner.read_rows(out)] == ["64", "128", "512"]


@pytest.mark.parametrize("content", [b"\xef\xbb\xbfkernel,B,H\r\n", b"name,score\r\nann,3\r\n", b"\x00\x01",
                                     b"# only a comment\n"])
def test_a_foreign_file_is_refused_and_left_alone(tmp_path, content):
    out = tmp_path / "m.csv"
    out.write_bytes(content)
    with pytest.raises(InputError) as e:
        runner.Appender(out, runner.COLUMNS)
    assert "\n" not in str(e.value) and out.read_bytes() == content


def test_measure_refuses_a_foreign_out_before_anything_else(tmp_path):
    out = tmp_path / "m.csv"
    out.write_bytes(b"\xef\xbb\xbfkernel,B,H\n")
    r = CliRunner().invoke(main, ["measure", "--grid", "examples/grids/h100-fa1.yaml", "--out", str(out)])
    assert r.exit_code == 2 and "byte-order mark" in r.stderr and out.read_bytes() == b"\xef\xbb\xbfkernel,B,H\n"


def test_retiming_keeps_comments_extra_columns_and_a_users_tmp_file(tmp_path):
    out = tmp_path / "m.csv"
    cols = runner.COLUMNS + ["note"]
    with out.open("w", newline="") as f:
        f.write("# my notes on this run\n")
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for n in (64, 128):
            w.writerow(dict(KEY, Nq=n, Nk=n, median_ms="1.0", note=f"keep {n}"))
    (tmp_path / "m.tmp").write_text("the user's own file")
    key = runner.row_key({k: str(v) for k, v in dict(KEY, Nq=128, Nk=128).items()})
    runner.replace_row(out, key, dict(KEY, Nq=128, Nk=128, median_ms="0.5"))
    assert (tmp_path / "m.tmp").read_text() == "the user's own file"
    assert out.read_text().startswith("# my notes on this run\n")
    rows = runner.read_rows(out)
    assert [(r["median_ms"], r["note"]) for r in rows] == [("1.0", "keep 64"), ("0.5", "keep 128")]
    assert sorted(os.listdir(tmp_path)) == ["m.csv", "m.tmp"]
