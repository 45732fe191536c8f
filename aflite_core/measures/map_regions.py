"""Named regions of the 2-D map: its dense parts, what is in them, and what their words are.

A *region* is a dense part of the map found by HDBSCAN (Campello et al., 2013; scikit-learn's
``HDBSCAN``) on the 2-D coordinates of a seeded sample of at most ``sample_size`` rows, with a
smallest region of ``min_share`` of the sample (at least ``MIN_REGION_ROWS`` rows). Every other
row takes the region of its nearest sampled point on the map (a k-d tree), so every row of a
million-row map is assigned in about a second; points HDBSCAN leaves as noise are in no region
(``-1``). Regions are numbered by size, largest first, so the numbering is the same for a seed.

**A region is a part, never the whole.** No region may hold more than
:data:`MAX_REGION_SHARE` (40 %) of the rows: HDBSCAN's excess-of-mass selection is tried
first; when it gives a region over the cap, the leaves of its cluster tree (the finest dense
parts) are taken instead, and a part still over the cap is clustered again on its own
points. A part that stays over the cap has no density
structure inside it, and then the map has no distinct regions: none is named (the page and
``summary.json`` say so), rather than one region that is the dataset.

Each region is described by its rows, the share of its filtered rows that AFLite removed, its
label shares (one column ``share:<label>`` each) with a chi-square test of its label counts
against the map's label mix, Bonferroni-corrected over the regions (``label_p``;
``label_skewed`` when below 0.05, and ``over_label`` the label most over-represented there;
a region whose mix is the data's is not called by its most frequent label), its centre (the
median of its points), its name and its distinctive words:

- the **name** is made of the words (at most three) that occur in at least
  :data:`NAME_MIN_INSIDE` (50 %) of the region's texts and at most :data:`NAME_MAX_OUTSIDE`
  (15 %) of the other rows' texts, most distinctive first (``name_in`` and ``name_out`` give
  its first word's two shares); a region without such a word is called "region N";
- the **distinctive words** (``top_words``) are its most distinctive hypothesis words by
  class-based TF-IDF (c-TF-IDF, as BERTopic names topics: a word's frequency in the region,
  times log(1 + A / f) with A the average number of words per region and f the word's
  frequency in all regions).

Words are counted over a seeded sample of at most ``text_sample`` rows; English stop words
and words in fewer than 3 sampled rows are left out.

:func:`slice_regions` says in which regions the rows of the stored "why removed" slices
concentrate (read from the run folder, so the slices measure need not wait for the map).
:func:`region_table` reads a stored table, those of runs made before the shares were columns
included. See ``docs/measures.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from aflite_core._validation import check_fraction, check_int, make_rng

__all__ = [
    "FILE",
    "REGION_COLUMNS",
    "describe_regions",
    "distinctive_words",
    "find_regions",
    "label_mix",
    "name_words",
    "region_rows",
    "region_table",
    "slice_regions",
    "with_slice_regions",
]

#: The regions' table in the run folder.
FILE = "map_regions.parquet"
#: Rows HDBSCAN clusters (a seeded sample); the others take their nearest sampled point's region.
SAMPLE_SIZE: int = 10_000
#: Smallest region, as a share of the clustered sample.
MIN_SHARE: float = 0.02
#: ... and in rows.
MIN_REGION_ROWS: int = 15
#: HDBSCAN's ``min_samples`` (how conservative the density estimate is).
MIN_SAMPLES: int = 10
#: Rows whose hypotheses name the regions (a seeded sample).
TEXT_SAMPLE: int = 50_000
#: Words kept per region.
N_WORDS: int = 6
#: A slice "concentrates" in a region holding at least this share of its rows.
CONCENTRATION: float = 0.25
#: No region holds more than this share of the rows (else the map has no distinct regions).
MAX_REGION_SHARE: float = 0.40
#: Times a part over the cap is clustered again on its own points.
MAX_SPLITS: int = 3
#: A name's word occurs in at least this share of the region's texts ...
NAME_MIN_INSIDE: float = 0.50
#: ... and in at most this share of the other rows' texts.
NAME_MAX_OUTSIDE: float = 0.15
#: Family-wise level of the regions' label-mix tests.
LABEL_ALPHA: float = 0.05
#: Prefix of the label-share columns (``share:entailment``).
SHARE_PREFIX = "share:"
#: What the page and ``summary.json`` say of a map without distinct regions.
NO_REGIONS = "no distinct regions"

#: Columns of the table, the label shares (one ``share:<label>`` each) after ``share_removed``.
REGION_COLUMNS = ("region", "name", "rows", "share_of_rows", "filtered", "removed",
                  "share_removed", "label_skewed", "label_p", "over_label", "top_words",
                  "name_in", "name_out", "x", "y")


#: Points :func:`find_regions` places at a time on the sampled points' k-d tree.
QUERY_CHUNK = 1 << 18


def find_regions(coords: np.ndarray, *, sample_size: int = SAMPLE_SIZE,
                 min_share: float = MIN_SHARE, random_state: int | None = 0) -> np.ndarray:
    """Region of each point of a 2-D map (``-1``: none).

    Parameters
    ----------
    coords : array of shape (n_rows, 2)
        The map.
    sample_size : int, default 10000
        HDBSCAN clusters a seeded sample of at most this many points.
    min_share : float, default 0.01
        Smallest region, as a share of the sample (at least ``MIN_REGION_ROWS`` points).
    random_state : int or None, default 0
        Seeds the sample.

    Returns
    -------
    np.ndarray of int32
        Region ids 0, 1, ... by decreasing size (in the sample), ``-1`` for noise. Fewer
        than ``2 * MIN_REGION_ROWS`` points, or a map of one point, give no region.
    """
    from scipy.spatial import cKDTree  # lazy: +400 ms to import

    coords = np.asarray(coords)
    if coords.dtype not in (np.float32, np.float64):  # the map's float32 stays: no copy
        coords = coords.astype(np.float64)
    if coords.ndim != 2 or coords.shape[1] != 2:
        raise ValueError(f"coords: expected shape (n_rows, 2), got {coords.shape}")
    if not np.isfinite(coords).all():
        raise ValueError("coords: expected finite coordinates; found NaN or infinite values")
    sample_size = check_int("sample_size", sample_size, minimum=2 * MIN_REGION_ROWS)
    min_share = check_fraction("min_share", min_share)
    n = len(coords)
    regions = np.full(n, -1, dtype=np.int32)
    if n < 2 * MIN_REGION_ROWS or np.ptp(coords, axis=0).max() == 0:
        return regions
    rng = make_rng(random_state)
    sample = np.sort(rng.choice(n, size=sample_size, replace=False)) if n > sample_size \
        else np.arange(n)
    min_size = max(MIN_REGION_ROWS, int(round(min_share * len(sample))))
    points = coords[sample].astype(np.float64)
    found = _dense_parts(points, min_size)
    if found.max() < 0:
        return regions
    # number the regions by size, largest first (ties: the smaller HDBSCAN label)
    sizes = np.bincount(found[found >= 0])
    order = np.lexsort((np.arange(len(sizes)), -sizes))
    renumber = np.empty(len(sizes), dtype=np.int32)
    renumber[order] = np.arange(len(sizes), dtype=np.int32)
    sampled = np.where(found >= 0, renumber[np.maximum(found, 0)], -1).astype(np.int32)
    if len(sample) == n:
        return sampled
    # every point's nearest sampled point, a chunk at a time in float64 (the tree's type):
    # the query of all rows at once made float64 copies, distances and int64 indices of
    # every row (0.2 GB at 5M rows)
    tree = cKDTree(points)
    for start in range(0, n, QUERY_CHUNK):
        part = coords[start:start + QUERY_CHUNK].astype(np.float64)
        regions[start:start + len(part)] = sampled[tree.query(part, k=1)[1]]
    return regions


def _hdbscan(points: np.ndarray, min_size: int, method: str) -> np.ndarray:
    from sklearn.cluster import HDBSCAN  # lazy: +2176 ms to import

    if len(points) < 2 * min_size or np.ptp(points, axis=0).max() == 0:
        return np.full(len(points), -1, dtype=np.int64)
    return HDBSCAN(min_cluster_size=min_size, min_samples=min(MIN_SAMPLES, min_size),
                   cluster_selection_method=method, copy=True).fit_predict(points)


def _largest_share(found: np.ndarray) -> float:
    inside = found[found >= 0]
    return float(np.bincount(inside).max() / len(found)) if len(inside) else 0.0


def _dense_parts(points: np.ndarray, min_size: int) -> np.ndarray:
    """HDBSCAN's regions of ``points`` (``-1``: noise) with none over
    :data:`MAX_REGION_SHARE` of them, or none at all (see the module docstring)."""
    found = _hdbscan(points, min_size, "eom")
    if _largest_share(found) <= MAX_REGION_SHARE:
        return found
    leaves = _hdbscan(points, min_size, "leaf")
    if _largest_share(leaves) <= MAX_REGION_SHARE:
        return leaves
    found = leaves.copy()
    for _ in range(MAX_SPLITS):  # a part over the cap, clustered again on its own points
        sizes = np.bincount(found[found >= 0]) if (found >= 0).any() else np.zeros(0, int)
        over = np.flatnonzero(sizes > MAX_REGION_SHARE * len(points))
        if not len(over):
            return found
        for part in over:
            members = np.flatnonzero(found == part)
            inner = _hdbscan(points[members], min_size, "leaf")
            if inner.max() < 1:  # one part or none: no structure inside it
                return np.full(len(points), -1, dtype=np.int64)
            found[members] = np.where(inner >= 0, inner + found.max() + 1, -1)
    return found if _largest_share(found) <= MAX_REGION_SHARE else \
        np.full(len(points), -1, dtype=np.int64)


def _region_counts(texts: list[str], *, binary: bool) -> tuple[Any, np.ndarray]:
    """The texts' counts of each word and the words (sorted, an object array): scikit-learn's
    ``CountVectorizer(token_pattern=TOKEN_PATTERN, lowercase=True, stop_words="english",
    min_df=min(3, len(texts)), binary=binary)`` and its ``get_feature_names_out()``, bit for
    bit, tokenised in compiled code (:func:`aflite_core.represent.word_counts`: 50,000
    SNLI hypotheses 0.24 s -> a few hundredths each, run beside the other measures without
    holding the GIL; ``tests/represent/test_term_counts.py``).

    Raises
    ------
    ValueError
        No word left (scikit-learn's "empty vocabulary" and "no terms remain").
    """
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # lazy: +1575 ms to import

    from aflite_core.represent import word_counts  # lazy: numba with the compiled scanner

    vocab: list[str] = []
    counts = word_counts(texts, min_df=min(3, len(texts)), dtype=np.int64, vocabulary=vocab,
                         pattern="tokens", stop_words=ENGLISH_STOP_WORDS, binary=binary)
    return counts, np.asarray(vocab, dtype=object)


def distinctive_words(texts: Sequence[str], region: np.ndarray, *,
                      n_words: int = N_WORDS) -> dict[int, list[str]]:
    """The ``n_words`` most distinctive words of each region by c-TF-IDF.

    Parameters
    ----------
    texts : sequence of str
        One text per row.
    region : np.ndarray of int
        Region of each row (``-1`` rows are left out).

    Returns
    -------
    dict
        Region id -> its words, best first (regions with no countable word map to ``[]``).
    """
    region = np.asarray(region)
    if len(texts) != len(region):
        raise ValueError(f"region: expected {len(texts)} values (one per text), got "
                         f"{len(region)}")
    ids = np.unique(region[region >= 0])
    out: dict[int, list[str]] = {int(r): [] for r in ids}
    inside = np.flatnonzero(region >= 0)
    if not len(ids) or not len(inside):
        return out
    try:
        counts, vocab = _region_counts([texts[i] for i in inside], binary=False)
    except ValueError:  # no word left (empty vocabulary)
        return out
    import scipy.sparse as sp  # lazy: +174 ms to import

    codes = np.searchsorted(ids, region[inside])
    member = sp.csr_matrix((np.ones(len(inside)), (codes, np.arange(len(inside)))),
                           shape=(len(ids), len(inside)))
    per_region = np.asarray((member @ counts).todense(), dtype=np.float64)
    words_per_region = per_region.sum(axis=1, keepdims=True)
    tf = per_region / np.maximum(words_per_region, 1.0)
    average = per_region.sum() / len(ids)
    idf = np.log1p(average / np.maximum(per_region.sum(axis=0), 1.0))
    score = tf * idf
    alphabetic = np.asarray([len(w) > 1 and w[0].isalpha() for w in vocab])  # no "'s", "2"
    score[:, ~alphabetic] = 0.0
    for pos, r in enumerate(ids):
        row = score[pos]
        best = np.lexsort((vocab, -row))[:n_words]
        out[int(r)] = [str(vocab[j]) for j in best if row[j] > 0]
    return out


def name_words(texts: Sequence[str], region: np.ndarray, *,
               min_inside: float = NAME_MIN_INSIDE, max_outside: float = NAME_MAX_OUTSIDE,
               n_words: int = 3) -> dict[int, tuple[list[str], float, float]]:
    """Each region's name: the words in at least ``min_inside`` of its texts and at most
    ``max_outside`` of the other rows' texts, most distinctive first (by inside minus
    outside share), at most ``n_words``.

    Returns
    -------
    dict
        Region id -> ``(words, inside, outside)``: its name's words (``[]`` when no word
        qualifies) and the two shares of its first word (of its best word when none
        qualifies: what came closest).
    """
    region = np.asarray(region)
    ids = np.unique(region[region >= 0])
    out: dict[int, tuple[list[str], float, float]] = {int(r): ([], 0.0, 0.0) for r in ids}
    if not len(ids) or len(texts) == 0:
        return out
    try:
        has, vocab = _region_counts(list(texts), binary=True)
    except ValueError:  # no word left (empty vocabulary)
        return out
    import scipy.sparse as sp  # lazy: +174 ms to import

    alphabetic = np.asarray([len(w) > 1 and w[0].isalpha() for w in vocab])
    total = np.asarray(has.sum(axis=0)).ravel().astype(np.float64)
    rows = np.flatnonzero(region >= 0)
    member = sp.csr_matrix((np.ones(len(rows)), (np.searchsorted(ids, region[rows]), rows)),
                           shape=(len(ids), len(region)))
    per_region = np.asarray((member @ has).todense(), dtype=np.float64)  # texts with the word
    sizes = np.bincount(np.searchsorted(ids, region[rows]), minlength=len(ids))
    for pos, r in enumerate(ids):
        n_in, n_out = int(sizes[pos]), int(len(region) - sizes[pos])
        here = per_region[pos] / max(n_in, 1)
        there = (total - per_region[pos]) / max(n_out, 1)
        gap = np.where(alphabetic, here - there, -np.inf)
        order = np.lexsort((vocab, -gap))
        named = [j for j in order[:200] if here[j] >= min_inside and there[j] <= max_outside]
        best = named[0] if named else order[0]
        out[int(r)] = ([str(vocab[j]) for j in named[:n_words]], float(here[best]),
                       float(there[best]))
    return out


def label_mix(codes: np.ndarray, names: np.ndarray, region: np.ndarray, ids: np.ndarray,
              *, alpha: float = LABEL_ALPHA) -> pd.DataFrame:
    """Each region's label shares and a test of its label counts against the map's mix.

    A chi-square goodness-of-fit test of the region's counts against its size times the
    shares of all the map's rows; its p-value is multiplied by the number of regions
    (Bonferroni), and a region is ``label_skewed`` when that is below ``alpha``: only then
    ``over_label`` names the label whose share there most exceeds its share in the data.

    Returns
    -------
    DataFrame
        Indexed by region id: ``share:<label>`` per label (sorted), ``label_p``,
        ``label_skewed``, ``over_label``.
    """
    from scipy.stats import chisquare  # lazy: +1594 ms to import

    overall = np.bincount(codes, minlength=len(names)).astype(np.float64)
    overall /= max(overall.sum(), 1.0)
    rows = []
    for r in ids:
        counts = np.bincount(codes[region == r], minlength=len(names)).astype(np.float64)
        n = counts.sum()
        shares = counts / max(n, 1.0)
        present = overall > 0
        if present.sum() > 1 and n > 0:
            p = float(chisquare(counts[present], overall[present] * n).pvalue)
            p = min(1.0, p * len(ids))
        else:
            p = 1.0
        skewed = p < alpha
        ratio = np.where(present, shares / np.where(present, overall, 1.0), 0.0)
        rows.append({"region": int(r),
                     **{f"{SHARE_PREFIX}{names[v]}": round(float(shares[v]), 4)
                        for v in range(len(names))},
                     "label_p": p, "label_skewed": bool(skewed),
                     "over_label": str(names[int(np.argmax(ratio))]) if skewed else ""})
    return pd.DataFrame(rows).set_index("region")


def describe_regions(region: np.ndarray, coords: np.ndarray, *, texts: Sequence[str],
                     labels: np.ndarray, status: np.ndarray, n_words: int = N_WORDS,
                     text_sample: int = TEXT_SAMPLE,
                     random_state: int | None = 0) -> pd.DataFrame:
    """One row per region: its size, removal share, label mix, name, words and centre.

    Parameters
    ----------
    region : np.ndarray of int
        Region of each row (from :func:`find_regions`).
    coords : array of shape (n_rows, 2)
    texts : sequence of str
        The hypothesis (or single text) of each row.
    labels : np.ndarray or pandas.Categorical
        Label of each row (a categorical with sorted categories is read by its codes).
    status : np.ndarray of str or pandas.Categorical
        Status of each row (``retained``, ``removed``, ...): ``share_removed`` is removed /
        (retained + removed) among the region's rows.
    n_words, text_sample, random_state
        Distinctive words kept per region; rows sampled (seeded) to count words.

    Returns
    -------
    DataFrame with columns :data:`REGION_COLUMNS` and one ``share:<label>`` column per label
    (after ``share_removed``); ``top_words`` the distinctive words joined by ", ". Empty
    (:func:`empty_table`) when the map has no distinct regions.
    """
    region = np.asarray(region)
    coords = np.asarray(coords)  # the map's float32 as it is (medians taken in float64)
    if coords.dtype not in (np.float32, np.float64):
        coords = coords.astype(np.float64)
    # codes, not a fixed-width str copy of every row's label and status (52 bytes a row
    # each at 13 characters: 0.26 GB apiece at 5M rows)
    label_codes, names = _sorted_codes(labels)
    if isinstance(status, pd.Categorical):
        is_removed, is_filtered = _is_status(status, "removed"), _is_status(status, "retained")
        is_filtered |= is_removed
    else:
        status = pd.Series(np.asarray(status, dtype=object)).astype(str)
        is_removed = (status == "removed").to_numpy()
        is_filtered = is_removed | (status == "retained").to_numpy()
    n = len(region)
    for name, values in (("coords", coords), ("labels", label_codes), ("status", status)):
        if len(values) != n:
            raise ValueError(f"{name}: expected {n} rows (one per row of the map), got "
                             f"{len(values)}")
    if len(texts) != n:
        raise ValueError(f"texts: expected {n} texts (one per row of the map), got {len(texts)}")
    ids = np.unique(region[region >= 0])
    if not len(ids):
        return empty_table()
    text_sample = check_int("text_sample", text_sample, minimum=1)
    rng = make_rng(random_state)
    # every row's words count for the names (a region is named against all other rows,
    # noise included); a seeded sample of them above text_sample rows
    picked = np.arange(n) if n <= text_sample else np.sort(
        rng.choice(n, size=text_sample, replace=False))
    sample = texts.take(picked) if hasattr(texts, "take") else [texts[i] for i in picked]
    inside = region[picked] >= 0
    words = distinctive_words([t for t, i in zip(sample, inside, strict=True) if i],
                              region[picked][inside], n_words=n_words)
    named = name_words(sample, region[picked])
    mix = label_mix(label_codes, names, region, ids)
    share_columns = [c for c in mix.columns if c.startswith(SHARE_PREFIX)]
    rows = []
    for r in ids:
        members = np.flatnonzero(region == r)
        filtered = int(is_filtered[members].sum())
        removed = int(is_removed[members].sum())
        name, name_in, name_out = named.get(int(r), ([], 0.0, 0.0))
        rows.append({
            "region": int(r), "name": " · ".join(name) or f"region {int(r)}",
            "rows": int(len(members)), "share_of_rows": len(members) / n,
            "filtered": filtered, "removed": removed,
            "share_removed": removed / filtered if filtered else float("nan"),
            **mix.loc[int(r)].to_dict(),
            "top_words": ", ".join(words.get(int(r), [])),
            "name_in": name_in, "name_out": name_out,
            "x": _median(coords[members, 0]), "y": _median(coords[members, 1]),
        })
    columns = list(REGION_COLUMNS)
    at = columns.index("share_removed") + 1
    table = pd.DataFrame(rows, columns=[*columns[:at], *share_columns, *columns[at:]])
    return table.astype({"label_skewed": bool, "label_p": np.float64})


def region_table(table: pd.DataFrame | None) -> pd.DataFrame:
    """A stored regions table as this version writes it: a run made before the label shares
    were columns has its ``label_shares`` JSON spread into ``share:<label>`` columns (its
    label test unknown: ``label_p`` NaN) and no ``top_label``."""
    if table is None or table.empty:
        return empty_table()
    if "label_shares" not in table:
        return table
    shares = pd.DataFrame([json.loads(v) if isinstance(v, str) and v else {}
                           for v in table["label_shares"]], index=table.index).fillna(0.0)
    shares = shares[sorted(shares.columns, key=str)].add_prefix(SHARE_PREFIX)
    out = table.drop(columns=[c for c in ("label_shares", "top_label") if c in table])
    at = list(out.columns).index("share_removed") + 1
    out = pd.concat([out.iloc[:, :at], shares, out.iloc[:, at:]], axis=1)
    for column, value in (("label_skewed", False), ("label_p", float("nan")),
                          ("over_label", "")):
        if column not in out:
            out[column] = value
    return out


def _sorted_codes(labels) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, names)`` of the labels as texts, ``names`` sorted (np.unique's order): a
    categorical's own codes when its categories are sorted texts (the measure's: a byte a
    row), else the labels' factorisation."""
    if isinstance(labels, pd.Categorical):
        names = np.asarray(labels.categories, dtype=str)
        if np.all(names[:-1] < names[1:]) and (labels.codes >= 0).all():
            return labels.codes, names
    codes, names = pd.factorize(pd.Series(np.asarray(labels, dtype=object)).astype(str))
    ranks = np.argsort(np.argsort(np.asarray(names, dtype=str), kind="stable"))
    return ranks[codes], np.sort(np.asarray(names, dtype=str))


