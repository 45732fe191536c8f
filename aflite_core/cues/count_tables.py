"""The cue tables by map-reduce over row chunks: no feature matrix of all rows.

:func:`aflite_core.cues.statistics.cue_tables` extracts the features of every row at once
(an n x F indicator matrix, its distinct texts tagged once, cached on disk) and counts them.
On a Dask cluster (inside :func:`aflite_core.represent.on_dask`) the cue measure
builds the same table by map-reduce instead (issue 27: "cues, count tables by map-reduce"):

* **map**: the rows are cut into chunks of :data:`CHUNK_ROWS`; one task per chunk extracts
  its rows' features (:func:`~aflite_core.cues.linguistic.extract_features` with
  ``min_count=1``, in the task's process, with that process's annotation cache) and returns, per
  feature of the chunk, how many of its rows have it per scope, side of the split (train,
  test) and label, and how many of its rows have it at all;
* **reduce**: the driver sums the chunks' counts feature by feature (integers: the same sums
  in any order), keeps the words present in at least ``min_count`` rows of all (the rule of
  ``extract_features``; the other families' columns are fixed), and computes each scope's
  statistics from the summed counts
  (:func:`~aflite_core.cues.statistics.statistics_from_counts`).

The table is the local one bit for bit (``tests/cues/test_cue_count_tables.py`` compares them on
the bundled sample, ``tests/filter/test_dask_backend.py`` on a ``LocalCluster``): the statistics
read only the count tables, and the table's order is decided by its values and the
features' names, never by the column order of a feature matrix. The split (a split column or
the seeded hold-out) is decided on the driver, as locally, and sent as one side per row.

What it costs: a text repeated in several chunks is tagged in each (locally: once), and the
chunks' texts cross the network once. What the driver holds: a feature-by-cell count table
per chunk while it sums them, never the n x F matrix; with ``streamed=True`` (the measure on
a cluster) each chunk's texts only while its task is sent (read from the frame then,
:class:`~aflite_core.io.RowTexts`), never a list of every row's text.
"""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from aflite_core.cues import _tagging as tagging
from aflite_core.cues._annotation_cache import cache_save
from aflite_core.cues._annotations_ahead import annotate_here
from aflite_core.cues.linguistic import (
    FAMILIES,
    check_families,
    extract_with_annotations,
    word_method,
)
from aflite_core.cues.statistics import (
    DEFAULT_SORT,
    CueCounts,
    CueInputs,
    check_cue_options,
    dataset_inputs,
    encode_label_codes,
    listed_features,
    stack_scopes,
    statistics_from_counts,
)
from aflite_core.represent import cluster_workers, dask_folds, map_folds
from aflite_core.splits import resolve_split
from aflite_core.text import default_cache_dir, hash_texts

__all__ = ["AHEAD_PRIORITY", "CHUNK_ROWS", "MIN_CHUNK_ROWS", "annotate_chunks_ahead",
           "check_same_extraction", "chunk_rows_for", "cue_tables", "sorted_label_codes"]

#: Rows per map task at most: about 10 MB of SNLI texts and a few seconds of tagging on one
#: core.
CHUNK_ROWS = 50_000
#: Rows per map task at least (fewer rows, more set-up per row: the families' word lists).
MIN_CHUNK_ROWS = 5_000


#: The Dask priority of the tagging ahead's tasks (:func:`annotate_chunks_ahead`), below the
#: audit's own (0): a worker takes one only when none of those is ready for it.
AHEAD_PRIORITY = -10
#: How often the tagging ahead looks whether it was asked to stop, seconds.
POLL_SECONDS = 0.2
#: Held by :func:`annotate_chunks_ahead` while its tasks run; :func:`cue_tables` waits for it,
#: so that its tasks find each chunk tagged, not tag it a second time beside the first.
_AHEAD_LOCK = threading.Lock()
#: ``(id(dataset), included rows, chunk_rows)`` -> the worker that tagged each chunk ahead
#: (None: not tagged), taken by :func:`cue_tables` to send each chunk's task there.
_TAGGED_ON: dict[tuple[int, int, int], list[str | None]] = {}


