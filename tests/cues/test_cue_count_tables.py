"""The cue tables by map-reduce over row chunks equal the tables of all rows at once.

The Dask path of the cue measure (``aflite_core.cues.count_tables``) extracts features chunk
by chunk and sums per-feature counts; these tests run it on local threads with small chunks
(so words straddle chunks, and some words reach ``min_count`` only summed over chunks) and
compare with :func:`aflite_core.cues.statistics.cue_tables` on real SNLI rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core.cues import count_tables
from aflite_core.cues.statistics import cue_tables
from aflite_core.io.datasets import load_dataset
from aflite_core.represent._fold_pool import map_folds


@pytest.fixture(scope="module")
def dev(snli_dir):
    data = load_dataset(snli_dir / "snli_dev.csv")
    return data.subset(data.row_ids()[:2400])


def _both(dataset, scopes, tmp_path, **options):
    local = cue_tables(dataset, scopes, cache_dir=tmp_path, **options)
    chunked = count_tables.cue_tables(dataset, scopes, chunk_rows=700, **options)
    return local, chunked


def _assert_same(local: pd.DataFrame, chunked: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(local, chunked, check_exact=True)
    assert local.attrs == chunked.attrs


def test_chunked_counts_give_the_table_of_all_rows(dev, tmp_path):
    """Every family, the full and the retained scope, the seeded grouped hold-out."""
    premises = np.asarray(dev.premises(), dtype=object)
    scopes = {"full": None, "retained": dev.row_ids()[::3]}
    local, chunked = _both(dev, scopes, tmp_path, groups=premises, random_state=0)
    _assert_same(local, chunked)
    # the comparison has teeth: both scopes, several families, rows below support listed
    assert set(local["scope"]) == {"full", "retained"}
    assert {"word", "negation", "tense", "overlap"} <= set(local["feature_type"])
    assert (~local.loc[local["scope"] == "retained", "supported"].astype(bool)).any()


def test_a_word_rare_in_every_chunk_is_kept_when_the_sum_reaches_min_count(dev, tmp_path):
    """min_count applies to the summed presence, not per chunk: with 700-row chunks, words
    present in fewer than 5 rows of each chunk still qualify when the whole data has them
    in 5 or more (the local extraction's rule)."""
    scopes = {"full": None}
    local, chunked = _both(dev, scopes, tmp_path, features=["word"], min_count=5)
    _assert_same(local, chunked)
    hyps = pd.Series(list(dev.hypotheses())).str.lower()
    chunk_of = np.arange(len(hyps)) // 700
    spread = [w for w in local["feature"].head(400)
              if max(hyps[chunk_of == c].str.contains(rf"\b{w}\b", regex=True).sum()
                     for c in np.unique(chunk_of)) < 5]
    assert spread, "no qualifying word was rare in every chunk: the test would not bite"


def test_text_both_and_lemmas(dev, tmp_path):
    local, chunked = _both(dev, {"full": None, "retained": dev.row_ids()[:1500]}, tmp_path,
                           features=["word", "sentiment", "negation"], text="both",
                           lemma=True, random_state=3)
    _assert_same(local, chunked)


def test_the_map_runs_through_the_mapper_it_is_given(dev):
    seen = []

    def mapper(fn, tasks, on_done=None):
        seen.append(len(tasks))
        return map_folds(fn, tasks, on_done=on_done, threads=1)

    messages = []
    count_tables.cue_tables(dev, {"full": None}, features=["negation"], chunk_rows=1000,
                            mapper=mapper, progress=lambda f, m: messages.append((f, m)))
    assert seen == [3]
    assert messages[-1][0] == 1.0 and "chunk 3 of 3" in messages[-1][1]


def test_workers_that_extract_differently_are_refused():
    part = count_tables._ChunkCounts(
        np.asarray(["ner"], dtype=object), np.asarray(["entity"], dtype=object),
        np.ones((1, 6), dtype=np.int64), np.ones(1, dtype=np.int64), "hypothesis",
        {"ner": "ne_chunk"}, {}, {}, None)
    other = count_tables._ChunkCounts(
        part.feature_type, part.feature, part.counts, part.present, "hypothesis",
        {"ner": "heuristic"}, {}, {}, None)
    with pytest.raises(RuntimeError, match="extracted the features differently"):
        count_tables._reduce([part, other], min_count=1)


@pytest.mark.parametrize("kwargs,match", [
    ({"chunk_rows": 0}, "chunk_rows"), ({"min_count": 0}, "min_count"),
    ({"sort_by": "nope"}, "sort_by"),
])
def test_bad_options_are_named(dev, kwargs, match):
    with pytest.raises(ValueError, match=match):
        count_tables.cue_tables(dev, {"full": None}, **kwargs)


def test_a_second_audit_reads_the_chunks_annotations_from_the_cache(dev, tmp_path,
                                                                    monkeypatch):
    """Each task caches its chunk's annotations where it runs ($AFLITE_CACHE_DIR): the second
    run of the same chunks tags nothing (the tagger is never called) and gives the same
    table."""
    from aflite_core.cues import _tagging as tagging

    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path))
    first = count_tables.cue_tables(dev, {"full": None}, chunk_rows=1200)
    # one per chunk, and the whole column's for the driver's own extraction
    assert len(list(tmp_path.glob("tagged-*.npz"))) == 3

    def no_tagging(*args, **kwargs):
        raise AssertionError("tagged again")

    monkeypatch.setattr(tagging, "_tag_unique", no_tagging)
    again = count_tables.cue_tables(dev, {"full": None}, chunk_rows=1200)
    _assert_same(first, again)
    with pytest.raises(AssertionError, match="tagged again"):
        count_tables.cue_tables(dev, {"full": None}, chunk_rows=1200, cache=False)


