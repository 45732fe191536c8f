"""N-gram counts by map-reduce over chunks (issue 27 item 2: PVI's counts on the workers):
bit for bit the all-texts matrix, here and on a cluster; PVI fits beside them there."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core.io._text_columns import RowTexts
from aflite_core.measures import pvi
from aflite_core.represent._fold_fits import counts_evaluator
from aflite_core.represent._fold_pool import map_folds, on_dask
from aflite_core.represent._partitioned_counts import (
    chunk_ngram_counts,
    merge_ngram_vocabularies,
    ngram_counts_from_chunks,
    ngram_counts_on_workers,
)
from aflite_core.represent._term_counts import ngram_counts
from aflite_core.represent._text_models import text_model


@pytest.fixture(scope="module")
def snli(real_data):
    frame = pd.read_csv(real_data / "snli" / "snli_dev.csv", keep_default_na=False)
    return frame.iloc[:3000].reset_index(drop=True)


def _texts(snli) -> list[str]:
    # empty and word-less texts, a chunk of nothing but them, words met in one chunk only
    return (snli["hypothesis"].tolist()[:1500] + ["", "  ", "!!", ""]
            + snli["premise"].tolist()[:400] + ["zyzzyva quux", ""])


def _assert_same_counts(a, b) -> None:
    assert a.counts.shape == b.counts.shape
    for part in ("data", "indices", "indptr"):
        x, y = getattr(a.counts, part), getattr(b.counts, part)
        assert x.dtype == y.dtype, part
        np.testing.assert_array_equal(x, y)
    assert a.words.tolist() == b.words.tolist()
    np.testing.assert_array_equal(a.first, b.first)
    np.testing.assert_array_equal(a.second, b.second)


@pytest.mark.parametrize("step", [1, 3, 250, 1501, 1_000_000])
def test_chunks_merged_are_the_whole_inputs_counts_bit_for_bit(snli, step):
    texts = _texts(snli)
    whole = ngram_counts(texts)
    chunks = [texts[i:i + step] for i in range(0, len(texts), step)]
    merged = ngram_counts_from_chunks(chunks)
    _assert_same_counts(merged, whole)
    assert merged.terms() == whole.terms()
    if step == 250:  # the chunks' own vocabularies are smaller than the merged one
        assert len(chunk_ngram_counts(chunks[0]).words) < len(whole.words)


def test_a_chunk_without_words_is_empty_and_only_all_of_them_raise():
    empty = chunk_ngram_counts(["", "  ", "?"])
    assert empty.counts.shape == (3, 0) and len(empty.words) == 0
    with pytest.raises(ValueError, match="empty vocabulary"):
        merge_ngram_vocabularies([(empty.words, empty.first, empty.second, 0)])
    with pytest.raises(ValueError, match="empty vocabulary"):
        ngram_counts_from_chunks([["", "!"], [" "]])


def test_counts_on_workers_are_the_whole_inputs_counts(cluster, snli):
    _, client = cluster
    texts = _texts(snli)
    future = ngram_counts_on_workers(client, (texts[i:i + 500]
                                              for i in range(0, len(texts), 500)))
    _assert_same_counts(future.result(), ngram_counts(texts))


def test_row_texts_reads_like_the_list_a_chunk_at_a_time():
    series = pd.Series(["a b", None, "c", float("nan"), "d e f"], dtype=object)
    rows = RowTexts(series, np.array([4, 1, 0, 3]))
    assert len(rows) == 4
    assert list(rows) == ["d e f", "", "a b", ""]
    assert rows[0] == "d e f" and rows[1:3] == ["", "a b"]
    assert list(rows.chunks(3)) == [["d e f", "", "a b"], [""]]


def test_row_texts_of_every_row_need_no_positions():
    """positions=None reads every row in order, as the positions 0..n-1 do (the default
    audit's texts: no array of 8 bytes a row), by slice, int, take and chunks alike."""
    series = pd.Series(["a b", None, "c", float("nan"), "d e f"], dtype=object)
    every, listed = RowTexts(series), RowTexts(series, np.arange(5))
    assert len(every) == 5 and list(every) == list(listed) == ["a b", "", "c", "", "d e f"]
    for index in (slice(1, 4), slice(None, None, 2), slice(-2, None), slice(4, 1, -1)):
        assert every[index] == listed[index]
    assert every[-1] == listed[-1] == "d e f" and every[2] == "c"
    assert every.take(np.array([4, 0, -5])) == listed.take(np.array([4, 0, -5]))
    assert list(every.chunks(2)) == list(listed.chunks(2))
    with pytest.raises(IndexError):
        every.take(np.array([5]))
    with pytest.raises(IndexError):
        every[5]


def test_map_folds_passes_the_resident_value_to_every_fit():
    got = map_folds(lambda task, shared: task * shared, [1, 2, 3], resident=10, threads=2)
    assert got == [10, 20, 30]


def test_a_future_as_resident_value_needs_a_cluster(cluster):
    _, client = cluster
    future = client.submit(int, 3)
    with pytest.raises(TypeError, match="only for fits inside on_dask"):
        map_folds(lambda task, shared: task, [1], resident=future)
    with on_dask(client):
        assert map_folds(_add, [1, 2], resident=future) == [4, 5]


def _add(task: int, shared: int) -> int:
    return task + shared


def test_counts_evaluator_refuses_a_model_with_premises(snli):
    counts = ngram_counts(snli["hypothesis"].tolist()[:50])
    with pytest.raises(ValueError, match="hypothesis_only"):
        counts_evaluator(text_model("full_input"), counts, snli["label"].to_numpy()[:50])
    with pytest.raises(ValueError, match="expected 40 rows"):
        counts_evaluator(text_model("hypothesis_only"), counts, snli["label"].to_numpy()[:40])


def test_pvi_on_a_cluster_counts_and_fits_on_the_workers_with_the_local_figures(
        cluster, snli, monkeypatch):
    """Above WORKER_COUNTS_MIN_ROWS PVI sends its hypotheses a chunk at a time, the workers
    count them and fit the folds beside the counts: the local table bit for bit, and the
    driver builds no evaluator of its own."""
    import distributed

    _, client = cluster
    hypotheses = RowTexts(snli["hypothesis"], np.arange(len(snli)))
    labels, groups = snli["label"].to_numpy(), snli["premise"].to_numpy()
    here = pvi.hypothesis_only_pvi(list(hypotheses), labels, groups=groups, n_splits=3,
                                   random_state=5)
    monkeypatch.setattr(pvi, "WORKER_COUNTS_MIN_ROWS", 1000)
    monkeypatch.setattr(pvi, "COUNT_CHUNK_ROWS", 700)

    def no_local_evaluator(*_args, **_kwargs):
        raise AssertionError("the driver vectorised the hypotheses")

    monkeypatch.setattr(pvi, "evaluator", no_local_evaluator)
    sent = []
    submit = distributed.Client.submit

    label_args = []

    def counting(self, fn, *args, **kwargs):
        sent.append(getattr(fn, "__name__", ""))
        if sent[-1] == "_evaluator_of_codes":
            label_args.append(args[2])
        return submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(distributed.Client, "submit", counting)
    with on_dask(client) as record:
        there = pvi.hypothesis_only_pvi(hypotheses, labels, groups=groups, n_splits=3,
                                        random_state=5)
    pd.testing.assert_frame_equal(there, here, check_exact=True)
    assert sent.count("chunk_ngram_counts") == 5  # 3,000 rows, 700 a chunk
    assert sent.count("_evaluator_of_codes") == 1 and record.tasks == 3
    # the labels travel as one-byte codes, not as 52 bytes a row of fixed-width text
    assert label_args[0].dtype == np.uint8 and len(label_args[0]) == len(labels)
    assert here["correct"].mean() > 0.5  # SNLI's hypotheses alone: well above a third


def test_a_resident_value_goes_once_with_the_fit_not_with_every_task(cluster, monkeypatch):
    """On a cluster a plain value (PVI's evaluator below its threshold: the count matrix)
    travels with the scattered fit function, as before ``resident=``, not in each task."""
    import distributed

    _, client = cluster
    shared = np.arange(1000)
    args = []
    submit = distributed.Client.submit

    def recording(self, fn, *a, **kwargs):
        args.append(a)
        return submit(self, fn, *a, **kwargs)

    monkeypatch.setattr(distributed.Client, "submit", recording)
    with on_dask(client) as record:
        got = map_folds(_total, [1, 2, 3], resident=shared)
    assert got == [1 + 499_500, 2 + 499_500, 3 + 499_500] and record.tasks == 3
    assert len(args) == 3 and not any(a is shared for task in args for a in task)


def _total(task: int, shared: np.ndarray) -> int:
    return task + int(shared.sum())
