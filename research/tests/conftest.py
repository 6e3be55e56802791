"""The research tests: ``python -m pytest research/tests`` from the repository root (not the README's test command,
which runs tests/ only). They load research/scripts and read research/data; the product tests' helpers (tests/util.py
and the like) are importable here as there."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent / "scripts"))     # their shared helpers: ``from common import ...``

from repo import ROOT, _in_repo_root  # noqa: E402,F401  (the autouse fixture: each test runs from the repository root)
