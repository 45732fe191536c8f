"""``run``'s flags: one per declared run parameter and one per measure option.

Both are :class:`~aflite_core.schema.Option` declarations (:mod:`aflite_core.schema`), and
:func:`add_option_flag` makes the flag of either: its help and default from the declaration,
its choices checked by argparse, any other value parsed and checked by
:meth:`~aflite_core.schema.Option.parse` (one message for the CLI and the API, naming the
flag). A run parameter's flag is its declared ``flag``; a measure option's is
``--<measure>-<option>`` (underscores as hyphens: ``--projection-n-neighbors``,
``--knn-ks 1,5,10``), except an option the measure lists among its ``inputs`` (files:
``ood``'s challenge sets come with ``--challenge FILE``). A flag left out is ``None`` and the
value keeps the default ``suggest_config`` gives for the data.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from aflite_core.measures import registry
from aflite_core.parameters import FIELD, PARAMETERS, Parameter, measure_flag
from aflite_core.schema import Option

#: Titles of the flag groups in ``run --help``, by section of the declaration.
SECTIONS = {
    "audit": "audit",
    "aflite": "AFLite",
    "z": "Z-filter (with --filter z; see docs/zfilter.md)",
    "representation": "representation Φ (see docs/representations.md)",
}
#: Prefix of the argparse destinations of the measure options' flags.
DEST = "measure_option__"


#: The flag of ``option`` of ``measure``: ``--projection-method``.
flag_name = measure_flag


def _parsed(option: Option) -> Callable[[str], Any]:
    """An argparse ``type``: :meth:`Option.parse`, its message as argparse reports it."""

    def parse(text: str) -> Any:
        try:
            return option.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = option.name  # argparse names the type in some messages
    return parse


def add_option_flag(group: Any, option: Option, *, flag: str, dest: str, help: str,
                    parse: Callable[[str], Any] | None = None) -> None:
    """Add the flag of ``option`` to ``group`` (``parse``: a syntax of its own)."""
    kwargs: dict[str, Any] = {"dest": dest, "default": None, "help": help.replace("%", "%%")}
    metavar = "LIST" if option.kind in ("ints", "strs") else dest.upper().split("__")[-1]
    if parse is not None:
        kwargs.update(type=parse, metavar="N|FRAC" if option.kind == "size" else metavar)
    elif option.kind == "bool" and isinstance(option, Parameter):  # a switch
        kwargs.update(action="store_const", const=True)
    elif option.kind == "choice":
        choices = tuple(map(str, option.choices or ()))
        kwargs.update(type=_parsed(option), choices=option.choices,
                      metavar="{" + ",".join(choices) + "}")
        if "on" in choices:  # a bare flag is "on", as when it was a switch
            kwargs.update(nargs="?", const="on")
    else:
        kwargs.update(type=_parsed(option), metavar=metavar)
    group.add_argument(flag, **kwargs)


def add_parameter_flags(parser: argparse.ArgumentParser,
                        types: dict[str, Callable[[str], Any]]) -> None:
    """Add one flag per declared parameter, grouped by section.

    ``types`` gives the argparse ``type`` of the ``size`` parameters and of any parameter
    whose flag has a syntax of its own (``--representation precomputed:PATH``).
    """
    groups = {key: parser.add_argument_group(title) for key, title in SECTIONS.items()}
    for p in PARAMETERS:
        syntax = f" Written {p.cli_syntax}." if p.cli_syntax else ""
        parse = types.get(p.name, types["size"] if p.kind == "size" else None)
        add_option_flag(groups[p.section], p, flag=p.flag, dest=p.dest, parse=parse,
                        help=f"{p.help}{syntax} Default: {p.shown_default()}.")


def add_measure_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--<measure>-<option>`` for every option of every registered measure."""
    group = parser.add_argument_group(
        "measure options (default: the dashboard's, scaled to the data where it scales)")
    for measure in registry.measures():
        for option in measure.options:
            if option.name in measure.inputs:
                continue
            choices = f" ({' | '.join(map(str, option.choices))})" if option.choices else ""
            listed = " Comma-separated." if option.kind in ("ints", "strs") else ""
            add_option_flag(group, option, flag=flag_name(measure.name, option.name),
                            dest=f"{DEST}{measure.name}__{option.name}",
                            help=f"{measure.label}: {option.label}{choices}. "
                                 f"{option.help}{listed} Default: {option.shown_default()}.")


def given_parameters(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``{where: {name: value}}`` of the parameter flags given on the command line."""
    out: dict[str, dict[str, Any]] = {}
    for p in PARAMETERS:
        value = getattr(args, p.dest, None)
        if value is not None:
            out.setdefault(p.where, {})[p.name] = value
    out.setdefault(FIELD, {})
    return out


def measure_options(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``{measure: {option: value}}`` of the measure flags given on the command line."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in vars(args).items():
        if not key.startswith(DEST) or value is None:
            continue
        measure, option = key[len(DEST):].split("__", 1)
        out.setdefault(measure, {})[option] = value
    return out
