"""What every test session needs, the product's (tests/) and the research's (research/tests/) alike: each test runs
from the repository root, and rich prints no colour codes."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("NO_COLOR", "1")


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch):
    """Tests name committed files by repository-relative paths (as the README's commands do): run each from the
    repository root, wherever pytest was started."""
    monkeypatch.chdir(ROOT)
