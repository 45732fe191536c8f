"""The synthetic demo as a dataset: the paper's biased circles with their features.

:func:`aflite_core.synthetic.make_biased_circles` returns numbers; the dashboard needs an
:class:`~aflite_core.datasets.AuditDataset` (rows to show and export) and the features Φ (an
``.npy`` file the *precomputed* representation reads). This module builds both, in the
session's private folder.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ui import cache

LABELS = np.array(["outer circle", "inner circle"])


def demo_frame(X: np.ndarray, y: np.ndarray, biased: np.ndarray,
               flipped: np.ndarray) -> pd.DataFrame:
    """The rows of the demo: a readable text, the label, the coordinates, the planted flags."""
    text = [f"point ({a:+.3f}, {b:+.3f})" for a, b in X[:, :2]]
    frame = pd.DataFrame({"text": text, "label": LABELS[y]})
    frame["x"] = X[:, 0].round(4)
    frame["y"] = X[:, 1].round(4)
    for j in range(2, X.shape[1]):
        frame[f"bias_{j - 1}"] = X[:, j].round(4)
    frame["planted_bias"] = biased
    frame["flipped_label"] = flipped
    return frame


def make_demo(n: int, seed: int, folder: Path) -> tuple[Any, Path]:
    """Generate ``n`` biased-circle rows; return the dataset and the features file.

    Parameters
    ----------
    n : int
        Rows.
    seed : int
        ``random_state`` of the generator.
    folder : pathlib.Path
        Where the ``.npy`` features are written (the session's private folder).
    """
    synthetic = cache.core("synthetic")
    X, y, biased, flipped = synthetic.make_biased_circles(n, flip=0.05, random_state=seed)
    frame = demo_frame(X, y, biased, flipped)
    buffer = io.BytesIO()
    frame.to_csv(buffer, index=False)
    name = f"biased_circles_n{n}_seed{seed}.csv"
    dataset = cache.core("datasets").load_dataset(buffer.getvalue(), name=name,
                                                  hypothesis="text", label="label")
    features = Path(folder) / f"biased_circles_n{n}_seed{seed}.npy"
    np.save(features, np.ascontiguousarray(X, dtype=np.float32), allow_pickle=False)
    return dataset, features
