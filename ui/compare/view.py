"""Panels of the Compare page: pick two runs, their row overlap, then two columns.

Everything shown comes from :func:`aflite_core.report.compare.side_by_side` through
:func:`ui.cache.side_by_side`; this module only lays it out. Each section is one row of two
columns (run A left, run B right) so that the same sections line up side by side.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from aflite_core.report import format_value
from ui import cache, components, state

PAGE = "compare"

SUMMARY = (
    "Two runs side by side: different parameters, representations, filters (AFLite or the "
    "Z-filter) or datasets. On top, how far the two removed sets overlap **beyond chance**; "
    "below, the same sections for both runs, run A on the left and run B on the right."
)
FORMULA = r"""
* **Removed-set Jaccard** $J = |R_A \cap R_B| \,/\, |R_A \cup R_B|$.
* **Jaccard of random removals**: with $n$ rows filtered by both runs and $|R_A|, |R_B|$
  removed, random removals of those sizes share $E = |R_A||R_B|/n$ rows on average, so
  $J_0 = E / (|R_A| + |R_B| - E)$. $J / J_0$ near 1 means the runs agree no more than chance.
* **Spearman / Pearson** of the rows' predictability scores over the rows scored in both
  runs (for a Z-filter run the score is the row's one-word predictability).
* **Label shift**: total variation distance $\tfrac12\sum_y |p_\text{before}(y) -
  p_\text{after}(y)|$ between the label shares before and after.

Runs of different inputs have no rows in common: their overlap is *not applicable*.
"""

#: Rows of the changed-rows table shown (the download has them all).
MAX_CHANGED_ROWS = 1000
#: Rows of one measure table shown per column.
MAX_TABLE_ROWS = 200


def _label(info: Any) -> str:
    flt = str((info.parameters or {}).get("filter") or "aflite")
    name = {"aflite": "AFLite", "z": "Z-filter"}.get(flt, flt)
    created = info.created.replace("T", " ")[:16]
    return f"{info.name} · {name} · {info.input_name} · {created}"


def pick_runs() -> tuple[Path, Path] | None:
    """Two select boxes (run A, run B) over the complete runs of the runs root.

    Run A starts as the run open in the session (else the newest), run B as the newest
    other run. Returns the two folders, or None (with what to do) when fewer than two runs
    can be opened.
    """
    root = state.runs_root()
    runs = [r for r in cache.list_runs(root) if not r.damaged]
    if len(runs) < 2:
        components.empty_state(
            f"Comparing needs two complete runs in the runs folder "
            f"{components.md_escape(state.runs_root_label())}; there "
            f"{'is' if len(runs) == 1 else 'are'} {len(runs)}. Run another audit (other "
            "parameters, representation or filter) on the Audit page.",
            page="app_pages/audit.py", label="Go to Audit")
        return None
    by_path = {str(Path(r.path).resolve()): r for r in runs}
    paths = list(by_path)
    current = state.get_run_path()
    first = str(current.resolve()) if current and str(current.resolve()) in by_path else paths[0]
    second = next(p for p in paths if p != first)
    left, right = st.columns(2)
    a = left.selectbox("Run A (left)", paths, index=paths.index(first),
                       format_func=lambda p: _label(by_path[p]), key=state.key(PAGE, "run_a"))
    b = right.selectbox("Run B (right)", paths, index=paths.index(second),
                        format_func=lambda p: _label(by_path[p]), key=state.key(PAGE, "run_b"))
    if a == b:
        st.warning("Run A and run B are the same run; pick two different runs.",
                   icon=":material/warning:")
    return Path(a), Path(b)


def load(paths: tuple[Path, Path]) -> Any | None:
    """The cached comparison of the two runs, or None after showing why it failed."""
    try:
        return cache.side_by_side(*paths)
    except (ValueError, OSError) as exc:
        components.show_error(f"The runs cannot be compared: {exc}",
                              hint="Pick other runs; a damaged run is listed on the Audit "
                                   "page with what is missing.")
        return None


def overlap(side: Any, paths: tuple[Path, Path]) -> None:
    """The row overlap (full width), the parameters that differ, and the downloads."""
    st.subheader("Row overlap")
    if side.note:
        st.info(components.md_escape(side.note), icon=":material/info:")
    c = side.comparison
    if c is None:
        components.metric_row([("Removed-set Jaccard", "not applicable", None),
                               ("Jaccard of random removals", "not applicable", None),
                               ("Spearman of predictability", "not applicable", None)])
    else:
        ratio = (c.removed_jaccard / c.expected_jaccard_random
                 if c.expected_jaccard_random else float("nan"))
        components.metric_row([
            ("Removed in both", format_value(c.n_removed_both, "count"), None),
            ("Removed-set Jaccard", format_value(c.removed_jaccard), None),
            ("Jaccard of random removals", format_value(c.expected_jaccard_random), None),
            ("Jaccard / random", "–" if ratio != ratio else f"{ratio:.2f}×", None),
            ("Spearman of predictability", format_value(c.spearman), None),
        ])
        st.caption(f"{format_value(c.n_removed_a, 'count')} rows removed by A, "
                   f"{format_value(c.n_removed_b, 'count')} by B; "
                   f"{format_value(len(c.changed), 'count')} rows have a different status; "
                   f"Pearson {format_value(c.pearson)} over "
                   f"{format_value(c.n_scored_both, 'count')} rows scored in both.")
    params = side.parameter_table()
    left, right = st.columns(2)
    with left:
        st.markdown("**Parameters that differ**")
        if len(params):
            # st.table wraps long values instead of cutting them: every difference is read
            # in full, one parameter (or measure option) per row.
            st.table(params, hide_index=True)
        else:
            st.caption("None: the runs have the same parameters.")
    with right:
        if c is not None:
            st.markdown("**Status in A (rows) against status in B (columns)**")
            st.dataframe(c.status_table)
    if c is not None and len(c.changed):
        with st.expander(f"Rows whose status differs ({len(c.changed):,})"):
            st.dataframe(c.changed.head(MAX_CHANGED_ROWS), hide_index=True)
            if len(c.changed) > MAX_CHANGED_ROWS:
                st.caption(f"First {MAX_CHANGED_ROWS:,} rows.")
    if side.cue_changes is not None:
        with st.expander("Cue changes (retained rows, B − A)"):
            st.dataframe(side.cue_changes.head(MAX_TABLE_ROWS), hide_index=True)
    a, b = side.a, side.b
    st.download_button(
        "Comparison as HTML", data=lambda: cache.compare_html(*paths).encode("utf-8"),
        file_name=f"compare-{a.name}-vs-{b.name}.html"[:200], mime="text/html",
        on_click="ignore", icon=":material/description:", key=state.key(PAGE, "dl_html"))


#: Tables up to this many rows are drawn at full height (no inner scrolling), so that the
#: two columns of a section line up row for row.
FULL_HEIGHT_ROWS = 15


def _height(n_rows: int) -> int | str:
    return 35 * (n_rows + 1) + 3 if n_rows <= FULL_HEIGHT_ROWS else "auto"


def _table(frame: pd.DataFrame | None, absent: str = "Not in this run.") -> None:
    if frame is None or frame.empty:
        st.caption(absent)
        return
    percent = [c for c in frame.columns if str(c).startswith("share") or c == "kept"]
    st.dataframe(frame.head(MAX_TABLE_ROWS), hide_index=True, height=_height(len(frame)),
                 column_config={c: st.column_config.NumberColumn(format="percent")
                                for c in percent})
    if len(frame) > MAX_TABLE_ROWS:
        st.caption(f"First {MAX_TABLE_ROWS} of {len(frame):,} rows.")


def _run_facts(profile: Any, which: str) -> None:
    st.markdown(f"**{which}: {components.md_escape(profile.name)}**")
    st.caption(f"{components.md_escape(profile.filter)} · input "
               f"{components.md_escape(profile.input_name)} · sha256 {profile.sha256[:12]} · "
               f"created {profile.created.replace('T', ' ')[:19]} UTC")
    if profile.stop:
        st.caption(components.md_escape(profile.stop))


def _headline(profile: Any) -> None:
    h = profile.headline
    pp = format_value(h.get("bias_removed_pp"), "pp")
    if h.get("bias_removed_verdict") not in (None, "ok") and pp != "–":
        pp += f" ({h['bias_removed_verdict']})"
    components.metric_row([
        ("Retained", format_value(h.get("retained"), "count"), None),
        ("Bias removed (hyp.-only)", pp, None,
         "Bias removed beyond size, hypothesis-only baseline: random control minus retained "
         "rows. " + (h.get("bias_removed_caveat") or "")),
        ("Max |z| after", format_value(h.get("max_abs_z_after")), None),
    ])
    if h.get("bias_removed_caveat"):
        st.warning(components.md_escape(h["bias_removed_caveat"]))
    # st.table wraps long labels and values (a dataframe cuts them at the column's width).
    st.table(profile.headline_table(), hide_index=True)


def columns(side: Any) -> None:
    """The same sections for run A (left) and run B (right), one row of columns each."""
    a, b = side.a, side.b
    fixed = [
        ("Run", lambda p, w: _run_facts(p, w)),
        ("Headline", lambda p, w: _headline(p)),
        ("Sizes", lambda p, w: _table(p.sizes)),
        ("Labels (before vs after)", lambda p, w: _table(p.labels)),
        ("Splits", lambda p, w: _table(p.splits, "No split column.")),
    ]
    for title, draw in fixed:
        for column, profile, which in zip(st.columns(2), (a, b), ("A", "B"), strict=True):
            with column:
                st.subheader(title)
                draw(profile, which)
    for section in side.sections:
        for column, which in zip(st.columns(2), ("a", "b"), strict=True):
            with column:
                st.subheader(section.label)
                _measure(section, which)


def _measure(section: Any, which: str) -> None:
    state_ = section.state_a if which == "a" else section.state_b
    error = section.errors.get(which)
    if error:
        st.caption(f"Could not be read: {components.md_escape(error)}")
        return
    if not section.tables:
        st.caption(f"Not in this run ({state_}).")
        return
    if state_ == "damaged":
        st.caption("Some files of this measure are missing; what is left is shown.")
    for table in section.tables:
        st.markdown(f"**{components.md_escape(table.title)}**")
        _table(table.a if which == "a" else table.b)
