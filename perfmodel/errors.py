"""The one exception type for bad user input: the CLI prints its message on one line and exits 2."""


class InputError(ValueError):
    """Raised for impossible sizes, unknown GPUs, malformed spec files, missing toolchains, ..."""
