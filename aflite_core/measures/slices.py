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
measure, which runs first, fills that cache). The run folder gets ``slices.parquet`` (the
ranked table) and ``slices_members.parquet`` (the rows of the top ``n_stored`` slices as
bitmaps over the input rows, for the dashboard's Explore filter).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from aflite_core._validation import check_int, check_seed
from aflite_core.measures import map_regions
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option
from aflite_core.measures.slices_chart import slices_figures
from aflite_core.measures.slices_fold import fold_similar
from aflite_core.represent.partitioned_rows import is_partitioned

__all__ = [
    "FILE",
    "MEMBERS_FILE",
    "SliceFeatures",
    "find_slices",
    "length_features",
    "member_mask",
    "removal_z",
    "wilson_interval",
]

#: The ranked table: one row per slice with enough support.
FILE = "slices.parquet"
#: Rows of the top slices: ``slice_id``, ``rank``, ``n_rows``, ``members`` (packed bits,
#: little-endian bit order, one bit per input row in input order).
MEMBERS_FILE = "slices_members.parquet"
#: Two-sided 95 % normal quantile.
Z95 = 1.959963984540054
#: Rows the k-means of Φ is fitted on (the rest are assigned to the nearest centre).
KMEANS_SAMPLE = 20_000

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


# --------------------------------------------------------------------------- statistics


def wilson_interval(successes: np.ndarray, n: np.ndarray, *, z: float = Z95
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial proportion, elementwise.

    .. math::

        \\frac{\\hat p + z^2/2n \\pm z\\sqrt{\\hat p(1-\\hat p)/n + z^2/4n^2}}{1 + z^2/n}

    Parameters
    ----------
    successes, n : array-like
        Successes (removed rows) and trials (rows of the slice); ``n > 0``.
    z : float
        Normal quantile (1.96 for 95 %).

    Returns
    -------
    low, high : np.ndarray
        Bounds in [0, 1] (NaN where ``n == 0``).

    Examples
    --------
    >>> lo, hi = wilson_interval(np.array([8]), np.array([10]))
    >>> round(float(lo[0]), 4), round(float(hi[0]), 4)
    (0.4902, 0.9433)
    """
    k = np.asarray(successes, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        denom = 1.0 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z / denom * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def removal_z(removed: np.ndarray, size: np.ndarray, removed_total, n_total) -> np.ndarray:
    """Two-proportion z-score of each slice's removal rate against the other rows'.

    .. math::

        z = \\frac{r_1/n_1 - r_2/n_2}{\\sqrt{\\bar p(1-\\bar p)(1/n_1 + 1/n_2)}},\\quad
        r_2 = R - r_1,\\ n_2 = N - n_1,\\ \\bar p = R/N

    Parameters
    ----------
    removed, size : array-like
        Removed rows ``r_1`` and rows ``n_1`` of each slice.
    removed_total, n_total : int or array-like
        Removed rows ``R`` and rows ``N`` of the scope the slice is compared within (the
        whole data; for a pair's test against its parts, the part).

    Returns
    -------
    np.ndarray
        z per slice; 0 where it is undefined (nothing or everything removed, a slice of every
        row or of none).

    Examples
    --------
    >>> float(removal_z(np.array([8]), np.array([10]), 20, 100)[0])  # 80 % vs 13.3 %
    5.0
    """
    r1 = np.asarray(removed, dtype=float)
    n1 = np.asarray(size, dtype=float)
    n_all = np.asarray(n_total, dtype=float)
    r_all = np.asarray(removed_total, dtype=float)
    n2, r2 = n_all - n1, r_all - r1
    with np.errstate(divide="ignore", invalid="ignore"):
        base = r_all / n_all
        se = np.sqrt(base * (1 - base) * (1 / n1 + 1 / n2))
        z = (r1 / n1 - r2 / n2) / se
    return np.where(np.isfinite(z), z, 0.0)


# --------------------------------------------------------------------------- features


@dataclass
class SliceFeatures:
    """Boolean features of the rows that slices are made of.

    Attributes
    ----------
    X : scipy.sparse.csc_matrix
        ``(n_rows, n_features)`` 0/1 indicators.
    family : np.ndarray of str
        Family of each column (``word``, ``negation``, ``label``, ``length``, ``cluster``...).
    value : np.ndarray of str
        Value within the family (the slice id is ``family=value``).
    description : np.ndarray of str
        What a reader sees (``word "not"``, ``hypothesis 12-15 words``).
    """

    X: sp.csc_matrix
    family: np.ndarray
    value: np.ndarray
    description: np.ndarray

    @classmethod
    def stack(cls, parts: Iterable[SliceFeatures], n_rows: int) -> SliceFeatures:
        """Columns of several feature sets side by side (same rows)."""
        parts = [p for p in parts if p.X.shape[1]]
        if not parts:
            empty = np.empty(0, dtype=object)
            return cls(sp.csc_matrix((n_rows, 0), dtype=np.int8), empty, empty, empty)
        for part in parts:
            if part.X.shape[0] != n_rows:
                raise ValueError(f"features: expected {n_rows} rows, got {part.X.shape[0]}")
        return cls(sp.hstack([p.X for p in parts], format="csc", dtype=np.int8),
                   np.concatenate([p.family for p in parts]).astype(object),
                   np.concatenate([p.value for p in parts]).astype(object),
                   np.concatenate([p.description for p in parts]).astype(object))

    def select(self, columns: np.ndarray) -> SliceFeatures:
        """The columns picked by a boolean mask or positions."""
        columns = np.asarray(columns)
        return SliceFeatures(sp.csc_matrix(self.X[:, columns]), self.family[columns],
                             self.value[columns], self.description[columns])

    @classmethod
    def from_codes(cls, codes: np.ndarray, values: Sequence[str], family: str,
                   descriptions: Sequence[str] | None = None) -> SliceFeatures:
        """One column per value of a categorical code (``codes[i]`` in ``range(len(values))``,
        negative for none)."""
        codes = np.asarray(codes)
        rows = np.flatnonzero(codes >= 0)
        X = sp.csc_matrix((np.ones(len(rows), dtype=np.int8), (rows, codes[rows])),
                          shape=(len(codes), len(values)))
        values = np.asarray([str(v) for v in values], dtype=object)
        desc = (np.asarray(list(descriptions), dtype=object) if descriptions is not None
                else np.asarray([f"{family} {v}" for v in values], dtype=object))
        return cls(X, np.full(len(values), family, dtype=object), values, desc)


_SPACE_BYTES = np.zeros(256, dtype=bool)
_SPACE_BYTES[list(b" \t\n\r\f")] = True


def word_counts(texts: Sequence[str]) -> np.ndarray:
    """Words of each text: maximal runs of characters other than ASCII space, tab, newline,
    carriage return and form feed (RE2's ``\\S+``), counted over the UTF-8 bytes at once."""
    import pyarrow as pa

    array = pa.array(list(texts), type=pa.large_string())
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    _, offsets_buf, data_buf = array.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[:n + 1]
    data = (np.frombuffer(data_buf, dtype=np.uint8)[:offsets[-1]] if data_buf is not None
            else np.zeros(0, dtype=np.uint8))
    space = _SPACE_BYTES[data]
    after_space = np.empty(len(data), dtype=bool)
    after_space[:1] = True
    after_space[1:] = space[:-1]
    after_space[offsets[:-1][offsets[:-1] < len(data)]] = True  # each text starts afresh
    starts = np.concatenate([[0], np.cumsum(~space & after_space)])
    return (starts[offsets[1:]] - starts[offsets[:-1]]).astype(np.int64)


def length_features(lengths: np.ndarray, *, n_bins: int = 5, name: str = "hypothesis"
                    ) -> SliceFeatures:
    """Quantile bins of a word count, one column per bin.

    Cut points are the ``1/n_bins, ..., (n_bins-1)/n_bins`` empirical quantiles (observed
    word counts), duplicates dropped, so a bin is a range of word counts such as ``8-10``;
    the first bin is ``<= c_1`` and the last ``>= `` the shortest count seen above ``c_m``.
    """
    check_int("n_bins", n_bins, minimum=2, maximum=50)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        return SliceFeatures.stack([], 0)
    cuts = np.unique(np.quantile(lengths, np.arange(1, n_bins) / n_bins,
                                 method="inverted_cdf")).astype(np.int64)
    cuts = cuts[cuts < lengths.max()]
    codes = np.searchsorted(cuts, lengths, side="left")  # bin b: cuts[b-1] < len <= cuts[b]
    observed = np.unique(lengths)
    values, descriptions = [], []
    for b in range(len(cuts) + 1):
        # bounds named by the word counts seen: ">= 20" rather than ">= 11" with nothing between
        lo = None if b == 0 else int(observed[observed > cuts[b - 1]].min())
        hi = None if b == len(cuts) else int(cuts[b])
        if lo is None and hi is None:
            text = "any"
        elif lo is None:
            text = f"<={hi}"
        elif hi is None:
            text = f">={lo}"
        else:
            text = f"{lo}" if lo == hi else f"{lo}-{hi}"
        values.append(f"{name} {text} words")
        descriptions.append(f"{name} {text.replace('<=', '≤ ').replace('>=', '≥ ')} words")
    return SliceFeatures.from_codes(codes, values, "length", descriptions)


def length_thresholds(lengths: np.ndarray, removed: np.ndarray, *, min_support: int,
                      name: str = "hypothesis") -> SliceFeatures:
    """The one-sided length slice that best separates removed rows (``<= c`` or ``>= c``).

    Quantile bins dilute an artifact in a length tail (long hypotheses on 2 % of the rows
    share the top quintile with ordinary ones), so every whole-word threshold is tried and the
    one with the largest ``|z|`` (:func:`removal_z`) among those with at least ``min_support``
    rows on both sides is kept, as the side removed more often. A maximum over thresholds: its
    z is somewhat optimistic (docs/measures.md).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    removed = np.asarray(removed, dtype=bool)
    n, R = len(lengths), int(removed.sum())
    values = np.unique(lengths)
    if len(values) < 2:
        return SliceFeatures.stack([], n)
    at = np.searchsorted(values, lengths)
    below_n = np.cumsum(np.bincount(at, minlength=len(values)))[:-1].astype(float)
    below_r = np.cumsum(np.bincount(at, weights=removed.astype(float),
                                    minlength=len(values)))[:-1]
    ok = (below_n >= min_support) & (n - below_n >= min_support)
    if not ok.any():
        return SliceFeatures.stack([], n)
    z = removal_z(below_r, below_n, R, n)  # "<= values[i]" against ">= values[i + 1]"
    best = int(np.argmax(np.where(ok, np.abs(z), -1.0)))
    if z[best] >= 0:
        member, text, sign = lengths <= values[best], int(values[best]), "<="
    else:
        member, text, sign = lengths >= values[best + 1], int(values[best + 1]), ">="
    return SliceFeatures(
        sp.csc_matrix(member.astype(np.int8)[:, None]), np.array(["length"], dtype=object),
        np.array([f"{name} {sign}{text} words (best cut)"], dtype=object),
        np.array([f"{name} {'≤' if sign == '<=' else '≥'} {text} words (best cut)"],
                 dtype=object))


def cue_features(matrix) -> SliceFeatures:
    """A :class:`~aflite_core.cues.linguistic.FeatureMatrix` as slice features."""
    family = np.asarray(matrix.feature_type, dtype=object)
    value = np.asarray(matrix.feature, dtype=object)
    desc = np.asarray([f'{t} "{v}"' if t == "word" else f"{t}: {v}"
                       for t, v in zip(family, value, strict=True)], dtype=object)
    return SliceFeatures(sp.csc_matrix(matrix.X, dtype=np.int8), family, value, desc)


def cluster_features(X: np.ndarray, n_clusters: int, *, rows: np.ndarray | None = None,
                     words: SliceFeatures | None = None, random_state: int | None = 0,
                     sample: int = KMEANS_SAMPLE) -> SliceFeatures:
    """Clusters of Φ as slice features, each named by its most over-represented words.

    MiniBatchKMeans (k-means++, one initialisation, seeded) is fitted on a seeded sample of
    at most ``sample`` rows and every row goes to its nearest centre, in chunks, so a
    550k x 768 Φ is never copied whole.

    Parameters
    ----------
    X : np.ndarray
        Φ (all representation rows; ``rows`` picks the ones to cluster).
    n_clusters : int
        k (at most the number of rows).
    rows : np.ndarray of int, optional
        Positions of the rows of ``X`` to cluster (default all), in slice-row order.
    words : SliceFeatures, optional
        Word features of the same rows: a cluster's description lists up to three words
        present in at least 10 % of its rows with the highest lift over their overall share.
    """
    from sklearn.cluster import MiniBatchKMeans
    from threadpoolctl import threadpool_limits

    rows = np.arange(X.shape[0]) if rows is None else np.asarray(rows)
    n = len(rows)
    k = min(check_int("n_clusters", n_clusters, minimum=1), n)
    rng = np.random.default_rng(random_state)
    fit_rows = rows if n <= sample else np.sort(rng.choice(rows, size=sample, replace=False))
    contiguous = n > 0 and rows[-1] - rows[0] == n - 1 and bool(np.all(np.diff(rows) == 1))
    # One thread (OpenMP and BLAS): k-means' many small products gain nothing from threads,
    # and on a busy 2-core machine spinning BLAS threads made it 8x slower (21 s vs 2.8 s
    # for 100k x 256, k = 50).
    with threadpool_limits(limits=1):
        model = MiniBatchKMeans(n_clusters=k, n_init=1, batch_size=4096,
                                random_state=random_state).fit(
                                    np.asarray(X[fit_rows], dtype=np.float32))
        if is_partitioned(X):  # Φ on the workers: each chunk assigned where its rows are
            chunks = X.select(rows).map_chunks(model.predict, 65_536)
        else:
            chunks = (model.predict(np.asarray(X[c[0]:c[-1] + 1] if contiguous else X[c],
                                               dtype=np.float32))
                      for c in (rows[lo:lo + 65_536] for lo in range(0, n, 65_536)))
        labels = np.concatenate([np.empty(0, dtype=np.int64), *chunks]).astype(np.int64)
    names = [f"cluster {c}" for c in range(k)]
    if words is not None and words.X.shape[1]:
        names = _cluster_names(labels, k, words)
    return SliceFeatures.from_codes(labels, [str(c) for c in range(k)], "cluster", names)


def _cluster_names(labels: np.ndarray, k: int, words: SliceFeatures) -> list[str]:
    one_hot = sp.csr_matrix((np.ones(len(labels)), (labels, np.arange(len(labels)))),
                            shape=(k, len(labels)))
    counts = (one_hot @ words.X).toarray()  # (k, n_words)
    sizes = np.maximum(np.bincount(labels, minlength=k), 1)[:, None]
    overall = np.asarray(words.X.sum(axis=0), dtype=float).ravel() / max(len(labels), 1)
    share = counts / sizes
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = np.where((share >= 0.1) & (overall > 0), share / overall, 0.0)
    out = []
    for c in range(k):
        best = [j for j in np.argsort(-lift[c], kind="stable")[:3] if lift[c, j] > 1.0]
        named = ", ".join(str(words.value[j]) for j in best)
        out.append(f"cluster {c}" + (f" ({named})" if named else ""))
    return out


def default_n_clusters(n_rows: int) -> int:
    """k for the clusters of Φ: about sqrt(n)/3, between 4 and 50 (0 below 200 rows)."""
    if n_rows < 200:
        return 0
    return int(min(50, max(4, round(math.sqrt(n_rows) / 3))))


def default_min_support(n_rows: int) -> int:
    """Smallest slice: 0.1 % of the rows, at least 10 and at most 200."""
    return int(min(200, max(10, n_rows // 1000)))


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
    min_support = check_int("min_support", min_support, minimum=1)
    pair_top = check_int("pair_top", pair_top, minimum=0)
    n_stored = check_int("n_stored", n_stored, minimum=0)
    n_examples = check_int("n_examples", n_examples, minimum=0)
    row_ids = np.arange(n) if row_ids is None else np.asarray(row_ids)
    R = int(removed.sum())
    # columns: removed indicator, then two integer-valued random weights whose sums over a
    # slice's rows identify its row set (exact in float64 up to 2**53)
    hashing = np.random.default_rng(20_260_101).integers(1, 1 << 20, size=(n, 2))
    weights = np.column_stack([removed, hashing]).astype(np.float64)

    blocks = []
    singles = [("cue", features)] + ([("cluster", clusters)] if clusters is not None else [])
    for kind, feats in singles:
        Xc = sp.csc_matrix(feats.X, dtype=np.float64)
        size = np.asarray(Xc.sum(axis=0)).ravel()
        sums = np.asarray(Xc.T @ weights)  # (n_features, 3)
        idx = np.flatnonzero((size >= min_support) & (size < n))
        blocks.append(pd.DataFrame({
            "kind": kind, "family": feats.family[idx],
            "slice_id": [f"{f}={v}" for f, v in zip(feats.family[idx], feats.value[idx],
                                                     strict=True)],
            "description": feats.description[idx], "size": size[idx].astype(np.int64),
            "removed": np.rint(sums[idx, 0]).astype(np.int64), "z_within_parts": np.nan,
            "col_a": idx, "col_b": -1, "hash_1": sums[idx, 1], "hash_2": sums[idx, 2]}))
    table = _with_statistics(pd.concat(blocks, ignore_index=True), R, n)

    cue_rows = table[table["kind"] == "cue"]
    if pair_top >= 2 and len(cue_rows) >= 2:
        top = cue_rows.loc[cue_rows["z"].abs().sort_values(
            ascending=False, kind="stable").index[:pair_top], "col_a"].to_numpy()
        pairs = _pairs(features, top, removed, weights, R, n, min_support=min_support,
                       pair_min_z=pair_min_z)
        table = pd.concat([table, pairs], ignore_index=True)

    if table.empty:
        return SliceResult(_empty_table(), [])
    # ties: the side removed more often (a slice and its complement have the same |z|), then
    # the clearer name (the same rows twice: a made-up word is also a typo), then the larger
    priority = table["family"].map(lambda f: FAMILY_PRIORITY.get(f, len(FAMILY_PRIORITY)))
    z = table["z"].to_numpy()
    order = np.lexsort((table["slice_id"].to_numpy(dtype=str), -table["size"].to_numpy(),
                        priority.to_numpy(), (z <= 0), -np.round(np.abs(z), 9)))
    table = _drop_same_rows(table.iloc[order].reset_index(drop=True), n,
                            hashing.sum(axis=0).astype(np.float64))
    Xf = _sorted_csc(features.X)
    Xk = _sorted_csc(clusters.X) if clusters is not None else None
    marks = np.zeros(n, dtype=bool)
    window = table.head(max(2 * n_stored, FOLD_WINDOW))
    rows_of = [_slice_rows(row, Xf, Xk, marks) for row in window.itertuples(index=False)]
    kept, folded = fold_similar(rows_of, window["slice_id"].to_numpy(dtype=object))
    table = pd.concat([window.iloc[kept].assign(folded=folded),
                       table.iloc[len(window):].assign(folded="")], ignore_index=True)
    rows_of = [rows_of[i] for i in kept]
    table.insert(0, "rank", np.arange(1, len(table) + 1))

    members, examples = [], [""] * len(table)
    rng = np.random.default_rng(random_state)
    for pos, row in enumerate(table.head(n_stored).itertuples(index=False)):
        rows = rows_of[pos]
        members.append(rows)
        pool = rows[removed[rows] if row.difference >= 0 else ~removed[rows]]
        if n_examples and len(pool):
            picked = np.sort(rng.choice(pool, size=min(n_examples, len(pool)), replace=False))
            examples[pos] = ", ".join(str(x) for x in row_ids[picked])
    table["examples"] = examples
    return SliceResult(table[list(COLUMNS)], members)


def _slice_rows(row, Xf: sp.csc_matrix, Xk: sp.csc_matrix | None,
                marks: np.ndarray) -> np.ndarray:
    """Rows (sorted positions) of one ranked slice: its cue's or cluster's column, or for a
    pair the rows of its second cue that the first one has (``marks`` is scratch space)."""
    source = Xk if row.kind == "cluster" else Xf
    rows = _column_rows(source, row.col_a)
    if row.col_b >= 0:
        marks[rows] = True
        other = _column_rows(Xf, row.col_b)
        both = other[marks[other]]
        marks[rows] = False
        rows = both
    return rows


def _pairs(features: SliceFeatures, top: np.ndarray, removed: np.ndarray,
           weights: np.ndarray, R: int, n: int, *, min_support: int, pair_min_z: float
           ) -> pd.DataFrame:
    """Pairs of the cue columns ``top``: co-occurrence counts are S'S and S'diag(w)S."""
    S = sp.csc_matrix(features.X[:, top], dtype=np.float64)
    co = (S.T @ S).toarray()
    co_w = [(S.T @ sp.csc_matrix(S.multiply(weights[:, [c]]))).toarray() for c in range(3)]
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
    fam, val, desc = features.family, features.value, features.description
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


def _sorted_csc(X: sp.spmatrix) -> sp.csc_matrix:
    X = sp.csc_matrix(X)
    if not X.has_sorted_indices:
        X = X.sorted_indices()
    return X


def _column_rows(X: sp.csc_matrix, j: int) -> np.ndarray:
    """Rows (sorted) with a nonzero in column ``j`` of a CSC matrix with sorted indices."""
    start, stop = X.indptr[j], X.indptr[j + 1]
    return X.indices[start:stop][X.data[start:stop] != 0].astype(np.int64)


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
    from aflite_core.cues import linguistic

    params = dict(ctx.params)
    n_filtered = int(np.asarray(ctx.filterable).sum())
    min_support = check_int("min_support", params.get(
        "min_support", default_min_support(n_filtered)), minimum=1)
    pair_top = check_int("pair_top", params.get("pair_top", 30), minimum=0, maximum=500)
    n_clusters = check_int("n_clusters", params.get(
        "n_clusters", default_n_clusters(n_filtered)), minimum=0)
    n_stored = check_int("n_stored", params.get("n_stored", 100), minimum=0)
    length_bins = check_int("length_bins", params.get("length_bins", 5), minimum=2,
                            maximum=50)
    families = tuple(params.get("features", linguistic.FAMILIES))
    text = params.get("text", "hypothesis")
    seed = check_seed(ctx.random_state)

    scope = _scope(ctx)
    removed = ~np.asarray(ctx.keep, dtype=bool)[scope]
    included = np.flatnonzero(ctx.dataset.included_mask)
    rep_rows = np.flatnonzero(ctx.filterable)[scope]  # positions in Φ / included rows
    input_rows = included[rep_rows]                   # positions in the input frame
    row_ids = np.asarray(ctx.representation.row_ids)[rep_rows]

    ctx.progress(0.0, "annotating the rows (cached by the cue measure)")
    hyps_all = ctx.dataset.hypotheses()  # new lists: not copied again here
    prems_all = ctx.dataset.premises()
    # The same texts as the cue measure: its per-text annotations come from the disk cache.
    matrix = linguistic.extract_features(
        hyps_all, prems_all, features=families,
        text=text, min_count=min_support, n_jobs=params.get("n_jobs"))
    cues = cue_features(matrix.rows(rep_rows))
    labels = np.asarray(ctx.labels, dtype=str)[rep_rows]
    values, codes = np.unique(labels, return_inverse=True)
    parts = [cues, SliceFeatures.from_codes(codes, values, "label",
                                            [f"label {v}" for v in values])]
    ctx.progress(0.4, "length buckets")
    sides = [("hypothesis", hyps_all)] + ([("premise", prems_all)]
                                          if prems_all is not None else [])
    for name, texts in sides:
        lengths = word_counts([texts[i] for i in rep_rows])
        parts.append(length_features(lengths, n_bins=length_bins, name=name))
        parts.append(length_thresholds(lengths, removed, min_support=min_support, name=name))
    features = SliceFeatures.stack(parts, len(rep_rows))
    clusters = None
    if n_clusters and len(rep_rows) >= max(2 * n_clusters, 2):
        ctx.progress(0.5, f"{n_clusters} clusters of Φ")
        clusters = cluster_features(ctx.representation.X, n_clusters, rows=rep_rows,
                                    words=cues.select(cues.family == "word"),
                                    random_state=seed)
    ctx.progress(0.8, "ranking the slices")
    found = find_slices(features, removed, clusters=clusters, min_support=min_support,
                        pair_top=pair_top, n_stored=n_stored, row_ids=row_ids,
                        random_state=seed)
    n_input = len(ctx.dataset.frame)
    members = pd.DataFrame({
        "slice_id": found.table["slice_id"].head(len(found.members)).to_numpy(dtype=object),
        "rank": found.table["rank"].head(len(found.members)).to_numpy(dtype=np.int64),
        "n_rows": np.asarray([len(m) for m in found.members], dtype=np.int64),
        "members": pd.Series([_pack(input_rows[m], n_input) for m in found.members],
                             dtype=object),
    })
    table = found.table
    table.attrs = {}
    info = {"n_slices": int(len(table)), "rows": int(len(rep_rows)),
            "removed": int(removed.sum()), "min_support": min_support, "pair_top": pair_top,
            "n_clusters": int(0 if clusters is None else clusters.X.shape[1]),
            "unavailable": dict(matrix.unavailable),
            "top": table.head(3)["slice_id"].tolist()}
    return MeasureResult(tables={FILE: table, MEMBERS_FILE: members}, info=info)


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
        Option("min_support", "Slices: minimum rows", default_min_support, minimum=2,
               maximum=100_000, help="Smallest slice ranked (rows)."),
        Option("pair_top", "Slices: cues paired", 30, minimum=0, maximum=200,
               help="Pairs are formed among this many strongest single cues."),
        Option("n_clusters", "Slices: clusters of Φ", default_n_clusters, minimum=0,
               maximum=500, help="k of the k-means of Φ (0: no cluster slices)."),
    ),
    order=12,
    # seconds per 100k rows (bench_pipeline.py), cues cached; about 0.3 s whatever the size
    cost=lambda n: 0.5 + 0.3 * 100_000 / max(n, 1),
)
