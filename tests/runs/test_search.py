"""Search by meaning (issue 64, item 3): a typed sentence placed in Φ finds the rows like it,
from Python (``AuditRun.nearest_rows``) and on Explore; bad input is a message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aflite_core.io import load_dataset
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.represent import build_representation, load_text_model, save_text_model
from aflite_core.represent._text_search import TEXT_MODEL_FILE
from aflite_core.runs import load_run

SAMPLE = Path(__file__).resolve().parents[2] / "aflite_core" / "data" / "snli_sample.csv"


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("search")
    frame = pd.read_csv(SAMPLE, keep_default_na=False).head(1500)
    # planted: three rows about penguins and torches (words in at least two rows: the
    # TF-IDF's minimum document frequency from 1,000 rows on)
    frame.loc[[7, 8, 9], "hypothesis"] = ["A penguin juggles flaming torches.",
                                          "Two penguins hold torches on the ice.",
                                          "The penguin is carrying torches."]
    data = folder / "small.csv"
    frame.to_csv(data, index=False)
    return run_audit(load_dataset(data), AuditConfig(
        target_size=1100, n_partitions=4, report=False, measures=("projection",),
        measure_params={"projection": {"method": "pca"}}), runs_root=folder / "runs")


def test_the_text_model_places_a_row_exactly_where_phi_has_it(tmp_path):
    """The model Φ was built with (vocabularies, idf, components) rebuilds a row of Φ from its
    premise and hypothesis; the file keeps the hypotheses' part of it (int8 components with a
    scale per word: within 0.4 % of each word's largest value), what a query read as a
    hypothesis needs; an archive of float16 components (runs before int8) still reads."""
    from collections import Counter

    from aflite_core.represent._term_counts import DEFAULT_TOKEN_RE

    dataset = load_dataset(SAMPLE)
    rep = build_representation(dataset, "tfidf_svd", n_components=32)
    save_text_model(rep.text_model, tmp_path / TEXT_MODEL_FILE)
    kept = load_text_model(tmp_path / TEXT_MODEL_FILE)
    first = rep.text_model["blocks"][0]
    assert len(kept["blocks"]) == 1 and list(kept["blocks"][0]["vocabulary"]) == \
        first["vocabulary"]
    np.testing.assert_array_equal(kept["blocks"][0]["idf"], first["idf"])
    full = rep.text_model["components"][:len(first["idf"])]
    error = np.abs(kept["components"] - full).max(axis=1)
    assert (error <= np.abs(full).max(axis=1) * 0.004 + 1e-7).all()
    older = tmp_path / "older.npz"
    with np.load(tmp_path / TEXT_MODEL_FILE) as data:
        assert data["components_int8"].dtype == np.int8 and "components" not in data
        arrays = {k: data[k] for k in data if not k.startswith("components")}
    np.savez_compressed(older, components=full.astype(np.float16), **arrays)
    np.testing.assert_allclose(load_text_model(older)["components"], full, atol=1e-3)
    model = {"blocks": [{"vocabulary": {w: j for j, w in enumerate(b["vocabulary"])},
                         "idf": b["idf"]} for b in rep.text_model["blocks"]],
             "components": rep.text_model["components"]}

    def block(text: str, i: int) -> np.ndarray:
        counts = Counter(DEFAULT_TOKEN_RE.findall(text.lower()))
        words = model["blocks"][i]
        offset = sum(len(b["idf"]) for b in model["blocks"][:i])
        cols = [words["vocabulary"][w] for w in counts if w in words["vocabulary"]]
        vals = np.array([(1 + np.log(counts[w])) * words["idf"][words["vocabulary"][w]]
                         for w in counts if w in words["vocabulary"]])
        return (vals / np.linalg.norm(vals)) @ model["components"][offset + np.array(cols)]

    for row in (0, 11, 3999):
        rebuilt = block(dataset.hypotheses()[row], 0) + block(dataset.premises()[row], 1)
        np.testing.assert_allclose(rebuilt, rep.X[row], atol=1e-4)


def test_a_sentence_finds_the_rows_like_it(searched):
    run = load_run(searched)
    found = run.nearest_rows("a penguin with torches", k=5)
    assert list(found.columns) == ["row_id", "similarity"] and len(found) == 5
    # the planted rows with the query's words first ("penguins" is another word: no stems)
    assert set(found["row_id"].iloc[:2]) == {7, 9}
    assert found["similarity"].is_monotonic_decreasing and found["similarity"].iloc[0] > 0.3
    dogs = run.nearest_rows("a dog runs", k=10)
    hypotheses = run.frame.loc[dogs["row_id"], "hypothesis"].str.lower()
    premises = run.frame.loc[dogs["row_id"], "premise"].str.lower()
    assert (hypotheses.str.contains("dog") | premises.str.contains("dog")).mean() >= 0.8


def test_a_phi_wider_than_the_codes_is_searched_on_its_basis(tmp_path):
    """Φ of 300 dimensions is kept on 256 (the basis in the compact file's metadata): a typed
    sentence is put on that basis too, and finds the planted rows (placed without it, its
    code was 150 bytes against the rows' 128 and the search read the wrong dimensions)."""
    import pyarrow.parquet as pq

    from aflite_core.represent import BASIS_SHAPE_KEY, COMPACT_FILE
    from aflite_core.runs._search import phi_codes

    frame = pd.read_csv(SAMPLE, keep_default_na=False).head(1500)
    frame.loc[[7, 8, 9], "hypothesis"] = ["A penguin juggles flaming torches.",
                                          "Two penguins hold torches on the ice.",
                                          "The penguin is carrying torches."]
    run_dir = run_audit(load_dataset(frame, name="wide"), AuditConfig(
        target_size=1100, n_partitions=4, report=False, measures=(),
        representation_params={"n_components": 300}), runs_root=tmp_path)
    assert pq.read_schema(run_dir / COMPACT_FILE).metadata[BASIS_SHAPE_KEY] == b"300,256"
    run = load_run(run_dir)
    compact = phi_codes(run)
    assert compact.basis.shape == (300, 256) and compact.codes.shape[1] == 128
    found = run.nearest_rows("a penguin with torches", k=5)
    assert set(found["row_id"].iloc[:2]) == {7, 9}
    assert found["similarity"].iloc[0] > 0.3


def test_bad_searches_are_messages_and_old_runs_say_a_new_audit_is_needed(searched, tmp_path):
    import shutil

    run = load_run(searched)
    for text, message in (("", "type a sentence"), ("   ", "type a sentence"),
                          ("x" * 100_000, "search takes at most 10,000"),
                          ("zzqx blorpf", "none of the text's words"),
                          ("Такого слова нет", "none of the text's words")):
        with pytest.raises(ValueError, match=message):
            run.nearest_rows(text)
    old = tmp_path / "old"
    shutil.copytree(searched, old)
    (old / TEXT_MODEL_FILE).unlink()
    with pytest.raises(ValueError, match="needs a new audit of this data: this run kept no "
                                         "text model"):
        load_run(old).nearest_rows("a dog")
    (old / TEXT_MODEL_FILE).write_bytes(b"not an archive")
    with pytest.raises(ValueError, match="damaged"):
        load_run(old).nearest_rows("a dog")
    (old / "phi_compact.parquet").unlink()
    with pytest.raises(ValueError, match="kept no compact"):
        load_run(old).nearest_rows("a dog")


def test_explore_stars_the_rows_like_a_typed_sentence(runs_root, searched):
    from apptest_support import assert_clean, goto, new_app, open_run, texts

    at = new_app().run()
    open_run(at, searched)
    at = goto(at, "explore")
    at.text_input(key="explore:map_query").input("a penguin with torches").run()
    assert_clean(at)
    assert "The 20 rows most like the sentence" in texts(at)
    figure = at.get("plotly_chart")[-1].proto.spec
    assert "rows like the sentence" in figure
    at.text_input(key="explore:map_query").input("zzqx blorpf").run()
    assert "none of the text's words" in " ".join(e.value for e in at.error)


def test_explore_searches_a_run_without_a_map(runs_root, tmp_path):
    """The search needs Φ, not the map: a run audited without the map offers it too, the
    rows found filter the table."""
    from apptest_support import assert_clean, goto, new_app, open_run, texts

    frame = pd.read_csv(SAMPLE, keep_default_na=False).head(1200)
    data = tmp_path / "nomap.csv"
    frame.to_csv(data, index=False)
    path = run_audit(load_dataset(data), AuditConfig(target_size=900, n_partitions=4,
                                                     report=False, measures=()),
                     runs_root=tmp_path / "runs")
    at = new_app().run()
    open_run(at, path)
    at = goto(at, "explore")
    assert "has no 2-D projection" in texts(at)
    at.text_input(key="explore:map_query").input("a dog runs").run()
    assert_clean(at)
    assert "The 20 rows most like the sentence" in texts(at)
    assert len(at.dataframe[-1].value) == 20
