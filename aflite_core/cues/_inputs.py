"""What the cue statistics read of an ``AuditDataset``: its texts, labels and train/test split
(:func:`dataset_inputs`), re-exported by :mod:`aflite_core.cues.statistics`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aflite_core.splits import Split, resolve_split

__all__ = ["CueInputs", "dataset_inputs"]


@dataclass
class CueInputs:
    """Texts, labels and split read from a dataset (and an optional test dataset)."""

    hypotheses: list[str] | None  # None: read without the texts (``texts=False``)
    premises: list[str] | None
    labels: np.ndarray
    split: Split
    in_dataset: np.ndarray  # bool: True for rows of the main dataset (False: test file)
    row_ids: np.ndarray     # row_id of each example (of its own dataset)


def dataset_inputs(dataset, test=None, *, test_size: float = 0.2,
                   groups: Sequence | None = None, random_state: int | None = 0,
                   texts: bool = True) -> CueInputs:
    """Read texts, labels and the train/test split from an ``AuditDataset``.

    Parameters
    ----------
    dataset : AuditDataset
        Included rows only. Its split column decides the test rows unless ``test`` is
        given; without a usable split column a seeded stratified hold-out is used.
    test : AuditDataset, optional
        A second file whose included rows are the test rows (``dataset`` is then all
        training rows).
    test_size : float, default 0.2
        Share of each label held out by the hold-out.
    groups : sequence, optional
        Group per included row of ``dataset`` (e.g. its premise): the hold-out keeps the rows
        of one group on one side. Ignored when a split column or ``test`` decides.
    random_state : int or None, default 0
        Seed of the hold-out.
    texts : bool, default True
        Read the texts. False: ``hypotheses`` and ``premises`` are None (a table made from
        features already extracted needs the labels and the split only: at 1M SNLI rows the
        two lists of str were 0.23 GB).
    """
    for name, value in (("dataset", dataset), ("test", test)):
        if value is not None and not all(
            hasattr(value, attr) for attr in ("hypotheses", "premises", "labels", "splits")
        ):
            raise TypeError(f"{name}: expected an AuditDataset, got {type(value).__name__}")
    hyps = list(dataset.hypotheses()) if texts else None
    prems = dataset.premises() if texts else None
    labels = _label_objects(dataset)
    row_ids = np.asarray(dataset.row_ids())
    if test is None:
        split = resolve_split(dataset.splits(), labels, groups=groups, test_size=test_size,
                              random_state=random_state)
        return CueInputs(hyps, list(prems) if prems is not None else None, labels, split,
                         np.ones(len(labels), dtype=bool), row_ids)
    test_hyps = list(test.hypotheses()) if texts else None
    test_prems = test.premises() if texts else None
    premises = None
    if prems is not None and test_prems is not None:
        premises = list(prems) + list(test_prems)
    test_labels = _label_objects(test)
    n_train, n_test = len(labels), len(test_labels)
    in_dataset = np.r_[np.ones(n_train, dtype=bool), np.zeros(n_test, dtype=bool)]
    test_name = getattr(test, "name", "test file")
    split = Split(in_dataset.copy(), ~in_dataset, "file",
                  f"second file: train = {getattr(dataset, 'name', 'data')} ({n_train} rows), "
                  f"test = {test_name} ({n_test} rows)")
    return CueInputs(
        hyps + test_hyps if texts else None, premises,
        np.r_[labels, test_labels], split, in_dataset,
        np.r_[row_ids.astype(object), np.asarray(test.row_ids()).astype(object)],
    )


def _label_objects(dataset) -> np.ndarray:
    """The included rows' labels as an object array of str, one str object per distinct
    label where the dataset gives them so (``label_objects``: 8 bytes a row, where
    ``labels().astype(object)`` made a str per row)."""
    if hasattr(dataset, "label_objects"):
        return np.asarray(dataset.label_objects(), dtype=object)
    return np.asarray(dataset.labels(), dtype=object)
