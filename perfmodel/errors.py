"""The one exception type for bad user input (the CLI prints its message on one line and exits 2), and the one
safe way to read the text and YAML files users give: size, encoding and nesting limits, one-line errors."""

from __future__ import annotations

from pathlib import Path

MAX_TEXT_BYTES = 64 * 1024 * 1024     # far above any spec, calibration, grid or measurement file
MAX_YAML_DEPTH = 32
MAX_YAML_NODES = 200_000              # an alias bomb expands far past this


class InputError(ValueError):
    """Raised for impossible sizes, unknown GPUs, malformed spec files, missing toolchains, ... Its message is one
    line: a line break a user's input carries into it ('0\\n' as a GPU name) is shown escaped."""

    def __init__(self, message="", *args):
        if isinstance(message, str):
            message = message.replace("\r", "\\r").replace("\n", "\\n")
        super().__init__(message, *args)


def read_bytes(path, what: str, limit: int = MAX_TEXT_BYTES) -> bytes:
    """At most ``limit`` bytes of a file, else an InputError naming ``what``. Opened without blocking (a FIFO with
    no writer reads as empty instead of hanging) and read to at most limit + 1 bytes, so a device (/dev/zero), a
    pipe or /dev/stdin, whose size stat cannot tell, is refused past the limit too."""
    import errno
    import fcntl
    import os
    import stat

    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path} is a folder, not a file") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise InputError(f"cannot read {what} {path}: not a file (a socket?)") from None
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{what} {path} is a folder, not a file")
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise InputError(f"{what} {path} is too large ({st.st_size} bytes)")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise InputError(f"{what} {path} is too large (over {limit} bytes)")
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_text(path, what: str) -> str:
    """A UTF-8 text file (a byte-order mark is dropped); anything else is an InputError naming ``what``."""
    path = Path(path)
    data = read_bytes(path, what)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{what} {path} is not UTF-8 text") from None
    if "\x00" in text:
        raise InputError(f"{what} {path} is not text (it holds NUL bytes)")
    return text


def _check_tree(node, path, what, depth=0, count=None):
    """Refuse YAML nested deeper than MAX_YAML_DEPTH or expanding (through aliases) past MAX_YAML_NODES."""
    count = count if count is not None else [0]
    count[0] += 1
    if count[0] > MAX_YAML_NODES:
        raise InputError(f"{path}: {what} expands to too many values (an alias bomb?)")
    if depth > MAX_YAML_DEPTH:
        raise InputError(f"{path}: {what} is nested more than {MAX_YAML_DEPTH} levels deep")
    if isinstance(node, dict):
        for k, v in node.items():
            _check_tree(v, path, what, depth + 1, count)
    elif isinstance(node, list):
        for v in node:
            _check_tree(v, path, what, depth + 1, count)


_YAML_CACHE: dict = {}


def read_yaml(path, what: str):
    """Parse a YAML file with ``yaml.safe_load``; a missing, unreadable, malformed, too deep or too large file is
    an InputError naming ``what`` ("GPU spec file", "grid file", ...) and the path. Parsed files are cached by
    path, size and modification time (a copy is returned: callers may change it)."""
    import copy

    path = Path(path)
    try:
        import stat

        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None
    except (OSError, RuntimeError):           # a missing file, a symbolic-link loop: read_text says which
        key = None
    if key in _YAML_CACHE:
        return copy.deepcopy(_YAML_CACHE[key])
    data = _parse_yaml(path, what)
    if key is not None:
        _YAML_CACHE[key] = copy.deepcopy(data)
    return data


def _flow_depth(text: str) -> int:
    """Deepest nesting of [ and { (a cheap bound checked before the parser recurses into it)."""
    depth = top = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            top = max(top, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    return top


def _parse_yaml(path: Path, what: str):
    import yaml

    text = read_text(path, what)
    if _flow_depth(text) > MAX_YAML_DEPTH:
        raise InputError(f"{path}: {what} is nested more than {MAX_YAML_DEPTH} levels deep")
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise InputError(f"{path}: {what} is nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise InputError(f"{path}: malformed YAML{line}") from None
    _check_tree(data, path, what)
    return data