def chunk_rows_for(n_rows: int, n_workers: int) -> int:
    """Rows per map task: :data:`CHUNK_ROWS`, or fewer so that every worker gets two tasks
    (never below :data:`MIN_CHUNK_ROWS`)."""
    per_task = -(-int(n_rows) // max(2 * int(n_workers), 1))
    return max(MIN_CHUNK_ROWS, min(CHUNK_ROWS, per_task))


@dataclass(frozen=True)
class _ExtractOptions:
    """The options of ``extract_features`` every chunk is extracted with."""

    features: tuple[str, ...]
    text: str
    lemma: bool
    sentiment_lexicon: str
    on_missing: str
    cache: bool


@dataclass
class _Chunk:
    """One map task: a chunk's texts and, per row and scope, the count column it adds to
    (``(scope * 2 + side) * n_labels + label``; -1 when the row is outside the scope or on
    neither side of the split)."""

    hypotheses: list[str]
    premises: list[str] | None
    cells: np.ndarray  # (n_rows, n_scopes) int32


@dataclass
class _ChunkCounts:
    """What a map task returns: its features and their counts."""

    feature_type: np.ndarray
    feature: np.ndarray
    counts: np.ndarray   # (n_features, n_scopes * 2 * n_labels) int64
    present: np.ndarray  # (n_features,) int64: rows of the chunk having the feature
    text: str
    methods: dict[str, str]
    unavailable: dict[str, str]
    #: side -> the chunk's tagging annotations per row (tense, ner, typo), and the other
    #: parts of their cache key (NER method, NLTK and pyspellchecker versions) on the worker
    tagged: dict[str, dict[str, np.ndarray]]
    tag_key: tuple[str, str, str] | None


def _count_chunk(chunk: _Chunk, *, options: _ExtractOptions, n_columns: int) -> _ChunkCounts:
    """The map: one chunk's features, counted per cell (runs on a worker)."""
    features, tagged = extract_with_annotations(
        chunk.hypotheses, chunk.premises, features=options.features, text=options.text,
        min_count=1, lemma=options.lemma, sentiment_lexicon=options.sentiment_lexicon,
        cache=options.cache, cache_dir=None, n_jobs=1, on_missing=options.on_missing)
    rows, scopes = np.nonzero(chunk.cells >= 0)
    targets = sp.csr_matrix(
        (np.ones(rows.size, dtype=np.int64), (rows, chunk.cells[rows, scopes])),
        shape=(len(chunk.hypotheses), n_columns))
    X = sp.csr_matrix(features.X, dtype=np.int64)
    return _ChunkCounts(
        features.feature_type, features.feature, np.asarray((X.T @ targets).toarray()),
        np.asarray(X.sum(axis=0), dtype=np.int64).ravel(), features.text,
        dict(features.methods), dict(features.unavailable), tagged,
        (tagging.ner_method(), *tagging.tagger_versions()) if tagged else None)


def _annotate_chunk(texts: tuple[list[str], list[str] | None], *, features: tuple[str, ...],
                    text: str) -> str | None:
    """The tagging ahead of one chunk (runs on a worker): its token counts and tags into the
    worker's annotation cache, where :func:`_count_chunk` of the same rows reads them.
    Returns the worker's address (None when the cache did not take them)."""
    from distributed import get_worker  # lazy: runs on a Dask worker only

    hypotheses, premises = texts
    done = annotate_here(hypotheses, premises, features=features, text=text)
    return get_worker().address if done else None


def annotate_chunks_ahead(dataset, *, chunk_rows: int, features: Iterable[str] = FAMILIES,
                          text: str = "hypothesis", stop: threading.Event | None = None) -> int:
    """The cue measure's work ahead on a Dask cluster: each chunk of ``chunk_rows`` included
    rows tagged by a task on a worker, into that worker's annotation cache, while the audit
    builds Φ and filters, so that the cue table's task of the same chunk
    (:func:`cue_tables` with the same ``chunk_rows``) reads its tags instead of making them.

    Call it inside :func:`~aflite_core.represent.on_dask`. The tasks have
    :data:`AHEAD_PRIORITY`: a worker runs one only when none of the audit's own tasks is
    ready for it. Two per worker are in flight at a time, each carrying its chunk's texts,
    read as it is sent (the driver never lists every row's text). A failed task is let go:
    the cue table's task of that chunk tags it and says what went wrong. :func:`cue_tables`
    waits until this returns, and sends each chunk's task to the worker that tagged it (the
    cache is each worker's own, :func:`~aflite_core.text.default_cache_dir` there), or to
    another when that one is gone or busy for long; then it tags the chunk again.

    Parameters
    ----------
    dataset : AuditDataset
        Its included rows are tagged.
    chunk_rows : int
        Rows per task: the cue table's (:func:`chunk_rows_for`).
    features, text
        As the cue table's extraction will read them.
    stop : threading.Event, optional
        Set it to stop: the tasks not yet done are cancelled.

    Returns
    -------
    int
        The chunks tagged.
    """
    record = dask_folds()
    if record is None:
        raise RuntimeError("annotate_chunks_ahead: expected to run inside on_dask(client), "
                           "got no cluster")
    if int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows: expected an integer >= 1, got {chunk_rows!r}")
    client, chunk_rows = record.client, int(chunk_rows)
    stop = stop or threading.Event()
    hypotheses, premises = _row_texts(dataset)
    task = functools.partial(_annotate_chunk, features=tuple(check_families(features)),
                             text=text)
    in_flight = 2 * max(len(cluster_workers(client)), 1)
    waiting: deque = deque()
    places: list[str | None] = []
    with _AHEAD_LOCK:
        try:
            for lo in [*range(0, len(hypotheses), chunk_rows), None]:
                while waiting and (lo is None or len(waiting) >= in_flight):
                    if stop.wait(0 if waiting[0].done() else POLL_SECONDS):
                        return sum(place is not None for place in places)
                    if waiting[0].done():
                        future = waiting.popleft()
                        places.append(future.result() if future.status == "finished"
                                      else None)
                if lo is None:
                    _TAGGED_ON[id(dataset), len(hypotheses), chunk_rows] = places
                    return sum(place is not None for place in places)
                texts = (hypotheses[lo:lo + chunk_rows],
                         None if premises is None else premises[lo:lo + chunk_rows])
                waiting.append(client.submit(task, texts, pure=False, priority=AHEAD_PRIORITY))
                del texts
                record.tasks += 1
        finally:
            if waiting:
                client.cancel(list(waiting))


def check_same_extraction(parts: Sequence) -> None:
    """Raise when two chunks' features were extracted differently (their ``methods``,
    ``unavailable`` or ``text`` differ: another aflite_core or NLTK data on a worker)."""
    first = parts[0]
    for part in parts[1:]:
        if (part.methods, part.unavailable, part.text) != (first.methods, first.unavailable,
                                                           first.text):
            raise RuntimeError(
                "cue features on Dask: two workers extracted the features differently "
                f"({first.methods} / {first.unavailable} vs {part.methods} / "
                f"{part.unavailable}); install the same aflite_core and NLTK data on every "
                "worker, or run without a scheduler")


def _reduce(parts: Iterable[_ChunkCounts], *, min_count: int, lemma: bool = False
            ) -> tuple[CueCounts, np.ndarray]:
    """The reduce: every chunk's counts summed by feature, rare words dropped.

    Returns the features as a ``CueCounts`` (its ``train``/``test`` left empty) and their
    summed ``(n_features, n_columns)`` counts.
    """
    parts = list(parts)
    first = parts[0]
    check_same_extraction(parts)
    codes, uniques = pd.MultiIndex.from_arrays([
        np.concatenate([part.feature_type for part in parts]).astype(object),
        np.concatenate([part.feature for part in parts]).astype(object)]).factorize()
    total = np.zeros((len(uniques), first.counts.shape[1]), dtype=np.int64)
    present = np.zeros(len(uniques), dtype=np.int64)
    start = 0
    for part in parts:
        at = codes[start:start + len(part.feature)]
        start += len(part.feature)
        total[at] += part.counts  # a chunk lists each feature once
        present[at] += part.present
    feature_type = uniques.get_level_values(0).to_numpy(dtype=object)
    feature = uniques.get_level_values(1).to_numpy(dtype=object)
    keep = (feature_type != "word") | (present >= min_count)
    empty = np.zeros((int(keep.sum()), 0), dtype=np.int64)
    methods = dict(first.methods)
    if "word" in methods:  # the chunks' words were kept from one row on
        methods["word"] = word_method(min_count=min_count, lemma=lemma)
    features = CueCounts(empty, empty, feature_type[keep], feature[keep], first.text,
                         methods, first.unavailable)
    return features, total[keep]


def _chunks(inputs, scope_masks: list[np.ndarray], codes: np.ndarray, n_labels: int,
            chunk_rows: int) -> Iterator[_Chunk]:
    """The map tasks, made one at a time as they are asked for (a chunk's texts are read
    then): the rows cut into chunks, each row's count column per scope."""
    side = np.where(inputs.split.train, 0, np.where(inputs.split.test, 1, -1))
    cells = np.full((len(codes), len(scope_masks)), -1, dtype=np.int32)
    for s, mask in enumerate(scope_masks):
        inside = mask & (side >= 0)
        cells[inside, s] = (s * 2 + side[inside]) * n_labels + codes[inside]
    for lo in range(0, len(codes), chunk_rows):
        hi = min(lo + chunk_rows, len(codes))
        yield _Chunk(inputs.hypotheses[lo:hi],
                     inputs.premises[lo:hi] if inputs.premises is not None else None,
                     cells[lo:hi])


def sorted_label_codes(labels: Sequence) -> tuple[np.ndarray, list]:
    """``encode_label_codes(labels, sorted(pd.unique(labels), key=str))`` by one factorisation
    instead of a dictionary lookup per row, and without a Python str per label: each row's
    code and the distinct labels ordered by their text. A missing value (NaN, None) is one
    label, ``nan``.

    Examples
    --------
    >>> codes, order = sorted_label_codes(np.array(["b", "a", "b", 1], dtype=object))
    >>> codes.tolist(), order
    ([2, 1, 2, 0], [1, 'a', 'b'])
    """
    codes, uniques = pd.factorize(np.asarray(labels), use_na_sentinel=False)
    values = list(uniques)
    order = sorted(values, key=str)
    rank = np.asarray([order.index(v) for v in values], dtype=np.int64)
    return rank[codes], order


def _row_texts(dataset) -> tuple[Sequence[str], Sequence[str] | None]:
    """The included rows' hypotheses and premises (None without a premise column), read from
    the frame a slice at a time (:class:`~aflite_core.io.RowTexts`)."""
    from aflite_core.io import RowTexts, row_positions  # lazy: +9 ms to import

    rows = row_positions(dataset.included_mask)  # None: every row (no array of positions)
    columns = dataset.columns
    hypotheses = RowTexts(dataset.text_column(columns.hypothesis), rows)
    premises = (RowTexts(dataset.text_column(columns.premise), rows)
                if columns.premise is not None else None)
    return hypotheses, premises


def _row_inputs(dataset, *, test_size: float, groups: Sequence | None,
                random_state: int | None) -> CueInputs:
    """:func:`~aflite_core.cues.statistics.dataset_inputs` with the texts read from the
    frame a chunk at a time (:class:`~aflite_core.io.RowTexts`) and the labels
    as the dataset gives them: no list of every row's text, no Python str per label."""
    from aflite_core.io import label_objects  # lazy: +9 ms to import

    mask = dataset.included_mask
    columns = dataset.columns
    hypotheses, premises = _row_texts(dataset)
    # labels and split values with one str object per value: the str arrays of
    # dataset.labels() / splits() became a str per row in every factorisation of them
    labels = dataset.label_objects()
    splits = None if columns.split is None else label_objects(dataset.frame[columns.split])[mask]
    split = resolve_split(splits, labels, groups=groups, test_size=test_size,
                          random_state=random_state)
    return CueInputs(hypotheses, premises, labels, split, np.ones(len(labels), dtype=bool),
                     np.asarray(dataset.row_ids()))


def cue_tables(
    dataset,
    scopes: Mapping[str, Sequence | None],
    *,
    features: Iterable[str] = FAMILIES,
    min_count: int = 5,
    text: str = "hypothesis",
    lemma: bool = False,
    sentiment_lexicon: str = "opinion",
    pmi_smoothing: float = 100.0,
    alpha: float = 0.01,
    sort_by: str = DEFAULT_SORT,
    test_size: float = 0.2,
    groups: Sequence | None = None,
    random_state: int | None = 0,
    on_missing: str = "report",
    cache: bool = True,
    chunk_rows: int = CHUNK_ROWS,
    mapper: Callable | None = None,
    progress: Callable[[float, str], object] | None = None,
    streamed: bool = False,
    seed_cache: bool = True,
) -> pd.DataFrame:
    """:func:`aflite_core.cues.statistics.cue_tables` by map-reduce over row chunks.

    Parameters
    ----------
    dataset : AuditDataset
        Included rows; its split column (or the seeded hold-out) decides the test rows.
    scopes : mapping
        Scope name -> the row ids it keeps, or None for all rows.
    features, min_count, text, lemma, sentiment_lexicon, pmi_smoothing, alpha, sort_by,
    test_size, groups, random_state, on_missing
        As in :func:`~aflite_core.cues.statistics.cue_table` (no second test file here).
    cache : bool, default True
        Each task reads and writes its chunk's annotations in the annotation cache of the
        process it runs in (:func:`~aflite_core.text.default_cache_dir` there:
        ``$AFLITE_CACHE_DIR`` of a worker), keyed by the chunk's texts: a second audit of
        the same rows in the same chunks tags nothing.
    chunk_rows : int, default :data:`CHUNK_ROWS`
        Rows per map task.
    mapper : callable, optional
        ``mapper(fn, tasks, on_done=...)`` running the map tasks, results in task order;
        default :func:`~aflite_core.represent.map_folds` (tasks on the cluster
        inside ``on_dask``, else on local threads).
    progress : callable, optional
        ``progress(fraction, message)`` after each chunk.
    streamed : bool, default False
        Read each chunk's texts from the frame as its task is made (the tasks are then given
        to ``mapper`` as an iterator, which must send each before asking for the next:
        :func:`~aflite_core.represent.map_streamed`), the labels as the dataset
        gives them: the driver never lists every row's text (the measure on a cluster).
    seed_cache : bool, default True
        Store the chunks' tagging annotations in this process's cache for a later extraction
        of every row here (the slices measure on the driver); pointless when that measure
        extracts on the workers too.

    Returns
    -------
    pandas.DataFrame
        The stacked cue tables, equal to the local function's.
    """
    if not scopes:
        raise ValueError("scopes: expected at least one scope, got none")
    if int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows: expected an integer >= 1, got {chunk_rows!r}")
    check_cue_options(min_count=min_count, pmi_smoothing=pmi_smoothing, sort_by=sort_by)
    if mapper is None:
        mapper = map_folds
    if streamed:
        inputs = _row_inputs(dataset, test_size=test_size, groups=groups,
                             random_state=random_state)
    else:
        inputs = dataset_inputs(dataset, test_size=test_size, groups=groups,
                                random_state=random_state)
    if len(inputs.labels) == 0:
        raise ValueError("dataset: expected at least one included row, got none")
    codes, order = (sorted_label_codes(inputs.labels) if streamed else
                    encode_label_codes(inputs.labels, sorted(pd.unique(inputs.labels), key=str)))
    row_ids = pd.Index(inputs.row_ids)
    scope_masks = [np.ones(len(codes), dtype=bool) if ids is None else
                   np.asarray(row_ids.isin(pd.Index(np.asarray(ids))), dtype=bool)
                   for ids in scopes.values()]
    n_columns = len(scope_masks) * 2 * len(order)
    options = _ExtractOptions(tuple(features) if not isinstance(features, str) else
                              (features,), text, bool(lemma), sentiment_lexicon, on_missing,
                              bool(cache))
    tasks = _chunks(inputs, scope_masks, codes, len(order), int(chunk_rows))
    n_tasks = -(-len(codes) // int(chunk_rows))

    def done(i: int, _result: object) -> None:
        if progress is not None:
            progress((i + 1) / n_tasks, f"cue features: chunk {i + 1} of {n_tasks} "
                                        f"({len(codes):,} rows)")

    with _AHEAD_LOCK:  # the tagging ahead's chunks are these: tagged once, then read there
        places = _TAGGED_ON.pop((id(dataset), len(codes), int(chunk_rows)), None)
    parts = mapper(functools.partial(_count_chunk, options=options, n_columns=n_columns),
                   tasks if streamed else list(tasks), on_done=done,
                   **({"workers": places} if places else {}))
    found, total = _reduce(parts, min_count=min_count, lemma=bool(lemma))
    if cache and seed_cache:
        _seed_driver_cache(inputs, parts)
    n_labels = len(order)

    def table_of(name: str, _ids: Sequence | None, also: list | None) -> pd.DataFrame:
        s = list(scopes).index(name)
        keep = scope_masks[s]
        block = total[:, s * 2 * n_labels:(s + 1) * 2 * n_labels]
        counts = CueCounts(block[:, :n_labels], block[:, n_labels:], found.feature_type,
                           found.feature, found.text, found.methods, found.unavailable)
        split = inputs.split.restrict(keep)
        table = statistics_from_counts(
            counts, np.bincount(codes[keep][split.train], minlength=n_labels), split,
            labels=order, min_count=min_count, pmi_smoothing=pmi_smoothing, alpha=alpha,
            sort_by=sort_by, also=listed_features(found.feature_type, found.feature, also))
        table.attrs["dataset"] = str(getattr(dataset, "name", ""))
        return table

    return stack_scopes(scopes, table_of)


def _seed_driver_cache(inputs, parts: list[_ChunkCounts]) -> None:
    """Store the chunks' tagging annotations, joined in row order, in this process's
    annotation cache under the key the local extraction of the whole column reads: the
    slices measure extracts the same rows' features on the driver and then tags nothing
    (the tagging is most of an extraction: 28 s of 1M rows cold, 4 s from the cache).

    The key carries the NER method and the versions the workers tagged with: where this
    process would tag otherwise, its own key differs and it tags afresh.
    """
    first = parts[0]
    if first.tag_key is None or any(part.tag_key != first.tag_key for part in parts):
        return
    for side, arrays in first.tagged.items():
        texts = inputs.hypotheses if side == "hypothesis" else inputs.premises
        if texts is None:
            continue
        joined = {name: np.concatenate([part.tagged[side][name] for part in parts])
                  for name in arrays}
        cache_save(default_cache_dir(), tagging.tagged_cache_key(hash_texts(texts),
                                                                  *first.tag_key), joined)
