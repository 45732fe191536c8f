"""Panels of the Report page: before vs after, measures, and the downloads."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from aflite_core.measures import BASELINE_LABELS, UNCERTAINTY_NOTE, Measure, registry
from aflite_core.measures import format_figure as baseline_fmt
from aflite_core.runs import views
from ui import cache, charts, components, state
from ui import downloads as streamed
from ui.panels import datamap as datamap_view
from ui.panels import label_issues as label_issues_view
from ui.panels import slices as slices_view

PAGE = "report"

SUMMARY = (
    "Before vs after AFLite, side by side: sizes, labels, cues, distances between held-out "
    "and training rows, and baselines. The headline is the **bias removed beyond size**: how "
    "much lower a hypothesis-only model scores on the retained rows than on a random subset "
    "of the same size."
)
FORMULA = r"""
* **Bias removed beyond size** $= \mathrm{acc}(\text{random subset}) -
  \mathrm{acc}(\text{retained})$, both $k$-fold cross-validated, the random subset drawn
  (seeded, several draws) with the size of the retained set. A drop that a random subset of the
  same size also shows is an effect of size, not of bias removal.
* **KNN distances**: for each held-out row, the cosine distances on $\Phi$ to its top-$k$
  nearest training rows of the same class and of the other classes, averaged; *after* uses
  only the retained training rows. Larger same-class distances after AFLite mean the easy
  near-duplicates are gone (AFLite paper, ICLR version, Table 3).
* **Cueness change**: cueness of a cue on the retained rows minus on the full data.

Sources: Le Bras et al., ICML 2020; Gururangan et al., NAACL 2018; Huang & Zhu, EMNLP 2023.
"""

#: Above this many rows the Report page counts duplicates only when asked (it re-reads
#: the whole dataset: about 10 s and 0.7 GB at 550k rows).
DUPLICATES_ON_RENDER_MAX_ROWS = 50_000


def sizes(run: Any) -> None:
    """Row counts before and after."""
    s = run.sizes
    st.subheader("Sizes")
    before = s.get("filtered", s.get("retained", 0) + s.get("removed", 0))
    retained = s.get("retained", 0)
    components.metric_row([
        ("Input rows", f"{s.get('input', 0):,}", None),
        ("Audited (before)", f"{before:,}", None),
        ("Retained (after)", f"{retained:,}",
         f"{retained / before - 1:.0%}" if before else None),
        ("Removed", f"{s.get('removed', 0):,}", None),
        *([("Kept, not filtered", f"{s['unfiltered']:,}", None,
            "Rows of a split AFLite did not filter (dev/test under the train-only policy): "
            "kept as they are and scored by models trained on the retained rows.")]
          if s.get("unfiltered") else []),
        ("Warm-up / excluded", f"{s.get('warmup', 0):,} / {s.get('excluded', 0):,}", None),
    ])
    what = views.filter_description(run)
    if what:
        st.caption(components.md_escape(what))
    per_split = views.split_sizes(run)
    if per_split is not None:
        # a split the filter did not touch has no share kept: say so rather than "None"
        shown = per_split.assign(kept=[f"{v:.2%}" if pd.notna(v) else "— (not filtered)"
                                       for v in per_split["kept"]])
        st.dataframe(shown, hide_index=True)
    stop = views.stop_explanation(run)
    if stop:
        st.caption(components.md_escape(stop))
    planted = _planted(run)
    if planted is not None:
        st.info(planted, icon=":material/science:")


def _planted(run: Any) -> str | None:
    """For the synthetic demo: share of planted-bias rows before and after."""
    try:
        shares = views.planted_shares(cache.rows_table(run.path))
    except (ValueError, OSError):
        return None
    if shares is None:
        return None
    before, after = shares
    return (f"Synthetic demo: rows carrying the planted bias were {before:.0%} of the audited "
            f"rows and are {after:.0%} of the retained rows.")


def labels(run: Any) -> None:
    """Label distributions before and after."""
    summary_labels = run.summary.get("labels") or {}
    before, after = summary_labels.get("before") or {}, summary_labels.get("after") or {}
    st.subheader("Labels")
    if not before:
        st.caption("No label counts in this run.")
        return
    left, right = st.columns([3, 2])
    left.plotly_chart(charts.label_distribution({"before": before, "after": after}),
                      key=state.key(PAGE, "labels_chart"))
    table = pd.DataFrame({"before": pd.Series(before), "after": pd.Series(after)}).fillna(0)
    table = table.astype(int)
    table["removed"] = table["before"] - table["after"]
    table["share removed"] = (table["removed"] / table["before"].where(table["before"] > 0))
    right.dataframe(table.rename_axis("label"), column_config={
        "share removed": st.column_config.NumberColumn(format="percent")})


def cues(run: Any, tables: dict[str, pd.DataFrame]) -> None:
    """Top cues of the full data and their cueness after AFLite (the core's table)."""
    measure_figures(run, "cues")
    title, table = next(iter(tables.items()))
    n = st.slider("Top cues", 5, 50, 15, key=state.key(PAGE, "top_cues"))
    st.markdown(f"**{title}** (first {n}, in the cue table's default order)")
    st.dataframe(table.head(n), hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="%.3g")
        for c in ("cueness before", "cueness after", "change")})
    st.caption("Ranked by cueness on label shares shrunk towards the label prior (stopwords "
               "and words seen five times do not lead; docs/cues.md). The *after* column says "
               "when a cue fell below the minimum support in the retained rows, with its "
               "count.")


