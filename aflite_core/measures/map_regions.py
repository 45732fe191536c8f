"""Named regions of the 2-D map: its dense parts, what is in them, and what their words are.

A *region* is a dense part of the map found by HDBSCAN (Campello et al., 2013; scikit-learn's
``HDBSCAN``) on the 2-D coordinates of a seeded sample of at most ``sample_size`` rows, with a
smallest region of ``min_share`` of the sample (at least ``MIN_REGION_ROWS`` rows). Every other
row takes the region of its nearest sampled point on the map (a k-d tree), so every row of a
million-row map is assigned in about a second; points HDBSCAN leaves as noise are in no region
(``-1``). Regions are numbered by size, largest first, so the numbering is the same for a seed.

Each region is described by its rows, the share of its filtered rows that AFLite removed, its
label shares, its centre (the median of its points), and its most distinctive hypothesis words
by class-based TF-IDF (c-TF-IDF, as BERTopic names topics: a word's frequency in the region,
times log(1 + A / f) with A the average number of words per region and f the word's frequency
in all regions), counted over a seeded sample of at most ``text_sample`` rows. English stop
words and words in fewer than 3 sampled rows are left out. The region's name is its top three
words, the way datamapplot labels a map.

:func:`slice_regions` says in which regions the rows of the stored "why removed" slices
concentrate (read from the run folder, so the slices measure need not wait for the map).
See ``docs/measures.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from aflite_core._validation import check_fraction, check_int, make_rng
from aflite_core.text import TOKEN_PATTERN

__all__ = [
    "FILE",
    "REGION_COLUMNS",
    "describe_regions",
    "distinctive_words",
    "find_regions",
    "region_rows",
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

REGION_COLUMNS = ("region", "name", "rows", "share_of_rows", "filtered", "removed",
                  "share_removed", "label_shares", "top_label", "top_words", "x", "y")


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
    from scipy.spatial import cKDTree
    from sklearn.cluster import HDBSCAN

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
    found = HDBSCAN(min_cluster_size=min_size, min_samples=min(MIN_SAMPLES, min_size),
                    copy=True).fit_predict(points)
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
    from sklearn.feature_extraction.text import CountVectorizer

    region = np.asarray(region)
    if len(texts) != len(region):
        raise ValueError(f"region: expected {len(texts)} values (one per text), got "
                         f"{len(region)}")
    ids = np.unique(region[region >= 0])
    out: dict[int, list[str]] = {int(r): [] for r in ids}
    inside = np.flatnonzero(region >= 0)
    if not len(ids) or not len(inside):
        return out
    vectorizer = CountVectorizer(token_pattern=TOKEN_PATTERN, lowercase=True,
                                 stop_words="english", min_df=min(3, len(inside)))
    try:
        counts = vectorizer.fit_transform([texts[i] for i in inside])
    except ValueError:  # no word left (empty vocabulary)
        return out
    import scipy.sparse as sp

    codes = np.searchsorted(ids, region[inside])
    member = sp.csr_matrix((np.ones(len(inside)), (codes, np.arange(len(inside)))),
                           shape=(len(ids), len(inside)))
    per_region = np.asarray((member @ counts).todense(), dtype=np.float64)
    words_per_region = per_region.sum(axis=1, keepdims=True)
    tf = per_region / np.maximum(words_per_region, 1.0)
    average = per_region.sum() / len(ids)
    idf = np.log1p(average / np.maximum(per_region.sum(axis=0), 1.0))
    score = tf * idf
    vocab = vectorizer.get_feature_names_out()
    alphabetic = np.asarray([len(w) > 1 and w[0].isalpha() for w in vocab])  # no "'s", "2"
    score[:, ~alphabetic] = 0.0
    for pos, r in enumerate(ids):
        row = score[pos]
        best = np.lexsort((vocab, -row))[:n_words]
        out[int(r)] = [str(vocab[j]) for j in best if row[j] > 0]
    return out


def describe_regions(region: np.ndarray, coords: np.ndarray, *, texts: Sequence[str],
                     labels: np.ndarray, status: np.ndarray, n_words: int = N_WORDS,
                     text_sample: int = TEXT_SAMPLE,
                     random_state: int | None = 0) -> pd.DataFrame:
    """One row per region: its size, removal share, label shares, words and centre.

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
        Words kept per region; rows sampled (seeded) to count them.

    Returns
    -------
    DataFrame with columns :data:`REGION_COLUMNS`; ``label_shares`` is a JSON object (label ->
    share of the region's rows), ``top_words`` the words joined by ", ".
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
    inside = np.flatnonzero(region >= 0)
    picked = inside if len(inside) <= text_sample else np.sort(
        rng.choice(inside, size=text_sample, replace=False))
    sample = texts.take(picked) if hasattr(texts, "take") else [texts[i] for i in picked]
    words = distinctive_words(sample, region[picked], n_words=n_words)
    rows = []
    for r in ids:
        members = np.flatnonzero(region == r)
        filtered = int(is_filtered[members].sum())
        removed = int(is_removed[members].sum())
        counts = np.bincount(label_codes[members], minlength=len(names))
        present = np.flatnonzero(counts)
        shares = {str(names[v]): round(float(counts[v]) / len(members), 4)
                  for v in sorted(present.tolist(), key=lambda v: -counts[v])}
        top = words.get(int(r), [])
        rows.append({
            "region": int(r), "name": " · ".join(top[:3]) or f"region {int(r)}",
            "rows": int(len(members)), "share_of_rows": len(members) / n,
            "filtered": filtered, "removed": removed,
            "share_removed": removed / filtered if filtered else float("nan"),
            "label_shares": json.dumps(shares), "top_label": next(iter(shares)),
            "top_words": ", ".join(top),
            "x": _median(coords[members, 0]), "y": _median(coords[members, 1]),
        })
    return pd.DataFrame(rows, columns=list(REGION_COLUMNS))


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
    texts = {"name", "label_shares", "top_label", "top_words"}
    return pd.DataFrame({c: pd.Series(dtype="int64" if c in ints else object if c in texts
                                      else "float64") for c in REGION_COLUMNS})


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
