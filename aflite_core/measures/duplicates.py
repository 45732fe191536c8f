"""Exact and near duplicates, counted before vs after AFLite and listable.

*Exact* duplicates share the same normalised text (:func:`normalize_text`; for pairs, the same
normalised premise and hypothesis). *Near* duplicates are pairs of rows whose cosine similarity
on Φ is at least ``threshold``. For both kinds, rows linked by duplicate pairs form groups
(connected components); a group of g rows holds g - 1 redundant copies. ``before`` counts all
rows; ``after`` counts only the retained rows (a pair counts when both rows were kept).
See ``docs/measures.md``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from aflite_core._validation import check_real
from aflite_core.chart_style import PALETTE, SET_COLORS, chart_text
from aflite_core.measures._neighbors import as_matrix, l2_normalize
from aflite_core.measures.registry import (
    Measure,
    MeasureContext,
    MeasureResult,
    Option,
    stored_summary,
)

#: Default cosine-similarity threshold for near duplicates.
NEAR_THRESHOLD: float = 0.95
#: Default largest number of near-duplicate pairs kept before giving up.
MAX_PAIRS: int = 1_000_000
#: Float32 similarities of identical rows can round a hair below 1.
_SIM_TOLERANCE = 1e-6

_SPACE = re.compile(r"\s+")


def normalize_text(text) -> str:
    """Normalise a text for exact-duplicate matching.

    Steps: Unicode NFKC; case folding (lower case); every punctuation character (Unicode
    category P*) becomes a space; runs of whitespace collapse to one space; leading and
    trailing spaces are stripped. ``None`` becomes ``""``.

    >>> normalize_text("  A man,  riding a BIKE! ")
    'a man riding a bike'
    """
    if text is None:
        return ""
    text = unicodedata.normalize("NFKC", str(text)).casefold()
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    return _SPACE.sub(" ", text).strip()


def exact_duplicate_keys(hypotheses: Sequence[str], premises: Sequence[str] | None = None
                         ) -> list[str]:
    """Normalised key of each row: the hypothesis, or premise and hypothesis joined by a tab."""
    if premises is not None and len(premises) != len(hypotheses):
        raise ValueError(f"premises must have one entry per hypothesis ({len(hypotheses)}); "
                         f"got {len(premises)}")
    if premises is None:
        return [normalize_text(h) for h in hypotheses]
    return [normalize_text(p) + "\t" + normalize_text(h)
            for p, h in zip(premises, hypotheses, strict=True)]


def near_duplicate_pairs(X, *, threshold: float = NEAR_THRESHOLD, max_pairs: int = MAX_PAIRS,
                         block_size: int | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pairs of rows with cosine similarity ``>= threshold`` (exact blocked search).

    Cost is quadratic in the rows (about a minute for 100k x 256 on two cores); memory is
    bounded by ``block_size`` rows x n rows of float32 similarities.

    Parameters
    ----------
    X : array of shape (n_rows, n_features)
    threshold : float in (0, 1], default 0.95
    max_pairs : int, default 1,000,000
        Raise ``ValueError`` rather than collect more pairs than this.
    block_size : int, optional
        Rows per block (default: about 64 MiB of similarities).

    Returns
    -------
    i, j : int64 arrays with ``i < j``, sorted by (i, j)
    similarity : float32 array
    """
    Xn = l2_normalize(as_matrix(X, "X"))
    threshold = check_real("threshold", threshold, low=0.0, high=1.0, low_open=True)
    n = len(Xn)
    rows = block_size or max(1, min(4096, 16 * 1024 * 1024 // max(n, 1)))
    found_i, found_j, found_s, total = [], [], [], 0
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        block = Xn[start:stop] @ Xn[start:].T
        r, c = np.nonzero(block >= threshold - _SIM_TOLERANCE)
        upper = c > r  # column offset is `start`, so this means j > i
        r, c = r[upper], c[upper]
        total += len(r)
        if total > max_pairs:
            raise ValueError(f"threshold {threshold} gives more than max_pairs={max_pairs:,} "
                             f"near-duplicate pairs; raise the threshold or max_pairs")
        found_i.append(r + start)
        found_j.append(c + start)
        found_s.append(np.minimum(block[r, c], 1.0))
    if not found_i:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    return (np.concatenate(found_i).astype(np.int64), np.concatenate(found_j).astype(np.int64),
            np.concatenate(found_s).astype(np.float32))


def _group_counts(n: int, i: np.ndarray, j: np.ndarray, rows: np.ndarray) -> dict:
    """Groups, redundant rows and pairs among ``rows`` (positions) for the edges (i, j)."""
    inside = np.zeros(n, dtype=bool)
    inside[rows] = True
    keep = inside[i] & inside[j]
    i, j = i[keep], j[keep]
    if len(i) == 0:
        return {"n_rows": int(len(rows)), "n_groups": 0, "n_rows_in_groups": 0,
                "n_duplicate_rows": 0, "n_pairs": 0}
    graph = sp.coo_matrix((np.ones(len(i), dtype=np.int8), (i, j)), shape=(n, n))
    _, comp = connected_components(graph, directed=False)
    linked = np.zeros(n, dtype=bool)
    linked[i] = linked[j] = True
    n_linked = int(linked.sum())
    n_groups = int(len(np.unique(comp[linked])))
    return {"n_rows": int(len(rows)), "n_groups": n_groups, "n_rows_in_groups": n_linked,
            "n_duplicate_rows": n_linked - n_groups, "n_pairs": int(len(i))}


def _exact_counts(codes: np.ndarray, rows: np.ndarray) -> dict:
    """Groups, redundant rows and pairs of identical keys among ``rows`` (positions)."""
    counts = np.bincount(codes[rows]) if len(rows) else np.zeros(0, dtype=np.int64)
    counts = counts[counts > 1]
    return {"n_rows": int(len(rows)), "n_groups": int(len(counts)),
            "n_rows_in_groups": int(counts.sum()),
            "n_duplicate_rows": int((counts - 1).sum()),
            "n_pairs": int((counts * (counts - 1) // 2).sum())}


@dataclass
class DuplicateReport:
    """Output of :func:`find_duplicates`.

    Attributes
    ----------
    summary : DataFrame
        One row per ``scope`` (before/after) and ``kind`` (exact/near): ``n_rows``,
        ``n_groups`` (groups of two or more rows), ``n_rows_in_groups``, ``n_duplicate_rows``
        (rows in groups minus groups: redundant copies), ``n_pairs`` (duplicate pairs;
        for exact duplicates every pair inside a group) and ``share`` (duplicate rows / rows).
    exact_groups : DataFrame
        Rows that have an exact duplicate before filtering: ``group``, ``row_id``,
        ``retained`` and ``normalized_text``; sorted by group, then input order.
    near_pairs : DataFrame
        ``row_id_a``, ``row_id_b``, ``similarity``, ``retained_a``, ``retained_b``; empty when
        Φ was not given.
    params : dict
    """

    summary: pd.DataFrame
    exact_groups: pd.DataFrame
    near_pairs: pd.DataFrame
    params: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-friendly summary (counts and parameters, without the listings)."""
        return {"params": self.params, "summary": self.summary.to_dict(orient="records")}


def find_duplicates(hypotheses: Sequence[str], *, premises: Sequence[str] | None = None,
                    X=None, retained_mask=None, row_ids=None,
                    threshold: float = NEAR_THRESHOLD, max_pairs: int = MAX_PAIRS
                    ) -> DuplicateReport:
    """Exact (normalised text) and near (cosine on Φ) duplicates, before vs after.

    Parameters
    ----------
    hypotheses : sequence of str
        The hypothesis (or single) text of each row.
    premises : sequence of str, optional
        With premises, an exact duplicate needs the same premise *and* hypothesis.
    X : array of shape (n_rows, n_features), optional
        Φ; without it near duplicates are not computed.
    retained_mask : bool array of shape (n_rows,), optional
        True for rows AFLite kept; without it only ``before`` is reported.
    row_ids : array of shape (n_rows,), optional
        Reported in the listings (default: positions).
    threshold : float in (0, 1], default 0.95
        Near duplicates: cosine similarity at least this.
    max_pairs : int, default 1,000,000
        Near duplicates: refuse (``ValueError``) to collect more pairs.

    Returns
    -------
    DuplicateReport
    """
    n = len(hypotheses)
    keys = exact_duplicate_keys(hypotheses, premises)
    if row_ids is None:
        row_ids = np.arange(n)
    row_ids = np.asarray(row_ids)
    if row_ids.shape != (n,):
        raise ValueError(f"row_ids must have shape ({n},); got {row_ids.shape}")
    if retained_mask is not None:
        retained = np.asarray(retained_mask)
        if retained.dtype != bool or retained.shape != (n,):
            raise ValueError(f"retained_mask must be a boolean array of shape ({n},); got "
                             f"dtype {retained.dtype}, shape {retained.shape}")
    else:
        retained = np.ones(n, dtype=bool)
    if X is not None and len(X) != n:
        raise ValueError(f"X must have one row per text ({n}); got {len(X)} rows")

    scopes = {"before": np.arange(n)}
    if retained_mask is not None:
        scopes["after"] = np.flatnonzero(retained)
    codes, _ = pd.factorize(pd.Series(keys, dtype=object))
    edges: dict[str, tuple[np.ndarray, np.ndarray] | None] = {"exact": None}
    near = pd.DataFrame({"row_id_a": row_ids[:0], "row_id_b": row_ids[:0],
                         "similarity": np.zeros(0, np.float32), "retained_a": np.zeros(0, bool),
                         "retained_b": np.zeros(0, bool)})
    if X is not None:
        ni, nj, sims = near_duplicate_pairs(X, threshold=threshold, max_pairs=max_pairs)
        edges["near"] = (ni, nj)
        near = pd.DataFrame({"row_id_a": row_ids[ni], "row_id_b": row_ids[nj],
                             "similarity": sims, "retained_a": retained[ni],
                             "retained_b": retained[nj]})
    records = []
    for scope, rows in scopes.items():
        for kind, pair in edges.items():
            counts = _exact_counts(codes, rows) if pair is None else _group_counts(n, *pair, rows)
            share = counts["n_duplicate_rows"] / counts["n_rows"] if counts["n_rows"] else 0.0
            records.append({"scope": scope, "kind": kind, **counts, "share": float(share)})
    summary = pd.DataFrame.from_records(records)

    group_size = np.bincount(codes)
    dup = np.flatnonzero(group_size[codes] > 1)
    dup = dup[np.lexsort((dup, codes[dup]))]
    _, group = np.unique(codes[dup], return_inverse=True)
    exact_groups = pd.DataFrame({"group": group.astype(np.int64), "row_id": row_ids[dup],
                                 "retained": retained[dup],
                                 "normalized_text": [keys[k] for k in dup]})
    params = {"threshold": float(threshold), "near": X is not None,
              "pairs": premises is not None, "n_rows": int(n),
              "n_retained": int(retained.sum()) if retained_mask is not None else None}
    return DuplicateReport(summary=summary, exact_groups=exact_groups, near_pairs=near,
                           params=params)


# --- registry entry -------------------------------------------------------------------


def _duplicates(ctx: MeasureContext) -> MeasureResult:
    hyps, prems = ctx.texts()
    ctx.progress(0.0, "exact and near duplicates")
    result = find_duplicates(
        hyps, premises=prems, X=ctx.X, retained_mask=ctx.keep, row_ids=ctx.row_ids,
        **MEASURE.check_params(ctx.params, n_rows=len(ctx.keep)),
    )
    return MeasureResult(
        tables={
            "duplicates_exact.parquet": result.exact_groups,
            "duplicates_near.parquet": result.near_pairs,
        },
        documents={"duplicates.json": result.to_dict()},
        info={"params": result.params},
    )


def _duplicate_tables(run) -> dict[str, pd.DataFrame]:
    data = run.read_json("duplicates.json")
    if not data or not data.get("summary"):
        return {}
    summary = pd.DataFrame(data["summary"])
    wide = summary.pivot_table(
        index="kind", columns="scope", values=["n_duplicate_rows", "share"], aggfunc="first"
    )
    wide.columns = [f"{stat} {scope}" for stat, scope in wide.columns]
    order = [
        c
        for c in (
            "n_duplicate_rows before",
            "n_duplicate_rows after",
            "share before",
            "share after",
        )
        if c in wide
    ]
    return {"Duplicates before vs after": wide[order].reset_index()}


#: Columns of the ``summary`` records of ``duplicates.json`` the figure and report read.
SUMMARY_COLUMNS = {"scope", "kind", "share"}


def _duplicate_figures(run) -> list:
    """Share of redundant copies (exact and near) before vs after."""
    _, table = stored_summary(run, "duplicates", "duplicates.json", SUMMARY_COLUMNS)
    if table is None:
        return []
    chart = go.Figure()
    for scope, part in table.groupby("scope", sort=False):
        chart.add_trace(go.Bar(name=chart_text(scope), x=[chart_text(k) for k in part["kind"]],
                               y=part["share"],
                               marker_color=SET_COLORS.get(str(scope), PALETTE[0])))
    chart.update_layout(barmode="group", title="Share of redundant copies before vs after",
                        yaxis_title="duplicate rows / rows")
    return [chart]


MEASURE = Measure(
    name="duplicates",
    label="Duplicates (exact and near, before vs after)",
    compute=_duplicates,
    default=False,
    order=50,
    tables=_duplicate_tables,
    figures=_duplicate_figures,
    files=("duplicates.json", "duplicates_exact.parquet", "duplicates_near.parquet"),
    options=(
        Option(
            "threshold",
            "Near-duplicate similarity",
            0.95,
            minimum=0.8,
            maximum=1.0,
            help="Two rows are near duplicates when the cosine "
            "similarity of their Φ is at least this.",
        ),
        Option("max_pairs", "Near duplicates: pairs kept at most", MAX_PAIRS, minimum=1,
               maximum=100_000_000, form=False,
               help="The near-duplicate pairs stored (the most similar first)."),
    ),
)