def measure_figures(run: Any, name: str) -> None:
    """The figures the measure draws itself (the same the HTML report shows)."""
    for fig in cache.measure_figures(run.path, name):
        st.plotly_chart(charts.measure_figure(fig), config=charts.STATIC_CONFIG,
                        key=state.key("report", f"figure:{name}:{id(fig)}"))


def knn(run: Any, tables: dict[str, pd.DataFrame]) -> None:
    """KNN distances by k (the measure's figure) and the before/after table."""
    measure_figures(run, "knn")
    (title, wide), *rest = tables.items()
    st.markdown(f"**{title}**")
    st.dataframe(wide, hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="%.4f") for c in ("before", "after", "change")})
    for name, table in rest:
        with st.expander(name):
            st.dataframe(table, hide_index=True)


def baselines(run: Any, tables: dict[str, pd.DataFrame]) -> None:
    """Baseline accuracy: full vs retained vs random control, with majority and chance.

    The headline leads with the models whose features AFLite did not see; a figure whose
    model falls below majority or chance says so beside it (the core's verdicts).
    """
    figures = cache.baseline_headline(run.path)
    if figures:
        components.metric_row([
            (f"Bias removed beyond size: {f['label']}", baseline_fmt(f), None,
             " ".join(f["caveats"]) or None) for f in figures])
        for figure in figures:
            for caveat in figure["caveats"]:
                show = st.warning if figure["verdict"] != "ok" else st.caption
                show(components.md_escape(caveat))
        summary = tables.get("Bias removed beyond size")
        if summary is not None and "spread over seeds (pp)" in summary:
            seed_notes = [
                f"{BASELINE_LABELS.get(row['baseline'], row['baseline'])}: "
                f"{row['mean over seeds (pp)']:+.1f} ± {row['spread over seeds (pp)']:.1f} pp "
                f"over {int(row['AFLite seeds'])} AFLite seeds"
                for row in summary.to_dict("records")
                if pd.notna(row.get("spread over seeds (pp)"))]
            if seed_notes:
                st.caption("Spread over AFLite seeds: " + "; ".join(seed_notes) + ".")
        st.caption("Percentage points of accuracy: random control minus retained rows; "
                   f"{UNCERTAINTY_NOTE}. The control has the retained rows' size and "
                   "label counts (unless the run chose 'uniform').")
    warnings = tables.get("Warnings")
    if warnings is not None and not warnings.empty:
        for warning in warnings["warning"]:
            st.warning(components.md_escape(warning), icon=":material/warning:")
    records = next(iter(tables.values())).copy()
    if records.empty or "baseline" not in records:
        return
    records["baseline"] = records["baseline"].map(lambda b: BASELINE_LABELS.get(b, b))
    left, right = st.columns([3, 2])
    with left:
        measure_figures(run, "baselines")
    right.dataframe(records, hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="percent")
        for c in ("accuracy", "accuracy_std", "majority_accuracy", "chance")})


