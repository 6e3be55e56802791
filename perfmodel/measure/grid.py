"""Measurement grids (YAML): sets of parameter lists, expanded to configurations.

    kernel: fa2                # optional (the CLI's --kernel wins)
    budget_ms: 150             # skip configurations predicted to run longer than this per launch
    sets:
      - {B: [1], H: [4], N: [64, 128, 256, 512], d: [32], tiles: [[16, 16], [32, 32]], threads: [128], pad: [1]}

``tiles`` lists (Br, Bc) pairs; ``Br`` and ``Bc`` lists may be given instead (their product is taken).
``shuffle: true`` keeps the first set in order and measures the rest in a fixed random order, so that a run
stopped early still covers the whole range.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from perfmodel.errors import InputError, read_yaml
from perfmodel.problem import Config, make_config

_SET_KEYS = {"B", "H", "N", "d", "tiles", "Br", "Bc", "threads", "pad"}


def load(path: str | Path) -> dict:
    path = Path(path)
    raw = read_yaml(path, "grid file")
    if not isinstance(raw, dict) or not isinstance(raw.get("sets"), list) or not raw["sets"]:
        raise InputError(f"{path}: expected a 'sets' list")
    for i, s in enumerate(raw["sets"]):
        if not isinstance(s, dict):
            raise InputError(f"{path}: set {i} is not a mapping")
        unknown = sorted(set(s) - _SET_KEYS)
        if unknown:
            raise InputError(f"{path}: set {i}: unknown key '{unknown[0]}'")
    return raw


def expand(raw: dict, kernel: str) -> list[Config]:
    """Every configuration of every set, in order, without duplicates."""
    seen, out, first = set(), [], 0
    for n_set, s in enumerate(raw["sets"]):
        lists = {k: s.get(k, default) for k, default in
                 dict(B=[1], H=[4], N=[512], d=[32], threads=[None], pad=[None]).items()}
        if "tiles" in s:
            tiles = [tuple(t) for t in s["tiles"]]
        else:
            tiles = list(itertools.product(s.get("Br", [32]), s.get("Bc", [32])))
        for B, H, N, d, (Br, Bc), threads, pad in itertools.product(
                lists["B"], lists["H"], lists["N"], lists["d"], tiles, lists["threads"], lists["pad"]):
            cfg = make_config(kernel, B, H, N, d, Br, Bc, threads=threads, pad=pad)
            if cfg not in seen:
                seen.add(cfg)
                out.append(cfg)
        if n_set == 0:
            first = len(out)
    if raw.get("shuffle"):
        rest = out[first:]
        random.Random(0).shuffle(rest)
        out = out[:first] + rest
    return out
