"""The command line: parse, call perfmodel.api / evaluation / measure, present with perfmodel.report and plot.
Data to stdout, messages to stderr, exit 2 with one line for bad input. One module per group of commands."""

from __future__ import annotations

import sys

import click

from perfmodel.errors import InputError


class Group(click.Group):
    """A click group whose errors are one line and exit 2, never a traceback."""

    def main(self, args=None, prog_name=None, **kwargs):
        import sys as _sys

        if not list(args if args is not None else _sys.argv[1:]):
            click.echo(self.get_help(click.Context(self, info_name=prog_name or "perfmodel")))
            _sys.exit(0)
        try:
            rv = super().main(args=args, prog_name=prog_name or "perfmodel", standalone_mode=False, **kwargs)
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except click.UsageError as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(2)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="perfmodel")
def main():
    """Predict, measure and validate FlashAttention kernel performance on NVIDIA GPUs."""


from perfmodel.cli import evaluate, measure, plots, predict, sweeps  # noqa: E402,F401  (registration)
from perfmodel.cli import llm  # noqa: E402,F401,I001  (registration: `perfmodel llm`)
