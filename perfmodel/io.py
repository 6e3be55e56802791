"""Writing users' files so that no failure loses them: every file perfmodel writes or rewrites goes through
:func:`write_atomic` (a temporary file beside the target, fsync, rename over it). A full disk, a file-size limit,
an interrupt or a crash leaves the old file byte for byte, or the new one whole; never a cut copy. Every failure
is an InputError of one line naming the path."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from perfmodel.errors import InputError


def _target(path: Path) -> Path:
    """The file a write to ``path`` replaces: a symbolic link's target (the link stays a link)."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def check_writable(path, what: str = "output") -> Path:
    """One line for an output perfmodel cannot write: a folder, a special file (a FIFO, a device, /proc), a missing
    or read-only folder, a name too long. Checked before any work; returns the path."""
    p = Path(path)
    if not str(path):
        raise InputError(f"{what}: give a file name")
    try:
        target = _target(p)
        if target.is_dir():
            raise InputError(f"{what} '{path}' is a folder")
        if target.exists() and not stat.S_ISREG(target.stat().st_mode):
            raise InputError(f"{what} '{path}' is not a regular file (a FIFO, a device or another special file)")
        parent = target.resolve().parent
        if not parent.is_dir():
            raise InputError(f"{what} '{path}': folder {parent} does not exist")
        if str(parent).startswith(("/proc", "/sys")) or not os.access(parent, os.W_OK | os.X_OK) \
                or (target.exists() and not os.access(target, os.W_OK)):
            raise InputError(f"{what} '{path}': not writable")
        limit = os.pathconf(parent, "PC_NAME_MAX") if hasattr(os, "pathconf") else 255
        if len(os.fsencode(target.name)) + 16 > limit:
            raise InputError(f"{what} '{path}': file name too long")
    except OSError as exc:
        raise InputError(f"{what} '{path}': {exc.strerror or exc}") from None
    return p


def write_atomic(path, data, what: str = "output") -> None:
    """Replace ``path`` with ``data`` (str: UTF-8 text; bytes; or a callable given a binary file to write into)
    atomically: the old file stays whole until the new one is complete on disk. A symbolic link is followed (its
    target is replaced); an existing file keeps its permission bits."""
    p = Path(path)
    tmp = None
    try:
        target = _target(p)
        if target.exists() and not stat.S_ISREG(target.stat().st_mode):
            raise InputError(f"{what} '{path}' is not a regular file (a FIFO, a device or another special file)")
        folder = target.parent if str(target.parent) else Path(".")
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:100]}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else bytes(data))
            f.flush()
            os.fsync(f.fileno())
        if target.exists():
            mode = stat.S_IMODE(target.stat().st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        tmp = None
        try:
            dfd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass
    except OSError as exc:
        raise InputError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    """A line that holds YAML (not blank, not a whole-line comment)."""
    s = line.strip()
    return bool(s) and not s.startswith("#")


def set_yaml_entry(text: str, section: str, key: str, value) -> str:
    """``text`` (a YAML mapping) with ``section.key`` set to ``value``, edited textually: every other line (every
    comment, whole-line, indented or inline, and every other value as written) stays as it was. Comment lines
    inside the replaced entry are kept above the new one. The result is checked: it must parse to the old mapping
    with that one entry changed; else an InputError (the caller writes nothing)."""
    import re

    import yaml

    expected = yaml.safe_load(text) if text.strip() else {}
    if not isinstance(expected, dict):
        raise InputError(f"not a YAML mapping, cannot set {section}.{key}")
    sec = expected.get(section)
    if sec is not None and not isinstance(sec, dict):
        raise InputError(f"'{section}' is not a mapping, cannot set {section}.{key}")
    expected[section] = dict(sec or {}, **{key: value})
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    head = next((i for i, l in enumerate(lines)
                 if re.match(rf"{re.escape(section)}\s*:\s*(#.*)?$", l.rstrip("\r\n"))), None)

    def dumped(indent: int) -> list[str]:
        body = yaml.safe_dump({key: value}, sort_keys=False, width=100)
        return [" " * indent + l + "\n" for l in body.splitlines()]

    if head is None:
        if section in (yaml.safe_load(text) or {}):
            raise InputError(f"'{section}' is written in a form perfmodel cannot edit in place (flow style?)")
        new = lines + [f"{section}:\n"] + dumped(2)
    else:
        end = next((i for i in range(head + 1, len(lines)) if _content(lines[i]) and _indent(lines[i]) == 0),
                   len(lines))
        children = [i for i in range(head + 1, end) if _content(lines[i])]
        child = _indent(lines[children[0]]) if children else 2
        pattern = re.compile(rf" {{{child}}}(['\"]?){re.escape(key)}\1\s*:(\s|$)")
        start = next((i for i in children if _indent(lines[i]) == child and pattern.match(lines[i])), None)
        if start is None:
            last = children[-1] + 1 if children else head + 1
            new = lines[:last] + dumped(child) + lines[last:]
        else:
            stop = next((i for i in children if i > start and _indent(lines[i]) <= child), end)
            while stop - 1 > start and not _content(lines[stop - 1]):     # trailing comments: the next entry's
                stop -= 1
            kept = [l for l in lines[start + 1:stop] if l.strip().startswith("#")]
            entry = dumped(child)
            inline = re.search(r":\s+(#.*)$", lines[start].rstrip("\r\n"))
            if inline and entry[0].rstrip().endswith(":"):            # `key:  # note` keeps its note
                entry[0] = entry[0].rstrip("\n") + "  " + inline.group(1) + "\n"
            new = lines[:start] + kept + entry + lines[stop:]
    out = "".join(new)
    if yaml.safe_load(out) != expected:
        raise InputError(f"cannot set {section}.{key} in place without changing other values")
    return out