def _median(values: np.ndarray) -> float:
    """The median in float64 (a float32 map's values converted exactly, then taken)."""
    return float(np.median(values.astype(np.float64)))


def _is_status(status: pd.Categorical, name: str) -> np.ndarray:
    """Rows of ``status`` whose value is ``name`` (from its codes)."""
    where = np.flatnonzero(np.asarray(status.categories, dtype=object) == name)
    return status.codes == where[0] if len(where) else np.zeros(len(status), dtype=bool)


def empty_table() -> pd.DataFrame:
    """The regions' table with no region (its columns and types)."""
    ints = {"region", "rows", "filtered", "removed"}
    texts = {"name", "over_label", "top_words"}
    return pd.DataFrame({c: pd.Series(dtype="int64" if c in ints else object if c in texts
                                      else bool if c == "label_skewed" else "float64")
                         for c in REGION_COLUMNS})


def region_rows(run, region: int) -> np.ndarray:
    """Row ids of every row of the run's map in ``region``.

    Raises
    ------
    ValueError
        If the run has no map, its map has no regions, or ``region`` is not one of them.
    """
    projection = run.projection
    if projection is None or projection.empty:
        raise ValueError(f"run {run.name}: no 2-D map (the projection measure was not run)")
    if "region" not in projection:
        raise ValueError(f"run {run.name}: its map has no regions (made before they existed)")
    known = np.unique(projection["region"].to_numpy())
    if int(region) not in set(known[known >= 0].tolist()):
        raise ValueError(f"region: expected one of {sorted(known[known >= 0].tolist())}, got "
                         f"{region!r}")
    return projection["row_id"].to_numpy()[projection["region"].to_numpy() == int(region)]


