"""Measurement grids (YAML): sets of parameter lists, expanded to configurations.

    kernel: fa2                # optional (the CLI's --kernel wins)
    budget_ms: 150             # skip configurations predicted to run longer than this per launch
    sets:
      - {B: [1], H: [4], N: [64, 128, 256, 512], d: [32], tiles: [[16, 16], [32, 32]], threads: [128], pad: [1]}

``tiles`` lists (Br, Bc) pairs; ``Br`` and ``Bc`` lists may be given instead (their product is taken).
``dtype`` and ``causal`` lists join the shape axes; tile fields a kernel lacks (fa1 has no ``threads``) are an
error. ``shuffle: true`` keeps the first set in order and measures the rest in a fixed random order, so that a run
stopped early still covers the whole range.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from pathlib import Path

from perfmodel.errors import InputError, read_yaml
from perfmodel.kernels import get as get_kernel
from perfmodel.kernels.base import Tiles
from perfmodel.shape import AXES, AttentionShape, make_shape

_SHAPE_KEYS = set(AXES) | {"N", "dtype", "causal", "mode"}


@dataclass(frozen=True)
class Config:
    """One configuration to measure: a kernel, a scalar shape and scalar tiles."""

    kernel: str
    shape: AttentionShape
    tiles: Tiles

    def key(self) -> dict:
        """The CSV key columns of this configuration (perfmodel.measure.runner.KEY)."""
        s = self.shape
        return dict(kernel=self.kernel, B=s.B, H=s.H, Hkv=s.Hkv, Nq=s.Nq, Nk=s.Nk, d=s.d,
                    **{k: int(v) for k, v in self.tiles.columns().items()}, dtype=s.dtype, causal=int(s.causal),
                    mode=s.mode)

    def label(self) -> str:
        t = " ".join(f"{k}={getattr(self.tiles, k)}" for k in self.tiles.fields())
        s = self.shape
        lengths = f"N={s.Nq}" if s.Nq == s.Nk else f"Nq={s.Nq} Nk={s.Nk}"
        heads = f" Hkv={s.Hkv}" if s.Hkv != s.H else ""
        return (f"{self.kernel} {lengths}{heads} d={s.d} {s.dtype}{' causal' if s.causal else ''}"
                f"{'' if s.mode == 'fwd' else ' ' + s.mode} {t}")


def _list(raw, key, where):
    v = raw[key]
    if not isinstance(v, list) or not v:
        raise InputError(f"{where}: '{key}' must be a non-empty list")
    return v


MAX_GRID = 1_000_000              # configurations of one grid (a million timed runs is weeks of GPU time)


def load(path: str | Path) -> dict:
    path = Path(path)
    raw = read_yaml(path, "grid file")
    if not isinstance(raw, dict) or not isinstance(raw.get("sets"), list) or not raw["sets"]:
        raise InputError(f"{path}: expected a 'sets' list")
    for i, s in enumerate(raw["sets"]):
        if not isinstance(s, dict):
            raise InputError(f"{path}: set {i} is not a mapping")
        for k in s:
            _list(s, k, f"{path}: set {i}")
        for t in s.get("tiles", []):
            if not isinstance(t, list) or len(t) not in (2, 3):
                raise InputError(f"{path}: set {i}: each entry of 'tiles' must be a pair [Br, Bc] or a triple "
                                 f"[Br, Bc, third tile field], got {t!r}")
    if "budget_ms" in raw:
        b = raw["budget_ms"]
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not b >= 0 or b == float("inf"):
            raise InputError(f"{path}: 'budget_ms' must be a number >= 0 (0: no budget), got {b!r}")
    return raw


def expand(raw: dict, kernel: str) -> list[Config]:
    """Every configuration of every set, in order, without duplicates."""
    k = get_kernel(kernel)
    count = 0
    for s in raw["sets"]:                       # counted before expanding: a huge grid is one line, not a hang
        n = 1
        for v in s.values():                    # an upper bound: the product of every list's length
            if isinstance(v, list):
                n *= max(len(v), 1)
        count += n
        if count > MAX_GRID:
            raise InputError(f"the grid holds more than {MAX_GRID:,} configurations; split it into several")
    tile_keys = set(k.Tiles.fields()) | {"tiles"}
    seen, out, first = set(), [], 0
    for n_set, s in enumerate(raw["sets"]):
        unknown = sorted(set(s) - _SHAPE_KEYS - tile_keys)
        if unknown:
            raise InputError(f"set {n_set}: unknown key '{unknown[0]}' for kernel {kernel} (its tiles: "
                             f"{', '.join(k.Tiles.fields())})")
        lists = {a: s.get(a, default) for a, default in
                 dict(B=[1], H=[4], Hkv=[None], d=[32], dtype=["fp32"], causal=[False], mode=["fwd"]).items()}
        if "Nq" in s or "Nk" in s:                  # queries and keys apart, each defaulting to N
            lists["Nq"], lists["Nk"] = s.get("Nq", s.get("N", [512])), s.get("Nk", s.get("N", [512]))
            lengths = list(itertools.product(lists["Nq"], lists["Nk"]))
        else:
            lengths = [(n, n) for n in s.get("N", [512])]
        others = [f for f in k.Tiles.fields() if f not in ("Br", "Bc")]
        if "tiles" in s:                            # [Br, Bc] or [Br, Bc, the kernel's third tile field]
            if any(len(t) == 3 for t in s["tiles"]) and not others:
                raise InputError(f"set {n_set}: kernel {kernel} has no third tile field")
            triples = [tuple(t) + (None,) * (3 - len(t)) for t in s["tiles"]]
        else:                                       # not given: the kernel's default tiles for each shape
            triples = [(a, b, None) for a, b in itertools.product(s.get("Br", [None]), s.get("Bc", [None]))]
        other_lists = [s.get(f, [None]) for f in others]
        for B, H, Hkv, (Nq, Nk), d, dt, causal, mode, (Br, Bc, third), *rest in itertools.product(
                lists["B"], lists["H"], lists["Hkv"], lengths, lists["d"], lists["dtype"], lists["causal"],
                lists["mode"], triples, *other_lists):
            shape = make_shape(B, H, None, d, dt, causal, Hkv=Hkv, Nq=Nq, Nk=Nk, mode=mode)
            k.check_shape(shape)
            extra = dict(zip(others, rest))
            if third is not None:
                extra[others[0]] = third
            cfg = Config(kernel, shape, k.make_tiles(shape, Br=Br, Bc=Bc, **extra))
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