def duplicates(run: Any, tables: dict[str, pd.DataFrame]) -> None:
    """Exact and near duplicates before vs after (the run's measure, else the loader's)."""
    if tables:
        measure_figures(run, "duplicates")
        (title, wide), *_ = tables.items()
        order = [c for c in wide.columns if c != "kind"]
        st.dataframe(wide, hide_index=True, column_config={
            c: st.column_config.NumberColumn(format="percent") for c in order
            if c.startswith("share")})
        data = run.read_json("duplicates.json") or {}
        threshold = (data.get("params") or {}).get("threshold")
        st.caption("exact = same normalised premise + hypothesis; near = cosine similarity on "
                   f"Φ of at least {threshold}. Duplicate rows = rows in groups minus one per "
                   "group.")
        for filename, title in (("duplicates_exact.parquet", "Exact duplicate groups"),
                                ("duplicates_near.parquet", "Near-duplicate pairs")):
            if run.has(filename):
                with st.expander(title):
                    st.dataframe(run.read_parquet(filename).head(5000), hide_index=True)
        return


def duplicates_fallback(run: Any) -> None:
    """Duplicates were not part of the run: count them with the loader's rules."""
    n_rows = int(run.sizes.get("input", 0) or 0)
    if n_rows > DUPLICATES_ON_RENDER_MAX_ROWS and not st.button(
            f"Count duplicates ({n_rows:,} rows: re-reads the dataset, may take a while)",
            key=state.key(PAGE, "count_duplicates")):
        st.caption("Duplicates were not part of this run; they are counted on request for "
                   "runs this large.")
        return
    try:
        table = cache.duplicate_counts(run.path)
    except (ValueError, OSError, LookupError) as exc:
        st.caption(f"Duplicates could not be counted: {components.md_escape(exc)}")
        return
    st.dataframe(table)
    st.caption("Counted with the loader's rules (exact = same premise + hypothesis as an "
               "earlier row; normalised = the same after case-folding and dropping "
               "punctuation). Tick *Duplicates* on the Audit page for near duplicates on Φ.")


def inoculation(run: Any, tables: dict[str, pd.DataFrame]) -> None:
    """Inoculation curves: accuracy on original vs challenge data as challenge rows are added."""
    data = run.read_json("inoculation.json") or {}
    summary = next(iter(tables.values()))
    metric = str(data.get("challenge_metric") or "accuracy").replace("_", " ")
    left, right = st.columns([3, 2])
    with left:
        measure_figures(run, "inoculation")
    with right:
        st.metric("Outcome", str(data.get("outcome_label", data.get("outcome"))))
        st.text(str(data.get("explanation", "")))
        st.caption("1 = dataset weakness (the gap closes, little loss on the original); "
                   "2 = model weakness (the gap stays); 3 = distribution difference (the gap "
                   "closes but original accuracy drops); decided from the whole curve. Liu, "
                   "Schwartz & Smith, NAACL 2019.")
        refs = [f"{k.replace('_', ' ')} {float(data[k]):.3f}"
                for k in ("majority_rate", "chance") if isinstance(data.get(k), (int, float))]
        if refs:
            st.caption(f"Challenge curve: {metric}; " + ", ".join(refs) + ". Strength per n "
                       "chosen on held-out challenge rows.")
    st.dataframe(summary, hide_index=True)


def generic(run: Any, tables: dict[str, pd.DataFrame], name: str | None = None) -> None:
    """A measure without a panel of its own: its figures and before/after tables from the
    core."""
    if name is not None:
        measure_figures(run, name)
    for title, table in tables.items():
        st.markdown(f"**{components.md_escape(title)}**")
        st.dataframe(table, hide_index=True)


