"""The Explore view in the URL: filters, sort, page and open run as query parameters.

A copied link reopens the same view on the same server: ``?run=NAME`` opens the run folder
``NAME`` of the server's runs root (on any page), and the Explore parameters below set the
page's widgets before they are drawn. The Explore page writes its state back after every
change, so the address bar always holds the current view. Only values that differ from
the defaults are written. Streamlit clears query parameters when the user switches page;
Explore writes them again when it is shown.

Encoding (all values are strings): ranges ``lo~hi``, switches ``1``/``0``, lists as
repeated parameters (``label=neutral&label=contradiction``). A value that does not fit
(an unknown label, a round beyond the run's last) is dropped or clamped, never an error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from aflite_core.runs import RowIndex
from ui import state

PAGE = "explore"
#: Query parameter of the open run (a folder name in the runs root).
RUN_PARAM = "run"
#: Session keys remembering the last parameters applied or written (so a link is applied
#: once, and the page's own writes are not applied back).
_APPLIED = "explore:url_applied"
_RUN_APPLIED = "app:url_run_applied"


@dataclass(frozen=True)
class Param:
    """One query parameter and the widget key it mirrors."""

    name: str
    key: str
    kind: str  # "str" | "bool" | "list" | "frange" | "irange" | "int"
    default: Any = None


def _k(name: str) -> str:
    return state.key(PAGE, name)


#: The Explore widgets mirrored in the URL.
PARAMS = (
    Param("view", _k("view"), "str", "all"),
    Param("q", _k("search"), "str", ""),
    Param("regex", _k("regex"), "bool", False),
    Param("case", _k("case"), "bool", False),
    Param("word", _k("whole_word"), "bool", False),
    Param("label", _k("labels"), "list", []),
    Param("status", _k("status"), "list", []),
    Param("pred", _k("pred"), "frange", (0.0, 1.0)),
    Param("rounds", _k("rounds"), "irange", None),
    Param("pvi", _k("pvi"), "frange", None),
    Param("region", _k("dm_regions"), "list", []),
    Param("cue", _k("cue"), "str", None),
    Param("slice", _k("slice"), "str", None),
    Param("col", _k("breakdown_column"), "str", None),
    Param("sort", _k("sort"), "str", "predictability"),
    Param("desc", _k("desc"), "bool", True),
    Param("size", _k("page_size"), "int", 50),
    Param("page", _k("rows_page"), "int", 1),
    Param("page_retained", _k("rows_retained_page"), "int", 1),
    Param("page_removed", _k("rows_removed_page"), "int", 1),
)
#: Values of the breakdown column chosen with ``col`` (key depends on the column).
COLUMN_VALUES = "colv"
NAMES = (*(p.name for p in PARAMS), COLUMN_VALUES)


def breakdown_values_key(column: str) -> str:
    """Widget key of the value filter of ``column`` (see ``ui.panels.breakdown``)."""
    return _k(f"breakdown_values:{column}")


# --------------------------------------------------------------------------- pure codec


def _fmt(value: float) -> str:
    return f"{float(value):g}"


def _encode_value(param: Param, value: Any) -> list[str] | None:
    if value is None:
        return None
    if param.kind == "bool":
        return ["1" if value else "0"]
    if param.kind == "list":
        return [str(v) for v in value] or None
    if param.kind in ("frange", "irange"):
        lo, hi = value
        return [f"{_fmt(lo)}~{_fmt(hi)}"]
    return [str(value)]


def _decode_value(param: Param, values: list[str]) -> Any:
    """The widget value of ``values`` (raises ``ValueError`` when it does not parse)."""
    if param.kind == "list":
        return [v for v in values if v != ""]
    raw = values[-1]
    if param.kind == "bool":
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{param.name}: expected 1 or 0, got {raw!r}")
    if param.kind in ("frange", "irange"):
        lo_text, sep, hi_text = raw.partition("~")
        if not sep:
            raise ValueError(f"{param.name}: expected LOW~HIGH, got {raw!r}")
        lo, hi = float(lo_text), float(hi_text)
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
            raise ValueError(f"{param.name}: expected finite LOW <= HIGH, got {raw!r}")
        return (int(round(lo)), int(round(hi))) if param.kind == "irange" else (lo, hi)
    if param.kind == "int":
        value = int(raw)
        if value < 1:
            raise ValueError(f"{param.name}: expected a positive integer, got {raw!r}")
        return value
    return raw


def encode(values: Mapping[str, Any], *, defaults: Mapping[str, Any] | None = None
           ) -> dict[str, list[str]]:
    """Query parameters (name -> list of strings) of the widget ``values`` (key -> value).

    Values equal to their default (``defaults`` overrides :data:`PARAMS`' defaults, e.g.
    the full range of a slider) are left out.
    """
    defaults = dict(defaults or {})
    out: dict[str, list[str]] = {}
    for param in PARAMS:
        if param.key not in values:
            continue
        value = values[param.key]
        default = defaults.get(param.name, param.default)
        if param.kind in ("frange", "irange") and value is not None:
            value = tuple(value)
            default = tuple(default) if default is not None else None
        if value == default or value in ("", [], ()):
            continue
        encoded = _encode_value(param, value)
        if encoded:
            out[param.name] = encoded
    column = values.get(_k("breakdown_column"))
    if column:
        chosen = values.get(breakdown_values_key(column)) or []
        if chosen:
            out[COLUMN_VALUES] = [str(v) for v in chosen]
    return out


def decode(params: Mapping[str, list[str]], *, bounds: Mapping[str, tuple] | None = None
           ) -> dict[str, Any]:
    """Widget values (key -> value) of query ``params`` (name -> list of strings).

    Unparseable values are dropped; ranges are clamped into ``bounds`` (name -> (lo, hi),
    e.g. the run's rounds) and dropped when nothing of them is left.
    """
    bounds = dict(bounds or {})
    bounds.setdefault("pred", (0.0, 1.0))
    out: dict[str, Any] = {}
    for param in PARAMS:
        values = [str(v) for v in params.get(param.name, [])]
        if not values:
            continue
        try:
            value = _decode_value(param, values)
        except ValueError:
            continue
        if param.kind in ("frange", "irange"):
            if param.name not in bounds:
                continue
            lo_b, hi_b = bounds[param.name]
            lo, hi = max(value[0], lo_b), min(value[1], hi_b)
            if lo > hi:
                continue
            value = (lo, hi)
        out[param.key] = value
    column = out.get(_k("breakdown_column"))
    chosen = [str(v) for v in params.get(COLUMN_VALUES, []) if str(v)]
    if column and chosen:
        out[breakdown_values_key(column)] = chosen
    return out


def bounds_of(table: pd.DataFrame, index: RowIndex | None = None) -> dict[str, tuple]:
    """The slider ranges of the Explore page for ``table`` (rounds, PVI), as its widgets
    compute them (from ``index``, the run's decoded columns, when given)."""
    index = index if index is not None else RowIndex(table)
    out: dict[str, tuple] = {"pred": (0.0, 1.0)}
    if "removal_round" in table and len(table):
        top = index.max_number("removal_round")
        max_round = int(top) if top is not None else 0
        if max_round >= 1:
            out["rounds"] = (1, max(max_round, 2))
    from aflite_core.measures import pvi  # lazy: +60 ms to import

    if pvi.COLUMN in table:
        column = index.numbers(pvi.COLUMN)
        finite = column[np.isfinite(column)]
        if len(finite):
            out["pvi"] = (float(np.floor(finite.min())), float(np.ceil(finite.max())))
    return out


# --------------------------------------------------------------------------- Streamlit side


def _current() -> dict[str, list[str]]:
    params = st.query_params
    return {name: list(params.get_all(name)) for name in params if name in NAMES}


def restore_explore(table: pd.DataFrame, index: RowIndex | None = None) -> bool:
    """Set the Explore widgets from the URL (before they are drawn); once per link.

    Returns
    -------
    bool
        Whether values were applied.
    """
    current = _current()
    if not current or current == state.get(_APPLIED):
        return False
    for key, value in decode(current, bounds=bounds_of(table, index)).items():
        st.session_state[key] = value
    state.put(_APPLIED, current)
    return True


def sync_explore(table: pd.DataFrame, run_path: Any, index: RowIndex | None = None
                 ) -> dict[str, list[str]]:
    """Write the Explore widgets' state (and the open run) to the URL; return it."""
    values = {k: v for k, v in st.session_state.items() if str(k).startswith(f"{PAGE}:")}
    wanted = encode(values, defaults=bounds_of(table, index))
    run_name = run_param(run_path)
    if run_name:
        wanted = {RUN_PARAM: [run_name], **wanted}
    params = st.query_params
    for name in [n for n in params if n in NAMES or n == RUN_PARAM]:
        if name not in wanted:
            del params[name]
    for name, values_ in wanted.items():
        if list(params.get_all(name)) != values_:
            params[name] = values_ if len(values_) > 1 else values_[0]
    state.put(_APPLIED, {k: v for k, v in wanted.items() if k in NAMES})
    if run_name:
        state.put(_RUN_APPLIED, run_name)
    return wanted


def run_param(run_path: Any) -> str | None:
    """The ``run`` parameter of ``run_path``: its folder name when it lies in the runs
    root (a link can only reopen runs of the server's runs root), else ``None``."""
    if not run_path:
        return None
    path = Path(run_path)
    try:
        inside = path.resolve().parent == state.runs_root().resolve()
    except OSError:
        return None
    return path.name if inside else None


#: Why the last link's ``?run=`` opened nothing (shown where a page says no run is open).
LINK_PROBLEM = "url:link_problem"
#: Longest run name a notice quotes (a link can carry anything).
MAX_QUOTED = 80


def md_literal(text: object) -> str:
    """``text`` shown literally in Markdown (a toast, a caption): as inline code, cut to
    :data:`MAX_QUOTED` characters, backticks and line breaks removed, so a link, an image
    or HTML in it is never rendered."""
    flat = " ".join(str(text).replace("`", "'").split())
    if len(flat) > MAX_QUOTED:
        flat = flat[:MAX_QUOTED] + "…"
    return f"`{flat}`" if flat else "(empty)"


def _link_problem(message: str) -> None:
    state.notify(message, icon=":material/warning:")
    state.put(LINK_PROBLEM, message)


def open_run_from_url() -> bool:
    """Open the run named by ``?run=NAME`` (once per link); say so when it cannot be.

    Returns
    -------
    bool
        Whether a run was opened.
    """
    from aflite_core.runs import check_run_name, is_run_folder  # lazy: +200 ms to import

    name = st.query_params.get(RUN_PARAM)
    if not name or name == state.get(_RUN_APPLIED):
        return False
    state.put(_RUN_APPLIED, name)
    root = state.runs_root()
    shown = md_literal(name)
    try:
        safe = check_run_name(name)
    except ValueError:
        _link_problem(f"The link names the run {shown}, which is not a valid run name; "
                      "no run was opened from it.")
        return False
    path = root / safe
    if not is_run_folder(path):
        _link_problem(f"The link names the run {shown}, which this server's runs folder "
                      "does not hold (it may have been deleted, or the link comes from "
                      "another server); the view shows the session's own run.")
        return False
    state.put(LINK_PROBLEM, None)
    current = state.get_run_path()
    if current is None or _resolved(current) != _resolved(path):
        state.set_run_path(path)
    return True


def _resolved(path: Any) -> str:
    """``path`` resolved, as text (for comparing two spellings of one folder)."""
    try:
        return str(Path(path).resolve())
    except OSError:
        return str(path)
