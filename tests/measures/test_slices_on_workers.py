"""The slices' counts by map-reduce over row chunks left on the workers (issue 27 item 2):
the ranked table and the stored rows of the local indicator matrix, bit for bit."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
from golden_run import GOLDEN, SAMPLE, SLICES_CONFIG

from aflite_core.cues import linguistic
from aflite_core.measures import _slices_features as slices_features
from aflite_core.measures import _slices_on_workers as slices_on_workers
from aflite_core.measures import slices
from aflite_core.measures._slices_counts import MatrixCounts
from aflite_core.measures._slices_features import SliceFeatures

FAMILIES = ("word", "sentiment", "negation", "overlap")


#: Two words with the same rows' count and removals (the same |z|) whose pair is a slice: its
#: name follows the order the words are first met in ("qqbeta" first), which the chunks'
#: merge must keep; "qqgone" marks the removed rows.
PLANTED = (["qqbeta"] * 50 + ["qqbeta qqgone"] * 10 + ["qqalpha qqbeta qqgone"] * 60
           + ["qqalpha"] * 50 + ["qqalpha qqgone"] * 10)


@pytest.fixture(scope="module")
def sample():
    frame = pd.read_csv(SAMPLE, keep_default_na=False)
    return (frame["hypothesis"].tolist() + PLANTED,
            frame["premise"].tolist() + ["A planted row."] * len(PLANTED),
            np.concatenate([frame["label"].to_numpy(), ["neutral"] * len(PLANTED)]))


def _planted(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A scope that skips whole chunks and odd rows (but keeps the planted rows), and random
    removals."""
    rng = np.random.default_rng(5)
    keep = (np.arange(n) // 700 != 2) & (rng.random(n) < 0.8)
    keep[n - len(PLANTED):] = True
    scope = np.flatnonzero(keep)
    removed = rng.random(len(scope)) < 0.25
    removed[-len(PLANTED):] = False
    return scope, removed


def _both(client, hyps, prems, labels, *, text: str, chunk_rows: int, min_count: int = 10):
    """The same slices from the local matrix and from chunks on the workers."""
    scope, removed = _planted(len(hyps))
    # a word alone, and a word within one label (a pair neither of its cues explains)
    removed |= np.asarray([" not " in f" {hyps[i]} " or "qqgone" in hyps[i] for i in scope])
    removed |= np.asarray([" man " in f" {hyps[i]} " for i in scope]) & (
        labels[scope] == "neutral")
    matrix = linguistic.extract_features(hyps, prems, features=FAMILIES, text=text,
                                         min_count=min_count)
    cues = slices_features.cue_features(matrix.rows(scope))
    values, codes = np.unique(labels[scope], return_inverse=True)
    lengths = slices_features.word_counts([hyps[i] for i in scope])
    extra = SliceFeatures.stack([SliceFeatures.from_codes(codes, values, "label"),
                                 slices_features.length_features(lengths)], len(scope))
    k = 6
    cluster_of = np.random.default_rng(1).integers(0, k, len(scope))
    clusters = SliceFeatures.from_codes(
        cluster_of, [str(c) for c in range(k)], "cluster",
        slices_features._cluster_names(cluster_of, k, cues.select(cues.family == "word")))
    options = {"min_support": min_count, "pair_top": 12, "n_stored": 40,
               "row_ids": scope * 10, "random_state": 3}
    here = slices.rank_slices(MatrixCounts(SliceFeatures.stack([cues, extra], len(scope)),
                                           clusters), removed, **options)
    bounds = slices_on_workers.chunk_bounds(len(hyps), chunk_rows)
    weights = slices.slice_weights(removed)
    chunked = slices_on_workers.ChunkedCounts(
        client, ((hyps[lo:hi], prems[lo:hi]) for lo, hi in bounds), bounds, scope,
        weights[0], slices_on_workers.ExtractOptions(FAMILIES, text), min_count=min_count)
    chunked.add_columns([extra], cluster_of, k)
    assert np.array_equal(chunked.lengths["hypothesis"], lengths)
    there = slices.rank_slices(chunked, removed, weights=weights, **options)
    chunked.release()
    return here, there, chunked


@pytest.mark.parametrize(("text", "chunk_rows"), [("hypothesis", 700), ("premise", 1_333),
                                                  ("hypothesis", 4_000)])
def test_chunked_counts_rank_the_local_slices_bit_for_bit(cluster, sample, text, chunk_rows):
    """Words first met in later chunks, words below min_count in all rows but frequent in a
    chunk, a chunk outside the scope, pairs, clusters named by their words, same_rows and
    folds: the table and every stored slice's rows are the local ones."""
    _, client = cluster
    here, there, chunked = _both(client, *sample, text=text, chunk_rows=chunk_rows)
    pd.testing.assert_frame_equal(there.table, here.table, check_exact=True)
    assert len(there.members) == len(here.members) == 40
    for a, b in zip(there.members, here.members, strict=True):
        assert np.array_equal(a, b)
    assert set(here.table["kind"]) == {"cue", "pair", "cluster"}
    if text == "hypothesis":  # the planted words' pair, named in the order they are met
        assert "word=qqbeta & word=qqalpha" in set(here.table["slice_id"])
    assert (here.table["description"].str.contains(r"cluster \d \(", regex=True)).any()
    assert chunked.tasks > 2 * -(-len(sample[0]) // chunk_rows)  # the passes ran on the workers


def test_the_audit_on_a_cluster_extracts_the_slices_features_on_the_workers(
        cluster, tmp_path, monkeypatch):
    """The seeded sample audit on the cluster, its slices above the (lowered) threshold: the
    golden table and rows bit for bit, and the driver never extracts a feature."""
    from aflite_core.cues import count_tables
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    _, client = cluster
    monkeypatch.setattr(slices_on_workers, "WORKER_MIN_ROWS", 1_000)
    monkeypatch.setattr(count_tables, "chunk_rows_for", lambda n, workers: 700)

    def no_driver_extraction(*args, **kwargs):
        raise AssertionError("the driver extracted every row's features")

    monkeypatch.setattr(linguistic, "extract_features", no_driver_extraction)
    path = run_audit(load_dataset(SAMPLE, group=""),
                     AuditConfig(**SLICES_CONFIG, backend="dask",
                                 scheduler=client.scheduler.address),
                     runs_root=tmp_path, name="on_workers")
    summary = json.loads((path / "summary.json").read_text())
    assert summary["engines"]["slices"] == "dask"
    assert summary["measures"]["slices"]["features"] == "workers"
    for name, file in (("table", "slices.parquet"), ("members", "slices_members.parquet")):
        pd.testing.assert_frame_equal(pd.read_parquet(path / file),
                                      pd.read_parquet(GOLDEN / f"slices_{name}.parquet"),
                                      check_exact=True)


def test_a_worker_killed_in_the_pairs_pass_leaves_the_local_slices(sample, tmp_path,
                                                                    monkeypatch):
    """One worker (its nanny restarts it) dies in the first pair count, with every chunk's
    features: Dask extracts them again from their tasks' own texts and the table is the
    local one."""
    distributed = pytest.importorskip("distributed")
    marker = str(tmp_path / "killed")
    pair_counts = slices_on_workers._pair_counts

    def dying(*args):  # nested: sent by value
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return pair_counts(*args)

    monkeypatch.setattr(slices_on_workers, "_pair_counts", dying)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as local, distributed.Client(local) as client:
        here, there, _ = _both(client, *sample, text="hypothesis", chunk_rows=1_500)
    assert os.path.exists(marker)
    pd.testing.assert_frame_equal(there.table, here.table, check_exact=True)
    for a, b in zip(there.members, here.members, strict=True):
        assert np.array_equal(a, b)
