"""Self-contained HTML report of a run.

One file, viewable offline: Plotly's JavaScript is inlined once in the page head and
every chart is a ``<div>`` drawn from inline JSON. Sections follow the run's artifacts;
a section whose artifact is absent says so in one line instead of disappearing.

Every piece of text that comes from the data (cells, labels, column names, cue tokens,
file and run names) goes through :func:`html.escape`; chart labels are escaped too,
since Plotly interprets a subset of HTML in them. Long cells are shortened for display.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from aflite_core._validation import check_callback
from aflite_core.chart_style import (
    PALETTE,
    SET_COLORS,
    STATUS_COLORS,
    rounds_figure,
)
from aflite_core.heap_trim import release_free_heap
from aflite_core.measures import (
    FIGURE_POINTS,
    UNCERTAINTY_NOTE,
    Measure,
    duplicates,
    format_figure,
    headline_figures,
    inoculation,
    measure_caveats,
    registry,
    stored_summary,
)
from aflite_core.runs import (
    STATUS_NAMES,
    STATUSES,
    AuditRun,
    check_not_in_run,
    load_run,
)

#: Longest cell shown in tables of examples (characters).
MAX_CELL_CHARS = 400
#: Sections, in page order: (anchor, title).
#: Sections every report has before the measures' sections.
HEAD_SECTIONS = (
    ("provenance", "Parameters and provenance"),
    ("sizes", "Sizes before and after"),
    ("labels", "Label distribution"),
    ("rounds", "Removal per round"),
    ("predictability", "Predictability"),
)
#: Sections after the measures'.
TAIL_SECTIONS = (("samples", "Examples"),)


def report_measures() -> tuple[Measure, ...]:
    """The registered measures that have a report section (before/after tables or a chart)."""
    return tuple(m for m in registry.measures() if m.tables is not None)


def sections() -> tuple[tuple[str, str], ...]:
    """Anchor and title of every section, in order: fixed ones, then one per measure."""
    return (*HEAD_SECTIONS, *((m.name, m.label) for m in report_measures()), *TAIL_SECTIONS)


#: Every section of a report with the measures registered at import time.
SECTIONS = sections()

#: Okabe-Ito, as the dashboard's; set on every trace (a Streamlit process replaces Plotly's
#: template with placeholder colours that render black outside it).
_SET_COLORS, _PALETTE, _STATUS_COLORS = SET_COLORS, PALETTE, STATUS_COLORS

_CSS = """
body{font-family:-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif;margin:0 auto;
max-width:1100px;padding:1rem 2rem;color:#212529;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{border-bottom:1px solid #dee2e6;padding-top:1rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #dee2e6;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f1f3f5}
.caveat{color:#8a4b00}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.text{white-space:pre-wrap;word-break:break-word;max-width:40rem}
.absent{color:#868e96;font-style:italic}.error{color:#c92a2a}
nav a{margin-right:.8rem;font-size:.9rem}.muted{color:#868e96;font-size:.85rem}
"""


# --------------------------------------------------------------------------- helpers


def esc(value: Any) -> str:
    """HTML-escape any value's text (quotes included)."""
    return html.escape("" if value is None else str(value), quote=True)


def shorten(text: Any, limit: int = MAX_CELL_CHARS) -> str:
    """Text of ``text`` cut to ``limit`` characters with an ellipsis."""
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            return "–"
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return shorten(value)


def html_table(
    frame: pd.DataFrame, *, text_columns: Iterable[str] = (), max_rows: int | None = None
) -> str:
    """Render a DataFrame as an escaped HTML table (index not shown)."""
    text_columns = set(text_columns)
    if max_rows is not None:
        frame = frame.head(max_rows)
    head = "".join(f"<th>{esc(c)}</th>" for c in frame.columns)
    rows = []
    for values in frame.itertuples(index=False, name=None):
        cells = []
        for column, value in zip(frame.columns, values, strict=True):
            numeric = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
                value, (bool, np.bool_)
            )
            cls = "text" if column in text_columns else ("num" if numeric else "")
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<td{attr}>{esc(_fmt(value))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _kv_table(pairs: Mapping[str, Any]) -> str:
    frame = pd.DataFrame({"name": list(pairs), "value": [_plain(v) for v in pairs.values()]})
    return html_table(frame, text_columns=("value",))


def _plain(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_plain(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return _fmt(value) if value is not None else "–"


def _absent(what: str) -> str:
    return f'<p class="absent">{esc(what)}</p>'


def _labels(values: Iterable[Any]) -> list[str]:
    """Chart-safe labels: escaped, since Plotly renders a subset of HTML in text."""
    return [esc(shorten(v, 60)) for v in values]


class _Figures:
    """Render Plotly figures to ``<div>``s without repeating the library."""

    def __init__(self) -> None:
        self._pio = pio
        self._template: dict[str, Any] | None = None

    def _white(self) -> dict[str, Any]:
        """The ``plotly_white`` template as a figure's dictionary holds it, made once: Plotly
        validates a template given by name property by property for every figure (12 ms
        of the 13 ms a small figure took)."""
        if self._template is None:
            self._template = go.Figure(layout={"template": "plotly_white"}).to_dict()[
                "layout"]["template"]
        return self._template

    def __call__(self, fig, height: int = 360) -> str:
        right = fig.layout.margin.r or 0  # room kept for reference-line labels
        # an empty template holds the template's place; the dictionary gets plotly_white
        fig.update_layout(template={}, colorway=list(_PALETTE),
                          margin={"l": 50, "r": max(20, right), "t": 40, "b": 40},
                          height=height)
        fig.update_xaxes(automargin=True)  # long category labels get room, never cut
        fig.update_yaxes(automargin=True)
        spec = fig.to_dict()
        spec["layout"]["template"] = self._white()
        return self._pio.to_html(
            spec,
            validate=False,
            include_plotlyjs=False,
            full_html=False,
            config={"displaylogo": False, "responsive": True},
        )


def plotly_js() -> str:
    """The Plotly JavaScript bundle shipped with the installed ``plotly`` package."""
    return get_plotlyjs()


# --------------------------------------------------------------------------- sections


def _section_provenance(run: AuditRun) -> str:
    summary = run.summary
    inp = run.input
    parts = [
        "<h3>Input</h3>",
        _kv_table(
            {
                "file": inp.get("name"),
                "sha256": inp.get("sha256"),
                "rows": inp.get("n_rows"),
                "columns used": inp.get("columns"),
            }
        ),
        "<h3>Parameters</h3>",
        _kv_table(run.parameters) if run.parameters else _absent("No parameters recorded."),
        "<h3>Provenance</h3>",
        _kv_table(
            {
                "run": run.name,
                "created (UTC)": run.created,
                "format version": run.format_version,
                **{f"version: {k}": v for k, v in (summary.get("versions") or {}).items()},
            }
        ),
    ]
    from aflite_core.runs import stage_table  # lazy: +107 ms to import

    stages = stage_table(run)
    if stages is not None:
        parts += ["<h3>Stages: seconds, and where each ran</h3>",
                  html_table(stages, text_columns=("stage", "ran on"))]
    measures = run.measures
    if measures:
        rows = [
            {
                "measure": k,
                "status": (v or {}).get("status", ""),
                "detail": (v or {}).get("error", (v or {}).get("reason", "")),
            }
            for k, v in measures.items()
        ]
        parts += ["<h3>Measures</h3>", html_table(pd.DataFrame(rows), text_columns=("detail",))]
    warnings = summary.get("warnings") or []
    if warnings:
        items = "".join(f"<li>{esc(w)}</li>" for w in warnings)
        parts += [f"<h3>Warnings</h3><ul>{items}</ul>"]
    return "".join(parts)


def _status_counts(run: AuditRun) -> dict[str, int]:
    sizes = run.sizes
    if all(s in sizes for s in STATUSES):
        return {s: int(sizes[s]) for s in STATUSES}
    counts = run.scores["status"].astype(str).value_counts()
    return {s: int(counts.get(s, 0)) for s in STATUSES}


def _section_sizes(run: AuditRun, fig: _Figures) -> str:
    counts = _status_counts(run)
    before = counts["retained"] + counts["removed"]
    table = pd.DataFrame(
        {
            "": ["rows in the input", "excluded (invalid label etc.)", "warm-up (not filtered)",
                 "kept, not filtered (a split the filter did not filter)",
                 "filtered (before)", "retained (after)", "removed"],
            "rows": [sum(counts.values()), counts["excluded"], counts["warmup"],
                     counts["unfiltered"], before, counts["retained"], counts["removed"]],
        }
    )
    table["share of filtered"] = [np.nan, np.nan, np.nan, np.nan, 1.0,
                                  counts["retained"] / before if before else np.nan,
                                  counts["removed"] / before if before else np.nan]
    chart = go.Figure(
        go.Bar(
            x=[STATUS_NAMES[s] for s in STATUSES],
            y=[counts[s] for s in STATUSES],
            marker_color=[_STATUS_COLORS[s] for s in STATUSES],
        )
    )
    chart.update_layout(title="Rows by status", yaxis_title="rows")
    from aflite_core.runs import filter_description, split_sizes  # lazy: +107 ms to import

    what = filter_description(run)
    per_split = split_sizes(run)
    extra = f"<p>{esc(what)}</p>" if what else ""
    if per_split is not None:
        extra += "<h3>Per split</h3>" + html_table(per_split, text_columns=("split",))
    return extra + html_table(table) + fig(chart)


def _label_counts(run: AuditRun) -> pd.DataFrame:
    labels = run.summary.get("labels") or {}
    before = labels.get("before")
    after = labels.get("after")
    if before is None or after is None:
        scores = run.scores
        if "label" not in scores.columns:
            return pd.DataFrame()
        status = scores["status"].astype(str)
        lab = scores["label"].astype(str)
        before = lab[status.isin(["retained", "removed"])].value_counts().to_dict()
        after = lab[status == "retained"].value_counts().to_dict()
    names = list(dict.fromkeys([*before, *after]))
    frame = pd.DataFrame(
        {
            "label": names,
            "before": [int(before.get(n, 0)) for n in names],
            "after": [int(after.get(n, 0)) for n in names],
        }
    )
    total_b, total_a = frame["before"].sum(), frame["after"].sum()
    frame["removed"] = frame["before"] - frame["after"]
    frame["share before"] = frame["before"] / total_b if total_b else np.nan
    frame["share after"] = frame["after"] / total_a if total_a else np.nan
    frame["kept"] = frame["after"] / frame["before"].where(frame["before"] > 0)
    return frame


def _section_labels(run: AuditRun, fig: _Figures) -> str:
    frame = _label_counts(run)
    if frame.empty:
        return _absent("No label information in this run.")
    names = _labels(frame["label"])
    chart = go.Figure(
        [
            go.Bar(name="before", x=names, y=frame["share before"], marker_color="#868e96"),
            go.Bar(name="after", x=names, y=frame["share after"],
                   marker_color=_SET_COLORS["after"]),
        ]
    )
    chart.update_layout(barmode="group", title="Label shares before vs after", yaxis_title="share")
    return html_table(frame) + fig(chart)


def _section_rounds(run: AuditRun, fig: _Figures) -> str:
    from aflite_core.runs import round_name, stop_explanation  # lazy: +107 ms to import

    history = run.history
    if history.empty or "size" not in history.columns or "removed" not in history.columns:
        return _absent("No per-round history in this run (summary.json has no 'history').")
    if "round" not in history.columns:
        history = history.assign(round=np.arange(1, len(history) + 1))
    step = round_name(run)
    chart = rounds_figure(history, step=step)
    chart.update_layout(title=f"Rows removed per {step} and the size after it")

    stop = stop_explanation(run)
    note = f"<p>{esc(stop)}</p>" if stop else ""
    shown = [c for c in history.columns if not isinstance(history[c].iloc[0], (list, dict))]
    return fig(chart, height=420) + note + html_table(history[shown], max_rows=200)


def _section_predictability(run: AuditRun, fig: _Figures) -> str:
    scores = run.score_columns(["predictability", "status"])  # status as codes
    values = scores["predictability"].to_numpy(dtype=float)
    status = scores["status"]
    if not np.isfinite(values).any():
        return _absent("No predictability scores in this run.")
    chart = go.Figure()
    bins = np.linspace(0, 1, 41)
    for name in ("retained", "removed"):
        v = values[(status == name).to_numpy() & np.isfinite(values)]
        if len(v):
            counts, _ = np.histogram(v, bins=bins)
            chart.add_trace(
                go.Bar(x=(bins[:-1] + bins[1:]) / 2, y=counts, name=name, width=1 / 40,
                       marker_color=_STATUS_COLORS[name], opacity=0.7)
            )
    tau = run.parameters.get("tau")
    if isinstance(tau, (int, float)):
        chart.add_vline(x=float(tau), line_dash="dash", annotation_text="tau")
    chart.update_layout(barmode="overlay", title="Predictability (score in the last round seen)",
                        xaxis_title="predictability", yaxis_title="rows")
    return fig(chart)


def _measure_tables(run: AuditRun, name: str) -> dict[str, pd.DataFrame]:
    return registry.get(name).before_after(run)


def _tables_html(tables: Mapping[str, pd.DataFrame], *, max_rows: int = 200,
                 text_columns: Sequence[str] = ()) -> str:
    return "".join(f"<h3>{esc(title)}</h3>"
                   + html_table(table, text_columns=[c for c in text_columns if c in table],
                                max_rows=max_rows)
                   for title, table in tables.items())


def _section_cues(run: AuditRun, fig: _Figures, top: int) -> str:
    tables = _measure_tables(run, "cues")
    if not tables:
        return _absent("Cue statistics were not computed in this run.")
    title, table = next(iter(tables.items()))
    shown = table.head(top)
    stat = table.attrs.get("statistic", "cueness")
    parts = [f"<p>The top {top} cues of the full data by <code>{esc(stat)}</code> (the "
             "default ranking: ICQ's cueness on label shares shrunk towards the label prior, "
             "so neither stopwords nor words seen five times lead), and the same cues in the "
             "retained rows; the <i>after</i> column says when a cue fell below the minimum "
             "support, with its count.</p>",
             _tables_html({title: shown}, text_columns=("feature_type", "feature"))]
    for chart in registry.get("cues").draw(run):
        parts.append(fig(chart, height=chart.layout.height or 360))
    return "".join(parts)


def _section_knn(run: AuditRun, fig: _Figures) -> str:
    tables = _measure_tables(run, "knn")
    if not tables:
        return _absent("KNN distances were not computed in this run.")
    note = ("<p>Larger same-class distances after filtering mean the retained set holds fewer "
            "near-copies of held-out examples. Removing rows can only make distances grow, "
            "so <i>random</i> (dash-dot) removes as many rows with the same label counts at "
            "random: only the growth beyond it is AFLite's (<i>AFLite beyond random</i>).</p>")
    (title, overall), *rest = tables.items()
    details = "".join(f"<details><summary>{esc(t)} ({len(table)} rows)</summary>"
                      f"{html_table(table, text_columns=('class',), max_rows=500)}</details>"
                      for t, table in rest)
    charts = "".join(fig(chart) for chart in registry.get("knn").draw(run))
    return note + charts + _tables_html({title: overall}) + details


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, Mapping):
        out = []
        for k, v in obj.items():
            out += _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    return [(prefix, obj)]


def _json_section(obj: Any) -> str:
    """Render a JSON artifact: lists of records as tables, other values flattened."""
    parts = []
    if isinstance(obj, Mapping):
        scalars = {}
        for key, value in obj.items():
            if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
                parts.append(f"<h3>{esc(key)}</h3>" + html_table(pd.DataFrame(value),
                                                                 max_rows=200))
            else:
                scalars.update(dict(_flatten(value, str(key))))
        if scalars:
            parts.insert(0, _kv_table(scalars))
    elif isinstance(obj, list) and obj and all(isinstance(v, Mapping) for v in obj):
        parts.append(html_table(pd.DataFrame(obj), max_rows=200))
    else:
        parts.append(f"<p>{esc(obj)}</p>")
    return "".join(parts)


def _baseline_headline(run: AuditRun) -> str:
    """The "bias removed" figures, unseen features first, each with its caveats beside it."""
    try:
        figures = headline_figures(run.read_json("baselines.json"))
    except (ValueError, OSError):
        figures = []
    items = "".join(
        f"<li><b>{esc(f['label'])}</b>: {esc(format_figure(f))}"
        + "".join(f'<br><span class="caveat">{esc(c)}</span>' for c in f["caveats"]) + "</li>"
        for f in figures)
    return ("<p><b>Bias removed beyond size</b> (random control minus retained rows):</p>"
            f"<ul class=\"headline\">{items}</ul>") if figures else ""


def _section_baselines(run: AuditRun, fig: _Figures) -> str:
    tables = _measure_tables(run, "baselines")
    if not tables:
        data = run.read_json("baselines.json")
        return (_json_section(data) if data is not None
                else _absent("Baselines were not computed in this run."))
    return (_baseline_headline(run) +
            "<p>Cross-validated accuracy on the full data, on the retained rows, and on random "
            "subsets with the retained rows' size and label counts (the control: a smaller "
            "set is harder whatever its content, and a label shift is not bias). <b>bias "
            "removed beyond size</b> = random − retained, in percentage points; "
            f"{esc(UNCERTAINTY_NOTE)}. Dashed lines: the majority-class rate and chance of "
            "the full data; an accuracy below the majority rate is listed under Warnings "
            "with its likely causes.</p>"
            + "".join(fig(chart) for chart in registry.get("baselines").draw(run))
            + _tables_html(tables))


def _section_duplicates(run: AuditRun, fig: _Figures) -> str:
    data, table = stored_summary(run, "duplicates", "duplicates.json",
                                 duplicates.SUMMARY_COLUMNS)
    if data is None:
        return _absent("Duplicate detection was not computed in this run.")
    if table is None:
        return _json_section(data)
    params = data.get("params") or {}
    note = ("<p>Exact: same normalised text; near: cosine similarity on Φ of at least "
            f"{esc(params.get('threshold', '?'))}. A group of g rows holds g − 1 redundant "
            "copies.</p>")
    charts = "".join(fig(chart) for chart in registry.get("duplicates").draw(run))
    return note + charts + _tables_html(_measure_tables(run, "duplicates"))


def _section_inoculation(run: AuditRun, fig: _Figures) -> str:
    data, table = stored_summary(run, "inoculation", "inoculation.json",
                                 inoculation.SUMMARY_COLUMNS)
    if data is None:
        return _absent("Inoculation was not computed in this run.")
    if table is None:
        return _json_section(data)
    metric = str(data.get("challenge_metric") or "accuracy").replace("_", " ")
    outcome = (f"<p><b>Outcome:</b> {esc(data.get('outcome_label', ''))}. "
               f"{esc(data.get('explanation', ''))} The challenge curve is {esc(metric)}; the "
               "fine-tuning strength of each n was chosen on held-out challenge rows "
               "(<code>strength</code> column).</p>")
    charts = "".join(fig(chart) for chart in registry.get("inoculation").draw(run))
    return outcome + charts + html_table(table)


def _caveats_html(run: AuditRun, anchor: str) -> str:
    """A measure's caveats (:func:`registry.measure_caveats`), above its figures."""
    return "".join(f'<p class="warning"><strong>Caveat:</strong> {esc(w)}</p>'
                   for w in measure_caveats(run, anchor))


def _section_measure(run: AuditRun, measure: Measure, fig: _Figures) -> str:
    """A measure without a section of its own: its description, its figures
    (:meth:`Measure.draw`) and its before/after tables."""
    tables = measure.before_after(run)
    charts = measure.draw(run)
    if not tables and not charts:
        return _absent(f"{measure.label} was not computed in this run.")
    intro = f"<p>{esc(measure.description)}</p>" if measure.description else ""
    return intro + "".join(fig(chart) for chart in charts) + _tables_html(tables)


def _section_datamap(run: AuditRun, fig: _Figures) -> str:
    """The data map (drawn by the datamap measure) and its exact region counts."""
    measure = registry.get("datamap")
    charts = measure.draw(run)
    if not charts:
        return _absent("The data map was not computed in this run.")
    note = f"<p>{esc(measure.description)} The map draws a seeded sample of at most " \
           f"{FIGURE_POINTS:,} rows; the counts below are exact.</p>"
    return (note + "".join(fig(chart, height=chart.layout.height or 460) for chart in charts)
            + _tables_html(_measure_tables(run, "datamap")))


def _text_columns(run: AuditRun, schema: pd.DataFrame) -> list[str]:
    mapping = run.columns
    cols = [mapping.get(k) for k in ("premise", "hypothesis")]
    cols = [c for c in cols if c and c in schema.columns]
    if cols:
        return cols
    return [c for c in schema.columns if pd.api.types.is_string_dtype(schema[c])][:3]


def _section_samples(run: AuditRun, n_samples: int, random_state: int) -> str:
    try:  # the frame's columns (no row): the examples' rows are read alone below
        schema = run.frame_rows(np.zeros(0, dtype=np.int64))
    except (OSError, ValueError) as exc:
        return _absent(f"Original rows are not available: {exc}")
    # three columns, status and label as codes (not the whole table: 5M rows in a report)
    scores = run.score_columns(["status", "predictability"], optional=("label",))
    scores = scores.reset_index(drop=True)
    text_cols = _text_columns(run, schema)
    label_col = run.columns.get("label")
    labels = (scores["label"] if "label" in scores.columns
              else run.frame[label_col].astype(str).reset_index(drop=True)
              if label_col in schema else pd.Series([""] * len(scores)))
    status = scores["status"]
    rng = np.random.default_rng(random_state)
    chosen: list[tuple[str, str, np.ndarray]] = []
    for label in pd.unique(labels[status.isin(["retained", "removed"])]):
        for name in ("removed", "retained"):
            idx = np.flatnonzero(((status == name) & (labels == label)).to_numpy())
            if name == "removed":
                order = np.argsort(-scores["predictability"].to_numpy(dtype=float)[idx],
                                   kind="stable")
                idx = idx[order[:n_samples]]
            elif len(idx) > n_samples:
                idx = np.sort(rng.choice(idx, size=n_samples, replace=False))
            chosen.append((label, name, idx))
    # every example row read at once: one pass over dataset.parquet's text columns
    every = np.concatenate([np.empty(0, dtype=np.int64), *(idx for _, _, idx in chosen)])
    rows = run.frame_rows(every, text_cols).reset_index()
    parts = [f"<p>Up to {n_samples} examples per label: removed rows with the highest "
             "predictability, retained rows at random.</p>"]
    start = 0
    for label, name, idx in chosen:
        if name == "removed":
            parts.append(f"<h3>Label {esc(label)}</h3>")
        if not len(idx):
            parts.append(_absent(f"No {name} rows with this label."))
            continue
        table = rows.iloc[start:start + len(idx)].reset_index(drop=True)
        start += len(idx)
        table["predictability"] = scores["predictability"].to_numpy()[idx]
        table = table.map(lambda v: shorten(v) if isinstance(v, str) else v)
        parts.append(f"<h4>{name.capitalize()}</h4>")
        parts.append(html_table(table, text_columns=text_cols))
    return "".join(parts)


# --------------------------------------------------------------------------- entry points


def build_report(
    run: AuditRun | str | os.PathLike,
    *,
    n_samples: int = 5,
    top_cues: int = 20,
    random_state: int = 0,
    include_plotlyjs: bool = True,
    callback: Callable[[dict], Any] | None = None,
) -> str:
    """Build the HTML report of a run.

    Parameters
    ----------
    run : AuditRun or path
        The run (folder).
    n_samples : int, default 5
        Examples shown per label for removed and for retained rows.
    top_cues : int, default 20
        Cues shown in the cue section.
    random_state : int, default 0
        Seeds the choice of retained examples.
    include_plotlyjs : bool, default True
        Inline the Plotly library (needed to view the file offline). ``False`` only for
        embedding into a page that already loads Plotly.
    callback : callable, optional
        ``callback({"fraction": f, "message": m})`` as each section is drawn (``f`` the
        share of the sections done, ``m`` names the next one): a large run's report takes
        seconds, minutes on a busy machine, and the audit's progress bar moves with it.

    Returns
    -------
    str
        One complete HTML document.
    """
    for name, value in (("n_samples", n_samples), ("top_cues", top_cues)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    callback = check_callback(callback)
    run = run if isinstance(run, AuditRun) else load_run(run)
    kept = {name for name in run.ROW_TABLES if name in run.__dict__}  # the caller's
    fig = _Figures()
    bodies = {
        "provenance": lambda: _section_provenance(run),
        "sizes": lambda: _section_sizes(run, fig),
        "labels": lambda: _section_labels(run, fig),
        "rounds": lambda: _section_rounds(run, fig),
        "predictability": lambda: _section_predictability(run, fig),
        # measures with a chart of their own; every other measure: its before/after tables
        "cues": lambda: _section_cues(run, fig, top_cues),
        "knn": lambda: _section_knn(run, fig),
        "baselines": lambda: _section_baselines(run, fig),
        "duplicates": lambda: _section_duplicates(run, fig),
        "inoculation": lambda: _section_inoculation(run, fig),
        "datamap": lambda: _section_datamap(run, fig),
        "samples": lambda: _section_samples(run, n_samples, random_state),
    }
    for measure in report_measures():
        bodies.setdefault(measure.name, lambda m=measure: _section_measure(run, m, fig))
    every = sections()
    parts = []
    for done, (anchor, title) in enumerate(every):
        if callback is not None:
            callback({"fraction": done / len(every),
                      "message": f"writing the HTML report: {title} ({done + 1} of {len(every)})"})
        try:
            body = _caveats_html(run, anchor) + bodies[anchor]()
        except (KeyError, ValueError, TypeError, OSError, IndexError) as exc:
            body = (f'<p class="error">This section could not be drawn: '
                    f"{esc(type(exc).__name__)}: {esc(exc)}</p>")
        parts.append(f'<section id="{anchor}"><h2>{esc(title)}</h2>{body}</section>')
        run.forget_row_tables(keep=kept)  # the section's per-row tables (scores, map, ...)
        release_free_heap()  # the section's tables read and freed: not under the next one's
    if callback is not None:
        callback({"fraction": 1.0, "message": "writing the HTML report: done"})
    nav = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in every)
    script = f"<script>{plotly_js()}</script>" if include_plotlyjs else ""
    title = f"AFLite audit report: {run.name}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style>{script}</head><body>"
        f"<h1>{esc(title)}</h1>"
        f'<p class="muted">Input {esc(run.input.get("name", "?"))} · created '
        f"{esc(run.created)} UTC · run format {esc(run.format_version)}</p>"
        f"<nav>{nav}</nav>{''.join(parts)}</body></html>\n"
    )


def write_report(
    run: AuditRun | str | os.PathLike,
    out: str | os.PathLike,
    *,
    overwrite: bool = False,
    **kwargs: Any,
) -> Path:
    """Write :func:`build_report` to ``out`` (through a temporary file, then renamed).

    Raises
    ------
    FileExistsError
        If ``out`` exists and ``overwrite`` is False.
    """
    out = check_not_in_run(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"report target {out} already exists; pass overwrite to replace it")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"folder {out.parent} of the report target does not exist")
    return write_atomically(out, build_report(run, **kwargs))


def write_atomically(out: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``out`` through a temporary file in its folder, then rename:
    a reader sees the old file or the whole new one, never a part."""
    tmp = out.parent / f".{out.name}.part-{os.getpid()}"
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def section_ids(html_text: str) -> list[str]:
    """Anchors of the sections present in a report (for tests and the dashboard)."""
    return [a for a, _ in sections() if f'<section id="{a}">' in html_text]


__all__: Sequence[str] = ("build_report", "write_report", "esc", "html_table", "section_ids")
