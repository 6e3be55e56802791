"""What the package is made of: the wheel carries the perfmodel package, its GPU specs and the CUDA sources it builds,
and nothing of the research that built it (research/: its scripts, CUDA, data and tests) or of examples/; the
package and its tests import nothing from there."""

import ast
import os
import sys
import warnings
from pathlib import Path

from perfmodel.measure import build

ROOT = Path(__file__).resolve().parent.parent
# the CUDA sources only the research scripts build (research/csrc), by name: none may ship
RESEARCH_CUDA = {"probe_cold.cu", "probe_dispatch.cu", "probe_icache.cu", "probe_stream.cu", "probe_wgmma.cu",
                 "fa2_tc_trace.cu", "fa2_tc_phase.cu"}


def wheel_files() -> list:
    """The files `pip wheel .` puts in the wheel besides its metadata, as setuptools' build_py lists them from
    pyproject.toml (no build, no network; the same list as a built wheel's)."""
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    dist = Distribution({"script_name": "setup.py"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # [tool.setuptools] is "beta"; data folders that look like packages
        apply_configuration(dist, ROOT / "pyproject.toml")
        cmd = dist.get_command_obj("build_py")
        cmd.ensure_finalized()
        out = cmd.get_outputs(include_bytecode=False)
    return sorted(Path(os.path.relpath(p, cmd.build_lib)).as_posix() for p in out)


def test_the_wheel_ships_the_package_and_no_research():
    files = wheel_files()
    assert all(f.startswith("perfmodel/") for f in files), [f for f in files if not f.startswith("perfmodel/")]
    assert not [f for f in files if {"research", "examples", "tests", "scripts"} & set(f.split("/"))]
    assert not [f for f in files if f.rsplit("/", 1)[-1] in RESEARCH_CUDA]
    # the CUDA is what the JIT builds compile, no more: the kernels' sources and the probe's, with their headers
    kernels = {f"perfmodel/kernels/csrc/{n}" for n in build.SOURCES + build.HEADERS}
    probe = {f"perfmodel/measure/probe_csrc/{n}" for n in build.PROBE_SOURCES + build.PROBE_HEADERS + ["probe_share.cu"]}
    assert {f for f in files if f.endswith((".cu", ".cuh", ".cpp", ".h"))} == kernels | probe
    assert {"perfmodel/gpus/h100-sxm.yaml", "perfmodel/gpus/arch/sm_90.yaml", "perfmodel/gpus/calibration/h200.yaml",
            "perfmodel/evaluation/measured_accuracy.json"} <= set(files)


def _imports(path: Path):
    """Top-level module names ``path`` imports (absolute imports only)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def _path_literals(path: Path):
    """String constants in ``path``'s code (docstrings aside) that name the research folder as a path."""
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            v = node.value.strip()
            if v == "research" or v.startswith(("research/", "research\\", "../research")):
                yield v


def test_the_package_and_its_tests_import_nothing_from_research():
    """perfmodel/ imports the standard library, its dependencies and itself; tests/ also its own helpers and its test
    tools. Neither names the research folder as a path (to load a script or read data from it): a citation inside a
    longer string (an ArchFacts source, a comment, a docstring) is not a path."""
    deps = {"click", "numpy", "yaml", "matplotlib", "rich", "perfmodel", "torch", "pynvml"}   # the last two optional
    test_tools = {"pytest", "hypothesis", "scipy", "setuptools"}
    helpers = {p.stem for p in (ROOT / "tests").rglob("*.py")}
    allowed = {"package": set(sys.stdlib_module_names) | deps,
               "tests": set(sys.stdlib_module_names) | deps | test_tools | helpers}
    bad = []
    for where, root in (("package", ROOT / "perfmodel"), ("tests", ROOT / "tests")):
        for p in sorted(root.rglob("*.py")):
            if p.resolve() == Path(__file__).resolve():
                continue                                    # this guard names what it forbids
            rel = p.relative_to(ROOT)
            bad += [f"{rel}: import {m}" for m in set(_imports(p)) - allowed[where]]
            bad += [f"{rel}: {v!r}" for v in _path_literals(p)]
    assert not bad, "\n".join(bad)
