"""Why removed: the slices of the data whose removal rate deviates most from the base rate.

A *slice* is a set of filtered rows that share something a reader can name:

``cue``      one boolean feature: a linguistic cue of :mod:`aflite_core.cues.linguistic`
             (word, sentiment, tense, negation, overlap, NER, typo), the label, or a length
             bucket (quantile bins of the hypothesis' and the premise's word counts);
``pair``     two of the strongest single cues together (``word=not & label=contradiction``);
``cluster``  a cluster of Φ (MiniBatchKMeans, seeded), named by its most over-represented
             words.

For every slice with at least ``min_support`` rows: its size, the rows AFLite removed from it,
its removal rate beside the base rate, the difference, a two-proportion z-score (the slice vs
the other rows, pooled variance), a Wilson 95 % interval of its removal rate, the share of all
removed rows it holds, and a few example rows (removed ones when the slice is removed more
than the base rate, retained ones otherwise). Slices are ranked by ``|z|``: the evidence that
the rate differs, which grows with both the effect and the slice's size, so a planted artifact
on 2 % of the rows outranks a stopword whose rate is off by two points (docs/measures.md).

Rows of a split AFLite removed nothing from (the dev/test rows the ``train_only`` policy
scores but never removes) are left out: they could not be removed, and counting them would
dilute the base rate.

Counts are sparse matrix products over the rows-by-features indicator matrix, so the whole
measure costs a few seconds at SNLI's 550k rows once the annotations are cached (the cue
measure, which runs first, fills that cache). :func:`rank_slices` reads them from a source
(:mod:`.slices_counts`): the matrix of every row here, or on a Dask cluster above
:data:`~aflite_core.measures._slices_on_workers.WORKER_MIN_ROWS` rows the same counts by
map-reduce over row chunks whose features stay on the workers (:mod:`.slices_on_workers`).
The run folder gets ``slices.parquet`` (the ranked table) and ``slices_members.parquet``
(the rows of the top ``n_stored`` slices as bitmaps over the input rows, for the dashboard's
Explore filter).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from aflite_core._validation import check_int, check_seed
from aflite_core.cues import FAMILIES, linguistic
from aflite_core.measures import _slices_on_workers as slices_on_workers
from aflite_core.measures import map_regions
from aflite_core.measures._slices_chart import slices_figures
from aflite_core.measures._slices_counts import MatrixCounts, SliceCounts, SliceSpec
from aflite_core.measures._slices_features import (  # noqa: F401  (the measure's public names)
    KMEANS_SAMPLE,
    Z95,
    SliceFeatures,
    cluster_codes,
    cluster_features,
    cue_features,
    default_min_support,
    default_n_clusters,
    length_features,
    length_thresholds,
    removal_z,
    wilson_interval,
    word_counts,
)
from aflite_core.measures._slices_fold import fold_by_overlap
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option
from aflite_core.represent import cluster_workers, dask_folds, on_cluster

__all__ = [
    "FILE",
    "MEMBERS_FILE",
    "SliceFeatures",
    "find_slices",
    "length_features",
    "member_mask",
    "rank_slices",
    "removal_z",
    "wilson_interval",
]

#: The ranked table: one row per slice with enough support.
FILE = "slices.parquet"
#: Rows of the top slices: ``slice_id``, ``rank``, ``n_rows``, ``members`` (packed bits,
#: little-endian bit order, one bit per input row in input order).
MEMBERS_FILE = "slices_members.parquet"

KINDS = ("cue", "pair", "cluster")
#: Tie-break between slices of equal |z| and size (the same rows under two names).
FAMILY_PRIORITY = {f: i for i, f in enumerate(
    ("word", "label", "length", "negation", "overlap", "sentiment", "tense", "ner", "typo"))}
#: Pairs must differ from each of their two cues with at least this |z| (see find_slices).
PAIR_MIN_Z = 3.0
#: Slices compared for folding (slices_fold.py): the top max(2 * n_stored, FOLD_WINDOW).
FOLD_WINDOW = 200
COLUMNS = ("rank", "slice_id", "kind", "family", "description", "size", "removed",
           "removal_rate", "base_rate", "difference", "z", "ci_low", "ci_high",
           "share_of_removed", "z_within_parts", "same_rows", "folded", "examples")


# --------------------------------------------------------------------------- slices


@dataclass
class SliceResult:
    """What :func:`find_slices` found.

    Attributes
    ----------
    table : DataFrame
        Ranked slices (columns :data:`COLUMNS`; ``examples`` holds row ids joined by ``", "``).
    members : list of np.ndarray
        Positions (over the rows given) of the rows of each of the top ``n_stored`` slices,
        in rank order.
    """

    table: pd.DataFrame
    members: list[np.ndarray]


def find_slices(features: SliceFeatures, removed: np.ndarray, *,
                clusters: SliceFeatures | None = None, min_support: int = 20,
                pair_top: int = 30, pair_min_z: float = PAIR_MIN_Z, n_stored: int = 100,
                n_examples: int = 5, row_ids: np.ndarray | None = None,
                random_state: int | None = 0) -> SliceResult:
    """Rank single cues, pairs of the strongest cues, and clusters by their removal rate.

    Parameters
    ----------
    features : SliceFeatures
        Cue indicators of the rows (linguistic cues, label, length bins).
    removed : np.ndarray of bool
        Removed by AFLite, one value per row.
    clusters : SliceFeatures, optional
        Cluster indicators of the same rows (never paired).
    min_support : int
        Smallest slice kept (rows).
    pair_top : int
        Pairs are formed among the ``pair_top`` single cues with the largest ``|z|``
        (``pair_top * (pair_top - 1) / 2`` candidates; 0: no pairs).
    pair_min_z : float
        A pair is kept only when it says something its two cues do not: inside each of its
        cues, its rows are removed at a rate that differs from the cue's other rows with
        ``|z| >= pair_min_z``, in the direction of the pair's own deviation (column
        ``z_within_parts``, the smaller of the two). Without this a strong cue drags every
        one of its subsets up the ranking.
    n_stored : int
        Top slices whose rows (``members``) and examples are kept.
    n_examples : int
        Example rows per stored slice.
    row_ids : np.ndarray, optional
        Id of each row, for the examples (default: positions).
    random_state : int or None
        Seeds the choice of examples.

    Returns
    -------
    SliceResult
        Slices with exactly the same rows as a better-ranked one are dropped and listed in
        its ``same_rows`` column; among the top ``max(2 * n_stored, FOLD_WINDOW)``, slices
        whose rows are nearly those of a better-ranked one (Jaccard >= ``FOLD_JACCARD``) are
        folded under it and listed in its ``folded`` column (:func:`fold_similar`).
    """
    removed = np.asarray(removed, dtype=bool)
    n = len(removed)
    if features.X.shape[0] != n:
        raise ValueError(f"removed: expected {features.X.shape[0]} values (one per row), "
                         f"got {n}")
    if clusters is not None and clusters.X.shape[0] != n:
        raise ValueError(f"clusters: expected {n} rows, got {clusters.X.shape[0]}")
    return rank_slices(MatrixCounts(features, clusters), removed, min_support=min_support,
                       pair_top=pair_top, pair_min_z=pair_min_z, n_stored=n_stored,
                       n_examples=n_examples, row_ids=row_ids, random_state=random_state)


def rank_slices(counts: SliceCounts, removed: np.ndarray, *, min_support: int = 20,
                pair_top: int = 30, pair_min_z: float = PAIR_MIN_Z, n_stored: int = 100,
                n_examples: int = 5, row_ids: np.ndarray | None = None,
                random_state: int | None = 0,
                keep_members: Callable[[np.ndarray], object] | None = None,
                weights: tuple[np.ndarray, np.ndarray] | None = None) -> SliceResult:
    """:func:`find_slices` from the counts a source gives (:mod:`.slices_counts`).

    Parameters
    ----------
    counts : SliceCounts
        The rows' cue (and cluster) columns, held as matrices here
        (:class:`~aflite_core.measures._slices_counts.MatrixCounts`) or in row chunks on a
        cluster's workers (:class:`~aflite_core.measures._slices_on_workers.ChunkedCounts`).
    removed : np.ndarray of bool
        Removed by AFLite, one value per row.
    min_support, pair_top, pair_min_z, n_stored, n_examples, row_ids, random_state
        As in :func:`find_slices`.
    keep_members : callable, optional
        What ``members`` keeps of each stored slice's rows (sorted positions), asked one
        slice at a time; default the positions.
    weights : tuple of np.ndarray, optional
        :func:`slice_weights` of ``removed``, when the caller made them already.

    Returns
    -------
    SliceResult
    """
    removed = np.asarray(removed, dtype=bool)
    n = len(removed)
    if counts.n_rows != n:
        raise ValueError(f"removed: expected {counts.n_rows} values (one per row), got {n}")
    min_support = check_int("min_support", min_support, minimum=1)
    pair_top = check_int("pair_top", pair_top, minimum=0)
    n_stored = check_int("n_stored", n_stored, minimum=0)
    n_examples = check_int("n_examples", n_examples, minimum=0)
    row_ids = np.arange(n) if row_ids is None else np.asarray(row_ids)
    R = int(removed.sum())
    weights, totals = slice_weights(removed) if weights is None else weights

    blocks = []
    for kind in ("cue", "cluster"):
        names = counts.columns(kind)
        if names is None:
            continue
        size, sums = counts.column_sums(kind, weights)  # (n_features,), (n_features, 3)
        idx = np.flatnonzero((size >= min_support) & (size < n))
        blocks.append(pd.DataFrame({
            "kind": kind, "family": names.family[idx],
            "slice_id": [f"{f}={v}" for f, v in zip(names.family[idx], names.value[idx],
                                                     strict=True)],
            "description": names.description[idx], "size": size[idx].astype(np.int64),
            "removed": np.rint(sums[idx, 0]).astype(np.int64), "z_within_parts": np.nan,
            "col_a": idx, "col_b": -1, "hash_1": sums[idx, 1], "hash_2": sums[idx, 2]}))
    table = _with_statistics(pd.concat(blocks, ignore_index=True), R, n)

    cue_rows = table[table["kind"] == "cue"]
    if pair_top >= 2 and len(cue_rows) >= 2:
        top = cue_rows.loc[cue_rows["z"].abs().sort_values(
            ascending=False, kind="stable").index[:pair_top], "col_a"].to_numpy()
        pairs = _pairs(counts, top, weights, R, n, min_support=min_support,
                       pair_min_z=pair_min_z)
        table = pd.concat([table, pairs], ignore_index=True)
    del weights

    if table.empty:
        return SliceResult(_empty_table(), [])
    # ties: the side removed more often (a slice and its complement have the same |z|), then
    # the clearer name (the same rows twice: a made-up word is also a typo), then the larger
    priority = table["family"].map(lambda f: FAMILY_PRIORITY.get(f, len(FAMILY_PRIORITY)))
    z = table["z"].to_numpy()
    order = np.lexsort((table["slice_id"].to_numpy(dtype=str), -table["size"].to_numpy(),
                        priority.to_numpy(), (z <= 0), -np.round(np.abs(z), 9)))
    table = _drop_same_rows(table.iloc[order].reset_index(drop=True), n, totals)
    window = table.head(max(2 * n_stored, FOLD_WINDOW))
    rows = counts.window([SliceSpec(str(k), int(a), int(b)) for k, a, b in zip(
        window["kind"], window["col_a"], window["col_b"], strict=True)])
    kept, folded = fold_by_overlap(window["size"].to_numpy(), rows.overlap,
                                   window["slice_id"].to_numpy(dtype=object))
    table = pd.concat([window.iloc[kept].assign(folded=folded),
                       table.iloc[len(window):].assign(folded="")], ignore_index=True)
    table.insert(0, "rank", np.arange(1, len(table) + 1))

    members, examples = [], [""] * len(table)
    rng = np.random.default_rng(random_state)
    stored = table.head(n_stored)
    if len(kept) >= len(stored):
        stored_rows = rows.rows(kept[:len(stored)])
    else:  # more than n_stored of the window folded: stored slices from beyond it too
        stored_rows = counts.window([SliceSpec(str(k), int(a), int(b)) for k, a, b in zip(
            stored["kind"], stored["col_a"], stored["col_b"], strict=True)]).rows(
                range(len(stored)))
    for pos, (row, rows_of) in enumerate(zip(stored.itertuples(index=False), stored_rows,
                                             strict=True)):
        members.append(rows_of if keep_members is None else keep_members(rows_of))
        pool = rows_of[removed[rows_of] if row.difference >= 0 else ~removed[rows_of]]
        if n_examples and len(pool):
            picked = np.sort(rng.choice(pool, size=min(n_examples, len(pool)), replace=False))
            examples[pos] = ", ".join(str(x) for x in row_ids[picked])
    table["examples"] = examples
    return SliceResult(table[list(COLUMNS)], members)


def slice_weights(removed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ranking's per-row weights and their totals.

    Returns
    -------
    weights : np.ndarray
        ``(n, 3)`` float64: the removed indicator, then two integer-valued random weights
        (seeded) whose sums over a slice's rows identify its row set (exact in float64 up to
        2**53: ``same_rows``).
    totals : np.ndarray
        The two random weights' sums over all rows.
    """
    removed = np.asarray(removed, dtype=bool)
    hashing = np.random.default_rng(20_260_101).integers(1, 1 << 20, size=(len(removed), 2))
    return (np.column_stack([removed, hashing]).astype(np.float64),
            hashing.sum(axis=0).astype(np.float64))


