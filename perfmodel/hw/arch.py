"""Per-architecture constants (gpus/arch/sm_XY.yaml): what a probe measures, in cycles, from published
microbenchmarks or this project's own probe runs, each value with its source (gpus/arch/README.md)."""

from __future__ import annotations

from functools import lru_cache

from perfmodel.errors import InputError, read_yaml
from perfmodel.hw.gpu import builtin_dir


@lru_cache(maxsize=None)
def constants(sm: str) -> dict:
    """{key: {"value": number or None, "source": str, "note": str}} for an architecture ('sm_90'); {} if none."""
    path = builtin_dir() / "arch" / f"{sm}.yaml"
    if not path.exists():
        return {}
    raw = read_yaml(path, "architecture file")
    vals = raw.get("values") if isinstance(raw, dict) else None
    if not isinstance(vals, dict):
        raise InputError(f"{path}: expected a 'values' mapping")
    return vals


def value(sm: str, key: str, default=None):
    """The value of ``key`` for an architecture, or ``default`` where the file has none (or null)."""
    v = constants(sm).get(key)
    v = v.get("value") if isinstance(v, dict) else v
    return default if v is None else float(v)
