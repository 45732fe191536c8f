"""2-D maps of Φ for the dashboard: UMAP (seeded, the default) or PCA, cached on disk.

UMAP is fitted on a seeded sample of at most ``sample_size`` rows and the other rows are
placed the way ``UMAP.transform`` does it. Rows are L2-normalised first (cosine geometry) for
both methods; for UMAP they are then reduced to ``pca_dims`` principal components of the
sample. Nearest neighbours for both steps come from the exact blocked cosine search of
:mod:`aflite_core.measures._neighbors`; the graph and the layout are umap-learn's algorithm in
:mod:`aflite_core.measures._umap_layout`, whose one numba kernel is cached on disk, so a new
process pays no compilation. The start is a PCA of the sample (umap-learn's ``init="pca"``),
and the layout spends :func:`fit_epochs` epochs. When rows were placed, a polish then moves
every row a little towards its own nearest rows among all rows (``_umap_layout.polish``: at
100k rows the map's neighbour recall@10 0.026 -> 0.127, trustworthiness 0.894 -> 0.892).
``benchmarks/bench_projection.py`` measures cost and quality (trustworthiness, neighbour
recall) against umap-learn's defaults and PCA.

Fallback: with fewer than 3 rows, or when Φ holds at most two distinct rows (a constant or
rank-1 Φ, once normalised), no neighbour graph exists; the map is then PCA and the reason is
returned (``projection_info``) and written to ``summary.json``. Fewer rows than neighbours
lowers the neighbour count to rows - 1.

Results are cached under ``cache_dir`` as ``projection-<key>.npy`` (plain float32 arrays, never
pickle) with a ``.json`` beside it, where the key hashes the bytes of ``X`` and every
parameter; a second call with the same input returns in well under a second. See
``docs/measures.md``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aflite_core import blas_threads
from aflite_core._validation import (
    available_cores,
    check_choice,
    check_int,
    check_real,
    make_rng,
    scratch_threads,
)
from aflite_core.chart_style import STATUS_COLORS, add_region_labels
from aflite_core.io import shared_strings
from aflite_core.json_files import read_json_file
from aflite_core.measures import map_regions
from aflite_core.measures._map_reduction import (
    pca_coords,
    pca_start,
    reduce_unit_rows,
    reduction_of,
    unit_reduced,
)
from aflite_core.measures._neighbors import as_matrix, exact_topk, l2_normalize
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option
from aflite_core.progress_plan import along_points
from aflite_core.represent import dask_folds, is_partitioned, map_folds

#: Default largest number of rows UMAP is fitted on; the rest is transformed.
SAMPLE_SIZE: int = 20_000
#: Rows transformed per step (one progress report each).
TRANSFORM_CHUNK: int = 10_000
#: Optimisation epochs UMAP spends on transformed rows (its own default for large inputs).
TRANSFORM_EPOCHS: int = 30
#: Layout epochs of the fitted sample: WORK_PER_FIT row-epochs, within [MIN_EPOCHS, MAX_EPOCHS].
WORK_PER_FIT: int = 800_000
MIN_EPOCHS: int = 80
MAX_EPOCHS: int = 500
#: UMAP: rows are first reduced to this many principal components (fitted on the sample),
#: which makes the neighbour searches several times cheaper; None keeps all dimensions.
PCA_DIMS: int | None = 64
#: Similarities per block of the neighbour searches (rows x fitted rows): 4M float32 (16 MB)
#: keeps a block, its comparison and its candidates in cache; 16M (the KNN measure's, right
#: for its 256-wide rows) made the map's 64-wide searches 21 % slower (16k rows against the
#: 20k fitted ones: 0.79 -> 0.62 s, one thread, the same indices and distances).
SEARCH_BLOCK_CELLS: int = 4 * 1024 * 1024
#: About what one task placing TRANSFORM_CHUNK rows holds (:func:`_place_rest`): its search's
#: block of similarities with its top-k candidates (half the block again), its neighbours'
#: graph and layout arrays; the tasks at once are as many as ``POOL_SCRATCH_BYTES`` holds
#: (:func:`~aflite_core._validation.scratch_threads`: 8; sixteen placing at once on 16 cores
#: raised a 300,000-row audit's peak by about 0.4 GB, ~29 MB a task).
PLACE_TASK_BYTES: int = 6 * SEARCH_BLOCK_CELLS + 32 * TRANSFORM_CHUNK * 16
#: Nearest fitted rows kept per row: the polish's candidates are the rows of their buckets.
POLISH_BUCKETS: int = 8
#: The polish (``_umap_layout.polish``) runs when rows were placed, up to this many rows:
#: above, the buckets grow (rows / fitted rows) and its codes and edges (about 200 bytes a
#: row) weigh on memory; the map is then placed only, and ``projection_info`` says so.
POLISH_MAX_ROWS: int = 2_000_000
#: Bump when the algorithm changes so stale cache files are not reused.
CACHE_VERSION = "6"

METHODS = ("umap", "pca")

ProgressCallback = Callable[[dict], object]


def _emit(callback: ProgressCallback | None, fraction: float, message: str) -> None:
    if callback is not None:
        callback({"stage": "projection", "fraction": float(min(1.0, max(0.0, fraction))),
                  "message": message})


def _knn(queries: np.ndarray, reference: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine neighbours of unit rows: (int32 indices, float32 distances)."""
    sims, idx = exact_topk(queries, reference, k,
                            max(1, SEARCH_BLOCK_CELLS // max(1, len(reference))))
    return idx.astype(np.int32), np.clip(1.0 - sims, 0.0, 2.0).astype(np.float32)


def cache_key(X: np.ndarray, params: dict) -> str:
    """Content hash of ``X`` (bytes, shape, dtype) and ``params`` (JSON), as 32 hex digits."""
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps({"shape": list(X.shape), "dtype": str(X.dtype), "params": params,
                         "version": CACHE_VERSION}, sort_keys=True).encode())
    h.update(memoryview(np.ascontiguousarray(X)).cast("B"))
    return h.hexdigest()


def _load_cached(path: Path, n_rows: int) -> tuple[np.ndarray, dict] | None:
    try:
        coords = np.load(path, allow_pickle=False)
        info = read_json_file(path.with_suffix(".json"))
    except (OSError, ValueError):
        return None
    if coords.shape != (n_rows, 2) or coords.dtype != np.float32 or not isinstance(info, dict):
        return None
    return coords, info


def _save_cached(path: Path, coords: np.ndarray, info: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    for target, write in ((path.with_suffix(".json"),
                           lambda fh: fh.write(json.dumps(info).encode("utf-8"))),
                          (path, lambda fh: np.save(fh, coords, allow_pickle=False))):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-projection-",
                                   suffix=target.suffix)
        try:
            with os.fdopen(fd, "wb") as fh:
                write(fh)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def fit_epochs(n_fit: int) -> int:
    """Layout epochs for a map fitted on ``n_fit`` rows: about 800,000 row-epochs, between 80
    and 500 (umap-learn spends 500 up to 10,000 rows and 200 above, whatever the size;
    measured in ``benchmarks/bench_projection.py``: 80 epochs at 10k-20k rows keep its
    trustworthiness, 0.906 against 0.907 with 100 on SNLI dev)."""
    return int(max(MIN_EPOCHS, min(MAX_EPOCHS, WORK_PER_FIT // max(1, n_fit))))


def _umap(X: np.ndarray, *, n_neighbors: int, min_dist: float, sample_size: int,
          pca_dims: int | None, random_state: int | None,
          callback: ProgressCallback | None) -> tuple[np.ndarray, dict]:
    """UMAP of the rows of ``X`` once normalised (cosine geometry): fitted on a seeded sample,
    the other rows placed as transform does.

    Returns the coordinates and what was done (``fitted_rows``, ``epochs``, ``init`` and,
    when the map fell back to PCA, ``fallback``).
    """
    n = X.shape[0]
    rng = make_rng(random_state)
    seed = int(rng.integers(0, 2**31 - 1)) if random_state is None else int(random_state)
    if n > sample_size:
        sample = np.sort(rng.choice(n, size=sample_size, replace=False))
    else:
        sample = np.arange(n)
    unit_sample = l2_normalize(X, rows=sample)
    reason = _degenerate(unit_sample)
    if reason:
        return pca_coords(l2_normalize(X), random_state), {"fallback": "pca", "reason": reason}
    # on a cluster with Φ on the workers, the other rows are reduced, searched and placed
    # where they are, a chunk a task (the map's transform per partition): only the sample's
    # reduced rows are made here
    on_cluster = dask_folds() is not None
    resident = on_cluster and is_partitioned(X)
    if resident:
        reduction = reduction_of(unit_sample, pca_dims, random_state)
        Xn = None
        Xs = np.ascontiguousarray(unit_reduced(X[sample], reduction, sample))
    else:
        Xn = reduce_unit_rows(X, unit_sample, pca_dims, random_state)
        Xs = np.ascontiguousarray(Xn[sample])
    del unit_sample
    k = min(int(n_neighbors), len(sample) - 1)
    epochs = fit_epochs(len(sample))
    info = {"fitted_rows": int(len(sample)), "epochs": epochs, "init": "pca", "n_neighbors": k}
    coords = np.empty((n, 2), dtype=np.float32)
    fitted_row = np.zeros(n, dtype=bool)  # setdiff1d of arange(n): its sorts' copies
    fitted_row[sample] = True
    rest = np.flatnonzero(~fitted_row)
    del fitted_row
    starts = list(range(0, len(rest), TRANSFORM_CHUNK))
    polished = len(rest) > 0 and n <= POLISH_MAX_ROWS
    # each row's nearest fitted rows (the polish's buckets), filled as rows are placed
    nearest = np.empty((n, min(POLISH_BUCKETS, k)), dtype=np.int32) if polished else None
    laid, placed_from, polish_at = _phase_marks(n, len(sample), epochs, polished)
    # the placed chunks' progress, 0..1, after the layout's span (the layout's is laid to
    # placed_from; the placing's had been the same, so the bar stood still through it)
    placing = _span(callback, placed_from, polish_at if polished else 1.0)
    if resident:  # the layout too is a task: numba and LLVM (0.13 GB) never load here
        _emit(callback, 0.05, f"laying out the {len(sample):,} fitted rows on a worker "
                              f"({epochs} epochs)")
        [(fitted, a, b, fitted_nearest)] = map_folds(
            _fit_layout, [(Xs, k, float(min_dist), epochs, seed)])
        coords[sample] = fitted
        # the polish's codes of the other rows come back with their chunks: Φ's reduced rows
        # are never all here
        codes = np.empty((n, Xs.shape[1]), dtype=np.int8) if polished else None
        _place_where_the_rows_are(coords, X, reduction, Xs, fitted, rest, starts, k=k, a=a,
                                  b=b, seed=seed, callback=placing,
                                  found=(nearest, codes))
        if polished:  # a task too (the fitted rows' codes made there): the same map
            nearest[sample] = fitted_nearest[:, :nearest.shape[1]]
            _emit(callback, polish_at, _POLISHING.format(k=k, n=n))
            [coords[:]] = map_folds(_polish_task, [(coords, codes, nearest, sample, Xs, k, a,
                                                    b, seed)])
        return coords, _polish_info(info, polished, n, len(rest))
    # imported here: it loads numba (0.5 s), which discovering the measures (the dashboard's
    # start, every CLI command) does not need
    from aflite_core.measures import _umap_layout

    _emit(callback, 0.3 * laid, f"nearest neighbours of the {len(sample):,} fitted rows")
    graph, a, b, init, fitted_nearest = _layout_inputs(Xs, k, float(min_dist), seed)
    _emit(callback, laid, f"laying out {len(sample):,} rows ({epochs} epochs)")

    def search(start: int) -> tuple[np.ndarray, np.ndarray]:
        """The fitted neighbours of one chunk of the other rows."""
        return _knn(np.ascontiguousarray(Xn[rest[start:start + TRANSFORM_CHUNK]]), Xs, k)

    # The layout runs on one core (one numba kernel, without the GIL); meanwhile the other
    # core searches the other rows' neighbours, which do not depend on the layout: the same
    # searches, done earlier (one BLAS thread each, as the placement pool runs them).
    # on a cluster (the audit's scheduler) the other rows are placed there instead, a chunk a
    # task, after the layout
    searcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="umap-search")
    try:
        with blas_threads.limit(1):
            searches = {} if on_cluster else {start: searcher.submit(search, start)
                                              for start in starts}
            fitted = _umap_layout.layout(
                graph, init, n_epochs=epochs, a=a, b=b, random_state=seed,
                callback=_layout_progress(_span(callback, laid, placed_from if starts else 1.0),
                                          len(sample), epochs))
        coords[sample] = fitted
        if on_cluster:
            _place_on_cluster(coords, Xn, Xs, fitted, rest, starts, k=k, a=a, b=b, seed=seed,
                              callback=placing, nearest=nearest)
        else:
            _place_rest(coords, search, searches, fitted, rest, starts, k=k, a=a, b=b,
                        seed=seed, callback=placing, nearest=nearest)
    finally:
        searcher.shutdown(wait=True, cancel_futures=True)
    if polished:
        nearest[sample] = fitted_nearest[:, :nearest.shape[1]]
        _emit(callback, polish_at, _POLISHING.format(k=k, n=n))
        _polish_task((coords, _umap_layout.polish_codes(Xn), nearest, sample, None, k, a, b, seed))
    return coords, _polish_info(info, polished, n, len(rest))


_POLISHING = "polishing the map: each row's {k} nearest rows among all {n:,}"


def _phase_marks(n: int, fitted: int, epochs: int, polished: bool
                 ) -> tuple[float, float, float]:
    """Where the map's phases end on its progress scale (0..1), in proportion to their
    seconds: the fitted rows' reduction, neighbours and graph; their layout; the other rows'
    placement (the polish after it). So the layout goes from the first mark to the second,
    the placement from the second to the third. One-core seconds of a 256-wide Φ
    (``project`` pinned to one core, 2026-11-30): at 10k rows, all fitted, 0.87 s before the
    layout and 0.9 s of it (the bar had sat at 0.15 for half the map's time); at 30k and 100k
    rows (20k fitted) 1.7-1.8 s, 2.0-3.5 s, then 0.45 s and 4.8 s placing, 0.1 s and 0.45 s
    polishing."""
    before = 0.3 + 0.06 * fitted / 1_000
    layout = 0.9 * (fitted / 10_000) ** 2 * epochs / 80
    placing = 0.055 * (n - fitted) / 1_000
    polish = 0.0045 * n / 1_000 if polished else 0.0
    total = before + layout + placing + polish
    return (before / total, (before + layout) / total,
            (before + layout + placing) / total)


def _span(callback: ProgressCallback | None, lo: float, hi: float
          ) -> ProgressCallback | None:
    """``callback`` given a phase's own fraction (0..1) as the map's, from ``lo`` to ``hi``."""
    if callback is None:
        return None
    return lambda info: callback({**info, "fraction": lo + (hi - lo) * info["fraction"]})


def _layout_progress(callback: ProgressCallback | None, rows: int, epochs: int
                     ) -> Callable[[float], None] | None:
    """The layout's progress (the share of its epochs done), to ``callback`` (the layout's
    span of the map's scale, :func:`_span`): the bar moves while the fitted rows are laid
    out, not only once they are."""
    if callback is None:
        return None
    return lambda done: _emit(callback, done,
                              f"laying out {rows:,} rows: epoch {round(done * epochs)} of "
                              f"{epochs}")


def _polish_task(task: tuple) -> np.ndarray:
    """``(coords, codes, nearest, sample, Xs, k, a, b, seed)`` -> the placed map polished (in
    place: ``_umap_layout.polish``), here or as a task on a worker (with Φ on the workers,
    so that numba never loads on the driver). ``Xs``, when given, are the fitted rows'
    reduced unit rows, whose codes go in ``codes[sample]`` first."""
    from aflite_core.measures import _umap_layout  # numba: loaded by the layout already

    coords, codes, nearest, sample, Xs, k, a, b, seed = task
    if Xs is not None:
        codes[sample] = _umap_layout.polish_codes(Xs)
    return _umap_layout.polish(coords, codes, nearest, n_fitted=len(sample), k=k, a=a, b=b,
                               random_state=seed, threads=available_cores())


def _polish_info(info: dict, polished: bool, n: int, placed: int) -> dict:
    """``info`` with whether the map was polished (and why not, when rows were placed)."""
    info["polished"] = bool(polished)
    if placed and not polished:
        info["polish_note"] = (f"the map was not polished ({n:,} rows, over "
                               f"{POLISH_MAX_ROWS:,}): the rows placed beside the fitted ones "
                               "keep those places, so a row's nearest points on the map are "
                               "less often its nearest rows in Φ")
    return info


def _layout_inputs(Xs: np.ndarray, k: int, min_dist: float, seed: int
                   ) -> tuple[Any, float, float, np.ndarray, np.ndarray]:
    """The fitted rows' fuzzy graph, the curve's ``a`` and ``b``, the layout's start and each
    fitted row's POLISH_BUCKETS nearest fitted rows (itself first, as a rule)."""
    from aflite_core.measures import _umap_layout  # lazy: +428 ms to import

    with blas_threads.limit(1):  # here or on a worker: the same bits (see _project)
        idx, dists = _knn(Xs, Xs, k + 1)  # the row itself first, as umap-learn counts it
        start = pca_start(Xs)
    graph = _umap_layout.fuzzy_graph(idx, dists)
    a, b = _umap_layout.find_ab(1.0, min_dist)
    return (graph, a, b, _umap_layout.scaled_init(start, seed),
            np.ascontiguousarray(idx[:, :POLISH_BUCKETS]))


def _fit_layout(task: tuple) -> tuple[np.ndarray, float, float, np.ndarray]:
    """The fitted rows' layout, as :func:`_umap` makes it here, in one task (on a worker):
    ``(Xs, k, min_dist, epochs, seed)`` -> the fitted coordinates, the curve's ``a``, ``b``
    and the fitted rows' nearest fitted rows. The same steps in the same order: the same
    layout."""
    from aflite_core.measures import _umap_layout  # lazy: +428 ms to import

    Xs, k, min_dist, epochs, seed = task
    graph, a, b, init, nearest = _layout_inputs(Xs, k, min_dist, seed)
    with blas_threads.limit(1):
        fitted = _umap_layout.layout(graph, init, n_epochs=epochs, a=a, b=b,
                                     random_state=seed)
    return fitted, a, b, nearest


def _place_rest(coords: np.ndarray, search: Callable, searches: dict, fitted: np.ndarray,
                rest: np.ndarray, starts: list[int], *, k: int, a: float, b: float, seed: int,
                callback: ProgressCallback | None, nearest: np.ndarray | None) -> None:
    """Place the rows of ``rest`` in the fitted map, TRANSFORM_CHUNK rows a task on every core
    (and keep their nearest fitted rows in ``nearest``, for the polish, unless None).

    A chunk's neighbours (``search(start)``, or its future in ``searches`` when the search
    already started during the layout) and layout depend only on the fitted rows and the
    chunk's own seed (its offset), so the map is the same whatever the number of threads;
    BLAS is held to one thread per task meanwhile. Progress is reported from the calling
    thread.
    """
    if not len(rest):
        return

    def task(start: int) -> tuple[np.ndarray, np.ndarray]:
        early = searches[start]
        near, near_d = search(start) if early.cancel() else early.result()
        return _place_chunk(near, near_d, fitted, start, k=k, a=a, b=b, seed=seed)

    workers = min(len(starts), scratch_threads(PLACE_TASK_BYTES))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="umap-place")
    try:
        with blas_threads.limit(1):
            for done, placed in enumerate(pool.map(task, starts)):
                _chunk_placed(coords, placed, done, rest, starts, callback, (nearest, None))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _place_chunk(near: np.ndarray, near_d: np.ndarray, fitted: np.ndarray, start: int, *,
                 k: int, a: float, b: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The coordinates of the chunk of placed rows starting at ``start`` (its own seed) and
    its rows' POLISH_BUCKETS nearest fitted rows."""
    from aflite_core.measures import _umap_layout  # loaded by _umap already

    placed = _umap_layout.place(near, near_d, fitted, k=k, n_epochs=TRANSFORM_EPOCHS,
                                a=a, b=b, random_state=(seed + start) % 2**31)
    return placed, np.ascontiguousarray(near[:, :POLISH_BUCKETS])


def _chunk_placed(coords: np.ndarray, placed: tuple, i: int, rest: np.ndarray,
                  starts: list[int], callback: ProgressCallback | None,
                  found: tuple[np.ndarray | None, np.ndarray | None]) -> None:
    """Store chunk ``i``'s coordinates (``placed[0]``) and, where ``found`` (the map's nearest
    fitted rows and polish codes) holds arrays, its rows' (``placed[1]``, ``placed[2]``);
    report the rows placed so far."""
    start = starts[i]
    rows = rest[start:start + TRANSFORM_CHUNK]
    coords[rows] = placed[0]
    for target, part in zip(found, placed[1:], strict=False):
        if target is not None:
            target[rows] = part[:, :target.shape[1]]
    _emit(callback, (i + 1) / len(starts),
          f"placed {min(len(rest), start + TRANSFORM_CHUNK):,} of {len(rest):,} rows")


def _place_on_cluster(coords: np.ndarray, Xn: np.ndarray, Xs: np.ndarray, fitted: np.ndarray,
                      rest: np.ndarray, starts: list[int], *, k: int, a: float, b: float,
                      seed: int, callback: ProgressCallback | None,
                      nearest: np.ndarray | None) -> None:
    """:func:`_place_rest` as tasks on the audit's Dask workers (the map's transform per
    partition): the fitted rows and their layout are scattered once, each task carries its
    chunk's reduced rows, searches their fitted neighbours and places them with the chunk's
    own seed, as locally (the neighbours' float32 similarities may round differently on a
    worker, so a near tie can pick another neighbour: the map agrees, not bit for bit)."""
    if not len(rest):
        return

    def place(chunk: tuple[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        start, rows = chunk
        near, near_d = _knn(rows, Xs, k)
        return _place_chunk(near, near_d, fitted, start, k=k, a=a, b=b, seed=seed)

    chunks = [(start, np.ascontiguousarray(Xn[rest[start:start + TRANSFORM_CHUNK]]))
              for start in starts]
    map_folds(place, chunks, on_done=lambda i, placed: _chunk_placed(
        coords, placed, i, rest, starts, callback, (nearest, None)))


def _place_where_the_rows_are(coords: np.ndarray, X, reduction, Xs: np.ndarray,
                              fitted: np.ndarray, rest: np.ndarray, starts: list[int], *,
                              k: int, a: float, b: float, seed: int,
                              callback: ProgressCallback | None,
                              found: tuple[np.ndarray | None, np.ndarray | None]) -> None:
    """:func:`_place_on_cluster` for Φ left on the workers: each chunk of the other rows is
    reduced, searched and placed by a task on the worker holding its rows (a chunk across two
    partitions is fetched and placed here), so neither their reduced rows nor their chunks
    are ever all on the driver: its coordinates come back, and for the polish (where
    ``found`` holds arrays) its rows' nearest fitted rows and the int8 codes of their reduced
    rows."""
    if not len(rest):
        return
    placements = X.select(rest).map_chunks(_place_rows, TRANSFORM_CHUNK, reduction, Xs,
                                           fitted, k, a, b, seed, found[1] is not None, rest,
                                           with_start=True)
    for i, placed in enumerate(placements):
        _chunk_placed(coords, placed, i, rest, starts, callback, found)
    record = dask_folds()
    if record is not None:  # tasks of the audit's cluster: the measure ran on Dask
        record.tasks += len(starts)


def _place_rows(rows: np.ndarray, start: int, reduction, Xs: np.ndarray, fitted: np.ndarray,
                k: int, a: float, b: float, seed: int, with_codes: bool,
                rest: np.ndarray) -> tuple:
    """One chunk of the other rows of Φ (``rest[start:]``'s first rows) placed in the fitted
    map (where its rows are): its coordinates, its rows' nearest fitted rows and,
    ``with_codes``, the polish's int8 codes of its reduced rows."""
    from aflite_core.measures import _umap_layout  # loaded by the placement already

    with blas_threads.limit(1):
        reduced = np.ascontiguousarray(unit_reduced(rows, reduction,
                                                     rest[start:start + len(rows)]))
        near, near_d = _knn(reduced, Xs, k)
    placed = _place_chunk(near, near_d, fitted, start, k=k, a=a, b=b, seed=seed)
    return (*placed, _umap_layout.polish_codes(reduced)) if with_codes else placed


def _degenerate(Xs: np.ndarray) -> str | None:
    """Why UMAP cannot make a map of the sample's unit rows ``Xs`` (then PCA does), or None.
    Fewer rows than neighbours is not a reason: the neighbour count is lowered to rows - 1."""
    if len(Xs) < 3:
        return f"only {len(Xs)} rows: UMAP needs at least 3"
    # at most two distinct rows (a constant or rank-1 Φ, once normalised)? Two passes over
    # the rows instead of sorting them all
    off_first = (np.abs(Xs - Xs[0]) > 1e-6).any(axis=1)
    distinct = 1
    if off_first.any():
        off_second = (np.abs(Xs - Xs[int(np.argmax(off_first))]) > 1e-6).any(axis=1)
        distinct = 3 if (off_first & off_second).any() else 2
    if distinct <= 2:
        return (f"only {distinct} distinct rows in Φ: every row lies on {distinct} point(s), "
                "a neighbour graph has no structure")
    return None


def project(X, *, method: str = "umap", row_ids=None, n_neighbors: int = 15,
            min_dist: float = 0.1, sample_size: int = SAMPLE_SIZE,
            pca_dims: int | None = PCA_DIMS, random_state: int | None = 0,
            cache_dir: str | os.PathLike | None = None,
            callback: ProgressCallback | None = None) -> pd.DataFrame:
    """Project the rows of Φ to 2-D with UMAP or PCA.

    Parameters
    ----------
    X : array of shape (n_rows, n_features)
        Φ (any real dtype; used as float32). Rows are L2-normalised first.
    method : {"umap", "pca"}, default "umap"
    row_ids : array of shape (n_rows,), optional
        Returned in the ``row_id`` column (default: positions).
    n_neighbors, min_dist : UMAP parameters (ignored for PCA).
    sample_size : int, default 20000
        UMAP is fitted on a seeded sample of at most this many rows; the rest is transformed.
    pca_dims : int or None, default 64
        UMAP only: reduce the (normalised) rows to this many principal components of the
        sample, then re-normalise, before the neighbour searches. None keeps every dimension.
    random_state : int or None, default 0
        Seeds the sample, UMAP and PCA. With an int the result is reproducible.
    cache_dir : path, optional
        Folder for the on-disk cache (``projection-<key>.npy``). None disables caching;
        with ``random_state=None`` nothing is cached.
    callback : callable, optional
        Called with ``{"stage": "projection", "fraction": float, "message": str}``.

    Returns
    -------
    DataFrame with columns ``row_id``, ``x``, ``y`` (float32) and ``method`` (the method
    that made the coordinates), in row order; :func:`projection_info` reads what was done
    (a UMAP that fell back to PCA says why).
    """
    check_choice("method", method, METHODS)
    X = as_matrix(X, "X")
    n = X.shape[0]
    if row_ids is None:
        row_ids = np.arange(n)
    else:
        row_ids = np.asarray(row_ids)
        if row_ids.shape != (n,):
            raise ValueError(f"row_ids must have shape ({n},) (one per row of X); got "
                             f"{row_ids.shape}")
    n_neighbors = check_int("n_neighbors", n_neighbors, minimum=2)
    min_dist = check_real("min_dist", min_dist, low=0.0, high=1.0)
    sample_size = check_int("sample_size", sample_size, minimum=10)
    if pca_dims is not None:
        pca_dims = check_int("pca_dims", pca_dims, minimum=2)
    params = {"method": method, "random_state": random_state}
    if method == "umap":
        params.update(n_neighbors=n_neighbors, min_dist=min_dist, sample_size=sample_size,
                      transform_epochs=TRANSFORM_EPOCHS, pca_dims=pca_dims,
                      work_per_fit=WORK_PER_FIT)
    table, _ = _project(X, params, row_ids, cache_dir, callback)
    return table


def projection_info(table: pd.DataFrame) -> dict:
    """What :func:`project` did for ``table``: the method asked for and used, and for UMAP
    the fitted rows, the epochs and the neighbour count, or the fallback and its reason."""
    return dict(table.attrs.get("projection", {}))


def _project(X: np.ndarray, params: dict, row_ids: np.ndarray,
             cache_dir: str | os.PathLike | None,
             callback: ProgressCallback | None) -> tuple[pd.DataFrame, dict]:
    n = X.shape[0]
    path = None
    if cache_dir is not None and params["random_state"] is not None:
        path = Path(cache_dir) / f"projection-{cache_key(X, params)}.npy"
        cached = _load_cached(path, n) if path.is_file() else None
        if cached is not None:
            _emit(callback, 1.0, "loaded from cache")
            return _frame(row_ids, *cached), cached[1]
    _emit(callback, 0.0, "normalising rows")
    info: dict = {"method": params["method"]}
    # BLAS on one thread: OpenBLAS's thread split rounds rows by where it falls (on an AMD
    # EPYC, a 2,000-row sample's searches and start differed on 2 threads from 1): the same
    # map whatever the cores
    with blas_threads.limit(1):
        if params["method"] == "pca":
            coords = pca_coords(l2_normalize(X), params["random_state"])
        else:  # UMAP normalises the rows as it reduces them: no unit copy of all of Φ
            coords, done = _umap(X, n_neighbors=params["n_neighbors"],
                                 min_dist=params["min_dist"], sample_size=params["sample_size"],
                                 pca_dims=params["pca_dims"],
                                 random_state=params["random_state"], callback=callback)
            info.update(done)
    if path is not None:
        _save_cached(path, coords, info)
    _emit(callback, 1.0, "done")
    return _frame(row_ids, coords, info), info


#: How ``projection.parquet``'s categorical column is written (``MeasureResult.astype``).
TABLE_TYPES = {"method": "str"}


def _frame(row_ids: np.ndarray, coords: np.ndarray, info: dict) -> pd.DataFrame:
    """The map's table; ``method`` is the method that made the coordinates (``pca`` when UMAP
    fell back), and ``attrs["projection"]`` holds ``info``."""
    used = info.get("fallback", info.get("method", "umap"))
    # the method as one categorical code a row (a str column of it was 12 bytes a row: 60 MB
    # at 5M rows); written as the strings it was (TABLE_TYPES)
    method = pd.Categorical.from_codes(np.zeros(len(row_ids), dtype=np.int8), [used])
    table = pd.DataFrame({"row_id": row_ids, "x": coords[:, 0], "y": coords[:, 1],
                          "method": method}, copy=False)  # not a stacked copy of coords
    table.attrs["projection"] = dict(info)
    return table


# --- registry entry -------------------------------------------------------------------


#: Expected seconds of a UMAP map (benchmarks/bench_projection.py, 2 cores): loading the
#: cached kernel, fitting on the sample (at most SAMPLE_SIZE rows), placing the other rows,
#: polishing them all (0.3-0.6 s at 100k); measured 1.3 s at 10k, 6.8 s at 100k, 54.0 s at
#: 1M, warm (2026-11-29). The placement 4.0 -> 3.0 s per 100,000 rows on 2026-11-30's VM: the
#: map took 11.8-12.6 s at 300k rows and 40.5 s at 1M in the audit (bench_cores.py,
#: bench_pipeline.py) where 4.0 planned 16.9 s and 49.5 s.
UMAP_FIXED_SECONDS = 0.5
UMAP_FIT_SECONDS_PER_10K = 1.5
UMAP_TRANSFORM_SECONDS_PER_100K = 3.0
UMAP_POLISH_SECONDS_PER_100K = 0.5
#: PCA's seconds per 100,000 rows.
PCA_SECONDS_PER_100K = 0.8
#: Finding the regions (HDBSCAN of a 10k sample, every row placed by the k-d tree):
#: ``REGIONS_SECONDS`` plus ``REGIONS_SECONDS_PER_100K`` per 100,000 rows; naming them
#: (c-TF-IDF of at most 50k texts, their label shares): ``DESCRIBE_SECONDS``. Measured in the
#: audit on 2026-11-30's VM: 0.30 + 0.19 s at 20k rows, 0.26 + 0.51 s at 100k, 0.77 + 0.53 s at
#: 1M (0.65 s at 10k, 0.9 s at 100k and 2.5 s at 1M in all on the previous VM). The bar moves
#: between the two: under load the regions took 5 s without a report, the ETA counting down.
REGIONS_SECONDS = 0.25
REGIONS_SECONDS_PER_100K = 0.05
DESCRIBE_SECONDS = ((20_000, 0.19), (100_000, 0.51), (1_000_000, 0.53))
#: Points of the map drawn in the HTML report and on the Report page (a seeded sample).
FIGURE_POINTS = 10_000


def _regions_seconds(n: int) -> tuple[float, float]:
    """Expected seconds of finding and of naming the regions of ``n`` rows' map."""
    return (REGIONS_SECONDS + REGIONS_SECONDS_PER_100K * n / 100_000,
            along_points(DESCRIBE_SECONDS, n))


def _cost(n: int, params: dict) -> float:
    """Seconds per 100,000 rows (the registry's unit) of the map ``params`` ask for."""
    n = max(int(n), 1)
    regions = sum(_regions_seconds(n)) * 100_000 / n
    if params.get("method", "umap") != "umap":
        return PCA_SECONDS_PER_100K + regions
    fitted = min(n, int(params.get("sample_size", SAMPLE_SIZE)))
    seconds = (UMAP_FIXED_SECONDS + UMAP_FIT_SECONDS_PER_10K * fitted / 10_000
               + UMAP_TRANSFORM_SECONDS_PER_100K * (n - fitted) / 100_000)
    if fitted < n <= POLISH_MAX_ROWS:
        seconds += UMAP_POLISH_SECONDS_PER_100K * n / 100_000
    return seconds * 100_000 / n + regions


def _projection(ctx: MeasureContext) -> MeasureResult:
    rep = ctx.representation
    params = {"random_state": ctx.random_state,
              **MEASURE.check_params(ctx.params, n_rows=len(ctx.labels))}
    report = ctx.callback()

    def scaled(info: dict) -> None:  # the map is 90 % of the measure, the regions the rest
        report({**info, "fraction": 0.9 * float(info.get("fraction", 0.0) or 0.0)})

    table = project(rep.X, row_ids=np.asarray(rep.row_ids), callback=scaled, **params)
    info = projection_info(table)
    coords = table[["x", "y"]].to_numpy()
    ctx.progress(0.9, "finding the map's regions")
    region = map_regions.find_regions(coords, random_state=ctx.random_state)
    find, describe = _regions_seconds(len(coords))
    ctx.progress(0.9 + 0.1 * find / (find + describe), "naming the map's regions")
    # the map's rows' statuses and labels from the scores' codes (a byte a row: no str, intp
    # code nor position per row); as strs where the scores have no such codes
    status = ctx.scores_categorical("status", included=True)
    if status is None:
        status = shared_strings(ctx.scores["status"])[np.flatnonzero(ctx.dataset.included_mask)]
    labels = ctx.scores_categorical("label", included=True)
    regions = map_regions.describe_regions(
        region, coords, texts=ctx.dataset.hypothesis_texts(),
        labels=ctx.labels if labels is None else labels, status=status,
        random_state=ctx.random_state)
    table = table.assign(region=region)
    table.attrs = {}
    info["regions"] = int(len(regions))
    info["rows_in_regions"] = int((region >= 0).sum())
    if regions.empty:  # said on the page and in the summary, never one region that is all
        info["regions_note"] = (f"{map_regions.NO_REGIONS}: no dense part of the map holds "
                                f"under {map_regions.MAX_REGION_SHARE:.0%} of its rows apart "
                                "from the rest")
    else:
        info["label_skewed_regions"] = int(regions["label_skewed"].sum())
    warnings = []  # beside the map's figures wherever they go (measure_caveats)
    if info.get("fallback"):
        warnings.append(f"UMAP could not map these rows, so the map is PCA: {info['reason']}")
    if "polish_note" in info:
        warnings.append(info["polish_note"])
    if warnings:
        info["warnings"] = warnings
    return MeasureResult(tables={"projection.parquet": table, map_regions.FILE: regions},
                         astype={"projection.parquet": TABLE_TYPES},
                         info={"params": params, **info})


def figures(run) -> list:
    """The map (a seeded sample of at most FIGURE_POINTS rows, coloured by status) with each
    region's name at its centre."""
    import plotly.graph_objects as go  # lazy: +14 ms to import

    # the columns drawn, method and status as codes (not every column of 5M rows)
    table = run.table_columns("projection.parquet", ["row_id", "x", "y", "method"],
                              categories=("method",))
    if table is None or table.empty:
        return []
    points = table[["row_id", "x", "y"]]
    if len(points) > FIGURE_POINTS:  # the sample first: a left merge keeps its rows' order
        keep = np.sort(np.random.default_rng(0).choice(len(points), FIGURE_POINTS,
                                                       replace=False))
        points = points.iloc[keep]
    points = points.merge(run.score_columns(["row_id", "status"]), on="row_id", how="left")
    fig = go.Figure()
    for status, part in points.groupby(points["status"].astype(str), sort=False):
        fig.add_trace(go.Scattergl(x=part["x"], y=part["y"], mode="markers", name=status,
                                   marker={"size": 3, "opacity": 0.6,
                                           "color": STATUS_COLORS.get(status, "#999999")},
                                   hoverinfo="skip"))
    regions = map_regions.region_table(run.read_parquet(map_regions.FILE))
    if not regions.empty:
        add_region_labels(fig, regions)
    method = str(table["method"].iloc[0]).upper()
    shown = f"{len(points):,} of {len(table):,} rows" if len(points) < len(table) else \
        f"{len(table):,} rows"
    fig.update_layout(title=f"The {method} map of Φ ({shown}), its regions named by their "
                            "distinctive words", height=620)
    fig.update_xaxes(showticklabels=False, title=None)
    fig.update_yaxes(showticklabels=False, title=None)
    return [fig]


def tables(run) -> dict[str, pd.DataFrame]:
    """``{"Regions of the map": ...}`` from ``map_regions.parquet``."""
    regions = map_regions.region_table(run.read_parquet(map_regions.FILE))
    if regions.empty:
        return {}
    return {"Regions of the map (dense parts, named by the words most of their texts hold; "
            "label mix tested against the data's)": regions}


MEASURE = Measure(
    name="projection",
    label="2-D map (UMAP/PCA) and its regions",
    description="A 2-D map of Φ (UMAP by default, PCA as an option) and its dense regions "
                "(HDBSCAN; none over 40 % of the rows), each named by the words at least half "
                "its texts hold, with its size, share removed, label shares and a test of its "
                "label mix against the data's.",
    compute=_projection,
    files=("projection.parquet", map_regions.FILE),
    order=30,
    cost=lambda n, params: _cost(n, params),
    tables=tables,
    figures=figures,
    exports={"projection": "projection.parquet", "map_regions": map_regions.FILE},
    # the layout is one numba kernel on one core without the GIL: the other measures use the
    # other core meanwhile (SNLI dev 7.0 -> 6.1 s, 100k rows 35.6 -> 33.7 s)
    beside=True,
    options=(
        Option(
            "method",
            "Map method",
            "umap",
            choices=("umap", "pca"),
            help="The 2-D map on the Explore page: UMAP keeps neighbourhoods (fitted on at "
            "most 20,000 rows, the rest placed as its transform does, then every row moved "
            "towards its own nearest rows; about 2 s at 10k rows, 10 s at 100k); PCA is "
            "instant but a poor map of text.",
        ),
        Option("n_neighbors", "Map: UMAP neighbours", 15, minimum=2, maximum=200,
               help="UMAP's n_neighbors: how many neighbours of a row shape its place "
                    "(fewer: finer local structure; more: the broad layout)."),
        Option("min_dist", "Map: UMAP minimum distance", 0.1, minimum=0.0, maximum=1.0,
               help="UMAP's min_dist: how tightly rows pack on the map (0: dense clumps)."),
        Option("sample_size", "Map: rows UMAP is fitted on", SAMPLE_SIZE, minimum=100,
               maximum=10_000_000, form=False,
               help="UMAP is fitted on a seeded sample of at most this many rows; the rest "
                    "is placed by its transform."),
        Option("pca_dims", "Map: dimensions before UMAP", PCA_DIMS, minimum=2,
               maximum=1_024, optional=True, form=False,
               help="UMAP only: the rows are reduced to this many principal components "
                    "before the neighbour searches (none: every dimension)."),
    ),
)
