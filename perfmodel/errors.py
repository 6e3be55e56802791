"""The one exception type for bad user input: the CLI prints its message on one line and exits 2."""


class InputError(ValueError):
    """Raised for impossible sizes, unknown GPUs, malformed spec files, missing toolchains, ..."""


def read_yaml(path, what: str):
    """Parse a YAML file with ``yaml.safe_load``; a missing, unreadable or malformed file is an InputError
    naming ``what`` ("GPU spec file", "grid file", ...) and the path."""
    from pathlib import Path

    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise InputError(f"{path}: malformed YAML{line}") from None
