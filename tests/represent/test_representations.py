"""Tests of aflite_core.represent._builders: shapes, dtype, determinism, separate TF-IDF
blocks, the warm-up split, precomputed-embedding checks, the optional encoder."""

from __future__ import annotations

import csv
import io
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score

from aflite_core.io.datasets import load_dataset
from aflite_core.represent._builders import (
    INSTALL_SENTENCE_TRANSFORMERS,
    EmbeddingFileError,
    OptionalDependencyError,
    Representation,
    RepresentationError,
    build_representation,
    load_embeddings,
    tfidf_blocks,
    tfidf_svd_features,
    warmup_split,
)


def csv_dataset(tmp_path: Path, rows: list[dict], name: str = "d.csv", **kw):
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = tmp_path / name
    path.write_text(buf.getvalue(), encoding="utf-8")
    return load_dataset(path, **kw)


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """Results do not depend on it, but small BLAS calls with 2 threads on a loaded 2-core
    machine can be 20x slower (spinning threads); keep these tests fast and steady."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def snli_small(snli_dir):
    """1,500 real SNLI dev pairs."""
    ds = load_dataset(snli_dir / "snli_dev.csv")
    return ds.subset(ds.row_ids()[:1500])


@pytest.fixture
def with_excluded(tmp_path):
    """60 rows, of which rows 5 and 17 are excluded (label '-' / empty text)."""
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(40)]
    rows = []
    for i in range(60):
        rows.append(
            {
                "premise": " ".join(rng.choice(words, 6)),
                "hypothesis": " ".join(rng.choice(words, 4)),
                "label": "abc"[i % 3],
            }
        )
    rows[5]["label"] = "-"
    rows[17]["hypothesis"] = " "
    return csv_dataset(tmp_path, rows)


# ------------------------------------------------------------------- tfidf_svd


def test_tfidf_svd_shape_dtype_rows_and_determinism(snli_small):
    rep = build_representation(snli_small, n_components=64, random_state=3)
    assert isinstance(rep, Representation) and rep.method == "tfidf_svd"
    assert rep.X.shape == (1500, 64)
    assert rep.X.dtype == np.float32 and rep.X.flags.c_contiguous
    assert np.isfinite(rep.X).all()
    assert rep.row_ids.tolist() == snli_small.row_ids().tolist()
    assert rep.warmup_mask.dtype == bool and not rep.warmup_mask.any()
    again = build_representation(snli_small, n_components=64, random_state=3)
    np.testing.assert_array_equal(rep.X, again.X)
    assert rep.params["n_components"] == 64 and 0 < rep.params["explained_variance"] < 1
    # the features carry label signal on real data (well above chance 1/3)
    acc = cross_val_score(LogisticRegression(max_iter=300), rep.X, snli_small.labels(), cv=3)
    assert acc.mean() > 0.39


def test_tfidf_svd_dimension_capped_by_rows_and_features(tmp_path):
    texts = ["red cat", "blue dog", "red dog", "blue cat", "green"]
    rows = [{"text": t, "label": "ab"[i % 2]} for i, t in enumerate(texts)]
    ds = csv_dataset(tmp_path, rows)
    rep = build_representation(ds)  # 5 rows, 5 terms: min(256, 5 - 1, 5 - 1)
    assert rep.X.shape == (5, 4)
    assert ds.columns.premise is None


def test_only_included_rows_in_frame_order(with_excluded):
    rep = build_representation(with_excluded, n_components=8)
    assert rep.X.shape[0] == 58
    assert 5 not in rep.row_ids and 17 not in rep.row_ids
    assert rep.row_ids.tolist() == [i for i in range(60) if i not in (5, 17)]


def test_hypothesis_and_premise_are_separate_blocks():
    """The artifact word appears once in every row -- in the hypothesis of class A and
    in the premise of class B. A bag of words over premise+hypothesis cannot tell the
    classes apart; separate blocks can."""
    rng = np.random.default_rng(0)
    vocab = [f"filler{i}" for i in range(150)]
    hyps, prems, y = [], [], []
    for i in range(400):
        h = list(rng.choice(vocab, 5))
        p = list(rng.choice(vocab, 8))
        if i % 2 == 0:
            h.insert(int(rng.integers(6)), "nobody")
        else:
            p.insert(int(rng.integers(9)), "nobody")
        hyps.append(" ".join(h))
        prems.append(" ".join(p))
        y.append(i % 2)
    y = np.asarray(y)
    clf = LogisticRegression(max_iter=1000)
    separate = tfidf_svd_features(hyps, prems, n_components=64, random_state=0)
    joined = tfidf_svd_features(
        [p + " " + h for p, h in zip(prems, hyps, strict=True)], n_components=64, random_state=0
    )
    acc_separate = cross_val_score(clf, separate, y, cv=4).mean()
    acc_joined = cross_val_score(clf, joined, y, cv=4).mean()
    assert acc_separate > 0.95
    assert acc_joined < 0.7
    blocks = tfidf_blocks(hyps, prems)
    assert blocks.shape[1] == 2 * 151  # each block has its own vocabulary


def test_tfidf_blocks_skip_an_empty_premise_block():
    M = tfidf_blocks(["a cat", "a dog"], ["", "  "])
    assert M.shape == (2, 3)
    with pytest.raises(RepresentationError, match="no word found"):
        tfidf_blocks(["...", "!"])


# ---------------------------------------------------------------------- warm-up


def test_warmup_split_is_stratified_and_seeded():
    labels = np.array(["a"] * 50 + ["b"] * 30 + ["c"] * 20)
    mask = warmup_split(labels, 0.1, 7)
    assert [int(mask[labels == v].sum()) for v in "abc"] == [5, 3, 2]
    np.testing.assert_array_equal(mask, warmup_split(labels, 0.1, 7))
    assert not np.array_equal(mask, warmup_split(labels, 0.1, 8))
    with pytest.raises(RepresentationError, match="at least two labels"):
        warmup_split(np.array(["a"] * 30 + ["b"] * 2), 0.1, 0)


def test_warmup_representation(snli_small):
    rep = build_representation(
        snli_small, "warmup", n_components=32, warmup_fraction=0.2, random_state=0
    )
    assert rep.method == "warmup"
    assert rep.X.shape == (1500, 32) and rep.X.dtype == np.float32 and rep.X.flags.c_contiguous
    labels = snli_small.labels()
    counts = pd.Series(labels).value_counts()
    for lab, c in counts.items():
        assert rep.warmup_mask[labels == lab].sum() == int(np.floor(0.2 * c + 0.5))
    assert rep.params["n_warmup"] == int(rep.warmup_mask.sum())
    again = build_representation(
        snli_small, "warmup", n_components=32, warmup_fraction=0.2, random_state=0
    )
    np.testing.assert_array_equal(rep.X, again.X)
    np.testing.assert_array_equal(rep.warmup_mask, again.warmup_mask)


def test_warmup_features_carry_what_the_warmup_model_learned(tmp_path):
    """Label = a planted hypothesis word among 3 (plus noise words). Trained on 10% of
    the rows, the hidden layer must expose the cue for the other 90%."""
    rng = np.random.default_rng(0)
    vocab = [f"noise{i}" for i in range(300)]
    cues = {"a": "tall", "b": "sleeping", "c": "outdoors"}
    rows = []
    for i in range(900):
        lab = "abc"[i % 3]
        words = list(rng.choice(vocab, 6))
        words.insert(int(rng.integers(7)), cues[lab] if rng.random() < 0.9 else "noise0")
        rows.append(
            {"premise": " ".join(rng.choice(vocab, 8)), "hypothesis": " ".join(words), "label": lab}
        )
    ds = csv_dataset(tmp_path, rows)
    rep = build_representation(ds, "warmup", n_components=16, random_state=0)
    assert rep.warmup_mask.sum() == 90
    rest = ~rep.warmup_mask
    labels = ds.labels()
    acc = cross_val_score(LogisticRegression(max_iter=500), rep.X[rest], labels[rest], cv=3)
    assert acc.mean() > 0.7  # the cue covers 90% of rows; chance is 1/3


# ------------------------------------------------------------------ precomputed


def test_precomputed_npy_all_rows_or_included_rows(tmp_path, with_excluded):
    E = np.arange(60 * 3, dtype=np.float64).reshape(60, 3)
    np.save(tmp_path / "all.npy", E)
    rep = build_representation(with_excluded, "precomputed", path=tmp_path / "all.npy")
    assert rep.X.dtype == np.float32 and rep.X.flags.c_contiguous
    np.testing.assert_array_equal(rep.X, E[with_excluded.included_mask].astype(np.float32))
    assert rep.params["matched_by"] == "all rows"
    np.save(tmp_path / "inc.npy", E[:58])
    rep = build_representation(with_excluded, "precomputed", path=str(tmp_path / "inc.npy"))
    np.testing.assert_array_equal(rep.X, E[:58].astype(np.float32))
    assert rep.params["matched_by"] == "included rows"


def test_precomputed_npz_and_parquet_with_row_ids(tmp_path, with_excluded):
    ids = np.arange(60)
    E = np.random.default_rng(0).normal(size=(60, 4)).astype(np.float32)
    perm = np.random.default_rng(1).permutation(60)
    np.savez(tmp_path / "e.npz", embeddings=E[perm], row_id=ids[perm])
    rep = build_representation(with_excluded, "precomputed", path=tmp_path / "e.npz")
    np.testing.assert_array_equal(rep.X, E[with_excluded.row_ids()])
    assert rep.params["matched_by"] == "row_id"

    table = pa.table({"row_id": ids[perm], "embedding": [list(r) for r in E[perm]]})
    pq.write_table(table, tmp_path / "list.parquet")
    rep = build_representation(with_excluded, "precomputed", path=tmp_path / "list.parquet")
    np.testing.assert_array_equal(rep.X, E[with_excluded.row_ids()])

    cols = pd.DataFrame(E, columns=[f"d{i}" for i in range(4)])
    cols.to_parquet(tmp_path / "cols.parquet")
    rep = build_representation(with_excluded, "precomputed", path=tmp_path / "cols.parquet")
    np.testing.assert_array_equal(rep.X, E[with_excluded.included_mask])


class _Boom:
    """Unpickling this would create a marker file: proves the loader never unpickles."""

    marker = ""

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_object_npy_and_npz_refused_never_unpickled(tmp_path, with_excluded):
    boom = _Boom()
    boom.marker = str(tmp_path / "UNPICKLED")
    arr = np.empty(60, dtype=object)
    arr[:] = [boom] * 60
    np.save(tmp_path / "evil.npy", arr, allow_pickle=True)
    np.savez(tmp_path / "evil.npz", X=arr)
    for name in ("evil.npy", "evil.npz"):
        with pytest.raises(EmbeddingFileError, match="unpickling"):
            build_representation(with_excluded, "precomputed", path=tmp_path / name)
    assert not (tmp_path / "UNPICKLED").exists()


@pytest.mark.parametrize(
    ("array", "match"),
    [
        (np.zeros((59, 3)), "expected 60 .one per row. or 58 .one per included row.*found 59"),
        (np.zeros(60), "2-D.*shape \\(60,\\).*reshape"),
        (np.array([["a", "b"]] * 60), "expected numbers"),
        (np.zeros((60, 0)), "0 dimensions"),
    ],
    ids=["rows", "1d", "strings", "empty"],
)
def test_precomputed_shape_and_dtype_errors(tmp_path, with_excluded, array, match):
    np.save(tmp_path / "e.npy", array)
    with pytest.raises(EmbeddingFileError, match=match):
        build_representation(with_excluded, "precomputed", path=tmp_path / "e.npy")


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e300])
def test_precomputed_non_finite_values_name_the_row(tmp_path, with_excluded, bad):
    E = np.ones((60, 3))
    E[40, 1] = bad
    np.save(tmp_path / "e.npy", E)
    # row 40 of the file is the 38th included row (rows 5 and 17 are excluded)
    with pytest.raises(EmbeddingFileError, match="non-finite.*row 38"):
        build_representation(with_excluded, "precomputed", path=tmp_path / "e.npy")


def test_precomputed_file_errors(tmp_path, with_excluded):
    with pytest.raises(ValueError, match="needs path="):
        build_representation(with_excluded, "precomputed")
    with pytest.raises(EmbeddingFileError, match="not found"):
        load_embeddings(tmp_path / "missing.npy")
    (tmp_path / "e.csv").write_text("1,2\n")
    with pytest.raises(EmbeddingFileError, match=r"\.npy, \.npz, \.parquet"):
        load_embeddings(tmp_path / "e.csv")
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(EmbeddingFileError, match="not a valid .npy"):
        load_embeddings(tmp_path / "junk.npy")
    np.savez(tmp_path / "two.npz", a=np.zeros((60, 2)), b=np.zeros((60, 2)))
    with pytest.raises(EmbeddingFileError, match="which array"):
        load_embeddings(tmp_path / "two.npz")
    pq.write_table(pa.table({"row_id": np.arange(3), "x": ["a", "b", "c"]}), tmp_path / "s.parquet")
    with pytest.raises(EmbeddingFileError, match="numeric columns"):
        load_embeddings(tmp_path / "s.parquet")
    np.savez(tmp_path / "ids.npz", X=np.zeros((3, 2)), row_id=np.array([0, 1, 99]))
    with pytest.raises(EmbeddingFileError, match="no embedding for"):
        build_representation(with_excluded, "precomputed", path=tmp_path / "ids.npz")


def test_precomputed_npy_is_memory_mapped(tmp_path):
    E = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    np.save(tmp_path / "m.npy", E)
    X, ids = load_embeddings(tmp_path / "m.npy")
    assert isinstance(X, np.memmap) and ids is None
    np.testing.assert_array_equal(X, E)


# --------------------------------------------------------- sentence-transformers


def test_sentence_transformers_missing_says_how_to_install(monkeypatch, with_excluded):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(OptionalDependencyError) as err:
        build_representation(with_excluded, "sentence-transformers", model="all-MiniLM-L6-v2")
    assert INSTALL_SENTENCE_TRANSFORMERS in str(err.value)
    assert isinstance(err.value, ImportError) and isinstance(err.value, ValueError)
    with pytest.raises(ValueError, match="needs model="):
        build_representation(with_excluded, "sentence_transformers")


def test_sentence_transformers_encodes_blocks_from_a_local_path(
    monkeypatch, tmp_path, with_excluded
):
    """The loader's contract with a stand-in model (the real library:
    tests/represent/test_encoders.py)."""
    from aflite_core.represent import encoders

    loaded = []

    class FakeModel:
        def __init__(self, source, **kw):
            loaded.append((source, kw))

        def get_sentence_embedding_dimension(self):
            return 2

        def encode(self, texts, **kw):
            return np.array([[len(t), t.count(" ")] for t in texts], dtype=np.float64)

    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = FakeModel
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cache"))
    encoders._LOADED.clear()
    folder = tmp_path / "my-model"
    folder.mkdir()
    rep = build_representation(with_excluded, "sentence_transformers", model=str(folder),
                               combine="concat")
    assert loaded == [(str(folder.resolve()), {"device": "cpu"})] and rep.params["local"] is True
    assert rep.X.shape == (58, 4) and rep.X.dtype == np.float32
    hyps, prems = with_excluded.hypotheses(), with_excluded.premises()
    assert rep.X[0].tolist() == [  # [u, v]: premise, then hypothesis
        len(prems[0]),
        prems[0].count(" "),
        len(hyps[0]),
        hyps[0].count(" "),
    ]
    encoders._LOADED.clear()


# ------------------------------------------------------------------ parameters


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"method": "bert"}, ValueError, "method: expected one of"),
        ({"n_components": 0}, ValueError, "n_components: expected an int >= 1, got 0"),
        ({"n_components": 2.5}, TypeError, "n_components"),
        ({"random_state": "0"}, TypeError, r"random_state: expected an int in \[0, \d+\], got '0'"),
        ({"random_state": -1}, ValueError, r"random_state: expected an int in \[0, \d+\], got -1"),
        ({"method": "warmup", "warmup_fraction": 1.5}, ValueError, "warmup_fraction"),
    ],
)
def test_invalid_parameters_name_the_argument(with_excluded, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        build_representation(with_excluded, **kwargs)


def test_dataset_argument_checked():
    with pytest.raises(TypeError, match="dataset: expected an AuditDataset"):
        build_representation(np.zeros((3, 3)))


def test_a_missing_static_model_says_how_to_make_one():
    """No static model ships: the error for a name that is neither a folder nor loadable
    says how to distill one, offline, from the packaged sentence-transformer."""
    from aflite_core.represent.encoders import _not_found

    err = _not_found("static", "all-MiniLM-L6-v2", OSError("Name or service not known"))
    assert "encoders distill" in str(err) and "static:models/minilm-static" in str(err)
    assert "encoders distill" not in str(
        _not_found("sentence_transformers", "x", OSError("no")))