def slice_regions(run, members: pd.DataFrame | None, *,
                  concentration: float = CONCENTRATION) -> pd.DataFrame:
    """In which map regions the rows of each stored "why removed" slice concentrate.

    Parameters
    ----------
    run : AuditRun
    members : DataFrame or None
        The slices' stored rows (``slices_members.parquet``: ``slice_id`` and ``members``,
        packed bits over the input rows).

    Returns
    -------
    DataFrame
        ``slice_id``, ``regions`` ("62% in 3 guitar · music · playing; ..." for every region
        holding at least ``concentration`` of the slice's rows, at most three, strongest
        first; "" when none does), ``top_region`` (id, or -1) and ``top_region_share``.
        Empty when the run has no slices or no regions.
    """
    columns = ["slice_id", "regions", "top_region", "top_region_share"]
    regions = run.read_parquet(FILE)
    if (members is None or members.empty or regions is None or regions.empty
            or "region" not in run.parquet_columns("projection.parquet")):
        return pd.DataFrame(columns=columns)
    projection = run.table_columns("projection.parquet", ["row_id", "region"])
    frame_ids = run.score_columns(["row_id"])["row_id"].to_numpy()
    if np.array_equal(projection["row_id"].to_numpy(), frame_ids):  # every row, in order
        region_of = projection["region"].fillna(-1).to_numpy(dtype=np.int64)
    else:  # looked up by id (no hash table of every row id in the common case above)
        by_row = pd.Series(projection["region"].to_numpy(),
                           index=projection["row_id"].to_numpy())
        region_of = by_row.reindex(frame_ids).fillna(-1).to_numpy(dtype=np.int64)
    names = dict(zip(regions["region"].astype(int), regions["name"].astype(str), strict=True))
    out = []
    n = len(frame_ids)
    for slice_id, packed in zip(members["slice_id"], members["members"], strict=True):
        mask = np.unpackbits(np.frombuffer(packed, dtype=np.uint8), count=n,
                             bitorder="little").astype(bool)
        held = region_of[mask]
        held = held[held >= 0]
        if not len(mask.nonzero()[0]) or not len(held):
            out.append((str(slice_id), "", -1, float("nan")))
            continue
        counts = np.bincount(held)
        share = counts / mask.sum()
        order = [r for r in np.argsort(-share, kind="stable")[:3] if share[r] >= concentration]
        text = "; ".join(f"{share[r]:.0%} in {r} {names.get(int(r), '')}".strip()
                         for r in order)
        top = int(np.argmax(share))
        out.append((str(slice_id), text, top, float(share[top])))
    return pd.DataFrame(out, columns=columns)


def with_slice_regions(run, table: pd.DataFrame, members: pd.DataFrame | None) -> pd.DataFrame:
    """The slices' ``table`` with a ``regions`` column (:func:`slice_regions`; "" for slices
    whose rows are not stored), unchanged when the run has no map regions."""
    where = slice_regions(run, members)
    if where.empty:
        return table
    regions = dict(zip(where["slice_id"], where["regions"], strict=True))
    return table.assign(regions=[regions.get(str(i), "") for i in table["slice_id"]])
