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


def _capability(sm: str) -> tuple[int, int]:
    """(major, minor) of 'sm_89' (8, 9), 'sm_100' (10, 0); (0, 0) for a name without digits."""
    digits = sm[3:]
    return (int(digits[:-1]), int(digits[-1])) if digits.isdigit() and len(digits) >= 2 else (0, 0)


def closest(sm: str, known) -> str:
    """Of the architectures ``known``: ``sm`` itself, else one of its major version (one SM family: Ada's sm_89 is
    Ampere GA102's kind, sm_86, not Hopper's sm_90, though 89 lies nearer 90), the nearest minor first, else the
    nearest compute capability; the newer on a tie."""
    known = list(known)
    if sm in known:
        return sm
    major, minor = _capability(sm)
    num = lambda s: _capability(s)[0] * 10 + _capability(s)[1]
    return min(known, key=lambda s: (_capability(s)[0] != major, abs(num(s) - (major * 10 + minor)), -num(s)))


def nearest(sm: str) -> str:
    """``sm`` if it has a file, else the closest architecture that has one (``closest``)."""
    return closest(sm, available())


@lru_cache(maxsize=None)
def header(sm: str) -> dict:
    """The file's top-level keys besides ``values`` (basis, path_fits_from or scaled_fits_from, name, sources)."""
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
