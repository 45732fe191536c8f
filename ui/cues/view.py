"""Panels of the Cues page: the cue table, PMI/LMI/z side by side, drill-down, probing."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from aflite_core.cues import linguistic, probing
from aflite_core.cues import statistics as cue_statistics
from ui import cache, charts, components, state

PAGE = "cues"
#: Cues offered in the drill-down's list (the table's order: the strongest first).
MAX_CUE_CHOICES = 2_000

SUMMARY = (
    "A **cue** is a feature of the text (a word, a negation, the tense, the sentiment, ...) "
    "whose presence gives the label away. ICQ's **cueness** ranks features whose label "
    "distribution is skewed in training *and* skewed the same way in test, so that a model "
    "can score by exploiting them; PMI, LMI and z are the classic alternatives."
)
FAMILY_NAMES = {"word": "words", "sentiment": "sentiment", "tense": "tense",
                "negation": "negation", "overlap": "premise overlap", "ner": "named entities",
                "typo": "typos"}
SORT_KEYS = ["cueness_shrunk", "cueness", "cueness_proportion", "mse", "jsd", "z", "pmi",
             "lmi", "n_train", "majority_share"]
SHOWN_COLUMNS = ["feature_type", "feature", "n_train", "n_test", "majority_label",
                 "majority_share", "cueness_shrunk", "cueness", "mse", "jsd", "pmi_label", "pmi",
                 "lmi_label",
                 "lmi", "z_label", "z", "z_significant"]


def formulas() -> str:
    """Markdown with every formula of the cue statistics (``FORMULAS``) and its source."""
    table = cue_statistics.FORMULAS
    parts = []
    for name in ("mse", "mse_proportion", "jsd", "cueness", "cueness_shrunk", "pmi", "lmi",
                 "z", "z_threshold", "accuracy_delta", "distribution_test"):
        entry = table.get(name)
        if entry:
            parts.append(f"**{name}**\n\n$$\n{entry['latex']}\n$$\n\n{entry['text']}.  \n"
                         f"*Source: {entry['source']}.*")
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- sources
@st.cache_data(max_entries=8, show_spinner="Computing the cue table…")
def _dataset_cues(content_hash: str, features: tuple[str, ...], min_count: int,
                  _dataset: Any) -> pd.DataFrame:
    return cue_statistics.cue_table(_dataset, features=list(features), min_count=min_count)


def cue_source(dataset: Any, run: Any) -> tuple[pd.DataFrame | None, str, dict]:
    """Pick the cue table to show: the open run's (full/retained) or one computed on demand.

    Returns
    -------
    table : DataFrame or None
        One row per qualifying feature (no ``scope`` column), or None when there is none yet.
    origin : str
        What the table is ("run, full data", ...).
    attrs : dict
        The table's metadata (labels, split, methods, unavailable families).
    """
    run_cues = run.cues if run is not None else None
    options = []
    if run_cues is not None and not run_cues.empty:
        options += ["run:full", "run:retained"]
    if dataset is not None:
        options.append("dataset")
    if not options:
        return None, "", {}
    names = {"run:full": "Open run: full data (before AFLite)",
             "run:retained": "Open run: retained rows (after AFLite)",
             "dataset": "Current dataset (compute on demand)"}
    choice = st.segmented_control("Cue table of", options, format_func=names.get,
                                  default=options[0], required=True,
                                  key=state.key(PAGE, "source"))
    if choice.startswith("run:"):
        scope = choice.split(":", 1)[1]
        table = run_cues[run_cues["scope"] == scope].drop(columns="scope")
        attrs = dict(run_cues.attrs or {})
        attrs.update((attrs.get("scopes") or {}).get(scope, {}))
        return table.reset_index(drop=True), names[choice], attrs
    families = linguistic.FAMILIES
    c1, c2, c3 = st.columns([3, 1, 1], vertical_alignment="bottom")
    chosen = c1.multiselect("Feature families", list(families), default=list(families),
                            format_func=lambda f: FAMILY_NAMES.get(f, f),
                            key=state.key(PAGE, "families"))
    min_count = c2.number_input("Min support", 1, 1000, 5, key=state.key(PAGE, "min_count"),
                                help="A feature counts only if it occurs at least this often "
                                     "in train and in test.")
    params = (dataset.content_hash, tuple(chosen), int(min_count))
    requested = state.key(PAGE, "requested")
    if c3.button("Compute", type="primary", key=state.key(PAGE, "compute"),
                 disabled=not chosen):
        state.put(requested, params)
    if state.get(requested) != params:
        st.caption("Choose the families and press Compute (a few seconds on the sample; the "
                   "annotations are cached on disk for the next time).")
        return None, "", {}
    try:
        table = _dataset_cues(*params, dataset)
    except (ValueError, LookupError, OSError) as exc:
        components.show_error(f"The cue table could not be computed: {exc}")
        return None, "", {}
    return table, f"{dataset.name} (computed here)", dict(table.attrs or {})


# --------------------------------------------------------------------------- table
def notes(attrs: dict) -> None:
    """Split used, feature methods, and families that could not be computed."""
    if attrs.get("split"):
        split = components.md_escape(attrs["split"])
        rows = ""
        if attrs.get("n_train_examples") is not None:  # this table's own rows (per scope)
            rows = (f" This table: {int(attrs['n_train_examples']):,} training and "
                    f"{int(attrs.get('n_test_examples', 0)):,} test rows.")
        st.caption(f"Train/test: {split}.{rows} z threshold (Bonferroni, α = "
                   f"{attrs.get('alpha', 0.01)}): {attrs.get('z_threshold', float('nan')):.2f}.")
    unavailable = attrs.get("unavailable") or {}
    if unavailable:
        st.warning(f"{len(unavailable)} feature famil{'y' if len(unavailable) == 1 else 'ies'} "
                   f"could not be computed ({', '.join(map(str, unavailable))}): "
                   + cache.unavailable_fix(), icon=":material/warning:")
        with st.expander("Why each family is unavailable"):
            for family, why in unavailable.items():
                st.text(f"{family}: {why}")
    methods = attrs.get("methods") or {}
    if methods:
        with st.expander("How each feature family was computed"):
            st.dataframe(pd.DataFrame({"family": list(methods), "method": list(methods.values())}),
                         hide_index=True)


def filtered_table(table: pd.DataFrame) -> pd.DataFrame:
    """Family filter, minimum support slider, feature search and sort; returns the rows."""
    c1, c2, c3, c4 = st.columns([2, 2, 2, 1], vertical_alignment="bottom")
    families = sorted(table["feature_type"].astype(str).unique())
    chosen = c1.multiselect("Families", families, format_func=lambda f: FAMILY_NAMES.get(f, f),
                            key=state.key(PAGE, "filter_families"), placeholder="all")
    top = int(max(table["n_train"].max(), 1)) if len(table) else 1
    support = c2.slider("Min support (train and test)", 1, max(min(top, 500), 2), 1,
                        key=state.key(PAGE, "support"))
    sort_by = c3.selectbox("Sort by", [k for k in SORT_KEYS if k in table],
                           key=state.key(PAGE, "sort"))
    query = c4.text_input("Feature contains", key=state.key(PAGE, "query"))
    rows = table
    if chosen:
        rows = rows[rows["feature_type"].astype(str).isin(chosen)]
    rows = rows[(rows["n_train"] >= support) & (rows["n_test"] >= support)]
    if query:
        rows = rows[rows["feature"].astype(str).str.contains(query, case=False, regex=False)]
    return rows.sort_values(sort_by, ascending=False, kind="stable")


def show_table(rows: pd.DataFrame) -> None:
    """The cue table (paged)."""
    shown = rows[[c for c in SHOWN_COLUMNS if c in rows]]
    st.markdown(f"**{len(shown):,} cues**")
    components.paged_table(shown.reset_index(drop=True), page_key=state.key(PAGE, "page"),
                           page_size=25)


def side_by_side(table: pd.DataFrame, labels: list[str]) -> None:
    """Top features per label by PMI, LMI and z, in three columns."""
    st.subheader("PMI, LMI and z side by side")
    if not labels:
        st.caption("No per-label statistics in this table.")
        return
    label = st.selectbox("Label", labels, key=state.key(PAGE, "side_label"))
    n = st.slider("Top", 5, 50, 10, key=state.key(PAGE, "side_top"))
    for col, stat in zip(st.columns(3), ("pmi", "lmi", "z"), strict=True):
        column = f"{stat}_{label}"
        with col:
            st.markdown(f"**{stat.upper()}**")
            if column not in table:
                st.caption("not computed")
                continue
            top = table.nlargest(n, column)[["feature_type", "feature", column, "n_train"]]
            st.dataframe(top.rename(columns={column: stat}), hide_index=True,
                         column_config={stat: st.column_config.NumberColumn(format="%.3f")})


def drill_down(table: pd.DataFrame, labels: list[str], run: Any, scope_tables: dict) -> None:
    """One cue: train vs test label shares, before vs after AFLite, example rows."""
    st.subheader("One cue in detail")
    if table.empty:
        st.caption("No cue to show.")
        return
    listed = table.head(MAX_CUE_CHOICES)
    options = [f"{t}:{f}" for t, f in zip(listed["feature_type"], listed["feature"],
                                          strict=True)]
    choice = st.selectbox("Cue", options, key=state.key(PAGE, "drill"))
    if not choice:
        return
    feature_type, _, feature = choice.partition(":")
    row = table[(table["feature_type"] == feature_type) & (table["feature"] == feature)].iloc[0]
    left, right = st.columns(2)
    with left:
        counts = {"train": {lab: int(row.get(f"train_{lab}", 0)) for lab in labels},
                  "test": {lab: int(row.get(f"test_{lab}", 0)) for lab in labels}}
        st.markdown("**Label shares among rows with the cue, train vs test**")
        st.plotly_chart(charts.label_distribution(counts), key=state.key(PAGE, "drill_chart"))
    with right:
        st.markdown("**Before vs after AFLite**")
        compare = []
        for scope, scope_table in scope_tables.items():
            hit = scope_table[(scope_table["feature_type"] == feature_type)
                              & (scope_table["feature"] == feature)]
            if hit.empty:  # runs made before below-support cues were listed
                compare.append({"scope": scope, "note": "below the minimum support "
                                                        "(count not recorded in this run)"})
                continue
            h = hit.iloc[0]
            supported = bool(h.get("supported", True)) if pd.notna(h.get("supported", True)) \
                else True
            entry = {"scope": scope, "n_train": int(h["n_train"]), "n_test": int(h["n_test"])}
            if supported:
                entry.update({"majority": h["majority_label"],
                              "majority_share": float(h["majority_share"]),
                              "cueness": float(h.get("cueness_shrunk", h["cueness"]))})
            else:
                entry["note"] = (f"below the minimum support (n = {int(h['n_train'])} train, "
                                 f"{int(h['n_test'])} test)")
            compare.append(entry)
        if compare:
            st.dataframe(pd.DataFrame(compare), hide_index=True)
        else:
            st.caption("Open a run with cue statistics to compare before and after AFLite.")
    if run is not None:
        _examples(run, feature_type, feature)


def _examples(run: Any, feature_type: str, feature: str) -> None:
    try:
        mask = cache.feature_mask(run.path, feature_type, feature)
        index = cache.row_index(run.path)
    except (ValueError, LookupError, OSError) as exc:
        st.caption(f"Examples are not available: {components.md_escape(exc)}")
        return
    positions = np.flatnonzero(mask)  # the first 200 taken by position, not every hit copied
    shown = index.page(positions, 0, 200)
    st.markdown(f"**Rows with the cue** ({len(positions):,} in the run; first 200 shown)")
    st.dataframe(components.with_row_id(shown), hide_index=True,
                 column_config=components.column_config(shown))


# --------------------------------------------------------------------------- probing
@st.cache_data(max_entries=8, show_spinner="Probing the model…")
def _probe(content_hash: str, source: str, predictions_key: str, min_count: int,
           families: tuple[str, ...], _dataset: Any, _predictions: Any) -> dict:
    if source in probing.BASELINES:
        result = probing.probe_model(_dataset, None, baseline=source, min_count=min_count,
                                     features=families)
    else:
        result = probing.probe_model(_dataset, _predictions, min_count=min_count,
                                     features=families)
    return {"accuracy": result.accuracy, "distribution": result.distribution,
            "model": result.model, "split": result.split,
            "overall_accuracy": result.overall_accuracy, "labels": list(result.labels)}


def _uploaded_predictions(dataset: Any, upload: Any) -> list[str]:
    """Map an uploaded (row_id, prediction) file onto the dataset's audited rows."""
    raw = cache.read_frame(upload.getvalue(), upload.name)
    return probing.predictions_by_row_id(dataset, raw, name=upload.name)


