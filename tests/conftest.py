import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("NO_COLOR", "1")
