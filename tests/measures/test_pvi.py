"""Hypothesis-only pointwise V-information: planted cues, grouped folds, the run folder."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from planted import LABELS, filler_words, planted_texts

from aflite_core.io.datasets import load_dataset
from aflite_core.measures import pvi
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.runs.folder import load_run


def test_rows_with_a_planted_hypothesis_cue_have_high_pvi():
    texts, labels, cue = planted_texts()
    table = pvi.hypothesis_only_pvi(texts, labels, n_splits=5, random_state=0)
    assert len(table) == len(labels)
    assert table["fold"].between(0, 4).all()
    # p(y) is the training folds' label share: near a third here
    assert table["p_prior"].between(0.25, 0.42).all()
    np.testing.assert_allclose(table["pvi"],
                               np.log2(table["p_label"]) - np.log2(table["p_prior"]))
    assert table.loc[cue, "pvi"].mean() > 0.8  # bits: the label can be read off "nobody"
    assert abs(table.loc[~cue, "pvi"].mean()) < table.loc[cue, "pvi"].mean() / 3
    assert table.loc[cue, "correct"].mean() > 0.9
    # per label: contradictions (which carry the cue) hold more information
    summary = pvi.pvi_summary(table.assign(label=labels)).set_index("label")
    assert summary.loc["contradiction", "mean PVI (bits)"] > \
        summary.loc["neutral", "mean PVI (bits)"] + 0.2
    assert summary.loc["all", "rows"] == len(labels)


def test_grouped_folds_keep_twins_out_of_the_model_that_scores_them():
    """Groups of three rows with one unique hypothesis and a random label: a model that saw a
    twin reads the label off the unique words (PVI > 0); with groups no fold does."""
    rng = np.random.default_rng(1)
    n_groups = 300
    groups = np.repeat(np.arange(n_groups), 3)
    labels = np.repeat(LABELS[rng.integers(0, 3, n_groups)], 3)
    texts = [f"unique{g}a unique{g}b {filler_words(rng, 3)}" for g in groups]
    leaky = pvi.hypothesis_only_pvi(texts, labels, n_splits=5, random_state=0)
    grouped = pvi.hypothesis_only_pvi(texts, labels, n_splits=5, groups=groups,
                                      random_state=0)
    assert (grouped.groupby(groups)["fold"].nunique() == 1).all()
    assert leaky["pvi"].mean() > 0.3
    assert grouped["pvi"].mean() < 0.05  # no usable information in a random label


def test_invalid_inputs_are_refused():
    with pytest.raises(ValueError, match="hypotheses"):
        pvi.hypothesis_only_pvi(["a", "b"], ["x", "y", "x"])
    with pytest.raises(ValueError, match="2 distinct labels"):
        pvi.hypothesis_only_pvi(["a", "b", "c"], ["x", "x", "x"])
    with pytest.raises(ValueError, match="n_splits"):
        pvi.hypothesis_only_pvi(["a", "b", "c"], ["x", "y", "x"], n_splits=1)


def test_run_folder_round_trip(snli_dir, tmp_path):
    frame = pd.read_csv(snli_dir / "snli_dev.csv").head(900)
    dataset = load_dataset(frame, name="snli_900")
    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=16,
                         target_size=0.7, measures=("pvi",), report=False,
                         measure_params={"pvi": {"n_splits": 3}})
    run = load_run(run_audit(dataset, config, runs_root=tmp_path))
    table = run.read_parquet(pvi.FILE)
    scores = run.scores.set_index("row_id")
    filtered = scores[scores["status"].isin(["retained", "removed"])]
    assert len(table) == len(filtered)
    assert (table["status"].to_numpy() == scores.loc[table["row_id"], "status"].to_numpy()).all()
    info = run.measures["pvi"]
    assert info["params"]["n_splits"] == 3
    assert info["grouped"] == (dataset.groups() is not None)
    if dataset.groups() is not None:  # the premise groups: one fold per premise
        premise = run.frame.loc[table["row_id"], run.columns["premise"]].to_numpy()
        assert (table.groupby(premise)["fold"].nunique() == 1).all()
    assert info["v_information_bits"] == pytest.approx(table["pvi"].mean())
    tables = pvi.MEASURE.before_after(run)
    per_label = next(iter(tables.values())).set_index("label")
    assert set(per_label.index) == {*table["label"].unique(), "all"}
    # AFLite removes the rows a hypothesis-only-like model finds easy: they hold more
    # hypothesis information than the retained ones
    assert table.loc[table["status"] == "removed", "pvi"].mean() > \
        table.loc[table["status"] == "retained", "pvi"].mean()


@pytest.mark.parametrize("row_group", [16, 1 << 20])
def test_the_table_held_as_codes_is_written_as_the_strings_it_was(tmp_path, monkeypatch,
                                                                  row_group):
    """The PVI table holds its predictions, statuses and labels as categorical codes and its
    folds in int8 (a str object or an int64 per row before); written through the measure's
    ``astype`` (a row group at a time above ROW_GROUP_ROWS), the file is byte for byte the
    one written from the strings and int64 folds the table held before."""
    import filecmp

    import pyarrow.parquet as pq

    from aflite_core.io._tables import parquet_safe_table
    from aflite_core.measure_runs import _write_result
    from aflite_core.measures.registry import MeasureResult
    from aflite_core.runs import _writer as writer_module
    from aflite_core.runs._writer import RunWriter

    monkeypatch.setattr(writer_module, "ROW_GROUP_ROWS", row_group)
    texts, labels, _ = planted_texts(n=300)
    table = pvi.hypothesis_only_pvi(texts, labels, n_splits=3, random_state=0)
    assert isinstance(table["predicted"].dtype, pd.CategoricalDtype)
    assert table["fold"].dtype == np.int8
    status = np.where(np.arange(300) % 3 == 0, "removed", "retained").astype(object)
    table.insert(0, "row_id", np.arange(300))
    table.insert(1, "status", pd.Categorical(status))
    table.insert(2, "label", pd.Categorical(labels.astype(object)))
    before = table.assign(  # the columns as compute() made them before
        status=pd.array(status, dtype="string"), label=pd.array(labels, dtype="string"),
        predicted=pd.Series(table["predicted"].to_numpy(dtype=object)),
        fold=table["fold"].astype(np.int64))
    assert before["predicted"].dtype == "str"
    with RunWriter(tmp_path, "r") as writer:
        _write_result(writer, MeasureResult(tables={pvi.FILE: table},
                                            astype={pvi.FILE: pvi.TABLE_TYPES}), [])
        path = writer.file(pvi.FILE)
        pq.write_table(parquet_safe_table(before)[0], tmp_path / "before.parquet",
                       row_group_size=min(row_group, 1 << 20))
        assert filecmp.cmp(path, tmp_path / "before.parquet", shallow=False)
        got = pd.read_parquet(path)
        assert got["predicted"].tolist() == table["predicted"].astype(str).tolist()
        assert got["fold"].dtype == np.int64
        writer.write_summary({})
