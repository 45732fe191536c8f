"""Panels of the Report page: before vs after, measures, and the downloads."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from ui import cache, charts, components, state

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
        ("Warm-up / excluded", f"{s.get('warmup', 0):,} / {s.get('excluded', 0):,}", None),
    ])
    planted = _planted(run)
    if planted is not None:
        st.info(planted, icon=":material/science:")


def _planted(run: Any) -> str | None:
    """For the synthetic demo: share of planted-bias rows before and after."""
    try:
        rows = cache.rows_table(run.path)
    except (ValueError, OSError):
        return None
    if "planted_bias" not in rows:
        return None
    flag = rows["planted_bias"].astype(str).str.lower().isin(["true", "1"])
    audited = rows["status"].isin(["retained", "removed"])
    kept = rows["status"] == "retained"
    before = flag[audited].mean() if audited.any() else float("nan")
    after = flag[kept].mean() if kept.any() else float("nan")
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


def cues(run: Any) -> None:
    """Top cues of the full data and their cueness after AFLite."""
    st.subheader("Top cues and their cueness change")
    table = run.cues
    if table is None or table.empty or "scope" not in table:
        st.caption("This run has no cue statistics (measure *Lexical cues*).")
        return
    key = ["feature_type", "feature"]
    full = table[table["scope"] == "full"].set_index(key)
    kept = table[table["scope"] == "retained"].set_index(key)
    n = st.slider("Top cues", 5, 50, 15, key=state.key(PAGE, "top_cues"))
    top = full.head(n)
    out = pd.DataFrame({
        "majority label": top["majority_label"],
        "cueness before": top["cueness"],
        "cueness after": kept["cueness"].reindex(top.index),
        "n_train before": top["n_train"],
        "n_train after": kept["n_train"].reindex(top.index),
    })
    out["change"] = out["cueness after"] - out["cueness before"]
    st.dataframe(out.reset_index(), hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="%.3g")
        for c in ("cueness before", "cueness after", "change")})
    st.caption("An empty *after* cell: the cue no longer has the minimum support in the "
               "retained rows.")


def knn(run: Any) -> None:
    """KNN-distance table, before vs after."""
    st.subheader("Distances from held-out rows to their nearest training rows")
    table = run.knn
    if table is None or table.empty:
        st.caption("This run has no KNN measures (measure *KNN distances*).")
        return
    overall = table[table["class"].astype(str) == "all"] if "class" in table else table
    wide = overall.pivot_table(index=["relation", "k"], columns="scope",
                               values="mean_distance").reset_index()
    wide = wide[[c for c in ("relation", "k", "before", "after") if c in wide]]
    if {"before", "after"} <= set(wide.columns):
        wide["change"] = wide["after"] - wide["before"]
    st.dataframe(wide, hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="%.4f") for c in ("before", "after", "change")})
    st.caption("Mean cosine distance per neighbour, all classes; the per-class table with "
               "95% bootstrap intervals is below.")
    with st.expander("Per class, with confidence intervals"):
        st.dataframe(table, hide_index=True)


def baselines(run: Any) -> None:
    """Hypothesis-only and linear-probe accuracy: full vs retained vs random control."""
    st.subheader("Baselines vs the random-subset control")
    data = run.baselines
    if not data:
        st.caption("This run has no baselines (measure *Baselines vs random control*).")
        return
    records = pd.DataFrame(data.get("results") or [])
    names = {"hypothesis_only": "hypothesis-only", "linear_probe": "linear probe on Φ"}
    items = []
    for key, name in names.items():
        block = data.get(key)
        if isinstance(block, dict) and "bias_removed_beyond_size" in block:
            items.append((f"Bias removed beyond size ({name})",
                          f"{block['bias_removed_beyond_size']:.1%}", None))
    if items:
        components.metric_row(items)
    if records.empty:
        return
    records["baseline"] = records["baseline"].map(lambda b: names.get(b, b))
    left, right = st.columns([3, 2])
    left.plotly_chart(
        charts.grouped_bars(records, x="baseline", y="accuracy", group="subset",
                            error="accuracy_std" if "accuracy_std" in records else None,
                            y_title="cross-validated accuracy", percent=True),
        key=state.key(PAGE, "baselines_chart"))
    right.dataframe(records, hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="percent")
        for c in ("accuracy", "accuracy_std", "majority_accuracy")})


def duplicates(run: Any) -> None:
    """Exact and near duplicates before vs after (the run's measure, else the loader's)."""
    st.subheader("Duplicates")
    data = run.read_json("duplicates.json") if run.has("duplicates.json") else None
    if data and data.get("summary"):
        summary = pd.DataFrame(data["summary"])
        wide = summary.pivot_table(index="kind", columns="scope",
                                   values=["n_duplicate_rows", "share"])
        wide.columns = [f"{stat} {scope}" for stat, scope in wide.columns]
        order = [c for c in ("n_duplicate_rows before", "n_duplicate_rows after",
                             "share before", "share after") if c in wide]
        st.dataframe(wide[order], column_config={
            c: st.column_config.NumberColumn(format="percent") for c in order
            if c.startswith("share")})
        threshold = (data.get("params") or {}).get("threshold")
        st.caption("exact = same normalised premise + hypothesis; near = cosine similarity on "
                   f"Φ of at least {threshold}. Duplicate rows = rows in groups minus one per "
                   "group.")
        for filename, title in (("duplicates_exact.parquet", "Exact duplicate groups"),
                                ("duplicates_near.parquet", "Near-duplicate pairs")):
            if run.has(filename):
                with st.expander(title):
                    st.dataframe(pd.read_parquet(run.path / filename).head(5000),
                                 hide_index=True)
        return
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


def inoculation(run: Any) -> None:
    """Inoculation curves: accuracy on original vs challenge data as challenge rows are added."""
    st.subheader("Inoculation")
    data = run.read_json("inoculation.json") if run.has("inoculation.json") else None
    if not data or not data.get("summary"):
        st.caption("No inoculation curves in this run: tick *Inoculation* on the Audit page "
                   "(or run `python -m aflite_core inoculate ORIGINAL CHALLENGE --out DIR`).")
        return
    summary = pd.DataFrame(data["summary"])
    long = pd.concat([
        pd.DataFrame({"n": summary["n"], "accuracy": summary["original_mean"],
                      "eval_set": "held-out original"}),
        pd.DataFrame({"n": summary["n"], "accuracy": summary["challenge_mean"],
                      "eval_set": "held-out challenge (AFLite-retained)"}),
    ])
    left, right = st.columns([3, 2])
    left.plotly_chart(charts.line_curves(long, x="n", y="accuracy", group="eval_set",
                                         x_title="challenge examples added (n)",
                                         y_title="accuracy"),
                      key=state.key(PAGE, "inoculation_chart"))
    with right:
        st.metric("Outcome", str(data.get("outcome_label", data.get("outcome"))))
        st.text(str(data.get("explanation", "")))
        st.caption("1 = dataset weakness (the gap closes, little loss on the original); "
                   "2 = model weakness (the gap stays); 3 = distribution difference (the gap "
                   "closes but original accuracy drops). Liu, Schwartz & Smith, NAACL 2019.")
    st.dataframe(summary, hide_index=True)


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
    for col, (what, label, stem) in zip(cols, items, strict=False):
        col.download_button(
            label, data=lambda what=what: cache.export_bytes(run.path, what),
            file_name=f"{run.name}-{stem}.csv", mime="text/csv", on_click="ignore",
            icon=":material/download:", key=state.key(PAGE, f"dl_{what}"))
    if run.cues is not None:
        cols[3].download_button(
            "Cue table CSV", data=lambda: cache.export_bytes(run.path, "cues"),
            file_name=f"{run.name}-cues.csv", mime="text/csv", on_click="ignore",
            icon=":material/download:", key=state.key(PAGE, "dl_cues"))
    cols[4].download_button(
        "HTML report", data=lambda: cache.report_html(run.path).encode("utf-8"),
        file_name=f"{run.name}-report.html", mime="text/html", on_click="ignore",
        icon=":material/description:", key=state.key(PAGE, "dl_report"))
