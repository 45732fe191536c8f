"""``run``'s flags for the declared run parameters (:data:`aflite_core.parameters.PARAMETERS`).

Each parameter becomes its declared flag, with its choices checked by argparse and its help
and default from the declaration; numbers are checked against their declared bounds by
``AuditConfig.validate`` (one message for the CLI and the API). A flag left out is ``None``
and the parameter keeps the default ``suggest_config`` gives for the data.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from aflite_core.parameters import FIELD, PARAMETERS, shown_default

#: Titles of the flag groups in ``run --help``, by section of the declaration.
SECTIONS = {
    "audit": "audit",
    "aflite": "AFLite",
    "z": "Z-filter (with --filter z; see docs/zfilter.md)",
    "representation": "representation Φ (see docs/representations.md)",
}


def add_parameter_flags(parser: argparse.ArgumentParser,
                        types: dict[str, Callable[[str], Any]]) -> None:
    """Add one flag per declared parameter, grouped by section.

    ``types`` gives the argparse ``type`` of the ``size`` parameters and of any parameter
    whose flag has a syntax of its own (``--representation precomputed:PATH``).
    """
    groups = {key: parser.add_argument_group(title) for key, title in SECTIONS.items()}
    for p in PARAMETERS:
        syntax = f" Written {p.cli_syntax}." if p.cli_syntax else ""
        help_text = f"{p.help}{syntax} Default: {shown_default(p)}."
        kwargs: dict[str, Any] = {"dest": p.dest, "default": None,
                                  "help": help_text.replace("%", "%%")}
        if p.name in types:
            kwargs.update(type=types[p.name], metavar=p.dest.upper())
        elif p.kind == "bool":
            kwargs.update(action="store_const", const=True)
        elif p.kind == "choice":
            kwargs.update(choices=p.choices)
            if "on" in p.choices:  # a bare flag is "on", as when it was a switch
                kwargs.update(nargs="?", const="on")
        elif p.kind == "size":
            kwargs.update(type=types["size"], metavar="N|FRAC")
        else:
            # bounds are checked by AuditConfig.validate against the same declaration, so
            # the message is the library's, with the flag's name (commands.run.cli_parameter)
            kwargs.update(type=int if p.kind == "int" else float, metavar=p.dest.upper())
        groups[p.section].add_argument(p.flag, **kwargs)


def given_parameters(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``{where: {name: value}}`` of the parameter flags given on the command line."""
    out: dict[str, dict[str, Any]] = {}
    for p in PARAMETERS:
        value = getattr(args, p.dest, None)
        if value is not None:
            out.setdefault(p.where, {})[p.name] = value
    out.setdefault(FIELD, {})
    return out