def _pairs(counts: SliceCounts, top: np.ndarray, weights: np.ndarray, R: int, n: int, *,
           min_support: int, pair_min_z: float) -> pd.DataFrame:
    """Pairs of the cue columns ``top``: co-occurrence counts are S'S and S'diag(w)S."""
    co, co_w = counts.cooccurrence(top, weights)
    i, j = np.triu_indices(len(top), k=1)
    size_i, size_j, both = co[i, i], co[j, j], co[i, j]
    ok = (both >= min_support) & (both < size_i) & (both < size_j)
    i, j = i[ok], j[ok]
    both, r_both = co[i, j], co_w[0][i, j]
    sign = np.sign(r_both / np.maximum(both, 1) - R / max(n, 1))
    # the pair against the other rows of each of its cues, signed by its own deviation
    within = np.minimum(sign * removal_z(r_both, both, co_w[0][i, i], co[i, i]),
                        sign * removal_z(r_both, both, co_w[0][j, j], co[j, j]))
    keep = within >= pair_min_z
    i, j, within = i[keep], j[keep], within[keep]
    a, b = top[i], top[j]
    names = counts.columns("cue")
    fam, val, desc = names.family, names.value, names.description
    pairs = pd.DataFrame({
        "kind": "pair",
        "family": [f"{fam[x]} & {fam[y]}" for x, y in zip(a, b, strict=True)],
        "slice_id": [f"{fam[x]}={val[x]} & {fam[y]}={val[y]}"
                     for x, y in zip(a, b, strict=True)],
        "description": [f"{desc[x]} & {desc[y]}" for x, y in zip(a, b, strict=True)],
        "size": co[i, j].astype(np.int64), "removed": np.rint(co_w[0][i, j]).astype(np.int64),
        "z_within_parts": within, "col_a": a, "col_b": b,
        "hash_1": co_w[1][i, j], "hash_2": co_w[2][i, j]})
    return _with_statistics(pairs, R, n)


