"""The command line: parse, call perfmodel.api / evaluation / measure, present with perfmodel.report and plot.
Data to stdout, messages to stderr, exit 2 with one line for bad input. One module per group of commands."""

from __future__ import annotations

import sys

import click

from perfmodel.errors import InputError


_ASCII = {"\u2014": "-", "\u2013": "-", "\u2212": "-", "\u00d7": "x", "\u00b1": "+/-", "\u00b5": "u",
          "\u03bc": "u", "\u2264": "<=", "\u2265": ">=", "\u2248": "~", "\u2026": "...", "\u2192": "->",
          "\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00b7": "*", "\u2022": "*",
          "\u25c0": "<", "\u25b6": ">", "\u2713": "ok", "\u2717": "x"}


def _plain_ascii(exc):
    """An encoding error handler: the characters perfmodel prints, in plain ASCII; any other as '?'."""
    bad = exc.object[exc.start:exc.end]
    return "".join(_ASCII.get(c, "?") for c in bad), exc.end


def _prepare_streams() -> None:
    """A stdout or stderr that cannot encode UTF-8 (PYTHONIOENCODING=ascii, LANG=C) gets plain ASCII instead of
    a UnicodeEncodeError; tables are as wide as the terminal, or $COLUMNS, else 80 columns when piped."""
    import codecs

    from perfmodel.cli import common
    from perfmodel.hw import gpu

    gpu._WARNED.clear()                     # each run warns once per bad spec file
    codecs.register_error("perfmodel-ascii", _plain_ascii)
    for stream in (sys.stdout, sys.stderr):
        enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if enc and not enc.startswith("utf") and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="perfmodel-ascii")
            except (ValueError, OSError):
                pass
    common.set_widths()


def _quiet_stdout() -> None:
    """After stdout failed (a full disk, a closed pipe): point it at /dev/null, so the interpreter's own flush at
    exit prints nothing more."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


class Group(click.Group):
    """A click group whose errors are one line and exit 2, never a traceback."""

    def main(self, args=None, prog_name=None, **kwargs):
        import errno
        import warnings

        import numpy as np

        _prepare_streams()
        if not list(args if args is not None else sys.argv[1:]):
            click.echo(self.get_help(click.Context(self, info_name=prog_name or "perfmodel")))
            sys.exit(0)
        try:
            # numbers past float range are answered by the commands (one line), never by numpy's warnings
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                rv = super().main(args=args, prog_name=prog_name or "perfmodel", standalone_mode=False, **kwargs)
                sys.stdout.flush()
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except click.UsageError as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(2)
        except (click.exceptions.Abort, KeyboardInterrupt):
            click.echo("aborted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except BrokenPipeError:
            _quiet_stdout()
            sys.exit(0)                     # `perfmodel ... | head`: the reader had enough
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EIO, errno.EFBIG, errno.EDQUOT, errno.EBADF, errno.EROFS):
                raise
            _quiet_stdout()
            click.echo(f"error: cannot write the output: {exc.strerror or exc}", err=True)
            sys.exit(2)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="perfmodel")
def main():
    """Predict, measure and validate FlashAttention kernel performance on NVIDIA GPUs."""


from perfmodel.cli import evaluate, measure, plots, predict, sweeps  # noqa: E402,F401  (registration)
from perfmodel.cli import llm  # noqa: E402,F401,I001  (registration: `perfmodel llm`)
