"""Self-contained HTML page comparing two runs in two columns.

``python -m aflite_core compare RUN_A RUN_B --out compare.html`` writes it. The page has no
script and loads nothing: the row overlap across the full width, then every section twice,
run A on the left and run B on the right, the same sections in the same order on both
sides (a run that lacks a section says so in its column). Every piece of text from the runs
goes through :func:`aflite_core.report.html.esc`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from aflite_core.report.compare import SideBySide, side_by_side
from aflite_core.report.html import esc, html_table, write_atomically
from aflite_core.runs import AuditRun, check_not_in_run

#: Rows of a table shown per column (the measure tables are before/after summaries; a
#: long one, such as the cue table, is cut with a note).
MAX_TABLE_ROWS = 30

_CSS = """
body{font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;margin:0 auto;
max-width:1500px;padding:1rem 2rem;color:#212529;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{border-bottom:1px solid #dee2e6;padding-top:1rem}
h3{font-size:1.05rem;margin:.6rem 0 .3rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.85rem}
th,td{border:1px solid #dee2e6;padding:.2rem .45rem;text-align:left;vertical-align:top}
th{background:#f1f3f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.text{white-space:pre-wrap;word-break:break-word;max-width:30rem}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1.5rem}
.side{min-width:0;overflow-x:auto}.side-a{border-right:1px solid #dee2e6;padding-right:1.5rem}
.absent{color:#868e96;font-style:italic}.note{background:#fff3bf;padding:.5rem .8rem}
.muted{color:#868e96;font-size:.85rem}
"""


def _table(frame: pd.DataFrame | None, *, absent: str = "Not in this run.") -> str:
    if frame is None or frame.empty:
        return f'<p class="absent">{esc(absent)}</p>'
    note = ""
    if len(frame) > MAX_TABLE_ROWS:
        note = f'<p class="muted">First {MAX_TABLE_ROWS} of {len(frame):,} rows.</p>'
    return html_table(frame.reset_index(drop=True), max_rows=MAX_TABLE_ROWS) + note


def _pair(anchor: str, title: str, left: str, right: str) -> str:
    cells = "".join(
        f'<div class="side side-{k}" data-side="{k}"><h3>{esc(title)}</h3>{body}</div>'
        for k, body in (("a", left), ("b", right)))
    return f'<section id="{esc(anchor)}"><div class="pair">{cells}</div></section>'


def _run_box(profile: Any, side: str) -> str:
    facts = pd.DataFrame({
        "": ["run", "filter", "input", "sha256", "created (UTC)", "stop"],
        side: [profile.name, profile.filter, profile.input_name, profile.sha256[:16],
               profile.created.replace("T", " ")[:19], profile.stop or "–"],
    })
    return html_table(facts, text_columns=(side,))


def _overlap(side: SideBySide) -> str:
    parts = ["<h2>Row overlap and parameter changes</h2>"]
    if side.note:
        parts.append(f'<p class="note">{esc(side.note)}</p>')
    parts.append(html_table(side.overlap_table()))
    if side.comparison is not None:
        parts.append('<p class="muted">Jaccard = removed in both / removed in either. The '
                     "random figure is the Jaccard expected if each run had removed random "
                     "rows of its size from the rows both filtered: a ratio near 1 means the "
                     "two runs agree no more than chance.</p>")
        table = side.comparison.status_table
        cross = table.reset_index().rename(columns={"a": "status in A \\ in B"})
        cross.columns = [str(c) for c in cross.columns]
        parts += ["<h3>Status in A (rows) against status in B (columns)</h3>",
                  html_table(cross)]
    parts.append("<h3>Parameters that differ</h3>")
    params = side.parameter_table()
    parts.append(html_table(params, text_columns=("a", "b")) if len(params)
                 else '<p class="absent">None.</p>')
    parts.append("<h3>Cue changes (retained rows, B − A)</h3>")
    parts.append(_table(side.cue_changes, absent="Needs the cue table in both runs."))
    return "".join(parts)


def build_compare_html(side: SideBySide) -> str:
    """The comparison as one HTML document (no script, no external resource).

    Parameters
    ----------
    side : SideBySide
        From :func:`aflite_core.report.compare.side_by_side`.
    """
    a, b = side.a, side.b
    body = [
        f"<h1>Comparison: {esc(a.name)} vs {esc(b.name)}</h1>",
        f'<p class="muted">A = {esc(a.name)} ({esc(a.filter)}, {esc(a.input_name)}); '
        f"B = {esc(b.name)} ({esc(b.filter)}, {esc(b.input_name)}). Left column A, right "
        "column B, the same sections on both sides.</p>",
        _overlap(side),
        "<h2>Side by side</h2>",
        _pair("run", "Run", _run_box(a, "A"), _run_box(b, "B")),
        _pair("headline", "Headline", html_table(a.headline_table()),
              html_table(b.headline_table())),
        _pair("sizes", "Sizes", _table(a.sizes), _table(b.sizes)),
        _pair("labels", "Labels (before vs after)", _table(a.labels), _table(b.labels)),
        _pair("splits", "Splits", _table(a.splits, absent="No split column."),
              _table(b.splits, absent="No split column.")),
    ]
    for section in side.sections:
        def column(which: str, section=section) -> str:
            state = section.state_a if which == "a" else section.state_b
            error = section.errors.get(which)
            head = f'<p class="muted">state: {esc(state)}</p>'
            if error:
                return head + f'<p class="absent">Could not be read: {esc(error)}</p>'
            if not section.tables:
                return head + '<p class="absent">Not in this run.</p>'
            return head + "".join(
                f"<h4>{esc(t.title)}</h4>" + _table(t.a if which == "a" else t.b)
                for t in section.tables)
        body.append(_pair(section.name, section.label, column("a"), column("b")))
    title = f"Comparison {a.name} vs {b.name}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
            f"{''.join(body)}</body></html>")


def write_compare_html(a: AuditRun | str | os.PathLike, b: AuditRun | str | os.PathLike,
                       out: str | os.PathLike, *, overwrite: bool = False,
                       side: SideBySide | None = None) -> Path:
    """Write :func:`build_compare_html` of runs ``a`` and ``b`` to ``out`` (atomically).

    Parameters
    ----------
    a, b : AuditRun or path
        The runs.
    out : path
        The HTML file; never inside a run folder.
    overwrite : bool, default False
        Replace ``out`` if it exists.
    side : SideBySide, optional
        The comparison when already built (else built here).

    Raises
    ------
    FileExistsError
        If ``out`` exists and ``overwrite`` is False.
    FileNotFoundError
        If the folder of ``out`` does not exist.
    """
    out = check_not_in_run(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"comparison target {out} already exists; pass --overwrite to "
                              "replace it")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"folder {out.parent} of the comparison target does not exist")
    return write_atomically(out, build_compare_html(side if side is not None
                                                    else side_by_side(a, b)))
