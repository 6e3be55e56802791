import os
import sys

sys.path.insert(0, os.path.dirname(__file__))      # the shared helpers (util, toy_kernel, ...), from every subfolder

from repo import ROOT, _in_repo_root  # noqa: E402,F401  (the autouse fixture: each test runs from the repository root)

try:            # CI (CI=true) runs the property tests on a fixed set of examples, so a run cannot pass or fail by chance
    from hypothesis import settings as _hsettings

    _hsettings.register_profile("ci", derandomize=True, print_blob=True)
    if os.environ.get("CI"):
        _hsettings.load_profile("ci")
except ImportError:
    pass
