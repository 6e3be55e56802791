import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("NO_COLOR", "1")

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch):
    """Tests name committed files by repository-relative paths (as the README's commands do): run each from the
    repository root, wherever pytest was started."""
    monkeypatch.chdir(ROOT)
