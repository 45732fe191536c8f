"""The slices' features and statistics (:mod:`aflite_core.measures.slices` ranks them).

Features are boolean columns over the rows a slice can be made of: the linguistic cues of
:mod:`aflite_core.cues.linguistic` (:func:`cue_features`), the label, quantile buckets and the
best one-sided cut of the word counts (:func:`length_features`, :func:`length_thresholds`) and
clusters of Φ (:func:`cluster_features`, named by their most over-represented words:
:func:`cluster_names`). A slice's removal rate is compared with the other rows' by
:func:`removal_z` and bounded by :func:`wilson_interval`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from aflite_core import blas_threads
from aflite_core._validation import check_int
from aflite_core.represent import is_partitioned

__all__ = [
    "KMEANS_SAMPLE",
    "Z95",
    "SliceFeatures",
    "cluster_codes",
    "cluster_features",
    "cluster_names",
    "cluster_word_counts",
    "cue_descriptions",
    "cue_features",
    "default_min_support",
    "default_n_clusters",
    "length_features",
    "length_thresholds",
    "removal_z",
    "wilson_interval",
    "word_counts",
]

#: Two-sided 95 % normal quantile.
Z95 = 1.959963984540054
#: Rows the k-means of Φ is fitted on (the rest are assigned to the nearest centre).
KMEANS_SAMPLE = 20_000


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


#: Texts per block of :func:`word_counts` (its byte-wise temporaries, 8 bytes a byte of
#: text for the running count, are a block's: 0.65 GB for 500k premises at once).
WORD_COUNT_BLOCK = 65_536


def word_counts(texts: Sequence[str]) -> np.ndarray:
    """Words of each text: maximal runs of characters other than ASCII space, tab, newline,
    carriage return and form feed (RE2's ``\\S+``), counted over the UTF-8 bytes of
    :data:`WORD_COUNT_BLOCK` texts at once."""
    texts = texts if isinstance(texts, list) else list(texts)
    if len(texts) <= WORD_COUNT_BLOCK:
        return _word_counts_block(texts)
    return np.concatenate([_word_counts_block(texts[lo:lo + WORD_COUNT_BLOCK])
                           for lo in range(0, len(texts), WORD_COUNT_BLOCK)])


def _word_counts_block(texts: list[str]) -> np.ndarray:
    import pyarrow as pa  # lazy: +41 ms to import

    array = pa.array(texts, type=pa.large_string())
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


def cue_descriptions(family: np.ndarray, value: np.ndarray) -> np.ndarray:
    """What a reader sees of each linguistic cue: ``word "not"``, ``negation: negation``."""
    return np.asarray([f'{t} "{v}"' if t == "word" else f"{t}: {v}"
                       for t, v in zip(family, value, strict=True)], dtype=object)


def cue_features(matrix) -> SliceFeatures:
    """A :class:`~aflite_core.cues.linguistic.FeatureMatrix` as slice features."""
    family = np.asarray(matrix.feature_type, dtype=object)
    value = np.asarray(matrix.feature, dtype=object)
    return SliceFeatures(sp.csc_matrix(matrix.X, dtype=np.int8), family, value,
                         cue_descriptions(family, value))


def cluster_features(X: np.ndarray, n_clusters: int, *, rows: np.ndarray | None = None,
                     words: SliceFeatures | None = None, random_state: int | None = 0,
                     sample: int = KMEANS_SAMPLE, fetch: bool = False) -> SliceFeatures:
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
    fetch : bool, default False
        Assign each chunk here even when Φ is in partitions (:func:`cluster_codes`).
    """
    labels, k = cluster_codes(X, n_clusters, rows=rows, random_state=random_state,
                              sample=sample, fetch=fetch)
    names = [f"cluster {c}" for c in range(k)]
    if words is not None and words.X.shape[1]:
        names = _cluster_names(labels, k, words)
    return SliceFeatures.from_codes(labels, [str(c) for c in range(k)], "cluster", names)


def cluster_codes(X: np.ndarray, n_clusters: int, *, rows: np.ndarray | None = None,
                  random_state: int | None = 0, sample: int = KMEANS_SAMPLE,
                  fetch: bool = False) -> tuple[np.ndarray, int]:
    """The cluster of each row and k: :func:`cluster_features` without the names.

    With Φ in partitions (on disk, or on a cluster's workers) each chunk of rows is assigned
    its centre where its rows are; with ``fetch``, each chunk is fetched and assigned here
    (the slices extracted on the driver of a cluster: a task would wait behind whatever
    holds its worker, 4.8 s of a 9.1 s stage at 100,000 rows on two workers with the map's
    layout beside it).

    Returns
    -------
    labels : np.ndarray of int64
        The nearest centre of each of ``rows`` (in their order).
    k : int
        Clusters fitted: ``n_clusters``, or fewer when there are fewer rows.
    """
    from sklearn.cluster import MiniBatchKMeans  # lazy: +1861 ms to import

    rows = np.arange(X.shape[0]) if rows is None else np.asarray(rows)
    n = len(rows)
    k = min(check_int("n_clusters", n_clusters, minimum=1), n)
    rng = np.random.default_rng(random_state)
    fit_rows = rows if n <= sample else np.sort(rng.choice(rows, size=sample, replace=False))
    contiguous = n > 0 and rows[-1] - rows[0] == n - 1 and bool(np.all(np.diff(rows) == 1))
    # One thread (OpenMP and BLAS): k-means' many small products gain nothing from threads,
    # and on a busy 2-core machine spinning BLAS threads made it 8x slower (21 s vs 2.8 s
    # for 100k x 256, k = 50).
    with blas_threads.limit(1, user_api=None):
        model = MiniBatchKMeans(n_clusters=k, n_init=1, batch_size=4096,
                                random_state=random_state).fit(
                                    np.asarray(X[fit_rows], dtype=np.float32))
        if is_partitioned(X) and not fetch:  # each chunk assigned where its rows are
            chunks = X.select(rows).map_chunks(model.predict, 65_536)
        else:
            chunks = (model.predict(np.asarray(X[c[0]:c[-1] + 1] if contiguous else X[c],
                                               dtype=np.float32))
                      for c in (rows[lo:lo + 65_536] for lo in range(0, n, 65_536)))
        labels = np.concatenate([np.empty(0, dtype=np.int64), *chunks]).astype(np.int64)
    return labels, k


def _cluster_names(labels: np.ndarray, k: int, words: SliceFeatures) -> list[str]:
    counts = cluster_word_counts(labels, k, words.X)  # (k, n_words)
    return cluster_names(counts, np.bincount(labels, minlength=k),
                         np.asarray(words.X.sum(axis=0), dtype=float).ravel(), words.value)


def cluster_word_counts(labels: np.ndarray, k: int, words: sp.spmatrix) -> np.ndarray:
    """``(k, n_words)`` float64: the rows of each of ``k`` clusters (``labels``, one per row)
    having each word (a 0/1 column of the sparse ``words``); a sparse product, the words never
    made dense."""
    one_hot = sp.csr_matrix((np.ones(len(labels)), (labels, np.arange(len(labels)))),
                            shape=(k, len(labels)))
    return (one_hot @ sp.csc_matrix(words, dtype=np.float64)).toarray()


def cluster_names(counts: np.ndarray, sizes: np.ndarray, word_rows: np.ndarray,
                  words: np.ndarray) -> list[str]:
    """Each cluster named by up to three words present in at least 10 % of its rows with the
    highest lift over their overall share (``cluster 3 (dog, frisbee)``).

    Parameters
    ----------
    counts : np.ndarray
        ``(k, n_words)`` rows of each cluster having each word.
    sizes : np.ndarray
        Rows of each cluster.
    word_rows : np.ndarray
        Rows having each word, over all clustered rows.
    words : np.ndarray of str
        The words.
    """
    k = len(sizes)
    n_rows = int(np.sum(sizes))
    sizes = np.maximum(np.asarray(sizes), 1)[:, None]
    overall = np.asarray(word_rows, dtype=float) / max(n_rows, 1)
    share = counts / sizes
    with np.errstate(divide="ignore", invalid="ignore"):
        lift = np.where((share >= 0.1) & (overall > 0), share / overall, 0.0)
    out = []
    for c in range(k):
        best = [j for j in np.argsort(-lift[c], kind="stable")[:3] if lift[c, j] > 1.0]
        named = ", ".join(str(words[j]) for j in best)
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