def _drop_same_rows(table: pd.DataFrame, n: int, totals: np.ndarray) -> pd.DataFrame:
    """Keep the best-ranked of slices with the same rows, or with complementary rows (a
    slice and the other rows have the same ``|z|``: ``overlap`` / ``no_overlap``); list the
    others in ``same_rows`` (``not X`` for a complement)."""
    keys = list(zip(table["size"].to_numpy().tolist(), table["hash_1"].to_numpy().tolist(),
                    table["hash_2"].to_numpy().tolist(), strict=True))
    seen: dict[tuple, int] = {}
    keep = np.ones(len(table), dtype=bool)
    same: list[list[str]] = [[] for _ in range(len(table))]
    ids = table["slice_id"].to_numpy(dtype=object)
    for pos, (size, h1, h2) in enumerate(keys):
        complement = (n - size, totals[0] - h1, totals[1] - h2)
        if (size, h1, h2) in seen:
            same[seen[(size, h1, h2)]].append(str(ids[pos]))
        elif complement in seen:
            same[seen[complement]].append(f"not {ids[pos]}")
        else:
            seen[(size, h1, h2)] = pos
            continue
        keep[pos] = False
    table = table.assign(same_rows=[", ".join(s) for s in same])
    return table[keep].reset_index(drop=True)


