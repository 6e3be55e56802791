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


def available() -> list[str]:
    return sorted(p.stem for p in (builtin_dir() / "arch").glob("sm_*.yaml"))


def nearest(sm: str) -> str:
    """``sm`` if it has a file, else the architecture with the nearest compute capability."""
    have = available()
    if sm in have:
        return sm
    num = lambda s: int(s[3:]) if s[3:].isdigit() else 0
    return min(have, key=lambda s: (abs(num(s) - num(sm)), -num(s)))


@lru_cache(maxsize=None)
def header(sm: str) -> dict:
    """The file's top-level keys besides ``values`` (basis, path_fits_from or join_fits_from, name, sources)."""
    path = builtin_dir() / "arch" / f"{sm}.yaml"
    raw = read_yaml(path, "architecture file") if path.exists() else {}
    return {k: v for k, v in (raw or {}).items() if k != "values"}


_MISSING = object()


def value(sm: str, key: str, default=_MISSING):
    """The value of ``key`` for an architecture; ``default`` where the file has none (or null), else an error."""
    v = constants(sm).get(key)
    v = v.get("value") if isinstance(v, dict) else v
    if v is None:
        if default is _MISSING:
            raise InputError(f"gpus/arch/{sm}.yaml has no value for '{key}'")
        return default
    return float(v)


def table(sm: str, key: str) -> dict | None:
    """A value that is a table (a mapping, such as fetch_once_ipc), or None where the file has none."""
    v = constants(sm).get(key)
    v = v.get("value") if isinstance(v, dict) else v
    if v is None:
        return None
    if not isinstance(v, dict):
        raise InputError(f"gpus/arch/{sm}.yaml: '{key}' must be a mapping")
    return v