def test_the_driver_cache_gets_the_whole_columns_tags(dev, tmp_path, monkeypatch):
    """The chunks' tags, joined in row order, are stored where the driver's own extraction of
    all rows (the slices measure's) looks for them: it then tags nothing and gets the
    features it computes without any cache."""
    from aflite_core.cues import _tagging as tagging
    from aflite_core.cues.linguistic import extract_features

    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path))
    count_tables.cue_tables(dev, {"full": None}, chunk_rows=1000, text="both")
    hyps, prems = list(dev.hypotheses()), list(dev.premises())
    fresh = extract_features(hyps, prems, text="both", min_count=5, cache=False)

    def no_tagging(*args, **kwargs):
        raise AssertionError("tagged again")

    monkeypatch.setattr(tagging, "_tag_unique", no_tagging)
    seeded = extract_features(hyps, prems, text="both", min_count=5)
    assert (fresh.X != seeded.X).nnz == 0
    assert fresh.feature.tolist() == seeded.feature.tolist()
    assert {"tense", "ner", "typo"} <= set(seeded.feature_type)


def test_streamed_chunks_on_a_cluster_give_the_table_and_never_list_every_text(
        dev, tmp_path, cluster, monkeypatch):
    """The measure's path on a cluster: each chunk's texts read from the frame as its task
    is sent (map_streamed), the labels factorised once: the table of all rows, and the
    dataset is never asked for every row's texts."""
    from aflite_core.io.datasets import AuditDataset
    from aflite_core.represent._fold_pool import map_streamed, on_dask

    _, client = cluster
    premises = np.asarray(dev.premises(), dtype=object)
    scopes = {"full": None, "retained": dev.row_ids()[::3]}
    local = cue_tables(dev, scopes, cache_dir=tmp_path, groups=premises, random_state=0)

    def no_lists(self, *args, **kwargs):
        raise AssertionError("every row's texts were listed")

    monkeypatch.setattr(AuditDataset, "hypotheses", no_lists)
    monkeypatch.setattr(AuditDataset, "premises", no_lists)
    with on_dask(client) as record:
        chunked = count_tables.cue_tables(dev, scopes, chunk_rows=700, groups=premises,
                                          random_state=0, mapper=map_streamed, streamed=True,
                                          seed_cache=False)
    assert record.tasks == 4  # 2,400 rows, 700 a chunk
    _assert_same(local, chunked)


