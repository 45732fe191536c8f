"""The one schema of what a run is asked: every run parameter and every measure option.

An :class:`Option` declares a value once: its name, label, help, kind, default (a value, or a
function of the number of audited rows), choices or bounds. Every surface is made from it:

- the ``run`` command's flags (:mod:`aflite_core.commands.run`,
  :mod:`aflite_core.commands.measure_flags`) parse with :meth:`Option.parse`;
- the dashboard's parameter form (``ui/audit/view.py``) draws one widget per option;
- :class:`~aflite_core.config.AuditConfig` checks every value with :meth:`Option.check` when
  it is made, so a bad value from Python, the CLI, a saved parameters file or a ``?run=`` link
  gets the same message;
- the table of defaults in ``docs/architecture.md``
  (:func:`aflite_core.parameters.defaults_table`) prints :meth:`Option.shown_default` and
  :meth:`Option.allowed`.

A run parameter (:class:`aflite_core.parameters.Parameter`) is an option with a flag and a
place in ``AuditConfig``; a measure option is one of a measure's
(:attr:`aflite_core.measures.registry.Measure.options`), read by its ``compute`` from
``ctx.params`` with every default filled in (:meth:`Option.value_for`, the one size rule).

Examples
--------
>>> ks = Option("ks", "Neighbours", (1, 5, 10), minimum=1, maximum=1000)
>>> ks.kind, ks.parse("1,5,10,50")
('ints', (1, 5, 10, 50))
>>> ks.check((0, 5), name="ks")
Traceback (most recent call last):
...
ValueError: ks: expected whole numbers in [1, 1,000], got (0, 5)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aflite_core._validation import check_choice, check_int, check_real, check_size

#: What an option holds: a whole number, a real, a size (rows, or a fraction of them), one of
#: ``choices``, a switch, a tuple of whole numbers, a tuple of strings (of ``choices`` when
#: declared).
KINDS = ("int", "float", "size", "choice", "bool", "ints", "strs")
#: A default scaled to the data by a rule the docs state (``scaled_rule``).
SCALED = "scaled to the data"
#: Rows the kind of a size-dependent default is read at (any size gives the same kind).
_SAMPLE_ROWS = 10_000


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (tuple, list)):
        return "strs" if value and all(isinstance(v, str) for v in value) else "ints"
    return ""


@dataclass(frozen=True)
class Option:
    """One declared value of a run: a run parameter or a measure's option.

    Attributes
    ----------
    name : str
        Keyword the value is passed as (``ctx.params[name]`` for a measure option).
    label : str
        The dashboard widget's label.
    default : Any
        The value a run takes when none is given; a callable gets the number of audited rows
        and returns it (:meth:`value_for`); :data:`SCALED` for a run parameter scaled by
        :func:`aflite_core.config.size_defaults`; None (with ``optional``) when the code
        decides (a calibrated threshold).
    choices : tuple, optional
        Allowed values (kind ``choice``; of each item for kind ``strs``).
    minimum, maximum : float, optional
        Bounds of a number (of each item for kind ``ints``), inclusive unless
        ``open_bounds``.
    help : str
        One line: the widget's help and the flag's help.
    kind : str, optional
        One of :data:`KINDS`; read from ``choices`` and the default when not given.
    open_bounds : bool
        The bounds themselves are not allowed (a level alpha in (0, 1)).
    optional : bool
        None is allowed (and means "the default rule").
    form : bool, default True
        The dashboard's form offers it (False: Python, the CLI and saved parameters only).
    scaled_rule : str
        For a default scaled to the data: the rule, as the table of defaults says it.
    cli_syntax : str
        How the flag's value is written when that differs from the value itself.
    """

    name: str
    label: str
    default: Any
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    help: str = ""
    kind: str = ""
    open_bounds: bool = False
    optional: bool = False
    form: bool = True
    scaled_rule: str = ""
    cli_syntax: str = ""

    def __post_init__(self) -> None:
        kind = self.kind
        if not kind:
            sample = self.value_for(_SAMPLE_ROWS)
            kind = "choice" if self.choices is not None and not isinstance(
                sample, (tuple, list)) else _kind_of(sample)
            if not kind:
                raise ValueError(f"option {self.name!r}: give its kind (one of {KINDS}); "
                                 f"its default {self.default!r} does not say it")
            object.__setattr__(self, "kind", kind)
        check_choice(f"option {self.name!r}: kind", kind, KINDS)
        if kind == "choice" and not self.choices:
            raise ValueError(f"option {self.name!r}: a choice needs its choices")

    # -- the default -------------------------------------------------------------------
    def value_for(self, n_rows: int) -> Any:
        """The default for ``n_rows`` audited rows (the size rule, when the default is one)."""
        return self.default(int(n_rows)) if callable(self.default) else self.default

    @property
    def scaled(self) -> bool:
        """The default depends on the size of the data."""
        return callable(self.default) or self.default == SCALED

    # -- checking and parsing --------------------------------------------------------------
    def check(self, value: Any, *, name: str | None = None) -> Any:
        """``value`` if the declaration allows it (a tuple for the list kinds).

        Raises
        ------
        TypeError, ValueError
            ``"{name}: expected ..., got ..."``: what the option allows and what arrived.
        """
        name = name or self.name
        if value is None and (self.optional or self.default == SCALED):
            return None
        kind = self.kind
        if kind == "choice":
            return check_choice(name, value, self.choices)
        if kind == "bool":
            if not isinstance(value, (bool,)):
                raise TypeError(f"{name}: expected true or false, got {value!r}")
            return value
        if kind == "size":
            return check_size(name, value)
        if kind == "int":
            return check_int(name, value, minimum=self.minimum, maximum=self.maximum)
        if kind == "float":
            return check_real(name, value, low=self.minimum, high=self.maximum,
                              low_open=self.open_bounds, high_open=self.open_bounds)
        return self._check_items(name, value)

    def _check_items(self, name: str, value: Any) -> tuple:
        items = (value,) if isinstance(value, (str, int)) else value
        bounds = _bounds(self.minimum, self.maximum, self.open_bounds)
        what = ("whole numbers" + (f" in {bounds}" if bounds != "any" else "")
                if self.kind == "ints" else
                "names" + (f" among {', '.join(map(str, self.choices))}" if self.choices
                           else ""))
        try:
            items = tuple(items)
        except TypeError:
            raise TypeError(f"{name}: expected a list of {what}, got {value!r}") from None
        if not items:
            raise ValueError(f"{name}: expected at least one of {what}, got none")
        try:
            if self.kind == "ints":
                return tuple(int(check_int(name, v, minimum=self.minimum,
                                           maximum=self.maximum)) for v in items)
            if self.choices is not None:
                return tuple(check_choice(name, v, self.choices) for v in items)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected {what}, got {value!r}") from None
        if not all(isinstance(v, str) and v for v in items):
            raise TypeError(f"{name}: expected {what}, got {value!r}")
        return items

    def parse(self, text: str) -> Any:
        """The value of a flag written ``text`` (``1,5,10`` for a list), checked.

        Raises
        ------
        ValueError
            ``"expected ..., got ..."`` (the flag's name is the caller's to add).
        """
        text = str(text).strip()
        try:
            return self._check_without_name(self._from_text(text))
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from None

    def _from_text(self, text: str) -> Any:
        kind = self.kind
        if kind == "choice":
            by_text = {str(c): c for c in self.choices or ()}
            if text not in by_text:
                raise ValueError(f"expected one of {', '.join(by_text)}, got {text!r}")
            return by_text[text]
        if kind == "bool":
            low = text.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(f"expected true or false, got {text!r}")
            return low in ("true", "1", "yes")
        if self.optional and text.lower() in ("none", "auto"):
            return None
        if kind in ("ints", "strs"):
            parts = tuple(p.strip() for p in text.split(",") if p.strip())
            return tuple(_whole(p) for p in parts) if kind == "ints" else parts
        if kind == "int":
            return _whole(text)
        if kind == "size":
            number = _real(text)
            return int(number) if number >= 1 and float(number).is_integer() else number
        return _real(text)

    def _check_without_name(self, value: Any) -> Any:
        try:
            return self.check(value, name="\0")
        except (TypeError, ValueError) as exc:
            raise type(exc)(str(exc).removeprefix("\0: ")) from None

    # -- how it is shown -------------------------------------------------------------------
    def shown_default(self) -> str:
        """The default as help texts and the table of defaults show it."""
        if self.scaled:
            return f"{SCALED} ({self.scaled_rule})" if self.scaled_rule else SCALED
        if self.default is None:
            return "none" if self.kind in ("ints", "strs") else "automatic"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, (tuple, list)):
            return ",".join(map(str, self.default))
        return str(self.default)

    def allowed(self) -> str:
        """The allowed values, as the table of defaults shows them."""
        kind = self.kind
        if kind == "choice":
            return " \\| ".join(map(str, self.choices or ()))
        if kind == "bool":
            return "true \\| false (a switch)"
        if kind == "size":
            return "rows (int >= 1) or a fraction in (0, 1)"
        if kind == "strs":
            return ("some of " + ", ".join(map(str, self.choices)) if self.choices
                    else "names, comma-separated")
        bounds = _bounds(self.minimum, self.maximum, self.open_bounds)
        return f"{bounds}, comma-separated" if kind == "ints" else bounds


def _whole(text: str) -> int:
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise ValueError(f"expected a whole number, got {text!r}") from None


def _real(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {text!r}") from None


def _bounds(low: float | None, high: float | None, open_bounds: bool) -> str:
    if low is None and high is None:
        return "any"
    left, right = ("(", ")") if open_bounds else ("[", "]")
    low_s = "-inf" if low is None else _number(low)
    high_s = "inf" if high is None else _number(high)
    return f"{left}{low_s}, {high_s}{right}"


def _number(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def check_options(options: tuple[Option, ...], values: Any, *, where: str,
                  n_rows: int | None = None) -> dict[str, Any]:
    """``values`` (a mapping of option names) checked against ``options``.

    Parameters
    ----------
    options : tuple of Option
        What may be given.
    values : mapping
        What was given.
    where : str
        How the message names the mapping (``measure_params['knn']``).
    n_rows : int, optional
        With it, every option not given is filled in with its default for ``n_rows`` rows.

    Raises
    ------
    TypeError, ValueError
        An unknown key (listing the allowed ones) or a value the declaration refuses
        (``"measure_params['knn']['max_queries']: expected ..., got ..."``).
    """
    if not isinstance(values, Mapping):
        raise TypeError(f"{where}: expected a dict of options, got {type(values).__name__}")
    by_name = {o.name: o for o in options}
    unknown = sorted(str(k) for k in values if k not in by_name)
    if unknown:
        expected = (f"expected some of {sorted(by_name)}" if by_name
                    else "it takes no options")
        raise ValueError(f"{where}: unknown option(s) {unknown}; {expected}")
    out = {k: by_name[k].check(v, name=f"{where}[{k!r}]") for k, v in values.items()}
    if n_rows is not None:
        for option in options:
            if option.name not in out:
                out[option.name] = option.value_for(n_rows)
    return out

