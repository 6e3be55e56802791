"""Shortcuts for the research tests: a research script loaded as a module (research/scripts/NAME.py)."""

from util import script as _load


def script(name):
    """research/scripts/``name``.py as a module: ``script("flash_layout").layouts(...)``; its imports of the other
    research scripts (``import common``) resolve as when it is run."""
    return _load(name, "research/scripts")