def test_the_tagging_ahead_on_a_cluster_leaves_the_cue_table_nothing_to_tag(
        dev, tmp_path, cluster, monkeypatch):
    """The cue measure's work ahead on a cluster: a task per chunk tags it into the worker's
    cache at a priority below the audit's own tasks; the cue table's task of each chunk goes
    to the worker that tagged it, tags nothing (the tagger is never called), and the table
    is the table of all rows."""
    from distributed import get_worker

    from aflite_core.cues import _tagging as tagging
    from aflite_core.represent._fold_pool import map_streamed, on_dask

    _, client = cluster
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "workers"))
    scopes = {"full": None, "retained": dev.row_ids()[::3]}
    local = cue_tables(dev, scopes, cache_dir=tmp_path / "local", random_state=0)
    with on_dask(client) as record:
        assert count_tables.annotate_chunks_ahead(dev, chunk_rows=700) == 4
    assert record.tasks == 4  # 2,400 rows, 700 a chunk
    assert len(list((tmp_path / "workers").glob("tagged-*.npz"))) == 4
    key = (id(dev), len(dev), 700)
    workers = sorted(client.scheduler_info()["workers"])
    assert len(count_tables._TAGGED_ON[key]) == 4
    assert set(count_tables._TAGGED_ON[key]) <= set(workers)
    # the workers share one cache folder here: say the first two chunks were tagged on the
    # second worker and the others on the first, where the scheduler would otherwise
    # alternate them
    tagged_on = count_tables._TAGGED_ON[key] = [workers[1], workers[1], workers[0],
                                                workers[0]]

    def no_tagging(*args, **kwargs):
        raise AssertionError("tagged again")

    # the workers run in this process: a task looks the module's names up here
    counted_on = {}
    extract = count_tables.extract_with_annotations

    def recording(hypotheses, *args, **kwargs):
        counted_on[hypotheses[0]] = get_worker().address
        return extract(hypotheses, *args, **kwargs)

    monkeypatch.setattr(tagging, "_tag_unique", no_tagging)
    monkeypatch.setattr(count_tables, "extract_with_annotations", recording)
    with on_dask(client):
        chunked = count_tables.cue_tables(dev, scopes, chunk_rows=700, random_state=0,
                                          mapper=map_streamed, streamed=True,
                                          seed_cache=False)
    _assert_same(local, chunked)
    hypotheses = dev.hypotheses()
    counted = [counted_on[hypotheses[lo]] for lo in range(0, 2400, 700)]
    # where it was tagged (work stealing may move one whose worker is still busy): the
    # scheduler alone alternates them, two in the same place
    assert sum(c == t for c, t in zip(counted, tagged_on, strict=True)) >= 3, counted
    assert not count_tables._TAGGED_ON  # taken by the cue table
    # other chunks than the ahead's are tagged afresh: the test above has teeth
    with on_dask(client), pytest.raises(AssertionError, match="tagged again"):
        count_tables.cue_tables(dev, scopes, chunk_rows=600, random_state=0,
                                mapper=map_streamed, streamed=True, seed_cache=False)


def test_the_tagging_ahead_stops_when_asked_and_needs_a_cluster(dev, tmp_path, cluster,
                                                               monkeypatch):
    """Asked to stop before it starts, it sends nothing more than its first tasks and
    cancels them; outside ``on_dask`` it says what it needs."""
    import threading

    from aflite_core.represent._fold_pool import on_dask

    _, client = cluster
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path))
    stop = threading.Event()
    stop.set()
    with on_dask(client) as record:
        assert count_tables.annotate_chunks_ahead(dev, chunk_rows=300, stop=stop) == 0
    assert record.tasks == 4  # two per worker in flight, then it stopped
    with pytest.raises(RuntimeError, match="on_dask"):
        count_tables.annotate_chunks_ahead(dev, chunk_rows=700)
    with on_dask(client), pytest.raises(ValueError, match="chunk_rows"):
        count_tables.annotate_chunks_ahead(dev, chunk_rows=0)
