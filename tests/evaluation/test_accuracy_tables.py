"""The accuracy tables in the docs match the recorded figures (examples/accuracy_tables.py --check), and the check
notices a stale table. Fast: reads JSON and Markdown only."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
SCRIPT = ROOT / "examples" / "accuracy_tables.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT)


def test_tables_are_up_to_date():
    r = run("--check")
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_flags_a_stale_table_and_a_rewrite_fixes_it(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("accuracy_tables", SCRIPT)
    at = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(at)
    for rel in (*at.TARGETS, *at.SOURCES.values()):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    target = tmp_path / at.TARGETS[0]
    text = target.read_text(encoding="utf-8")
    target.write_text(text.replace("<!-- accuracy:end summary -->", "| stale |\n<!-- accuracy:end summary -->"),
                      encoding="utf-8")
    assert run("--check", "--root", str(tmp_path)).returncode == 1
    assert run("--root", str(tmp_path)).returncode == 0
    assert target.read_text(encoding="utf-8") == text
    assert run("--check", "--root", str(tmp_path)).returncode == 0
    assert not [p for p in target.parent.iterdir() if p.name.endswith(".tmp")]
