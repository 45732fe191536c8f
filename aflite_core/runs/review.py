"""A review queue: the rows of one set the product shows, in the order to review them, and
what a reviewer needs to see of each (the dashboard's Review page reads it).

Sources (:data:`SOURCES`): the flagged label issues, lowest label quality first; AFLite's
removed rows, most predictable first; the rows of a stored slice, of a map region or of a
saved subset, in input order. :func:`row_card` gives a row's texts, label, suggested label,
the scores that flagged it, and its nearest rows in Φ with their labels (from the run's
compact Φ; on the map for a run made before it was kept);
:func:`undo` takes a reviewer's last decision on a row back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from aflite_core.measures import member_mask
from aflite_core.represent import nearest_codes
from aflite_core.runs._search import phi_codes
from aflite_core.runs.decisions import all_decisions, decide
from aflite_core.runs.folder import AuditRun
from aflite_core.runs.subsets import list_subsets, load_subset

__all__ = ["SOURCES", "available_sources", "review_queue", "row_card", "source_keys", "undo"]

#: What a queue can be made of, as the page offers it.
SOURCES = {"label_issues": "Label issues (lowest label quality first)",
           "removed": "Rows AFLite removed (most predictable first)",
           "slice": "A slice (why-removed)",
           "region": "A map region",
           "subset": "A saved subset"}
#: Neighbours shown per row.
NEIGHBOURS = 5


def _label_issues(run: AuditRun) -> pd.DataFrame:
    """``label_issues.parquet``, read once per opened run: the Review page asks for it on
    every rerun, and the table of a finished run never changes (kept on the run object, as
    the run keeps its scores)."""
    kept = run.__dict__.get("_review_label_issues")
    if kept is None:
        kept = run.__dict__["_review_label_issues"] = run.read_parquet("label_issues.parquet")
    return kept


def available_sources(run: AuditRun) -> list[str]:
    """The sources this run can make a queue of (label issues only when it has them, a
    slice or region only when it stored some, subsets only when one is saved)."""
    out = []
    if run.has("label_issues.parquet"):
        out.append("label_issues")
    if int(run.sizes.get("removed", 0) or 0) > 0:
        out.append("removed")
    out += [s for s in ("slice", "region", "subset") if source_keys(run, s)]
    return out


def source_keys(run: AuditRun, source: str) -> list[tuple[str, str]]:
    """The choices within a source (``(key, label)``): the stored slices, the map's regions,
    the saved subsets; ``[]`` for a source that needs none."""
    if source == "slice" and run.has("slices_members.parquet"):
        members = run.read_parquet("slices_members.parquet",  # not the member bits
                                   columns=["slice_id", "rank", "n_rows"]).sort_values("rank")
        described = {}
        if run.has("slices.parquet"):
            table = run.read_parquet("slices.parquet")
            described = dict(zip(table["slice_id"].astype(str), table["description"],
                                 strict=False))
        return [(str(s), f"{described.get(str(s), s)} ({int(n):,} rows)")
                for s, n in zip(members["slice_id"], members["n_rows"], strict=True)]
    if source == "region" and run.has("map_regions.parquet"):
        regions = run.read_parquet("map_regions.parquet")
        return [(str(int(r)), f"{name} ({int(n):,} rows)")
                for r, name, n in zip(regions["region"], regions["name"], regions["rows"],
                                      strict=True)]
    if source == "subset":
        return [(s.name, f"{s.name} ({s.n_rows:,} rows)") for s in list_subsets(run)]
    return []


def review_queue(run: AuditRun, source: str, key: str | None = None) -> np.ndarray:
    """The row ids of a queue, in review order.

    Raises
    ------
    ValueError
        An unknown source, a source the run lacks (no label issues, no map), or a key that is
        not among :func:`source_keys`.
    """
    if source not in SOURCES:
        raise ValueError(f"source: expected one of {', '.join(SOURCES)}, got {source!r}")
    ids = run.score_columns(["row_id"])["row_id"].to_numpy()
    if source == "label_issues":
        if not run.has("label_issues.parquet"):
            raise ValueError(f"run {run.name} has no label issues: audit it with the label "
                             "issues measure")
        table = _label_issues(run)
        flagged = table[table["is_label_issue"].astype(bool)]
        return flagged.sort_values("label_quality", kind="stable")["row_id"].to_numpy()
    if source == "removed":
        scores = run.score_columns(["row_id", "status", "predictability"])
        removed = scores[scores["status"].astype(str) == "removed"]
        return removed.sort_values("predictability", ascending=False,
                                   kind="stable")["row_id"].to_numpy()
    if key is None:
        raise ValueError(f"{SOURCES[source]}: choose which one")
    if source == "slice":
        try:
            return ids[member_mask(run, key)]
        except LookupError as exc:
            raise ValueError(str(exc)) from None
    if source == "region":
        if not run.has("projection.parquet"):
            raise ValueError(f"run {run.name} has no map")
        projection = run.read_parquet("projection.parquet")
        return projection["row_id"].to_numpy()[projection["region"].to_numpy() == int(key)]
    return np.asarray(load_subset(run, key).row_ids)


def row_card(run: AuditRun, row_id: Any) -> dict[str, Any]:
    """What a reviewer sees of a row: ``texts`` (column -> value: premise and hypothesis),
    ``label``, ``status``, ``predictability``, ``suggested_label``, ``label_quality``,
    ``is_label_issue`` (None without label issues), ``decision`` in force, and
    ``neighbours`` (its nearest rows in Φ: row id, similarity, label, hypothesis; on the map,
    with their distance there, for a run made before the compact Φ was kept) and
    ``neighbours_in`` (``"phi"`` or ``"map"``)."""
    columns = run.input.get("columns") or {}
    scores = run.score_columns(["row_id", "status", "predictability", "label"])
    position = np.flatnonzero(scores["row_id"].to_numpy() == row_id)
    if not len(position):
        raise ValueError(f"row_id {row_id!r} is not a row of run {run.name}")
    i = int(position[0])
    text_columns = [c for c in (columns.get("premise"), columns.get("hypothesis")) if c]
    rows = run.frame_rows(np.array([i]), text_columns)
    card: dict[str, Any] = {
        "row_id": row_id, "texts": {c: str(rows[c].iloc[0]) for c in text_columns},
        "label": str(scores["label"].iloc[i]), "status": str(scores["status"].iloc[i]),
        "predictability": float(scores["predictability"].iloc[i]),
        "suggested_label": None, "label_quality": None, "is_label_issue": None,
        "decision": None, "neighbours": [], "neighbours_in": "phi"}
    if run.has("label_issues.parquet"):
        issues = _label_issues(run)
        hit = issues[issues["row_id"] == row_id]
        if len(hit):
            card.update(suggested_label=str(hit["suggested_label"].iloc[0]),
                        label_quality=float(hit["label_quality"].iloc[0]),
                        is_label_issue=bool(hit["is_label_issue"].iloc[0]))
    force = run.decisions()
    mine = force[force["row_id"] == row_id]
    if len(mine):
        card["decision"] = {k: mine[k].iloc[0] for k in ("decision", "label", "note",
                                                         "reviewer")}
    card["neighbours"] = _phi_neighbours(run, row_id, scores)
    if card["neighbours"] is None:  # no compact Φ in the run: the map's neighbourhood
        card["neighbours"], card["neighbours_in"] = _map_neighbours(run, row_id, scores), "map"
    return card


def _phi_neighbours(run: AuditRun, row_id: Any, scores: pd.DataFrame) -> list[dict] | None:
    """The row's nearest rows in Φ by cosine (of the compact Φ), or None without one."""
    found = phi_codes(run)
    if found is None:
        return None
    ids, codes, norms = found.row_ids, found.codes, found.norms
    at = np.flatnonzero(ids == row_id)
    if not len(at):
        return []  # a row Φ does not cover (excluded)
    rows, similarity = nearest_codes(codes, codes[at[0]], NEIGHBOURS, exclude=int(at[0]),
                                     norms=norms)
    return _neighbour_rows(run, scores, ids[rows], "similarity",
                           [round(float(s), 3) for s in similarity])