def _with_statistics(table: pd.DataFrame, R: int, n: int) -> pd.DataFrame:
    if table.empty:
        return table
    size = table["size"].to_numpy(dtype=float)
    rin = table["removed"].to_numpy(dtype=float)
    base = R / n if n else float("nan")
    table = table.copy()
    table["removal_rate"] = rin / size
    table["base_rate"] = base
    table["difference"] = table["removal_rate"] - base
    table["z"] = removal_z(rin, size, R, n)
    table["ci_low"], table["ci_high"] = wilson_interval(rin, size)
    table["share_of_removed"] = rin / R if R else 0.0
    return table


def _empty_table() -> pd.DataFrame:
    ints = {"rank", "size", "removed"}
    texts = {"slice_id", "kind", "family", "description", "same_rows", "folded", "examples"}
    return pd.DataFrame({c: pd.Series(dtype="int64" if c in ints else object if c in texts
                                      else "float64") for c in COLUMNS})


# --------------------------------------------------------------------------- the measure


def _scope(ctx: MeasureContext) -> np.ndarray:
    """Filtered rows that AFLite could remove: splits it removed nothing from are left out."""
    removed = ~np.asarray(ctx.keep, dtype=bool)
    scope = np.ones(len(removed), dtype=bool)
    splits = ctx.splits
    if splits is not None:
        splits = np.asarray(splits, dtype=str)
        active = np.unique(splits[removed])
        scope = np.isin(splits, active)
    return scope


