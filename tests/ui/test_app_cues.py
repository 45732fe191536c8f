"""AppTest: the Cues page (run cue table, computed table, drill-down, model probing)."""

from __future__ import annotations

import re

import pandas as pd
from apptest_support import (
    SAMPLE,
    assert_clean,
    errors,
    goto,
    new_app,
    open_run,
    texts,
)

from aflite_core.cues.linguistic import FAMILIES


def _cue_table(at) -> pd.DataFrame:
    return next(df.value for df in at.dataframe if "cueness" in df.value.columns)


def _cues(shared_run):
    at = new_app().run()
    open_run(at, shared_run)
    return goto(at, "cues")


def test_empty_state_without_data(runs_root) -> None:
    at = goto(new_app(autoload=False).run(), "cues")
    assert_clean(at)
    assert "Load a dataset (or open a run) first" in texts(at)


def test_cue_table_of_the_run_before_and_after(runs_root, shared_run) -> None:
    at = _cues(shared_run)
    assert_clean(at)
    stored = pd.read_parquet(shared_run / "cues.parquet")
    full = stored[stored["scope"] == "full"]
    table = _cue_table(at)
    assert table["feature"].tolist() == full["feature"].head(len(table)).tolist()
    assert "Formulas and sources" in [e.label for e in at.expander]
    # the after-AFLite table is one click away
    at.segmented_control(key="cues:source").set_value("run:retained").run()
    assert_clean(at)
    kept = stored[stored["scope"] == "retained"]
    table = _cue_table(at)
    assert table["feature"].tolist() == kept["feature"].head(len(table)).tolist()


def test_family_filter_support_and_side_by_side(runs_root, shared_run) -> None:
    at = _cues(shared_run)
    at.multiselect(key="cues:filter_families").set_value(["word"])
    at.slider(key="cues:support").set_value(20).run()
    assert_clean(at)
    table = _cue_table(at)
    assert set(table["feature_type"]) == {"word"}
    assert (table["n_train"] >= 20).all() and (table["n_test"] >= 20).all()
    # PMI / LMI / z columns for the chosen label
    at.selectbox(key="cues:side_label").set_value("contradiction").run()
    headers = [list(df.value.columns) for df in at.dataframe]
    assert any("pmi" in h for h in headers) and any("lmi" in h for h in headers)
    assert any("z" in h for h in headers)


def test_drill_down_shows_examples_with_the_cue(runs_root, shared_run) -> None:
    at = _cues(shared_run)
    options = at.selectbox(key="cues:drill").options
    word = next(o for o in options if o.startswith("word:") and len(o) > 8)
    at.selectbox(key="cues:drill").set_value(word).run()
    assert_clean(at)
    token = word.split(":", 1)[1]
    examples = at.dataframe[-1].value
    assert len(examples) > 0
    assert examples["hypothesis"].str.lower().str.contains(token, regex=False).all()
    assert "Before vs after AFLite" in texts(at)
    found = re.search(r"Rows with the cue\*\* \(([\d,]+) in the run; first 200 shown\)",
                      texts(at))
    assert found, "the count of rows with the cue is missing"
    assert len(examples) == min(int(found.group(1).replace(",", "")), 200)


def test_cue_table_computed_on_the_dataset(runs_root) -> None:
    at = goto(new_app().run(), "cues")
    assert_clean(at)
    at.multiselect(key="cues:families").set_value(["word", "negation"])
    at.button(key="cues:compute").click().run()
    assert_clean(at)
    table = _cue_table(at)
    assert set(table["feature_type"]) <= {"word", "negation"} and len(table) > 10


def test_probing_with_the_builtin_baseline(runs_root) -> None:
    at = goto(new_app().run(), "cues")
    at.button(key="cues:probe_go").click().run()
    assert_clean(at)
    accuracy = next(df.value for df in at.dataframe if "delta" in df.value.columns)
    assert accuracy["delta"].notna().any()
    assert len(at.get("plotly_chart")) >= 1  # the distribution-test bars
    # every feature family is probed by default, not only words
    assert at.multiselect(key="cues:probe_families").value == list(FAMILIES)
    assert len(set(accuracy["feature_type"])) > 1, set(accuracy["feature_type"])


def test_uploaded_predictions_are_checked(runs_root) -> None:
    at = goto(new_app().run(), "cues")
    at.selectbox(key="cues:probe_source").set_value("upload").run()
    at.file_uploader(key="cues:probe_upload").upload("preds.csv", b"foo,bar\n1,2\n",
                                                     "text/csv")
    at.run()
    assert not at.exception
    assert "expected a row id column" in errors(at)[0]

    sample = pd.read_csv(SAMPLE, dtype=str, keep_default_na=False)
    preds = pd.DataFrame({"row_id": range(len(sample)), "prediction": sample["label"]})
    at.file_uploader(key="cues:probe_upload").set_value(
        ("preds.csv", preds.to_csv(index=False).encode(), "text/csv"))
    at.run()
    at.button(key="cues:probe_go").click().run()
    assert_clean(at)
    assert "accuracy on the test rows 100.0%" in texts(at)


def test_retained_scope_caption_counts_its_own_rows(runs_root, shared_run) -> None:
    """The caption of the retained-rows table used to show the full run's test count."""
    from aflite_core.runs.folder import load_run

    scopes = load_run(shared_run).cues.attrs.get("scopes") or {}
    at = _cues(shared_run)
    at.segmented_control(key="cues:source").set_value("run:retained").run()
    assert_clean(at)
    kept = scopes["retained"]
    captions = " ".join(c.value for c in at.caption)
    assert (f"This table: {kept['n_train_examples']:,} training and "
            f"{kept['n_test_examples']:,} test rows") in captions
    assert kept["n_train_examples"] < scopes["full"]["n_train_examples"]


def test_drill_down_of_a_cue_below_support_after_filtering(runs_root, shared_run) -> None:
    """A cue below the minimum support in the retained rows said n = 0 / None although rows
    with it were retained; it now says so with its count."""
    stored = pd.read_parquet(shared_run / "cues.parquet")
    kept = stored[stored["scope"] == "retained"]
    below = kept[kept["supported"].eq(False)]
    assert len(below), "the shared run has a cue below support after filtering"
    cue = below.iloc[0]
    at = _cues(shared_run)
    at.selectbox(key="cues:drill").set_value(f"{cue['feature_type']}:{cue['feature']}").run()
    assert_clean(at)
    compare = next(df.value for df in at.dataframe if "scope" in df.value.columns
                   and "note" in df.value.columns)
    after = compare[compare["scope"] == "retained"].iloc[0]
    assert after["n_train"] == cue["n_train"]
    assert after["note"] == (f"below the minimum support (n = {int(cue['n_train'])} train, "
                             f"{int(cue['n_test'])} test)")
