"""Shortcuts for the research tests: a research script loaded as a module (research/scripts/NAME.py); the
committed Nsight Compute exports and ptxas records, read."""

import csv
import io
import re
import tarfile
from pathlib import Path

from util import script as _load


def script(name):
    """research/scripts/``name``.py as a module: ``script("flash_layout").layouts(...)``; its imports of the other
    research scripts (``import common``) resolve as when it is run."""
    return _load(name, "research/scripts")


def fa2_tc_ptxas(path):
    """{(d, Br, Bc, warps): {registers}} of each fa2_tc instance in a ptxas -v record (fp16 and bf16 together)."""
    out, cur = {}, None
    for line in Path(path).read_text().splitlines():
        m = re.search(r"fa2_tc_kernelI\w+?Li(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E", line)
        if "Compiling entry" in line and m:
            cur = tuple(map(int, m.groups()))
        used = re.search(r"Used (\d+) registers", line)
        if used and cur:
            out.setdefault(cur, set()).add(int(used.group(1)))
            cur = None
    return out


def ncu_sass(tarball, tag):
    """(header, instruction rows) of ``sass_<tag>.csv`` in a committed tarball of Nsight Compute source-page
    exports (research/scripts/ncu_sdpa_sass.sh): its first line names the kernel, its second the columns."""
    with tarfile.open(tarball) as tar:
        rows = list(csv.reader(io.StringIO(tar.extractfile(f"sass_{tag}.csv").read().decode())))
    return rows[1], rows[2:]


def ncu_details(lines):
    """The metric rows of an Nsight Compute ``--page details --csv`` export, given as lines (ncu's own messages,
    which do not start with a quote, are skipped)."""
    return list(csv.DictReader(line for line in lines if line.startswith('"')))