#: Measures with a panel of their own; every other measure is drawn by :func:`generic`.
PANELS = {"cues": cues, "knn": knn, "baselines": baselines, "duplicates": duplicates,
          "inoculation": inoculation, "datamap": datamap_view.report_panel,
          "pvi": datamap_view.pvi_report_panel, "slices": slices_view.report_panel,
          "label_issues": label_issues_view.report_panel}
#: Shown when a measure was not part of the run.
ABSENT = {
    "duplicates": None,  # counted with the loader's rules instead, see duplicates_fallback
    "inoculation": "No inoculation curves in this run: tick *Inoculation* on the Audit page "
                   "(or run `python -m aflite_core inoculate ORIGINAL CHALLENGE --out DIR`).",
}


#: Session key (not a widget's) holding the names of the Report sections the user opened;
#: it outlives the section widgets, which Streamlit forgets when another page is shown.
OPEN_SECTIONS = "report:open_sections"
#: Sections open on a first visit: the headline (bias removed beyond size).
DEFAULT_OPEN = frozenset({"baselines"})


def stages(run: Any) -> None:
    """Each stage's seconds and where it ran (this machine, or the audit's Dask cluster)."""
    table = views.stage_table(run)
    if table is None:
        st.caption("This run recorded no timings.")
        return
    on_dask = table.loc[table["ran on"] == "dask", "stage"].tolist()
    st.caption("On the audit's Dask cluster: " + ", ".join(on_dask) + "; every other stage "
               "on the machine that ran the audit." if on_dask else
               "Every stage ran on the machine that ran the audit (no Dask scheduler).")
    shown = table.assign(seconds=[f"{v:,.2f}" if pd.notna(v) else "– (not timed)"
                                  for v in table["seconds"]])
    st.dataframe(shown, hide_index=True)


def lazy_section(name: str, title: str) -> Any:
    """An expander titled ``title`` that draws its content only while it is open.

    Every section of the Report drawn at once cost most of its page switch in the browser
    (16 tables and 6 charts; ``benchmarks/bench_dashboard.py``), and the cost of leaving a
    heavy page lands on the next one. Closed sections send nothing to the browser. Which
    sections are open is remembered for the session.

    Returns
    -------
    streamlit expander
        Draw into it (``with box:``) only when ``box.open``.
    """
    opened = st.session_state.setdefault(OPEN_SECTIONS, set(DEFAULT_OPEN))
    box = st.expander(title, expanded=name in opened, key=state.key(PAGE, f"section:{name}"),
                      on_change="rerun")
    if box.open:
        opened.add(name)
    else:
        opened.discard(name)
    return box


def measure_section(run: Any, measure: Measure, state: str = "ok") -> None:
    """One registered measure, as a section drawn on request (:func:`lazy_section`): its
    panel, or its tables, or why it is absent (said in the title too).

    ``state`` is the measure's entry in :meth:`AuditRun.measure_states`.
    """
    if measure.tables is None and state not in ("error", "skipped"):  # nothing to show
        return
    title = f"**{measure.label}**"
    if state == "error":
        title += " · could not be computed"
    elif state == "skipped":
        title += " · does not apply to this run"
    elif state == "damaged":
        title += " · some files missing"
    elif state == "not run":
        title += " · not in this run"
    box = lazy_section(measure.name, title)
    if not box.open:
        return
    with box, components.shown_errors(measure.label):  # a damaged file: the rest stands
        _measure_body(run, measure, state)


def measure_sections(run: Any) -> None:
    """Every registered measure's section, in the registry's order (:func:`measure_section`)."""
    states = run.measure_states()
    for measure in registry.measures():
        measure_section(run, measure, states[measure.name])


