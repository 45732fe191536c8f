"""The audit's scores table: every input row's status, predictability, removal round and label.

:func:`build_scores` makes it from AFLite's per-row results over the filterable rows (the
pipeline then drops its other copies of them). It is held for the whole audit, so it is
compact: the statuses and labels are categoricals (a byte a row); ``RunWriter.write_scores``
writes them as strings.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from aflite_core.io import index_values, same_ids
from aflite_core.runs import STATUSES

__all__ = ["build_scores"]


def build_scores(dataset: Any, representation: Any, *, keep: np.ndarray,
                 predictability: np.ndarray, removal_round: np.ndarray,
                 unfiltered: np.ndarray | None, labels: np.ndarray
                 ) -> tuple[pd.DataFrame, np.ndarray]:
    """The scores of every row of ``dataset.frame``, and the ids of the retained rows.

    Parameters
    ----------
    dataset : AuditDataset
        The audited dataset (its frame's index gives the row ids).
    representation : Representation
        Φ of the included rows: its ``row_ids`` (checked against the dataset's included
        rows) and ``warmup_mask``.
    keep, predictability, removal_round : np.ndarray
        AFLite's results over the filterable rows (the included rows that are not warm-up).
    unfiltered : np.ndarray of bool or None
        Over the filterable rows: scored but never filtered (status ``unfiltered``).
    labels : np.ndarray
        Every frame row's label (one str object per label: ``label_objects(False)``).

    Returns
    -------
    scores : DataFrame
        ``row_id, status, predictability, removal_round, label``, one row per frame row in
        frame order; ``status`` and ``label`` categoricals with sorted categories.
    retained_ids : np.ndarray
        Row ids of the retained rows.

    Raises
    ------
    RuntimeError
        If the representation's rows are not the dataset's included rows.
    """
    frame_ids = index_values(dataset.frame.index)  # not kept on the frame's RangeIndex
    n = len(frame_ids)
    included_pos = np.flatnonzero(dataset.included_mask)
    if not same_ids(representation.row_ids, frame_ids[included_pos]):
        raise RuntimeError("representation rows do not match the dataset's included rows")
    warm = np.asarray(representation.warmup_mask, dtype=bool)
    names = np.array(sorted(STATUSES), dtype=object)  # a categorical's categories: sorted
    code = {name: i for i, name in enumerate(names)}
    # the statuses as codes, a byte a row: an object array of them and its factorisation
    # were 8 bytes and a hash table a row (0.4 GB at 5M rows)
    status = np.full(n, code["excluded"], dtype=np.int8)
    status[included_pos[warm]] = code["warmup"]
    filt_pos = included_pos[~warm]
    status[filt_pos] = np.where(keep, code["retained"], code["removed"])
    if unfiltered is not None:  # scored only (dev/test of train_only): kept as is
        status[filt_pos[unfiltered]] = code["unfiltered"]
    present = np.bincount(status, minlength=len(names)) > 0  # the statuses that occur
    scored = np.full(n, np.nan)
    scored[filt_pos] = predictability
    # int32 (the file's int64: RunWriter.write_scores): 4 bytes a row held for the audit
    rounds = np.full(n, -1, dtype=np.int32)
    rounds[filt_pos] = removal_round
    scores = pd.DataFrame({
        "row_id": frame_ids,
        "status": pd.Categorical.from_codes((np.cumsum(present) - 1).astype(np.int8)[status],
                                            names[present]),
        "predictability": scored,
        "removal_round": rounds,
        "label": pd.Categorical(labels),  # labels: one str object per label
    }, copy=False)  # the arrays made here as they are: not stacked into copies by dtype
    return scores, frame_ids[filt_pos[keep]]