def _map_neighbours(run: AuditRun, row_id: Any, scores: pd.DataFrame) -> list[dict]:
    if not run.has("projection.parquet"):
        return []
    projection = run.projection  # kept by the run (the map's table): read once
    ids = projection["row_id"].to_numpy()
    at = np.flatnonzero(ids == row_id)
    if not len(at):
        return []
    xy = projection[["x", "y"]].to_numpy(dtype=np.float64)
    distance = np.hypot(*(xy - xy[at[0]]).T)
    distance[at[0]] = np.inf
    k = min(NEIGHBOURS, len(distance) - 1)
    if k < 1:
        return []
    nearest = np.argpartition(distance, k - 1)[:k]  # the k nearest, then in order
    nearest = nearest[np.argsort(distance[nearest], kind="stable")]
    return _neighbour_rows(run, scores, ids[nearest], "distance",
                           [float(d) for d in distance[nearest]])


def _neighbour_rows(run: AuditRun, scores: pd.DataFrame, ids: np.ndarray, measure: str,
                    values: list[float]) -> list[dict]:
    """The neighbours as the card lists them: row id, ``measure`` (similarity or distance),
    label and hypothesis, read at the rows' positions (no index of every row's id)."""
    hypothesis = (run.input.get("columns") or {}).get("hypothesis")
    positions = pd.Index(scores["row_id"]).get_indexer(ids)
    labels = scores["label"].to_numpy()
    texts = run.frame_rows(positions, [hypothesis]) if hypothesis else None
    return [{"row_id": row_id, measure: value,
             "label": str(labels[p]) if p >= 0 else "",
             "text": str(texts[hypothesis].iloc[i]) if texts is not None else ""}
            for i, (row_id, value, p) in enumerate(zip(ids, values, positions, strict=True))]