def compute(ctx: MeasureContext) -> MeasureResult:
    """Slices of the filtered rows, ranked by the |z| of their removal rate."""
    params = MEASURE.check_params(ctx.params, n_rows=int(np.asarray(ctx.filterable).sum()))
    min_support, pair_top = params["min_support"], params["pair_top"]
    n_clusters, n_stored = params["n_clusters"], params["n_stored"]
    length_bins, families, text = params["length_bins"], params["features"], params["text"]
    seed = check_seed(ctx.random_state)

    scope = _scope(ctx)
    removed = ~np.asarray(ctx.keep, dtype=bool)[scope]
    included = np.flatnonzero(ctx.dataset.included_mask)
    rep_rows = np.flatnonzero(ctx.filterable)[scope]  # positions in Φ / included rows
    input_rows = included[rep_rows]                   # positions in the input frame
    row_ids = np.asarray(ctx.representation.row_ids)[rep_rows]

    values, codes = label_codes(np.asarray(ctx.labels, dtype=object)[rep_rows])
    label_part = SliceFeatures.from_codes(codes, values, "label",
                                          [f"label {v}" for v in values])
    weights = slice_weights(removed)
    record = dask_folds()
    chunked = None
    if record is not None and _on_workers(len(rep_rows), text):
        chunked = _chunked_counts(ctx, record, rep_rows, weights[0], families, text,
                                  min_support)
        lengths_of, unavailable, cues = chunked.lengths, chunked.unavailable, None
    else:
        ctx.progress(0.0, "annotating the rows (cached by the cue measure)")
        hyps_all = ctx.dataset.hypotheses()  # new lists: not copied again here
        prems_all = ctx.dataset.premises()
        # The same texts as the cue measure: its per-text annotations come from the disk
        # cache.
        matrix = linguistic.extract_features(
            hyps_all, prems_all, features=families,
            text=text, min_count=min_support, n_jobs=params.get("n_jobs"))
        cues = cue_features(matrix.rows(rep_rows))
        unavailable = dict(matrix.unavailable)
        del matrix
        lengths_of = {name: word_counts([texts[i] for i in rep_rows]) for name, texts in
                      [("hypothesis", hyps_all), ("premise", prems_all)] if texts is not None}
        del hyps_all, prems_all
    ctx.progress(0.4, "length buckets")
    parts = [label_part]
    for name, lengths in lengths_of.items():
        parts.append(length_features(lengths, n_bins=length_bins, name=name))
        parts.append(length_thresholds(lengths, removed, min_support=min_support, name=name))
    k = 0
    if n_clusters and len(rep_rows) >= max(2 * n_clusters, 2):
        ctx.progress(0.5, f"{n_clusters} clusters of Φ")
        if chunked is not None:
            cluster_of, k = cluster_codes(ctx.representation.X, n_clusters, rows=rep_rows,
                                          random_state=seed)
        else:
            # on a cluster, each chunk fetched: a task could wait behind another measure's
            clusters = cluster_features(ctx.representation.X, n_clusters, rows=rep_rows,
                                        words=cues.select(cues.family == "word"),
                                        random_state=seed,
                                        fetch=on_cluster(ctx.representation.X))
            k = clusters.X.shape[1]
    ctx.progress(0.8, "ranking the slices")
    if chunked is not None:
        chunked.add_columns(parts, cluster_of if k else None, k)  # empties parts
        counts: SliceCounts = chunked
    else:
        counts = MatrixCounts(SliceFeatures.stack([cues, *parts], len(rep_rows)),
                              clusters if k else None)
    n_input = len(ctx.dataset.frame)
    try:
        found = rank_slices(counts, removed, min_support=min_support, pair_top=pair_top,
                            n_stored=n_stored, row_ids=row_ids, random_state=seed,
                            weights=weights,
                            keep_members=lambda m: (len(m), _pack(input_rows[m], n_input)))
    finally:
        if chunked is not None:
            chunked.release()
    members = pd.DataFrame({
        "slice_id": found.table["slice_id"].head(len(found.members)).to_numpy(dtype=object),
        "rank": found.table["rank"].head(len(found.members)).to_numpy(dtype=np.int64),
        "n_rows": np.asarray([m[0] for m in found.members], dtype=np.int64),
        "members": pd.Series([m[1] for m in found.members], dtype=object),
    })
    table = found.table
    table.attrs = {}
    info = {"n_slices": int(len(table)), "rows": int(len(rep_rows)),
            "removed": int(removed.sum()), "min_support": min_support, "pair_top": pair_top,
            "n_clusters": int(k), "unavailable": unavailable,
            "top": table.head(3)["slice_id"].tolist(),
            "features": "workers" if chunked is not None else "driver"}
    return MeasureResult(tables={FILE: table, MEMBERS_FILE: members}, info=info)