def _measure_body(run: Any, measure: Measure, state: str) -> None:
    if measure.description:
        st.caption(measure.description)
    components.measure_warnings(run, measure.name)  # the caveats beside the figures
    if state == "error":
        error = (run.measures.get(measure.name) or {}).get("error", "unknown error")
        components.show_error(f"{measure.label} could not be computed in this run: {error}",
                              hint="The rest of the run is complete; rerun the audit with "
                                   "this measure to get it.")
        return
    if state == "skipped":
        reason = (run.measures.get(measure.name) or {}).get("reason", "")
        st.info(f"{measure.label} does not apply to this run: "
                f"{components.md_escape(reason)}", icon=":material/info:")
        return
    if state == "damaged":
        st.warning(f"Some files of {measure.label.lower()} are missing from the run folder; "
                   "what is left is shown.", icon=":material/warning:")
    tables = cache.measure_tables(run.path, measure.name)
    if not tables:
        if measure.name == "duplicates":
            duplicates_fallback(run)
            return
        where = (f"run `python -m aflite_core {measure.name} RUN_DIR FILE...` on this run"
                 if measure.inputs else "tick it on the Audit page")
        st.caption(ABSENT.get(measure.name) or f"This run has no {measure.label.lower()} "
                   f"({where}).")
        return
    panel = PANELS.get(measure.name)
    if panel is None:
        generic(run, tables, measure.name)
    else:
        panel(run, tables)


def downloads(run: Any) -> None:
    """Retained, removed, scores, cue table and the HTML report."""
    st.subheader("Downloads")
    st.caption("CSV files keep every original column and value, plus row_id, status, "
               "predictability and removal round. Cells that a spreadsheet would run as a "
               "formula (starting with =, +, -, @) get a leading apostrophe.")
    sizes = run.sizes
    cols = st.columns(5)
    st.caption(f"Retained: {sizes.get('retained', 0):,} rows · removed: "
               f"{sizes.get('removed', 0):,} rows · scores: one row per input row.")
    items = [("retained", "Retained CSV", "retained"),
             ("removed", "Removed CSV", "removed"),
             ("scores", "Scores CSV", "scores")]
    if run.cues is not None:
        items.append(("cues", "Cue table CSV", "cues"))
    for col, (what, label, stem) in zip(cols, items, strict=False):
        with col:  # streamed from the run's files while the browser saves them
            streamed.download(label, lambda what=what: cache.stream_export(run.path, what),
                               file_name=f"{run.name}-{stem}.csv", mime="text/csv",
                               key=state.key(PAGE, f"dl_{what}"),
                               signature=cache.run_signature(run.path, what))
    cols[4].download_button(
        "HTML report", data=lambda: cache.report_html(run.path).encode("utf-8"),
        file_name=f"{run.name}-report.html", mime="text/html", on_click="ignore",
        icon=":material/description:", key=state.key(PAGE, "dl_report"))
    if run.has("label_issues.parquet"):
        issues = (run.summary.get("measures") or {}).get("label_issues") or {}
        hardness = issues.get("bulk_hardness") or {}
        kept, clean = hardness.get("retained"), hardness.get("retained_clean")
        gives_up = (
            f" It is cleaner, not harder: its hypothesis-only accuracy is "
            f"{clean['beyond_random_pp']:+.1f} pp beyond a label-matched random subset of its "
            f"size, the retained set's {kept['beyond_random_pp']:+.1f} pp (> 0: harder than "
            "random rows); dropping every flagged row gives that up, so review them row by "
            "row on the *Review* page." if isinstance(kept, dict) and isinstance(clean, dict)
            else "")
        st.caption(f"Label issues: {issues.get('n_label_issues', 0):,} flagged rows (the "
                   "Report's *Label issues* section says how many were retained). A cleaner "
                   "set: the retained rows without them; the flagged rows alone for "
                   "relabelling (their suggested labels: the label issues table)." + gives_up)
        left, right, _ = st.columns([2, 2, 3])
        for col, what, label in ((left, "retained_clean", "Retained without label issues"),
                                 (right, "flagged", "Flagged label issues")):
            with col:
                streamed.download(label, lambda what=what: cache.stream_export(run.path, what),
                                  file_name=f"{run.name}-{what.replace('_', '-')}.csv",
                                  mime="text/csv", key=state.key(PAGE, f"dl_{what}"),
                                  signature=cache.run_signature(run.path, what))