def undo(run: AuditRun, row_id: Any, *, reviewer: str = "") -> str:
    """Take the last decision on ``row_id`` back: the decision before it is in force again
    (recorded anew), or none (a ``revert``). Returns the decision now in force, or ``""``."""
    history = all_decisions(run)
    mine = history[history["row_id"] == row_id]
    if mine.empty:
        return ""
    earlier = mine.iloc[:-1]
    if earlier.empty or earlier["decision"].iloc[-1] == "revert":
        decide(run, [row_id], "revert", reviewer=reviewer)
        return ""
    last = earlier.iloc[-1]
    decide(run, [row_id], str(last["decision"]),
           label=last["label"] if last["decision"] == "relabel" else None,
           note=str(last["note"] or ""), reviewer=str(last["reviewer"] or reviewer))
    return str(last["decision"])


#: Reviews of a queue before a bulk action on the rest of it is offered.
MIN_REVIEWS_FOR_BULK = 30


def wilson_interval(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a share ``hits / n`` (``(nan, nan)`` for ``n = 0``)."""
    if n <= 0:
        return float("nan"), float("nan")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def flag_precision(run: AuditRun) -> dict[str, Any] | None:
    """What reviews say of the label-issue flags: among reviewed flagged rows, how many were
    relabelled (the flags' observed precision) and how many to the suggested label, each with
    its 95 % Wilson interval; None without label issues or a reviewed flagged row."""
    if not run.has("label_issues.parquet"):
        return None
    force = run.decisions()
    if force.empty:
        return None
    issues = _label_issues(run).set_index("row_id")
    reviewed = force.set_index("row_id").join(issues, how="inner")
    flagged = reviewed[reviewed["is_label_issue"].astype(bool)]
    if flagged.empty:
        return None
    relabelled = flagged[flagged["decision"] == "relabel"]
    suggested = int((relabelled["label"].astype(str)
                     == relabelled["suggested_label"].astype(str)).sum())
    n = len(flagged)
    return {"reviewed": n, "relabelled": len(relabelled), "to_suggested": suggested,
            "precision": len(relabelled) / n,
            "precision_interval": wilson_interval(len(relabelled), n),
            "suggestion_precision": suggested / n,
            "suggestion_interval": wilson_interval(suggested, n)}


def bulk_offer(run: AuditRun, ids: np.ndarray) -> dict[str, Any]:
    """What a bulk action on the queue's unreviewed rows would do, from the reviews so far:
    ``reviewed``, ``remaining`` (their row ids), and per action (``drop``; with label issues
    ``relabel`` to the suggested label) the share of reviewed rows decided that way with its
    95 % interval. ``offered`` is False before :data:`MIN_REVIEWS_FOR_BULK` reviews."""
    force = run.decisions()
    decided = force[force["row_id"].isin(ids)] if len(force) else force
    remaining = ids[~np.isin(ids, decided["row_id"].to_numpy())] if len(decided) else ids
    n = len(decided)
    actions = {"drop": int((decided["decision"] == "drop").sum()) if n else 0}
    suggested = None
    if run.has("label_issues.parquet"):
        issues = _label_issues(run).set_index("row_id")
        if n:
            joined = decided.set_index("row_id").join(issues, how="left")
            actions["relabel"] = int(((joined["decision"] == "relabel")
                                      & (joined["label"].astype(str)
                                         == joined["suggested_label"].astype(str))).sum())
        suggested = issues["suggested_label"].reindex(remaining)
    return {"reviewed": n, "remaining": remaining, "offered": n >= MIN_REVIEWS_FOR_BULK,
            "suggested": suggested,
            "actions": {k: {"share": v / n if n else float("nan"),
                            "interval": wilson_interval(v, n)} for k, v in actions.items()}}