def _on_workers(n_rows: int, text: str) -> bool:
    """Whether the slices of ``n_rows`` rows in scope extract their features on a cluster's
    workers (:mod:`.slices_on_workers`; with ``text="both"`` they stay here)."""
    return n_rows >= slices_on_workers.WORKER_MIN_ROWS and text in ("hypothesis", "premise")


def features_on_workers(ctx: MeasureContext, text: str = "hypothesis") -> bool:
    """Whether the slices measure, run in ``ctx``'s audit on a cluster with ``text``,
    extracts its cue features on the workers (then nothing of it reads this process's
    annotation cache: the cue measure need not seed it). ``ctx`` may be another measure's:
    the rows in scope are the audit's. (With the slices' ``text="both"`` the answer is
    wrong and the slices tag their rows again: slower, the same table.)"""
    return _on_workers(int(_scope(ctx).sum()), text)


def label_codes(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(labels.astype(str), return_inverse=True)`` without a fixed-width copy of
    every label (at 5M rows of "contradiction", 0.26 GB) or a sort of all of them. The audit's
    labels are str; a missing value (NaN, None) reads ``"nan"``.

    Examples
    --------
    >>> values, codes = label_codes(np.array(["b", "a", "b", 1], dtype=object))
    >>> values.tolist(), codes.tolist()
    (['1', 'a', 'b'], [2, 1, 2, 0])
    """
    from aflite_core.io import str_codes  # lazy: +10 ms to import

    codes, classes = str_codes(labels)
    return classes, codes


def _chunked_counts(ctx: MeasureContext, record, rep_rows: np.ndarray, weights: np.ndarray,
                    families: tuple, text: str, min_support: int
                    ) -> slices_on_workers.ChunkedCounts:
    """The cue features of every included row extracted on the workers, a chunk at a time
    (the cue measure's chunks: their annotations are in the workers' caches), and left
    there (:mod:`.slices_on_workers`)."""
    from aflite_core.cues import chunk_rows_for  # lazy: +117 ms to import
    from aflite_core.io import RowTexts, row_positions  # lazy: +10 ms to import

    dataset = ctx.dataset
    n_included = int(np.count_nonzero(dataset.included_mask))
    rows = row_positions(dataset.included_mask)  # None: every row (no array of positions)
    chunk_rows = chunk_rows_for(n_included, len(cluster_workers(record.client)))
    bounds = slices_on_workers.chunk_bounds(n_included, chunk_rows)
    columns = dataset.columns
    hyps = RowTexts(dataset.text_column(columns.hypothesis), rows)
    prems = (RowTexts(dataset.text_column(columns.premise), rows)
             if columns.premise is not None else None)
    texts = ((hyps[lo:hi], None if prems is None else prems[lo:hi]) for lo, hi in bounds)
    ctx.progress(0.0, f"cue features of {n_included:,} rows on the workers")
    counts = slices_on_workers.ChunkedCounts(
        record.client, texts, bounds, rep_rows, weights,
        slices_on_workers.ExtractOptions(tuple(families), text), min_count=min_support,
        progress=lambda f, m: ctx.progress(0.4 * f, m))
    record.tasks += counts.tasks
    return counts


def _pack(positions: np.ndarray, n: int) -> bytes:
    bits = np.zeros(n, dtype=bool)
    bits[positions] = True
    return np.packbits(bits, bitorder="little").tobytes()


def member_mask(run, slice_id: str) -> np.ndarray:
    """Boolean mask over the run's input rows (input order): the rows of one stored slice.

    Raises
    ------
    LookupError
        If the run has no stored rows for ``slice_id`` (not among its top ``n_stored``).
    """
    members = run.read_parquet(MEMBERS_FILE)
    if members is None or members.empty:
        raise LookupError(f"run {run.name}: no stored slice rows ({MEMBERS_FILE})")
    hit = members[members["slice_id"].astype(str) == str(slice_id)]
    if hit.empty:
        raise LookupError(f"run {run.name}: slice {slice_id!r} is not among the stored slices")
    n = int(run.sizes.get("input", 0) or len(run.scores))
    bits = np.frombuffer(hit["members"].iloc[0], dtype=np.uint8)
    mask = np.unpackbits(bits, count=n, bitorder="little").astype(bool)
    return mask


def tables(run) -> dict[str, pd.DataFrame]:
    """``{"Slices ranked by |z| ...": ...}`` from ``slices.parquet``."""
    table = run.read_parquet(FILE)
    if table is None or table.empty:
        return {}
    table = map_regions.with_slice_regions(run, table, run.read_parquet(MEMBERS_FILE))
    return {"Why removed: slices ranked by |z| of their removal rate": table}



MEASURE = Measure(
    name="slices",
    label="Why removed: slices",
    description="The slices whose removal rate deviates most from the base rate: single "
                "cues (words, sentiment, tense, negation, overlap, NER, typos, label, length "
                "buckets), pairs of the strongest cues, and clusters of Φ, each with its size, "
                "removal rate, z-score (slice vs the other rows), Wilson 95 % interval and "
                "example rows; ranked by |z|.",
    compute=compute,
    files=(FILE, MEMBERS_FILE),
    tables=tables,
    figures=slices_figures,
    exports={"slices": FILE},
    options=(
        Option("min_support", "Slices: minimum rows", default_min_support, minimum=1,
               maximum=100_000, scaled_rule="0.1 % of the rows, between 10 and 200",
               help="Smallest slice ranked (rows)."),
        Option("pair_top", "Slices: cues paired", 30, minimum=0, maximum=500,
               help="Pairs are formed among this many strongest single cues."),
        Option("n_clusters", "Slices: clusters of Φ", default_n_clusters, minimum=0,
               maximum=500, scaled_rule="about sqrt(n)/3, between 4 and 50; 0 below 200 rows",
               help="k of the k-means of Φ (0: no cluster slices)."),
        Option("n_stored", "Slices: slices whose rows are stored", 100, minimum=0,
               maximum=10_000, form=False,
               help="The rows of this many top slices are kept for Explore's slice filter."),
        Option("length_bins", "Slices: hypothesis-length bins", 5, minimum=2, maximum=50,
               form=False, help="Slices of hypothesis length: this many bins at most."),
        Option("features", "Slices: cue families", FAMILIES, choices=FAMILIES, form=False,
               help="The linguistic families whose cues are slices."),
        Option("text", "Slices: text the cues are read from", "hypothesis",
               choices=("hypothesis", "premise", "both"), form=False,
               help="The cues of the hypothesis (the default), of the premise, or of both."),
        Option("n_jobs", "Slices: tagging processes", None, minimum=1, maximum=1_024,
               kind="int", optional=True, form=False,
               help="Processes that tag the texts (none: the cores this process may use)."),
    ),
    order=12,
    # seconds per 100k rows (bench_pipeline.py), cues cached; about 0.3 s whatever the size
    cost=lambda n: 0.5 + 0.3 * 100_000 / max(n, 1),
)
