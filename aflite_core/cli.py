"""Command-line interface: ``python -m aflite_core <command> ...``.

Commands live in :mod:`aflite_core.commands`, one module each. This module only
builds the parser and turns expected failures into one clear line on stderr and a
non-zero exit code; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from aflite_core import commands
from aflite_core.process_exit import exit_now

#: Command modules under ``aflite_core.commands``, in the order shown by ``--help``.
COMMANDS = ("run", "cues", "resources", "export", "decide", "report", "compare", "inoculate",
            "ood", "encoders")

#: Exit code for bad input or parameters (the user can fix it).
EXIT_USAGE = 2
#: Exit code for an unexpected internal failure.
EXIT_FAILURE = 1


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``error: argument --seed: invalid int
    value: 'abc'``) and the way to the help, exit status 2: argparse's own printed the whole
    usage (45 lines for ``run``) before the one line that mattered."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {printable(message)} ({self.prog} --help lists the options)",
              file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def printable(text: object, limit: int = 500) -> str:
    """``text`` as one line a terminal shows as it is: control characters and undecodable
    bytes (a corrupted file's content in a library's message) each become ``?``, cut to
    ``limit`` characters."""
    cleaned = "".join(c if c.isprintable() else " " if c in "\n\t" else "?"
                      for c in str(text))
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 3] + "..."


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every available command registered."""
    parser = OneLineParser(
        prog="python -m aflite_core",
        description="Audit a text dataset for shortcuts: AFLite, lexical cues, KNN distances.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        getattr(commands, name).register(subparsers)  # the face loads each on first use
    return parser


def console() -> NoReturn:
    """The ``aflite-audit`` command and ``python -m aflite_core``: :func:`main`, then
    :func:`~aflite_core.process_exit.exit_now` (the exit handlers run, the interpreter's 0.4 s
    teardown of every imported module does not). :func:`main` itself returns, for callers
    in-process."""
    exit_now(main())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    # an audit's cue child first: it loads NLTK while the parser imports every command
    early = commands.warm_early(words)
    try:
        return _main(words)
    finally:
        if early:  # ended unless the audit took it (a failed start, too few rows)
            from aflite_core.cues import discard_spare_child  # lazy: only after warm_early

            discard_spare_child()


def _main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, LookupError) as exc:
        # DatasetError and parameter validation errors derive from ValueError/TypeError.
        if args.debug:
            traceback.print_exc()
        print(f"error: {printable(exc, 4000)}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError as exc:  # ArrowMemoryError too: the input, not a bug
        if args.debug:
            traceback.print_exc()
        print(f"error: out of memory ({type(exc).__name__}): this input or these parameters "
              "need more memory than this machine has; nothing was written. Audit a smaller "
              "file (or a sample), lower --max-bytes to refuse such inputs early, or run on a "
              "larger machine or a Dask cluster (--scheduler)", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - last line of defence for a CLI
        if args.debug:
            traceback.print_exc()
        else:
            print(
                f"error: unexpected {type(exc).__name__}: {printable(exc, 300)} "
                "(re-run with --debug for details)",
                file=sys.stderr,
            )
        return EXIT_FAILURE