def probing_panel(dataset: Any) -> None:
    """Accuracy test table and distribution-test bars for a model's predictions."""
    st.subheader("Does a model exploit the cues?")
    st.markdown(
        "Give a model's predictions on the test rows (or use a built-in baseline). The "
        "**accuracy test** compares accuracy with and without each cue "
        "(Δ = acc(S_f) − acc(S_¬f)); the **distribution test** compares the labels the model "
        "predicts on cue rows (label-balanced) with the cue's training label distribution.")
    if dataset is None:
        components.empty_state("Load a dataset to probe a model on it.", page="app_pages/data.py",
                               label="Go to Data")
        return
    sources = {"hypothesis_only": "Built-in hypothesis-only baseline",
               "full_input": "Built-in full-input baseline",
               "column": "A column of the dataset holding predictions",
               "upload": "Upload predictions (CSV/JSONL with row_id and prediction)"}
    sources = {k: v for k, v in sources.items()
               if k in ("column", "upload") or k in probing.BASELINES}
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    source = c1.selectbox("Predictions", list(sources), format_func=sources.get,
                          key=state.key(PAGE, "probe_source"))
    min_count = c2.number_input("Min support", 1, 1000, 5, key=state.key(PAGE, "probe_min"))
    families = st.multiselect("Feature families probed", list(linguistic.FAMILIES),
                              default=list(linguistic.FAMILIES),
                              key=state.key(PAGE, "probe_families"),
                              help="Every family by default: a model may exploit negation, "
                                   "sentiment or overlap as well as words.")
    if not families:
        st.caption("Choose at least one feature family.")
        return
    predictions: Any = None
    key = source
    if source == "column":
        columns = [c for c in dataset.frame.columns if c not in dataset.columns.to_dict().values()]
        if not columns:
            st.caption("The dataset has no extra column that could hold predictions.")
            return
        predictions = st.selectbox("Predictions column", columns,
                                   key=state.key(PAGE, "probe_column"))
        key = f"column:{predictions}"
    elif source == "upload":
        upload = st.file_uploader("Predictions file", type=["csv", "tsv", "jsonl", "parquet"],
                                  key=state.key(PAGE, "probe_upload"))
        if upload is None:
            st.caption("The file needs a `row_id` column (the dataset's row ids) and a "
                       "`prediction` column.")
            return
        try:
            predictions = _uploaded_predictions(dataset, upload)
        except (ValueError, OSError) as exc:
            components.show_error(str(exc))
            return
        key = "upload:" + cache.digest(json.dumps(predictions).encode())
    requested = state.key(PAGE, "probe_requested")
    params = (dataset.content_hash, source, key, int(min_count),
              tuple(f for f in linguistic.FAMILIES if f in families))
    if st.button("Probe", type="primary", key=state.key(PAGE, "probe_go")):
        state.put(requested, params)
    if state.get(requested) != params:
        return
    try:
        result = _probe(*params, dataset, predictions)
    except (ValueError, LookupError, OSError) as exc:
        components.show_error(f"Probing failed: {exc}")
        return
    st.caption(f"Model: {components.md_escape(result['model'])} · accuracy on the test rows "
               f"{result['overall_accuracy']:.1%} · {result['split']}")
    accuracy = result["accuracy"].sort_values("delta", ascending=False, kind="stable")
    st.markdown("**Accuracy test** (positive Δ: the model does better when the cue is there)")
    st.dataframe(accuracy, hide_index=True, height=320, column_config={
        c: st.column_config.NumberColumn(format="%.3f")
        for c in ("delta", "acc_with", "acc_without", "cueness", "distribution_jsd")})
    distribution = result["distribution"]
    if distribution.empty:
        return
    names = [f"{t}:{f}" for t, f in
             distribution[["feature_type", "feature"]].drop_duplicates().itertuples(index=False)]
    pick = st.selectbox("Distribution test for cue", names, key=state.key(PAGE, "probe_cue"))
    ftype, _, feat = pick.partition(":")
    part = distribution[(distribution["feature_type"] == ftype)
                        & (distribution["feature"] == feat)]
    long = pd.concat([
        pd.DataFrame({"label": part["label"], "share": part["train_share"],
                      "set": "training labels with the cue"}),
        pd.DataFrame({"label": part["label"], "share": part["predicted_share"],
                      "set": "model predictions (flattened test rows)"}),
    ])
    st.plotly_chart(charts.grouped_bars(long, x="label", y="share", group="set",
                                        y_title="share", percent=True),
                    key=state.key(PAGE, "probe_chart"))
    jsd = float(part["jsd"].iloc[0]) if len(part) else float("nan")
    st.caption(f"JSD between the two distributions: {jsd:.3f} (0 = the model predicts the "
               "cue's training label distribution exactly; ln 2 ≈ 0.693 at most).")


def scope_tables(run: Any) -> dict[str, pd.DataFrame]:
    """The run's cue table per scope (``full``, ``retained``), or empty."""
    cues = run.cues if run is not None else None
    if cues is None or cues.empty or "scope" not in cues:
        return {}
    return {scope: part.drop(columns="scope") for scope, part in cues.groupby("scope",
                                                                                sort=False)}


def labels_of(table: pd.DataFrame, attrs: dict) -> list[str]:
    """Labels of a cue table (from its metadata, else from its ``train_<label>`` columns)."""
    labels = list(attrs.get("labels") or [])
    if labels:
        return [str(x) for x in labels]
    return [c[len("train_"):] for c in table.columns if c.startswith("train_")]
