import os
import sys

sys.path.insert(0, os.path.dirname(__file__))      # the shared helpers (util, toy_kernel, ...), from every subfolder

from repo import ROOT, _in_repo_root  # noqa: E402,F401  (the autouse fixture: each test runs from the repository root)
