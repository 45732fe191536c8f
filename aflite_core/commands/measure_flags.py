"""``run``'s measure options: one flag per option the registry declares.

Every :class:`~aflite_core.measures.registry.Option` of every registered measure is a flag
``--<measure>-<option>`` (underscores as hyphens: ``--projection-method``,
``--knn-max-queries``, ``--baselines-n-splits``), with the dashboard form's choices and
bounds, so the command line offers what the dashboard offers. An option left out keeps the
default ``suggest_config`` gives for the data's size (the form's default).
"""

from __future__ import annotations

import argparse
from typing import Any

#: Prefix of the argparse destinations of these flags.
DEST = "measure_option__"


def flag_name(measure: str, option: str) -> str:
    """The flag of ``option`` of ``measure``: ``--projection-method``."""
    return f"--{measure.replace('_', '-')}-{option.replace('_', '-')}"


def _sample_default(option: Any) -> Any:
    default = option.default
    return default(10_000) if callable(default) else default


def _parser(flag: str, option: Any):
    """An argparse ``type`` that checks the option's choices or bounds, naming the flag."""
    sample = _sample_default(option)
    if option.choices:
        by_text = {str(c): c for c in option.choices}

        def choice(text: str) -> Any:
            if text not in by_text:
                raise argparse.ArgumentTypeError(
                    f"expected one of {', '.join(by_text)}, got {text!r}")
            return by_text[text]

        return choice
    if isinstance(sample, bool):
        def boolean(text: str) -> bool:
            value = text.strip().lower()
            if value not in ("true", "false", "1", "0", "yes", "no"):
                raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
            return value in ("true", "1", "yes")

        return boolean
    cast = int if isinstance(sample, int) else float

    def number(text: str) -> int | float:
        try:
            value = cast(text)
        except ValueError:
            kind = "a whole number" if cast is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        if option.minimum is not None and value < option.minimum:
            raise argparse.ArgumentTypeError(f"expected at least {option.minimum:g}, got "
                                             f"{text}")
        if option.maximum is not None and value > option.maximum:
            raise argparse.ArgumentTypeError(f"expected at most {option.maximum:g}, got "
                                             f"{text}")
        return value

    return number


def add_measure_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--<measure>-<option>`` for every option of every registered measure."""
    from aflite_core.measures import registry

    group = parser.add_argument_group(
        "measure options (default: the dashboard's, scaled to the data where it scales)")
    for measure in registry.measures():
        for option in measure.options:
            flag = flag_name(measure.name, option.name)
            default = option.default
            shown = ("scaled to the data" if callable(default) else str(default))
            choices = f" ({' | '.join(map(str, option.choices))})" if option.choices else ""
            group.add_argument(
                flag, dest=f"{DEST}{measure.name}__{option.name}", default=None,
                type=_parser(flag, option), metavar="V",
                help=f"{measure.label}: {option.label}{choices}; default {shown}")


def measure_options(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``{measure: {option: value}}`` of the measure flags given on the command line."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in vars(args).items():
        if not key.startswith(DEST) or value is None:
            continue
        measure, option = key[len(DEST):].split("__", 1)
        out.setdefault(measure, {})[option] = value
    return out
