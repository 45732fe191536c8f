"""Planted-bias data generators: the benchmark workload and the paper's synthetic experiment.

* :func:`make_planted` — the standard AFLite workload: Gaussian noise features, and a share of
  rows whose label can be read off a class-specific shift in a few dimensions. Generated in
  float32 row chunks (no float64 intermediate), optionally straight into a memory-mapped
  ``.npy`` file, so 550,000 x 768 rows need no more than the output array.
* :func:`make_biased_circles` — the synthetic experiment of Le Bras et al. (ICML 2020, Sec. 3):
  two concentric circles (not linearly separable) plus class-specific Gaussian "bias" features
  on 75% of each class, noise features on the rest, and optionally flipped labels.
"""

from __future__ import annotations

import io
import numbers
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["make_biased_circles", "make_planted"]


def _check_count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {value!r}")
    return int(value)


def _check_fraction(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in [0, 1]; got {value!r}")
    return float(value)


def make_planted(
    n: int = 20000,
    d: int = 256,
    *,
    classes: int = 3,
    biased: float = 0.4,
    bias_dims: int = 8,
    strength: float = 2.0,
    random_state: int | np.random.Generator | None = 0,
    out: np.ndarray | None = None,
    chunk_rows: int = 65536,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features with a planted, linearly readable label bias on a share of the rows.

    Every feature is standard normal noise. A row is *biased* with probability ``biased``;
    biased rows get ``shift[y]`` added to their first ``bias_dims`` features, where ``shift``
    is a fixed random ``(classes, bias_dims)`` matrix scaled by ``strength``. A linear model
    predicts biased rows well and the rest at chance, so a good AFLite removes mostly biased
    rows.

    Same distribution as ``../shared/bench/make_planted.py``, but drawn directly in float32
    (the random stream differs, so the arrays are not bit-identical to that script's).

    Parameters
    ----------
    n, d : int
        Rows and feature columns.
    classes : int, default=3
    biased : float, default=0.4
        Probability that a row carries the bias.
    bias_dims : int, default=8
        Dimensions carrying the class shift (at most ``d``).
    strength : float, default=2.0
        Scale of the class shifts.
    random_state : int, Generator or None, default=0
    out : ndarray of shape (n, d), float32, optional
        Array to fill, e.g. ``np.lib.format.open_memmap(path, "w+", np.float32, (n, d))``;
        returned as ``X``.
    chunk_rows : int, default=65536
        Rows generated per step (bounds the temporary memory; does not change the result).

    Returns
    -------
    X : ndarray of shape (n, d), float32
    y : ndarray of shape (n,), int64
        Labels in ``0 .. classes - 1``.
    biased_mask : ndarray of shape (n,), bool
    """
    n = _check_count("n", n, 1)
    d = _check_count("d", d, 1)
    classes = _check_count("classes", classes, 2)
    bias_dims = _check_count("bias_dims", bias_dims, 1)
    if bias_dims > d:
        raise ValueError(f"bias_dims must be at most d={d}; got {bias_dims}")
    biased = _check_fraction("biased", biased)
    chunk_rows = _check_count("chunk_rows", chunk_rows, 1)
    if out is not None and (out.shape != (n, d) or out.dtype != np.float32):
        raise ValueError(
            f"out must be a float32 array of shape {(n, d)}; got {out.dtype} {out.shape}"
        )
    rng = np.random.default_rng(random_state)
    y = rng.integers(0, classes, n)
    mask = rng.random(n) < biased
    shift = (rng.standard_normal((classes, bias_dims)) * strength).astype(np.float32)
    X = np.empty((n, d), dtype=np.float32) if out is None else out
    for start in range(0, n, chunk_rows):
        stop = min(n, start + chunk_rows)
        if X.flags.c_contiguous:
            view = X[start:stop]
            rng.standard_normal(dtype=np.float32, out=view)
        else:
            view = X[start:stop]
            view[...] = rng.standard_normal((stop - start, d), dtype=np.float32)
        rows = np.flatnonzero(mask[start:stop])
        view[rows, :bias_dims] += shift[y[start + rows]]
    return X, y, mask


def make_biased_circles(
    n_samples: int = 2000,
    *,
    n_bias_features: int = 2,
    separation: float = 3.0,
    biased: float = 0.75,
    flip: float = 0.0,
    noise: float = 0.05,
    factor: float = 0.5,
    random_state: int | np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The synthetic experiment of Le Bras et al. (2020): circles plus planted bias features.

    The first two columns place each row on one of two concentric circles (label 0: outer
    circle of radius 1, label 1: inner circle of radius ``factor``, Gaussian jitter
    ``noise``): learnable by a non-linear model (e.g. an RBF SVM), not by a linear one. The
    remaining ``n_bias_features`` columns are the *bias*: for ``biased`` (75%) of each class
    they are drawn from a class-specific Gaussian, ``N(mu_y, I)`` with
    ``|mu_0 - mu_1| = separation``, so a linear model reads the label off them; for the other
    rows they are class-independent noise ``N(0, I)``.

    ``flip`` is the share of the biased rows whose label is flipped (the paper does this on its
    most separated set so that even the RBF kernel cannot be perfect). A flipped row keeps its
    position on the circle of the *original* class, while its bias features follow its (new)
    label like every biased row: the bias makes it easy, the task says it is wrong, so AFLite
    should remove it.

    Parameters
    ----------
    n_samples : int, default=2000
        Total rows, split evenly between the two classes.
    n_bias_features : int, default=2
    separation : float, default=3.0
        Distance between the two classes' bias-feature means.
    biased : float, default=0.75
        Share of each class carrying the class-specific bias features.
    flip : float, default=0.0
        Share of the biased rows with a flipped label.
    noise : float, default=0.05
        Standard deviation of the jitter on the circles.
    factor : float, default=0.5
        Radius of the inner circle (outer radius 1).
    random_state : int, Generator or None

    Returns
    -------
    X : ndarray of shape (n_samples, 2 + n_bias_features), float32
    y : ndarray of shape (n_samples,), int64
    biased_mask : ndarray of shape (n_samples,), bool
    flipped_mask : ndarray of shape (n_samples,), bool
    """
    n_samples = _check_count("n_samples", n_samples, 4)
    n_bias_features = _check_count("n_bias_features", n_bias_features, 1)
    biased = _check_fraction("biased", biased)
    flip = _check_fraction("flip", flip)
    if not 0 < factor < 1:
        raise ValueError(f"factor must be in (0, 1); got {factor!r}")
    rng = np.random.default_rng(random_state)

    circle = np.repeat([0, 1], [n_samples - n_samples // 2, n_samples // 2])
    angle = rng.uniform(0, 2 * np.pi, n_samples)
    radius = np.where(circle == 0, 1.0, factor)
    xy = np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    xy += rng.normal(scale=noise, size=xy.shape)

    biased_mask = np.zeros(n_samples, dtype=bool)
    for c in (0, 1):
        members = np.flatnonzero(circle == c)
        chosen = rng.choice(members, size=round(biased * len(members)), replace=False)
        biased_mask[chosen] = True
    flipped_mask = np.zeros(n_samples, dtype=bool)
    biased_rows = np.flatnonzero(biased_mask)
    n_flip = round(flip * len(biased_rows))
    if n_flip:
        flipped_mask[rng.choice(biased_rows, size=n_flip, replace=False)] = True
    y = np.where(flipped_mask, 1 - circle, circle).astype(np.int64)

    direction = rng.standard_normal(n_bias_features)
    direction /= np.linalg.norm(direction)
    means = np.stack([-direction, direction]) * (separation / 2.0)
    bias = rng.standard_normal((n_samples, n_bias_features))
    bias[biased_mask] += means[y[biased_mask]]
    X = np.hstack([xy, bias]).astype(np.float32)
    order = rng.permutation(n_samples)
    return X[order], y[order], biased_mask[order], flipped_mask[order]


#: Label names of the biased-circles demo dataset.
CIRCLE_LABELS = np.array(["outer circle", "inner circle"])


def biased_circles_frame(X: np.ndarray, y: np.ndarray, biased: np.ndarray,
                         flipped: np.ndarray) -> pd.DataFrame:
    """The rows of the circles demo: a readable text, the label, the coordinates, the flags.

    Parameters
    ----------
    X, y, biased, flipped : np.ndarray
        The output of :func:`make_biased_circles`.
    """
    text = [f"point ({a:+.3f}, {b:+.3f})" for a, b in X[:, :2]]
    frame = pd.DataFrame({"text": text, "label": CIRCLE_LABELS[y]})
    frame["x"] = X[:, 0].round(4)
    frame["y"] = X[:, 1].round(4)
    for j in range(2, X.shape[1]):
        frame[f"bias_{j - 1}"] = X[:, j].round(4)
    frame["planted_bias"] = biased
    frame["flipped_label"] = flipped
    return frame


def biased_circles_dataset(n: int, *, random_state: int = 0, flip: float = 0.05):
    """The paper's biased circles as an audit dataset, with its features Φ.

    Parameters
    ----------
    n : int
        Rows.
    random_state : int
        Seed of :func:`make_biased_circles`.
    flip : float
        Share of labels flipped.

    Returns
    -------
    dataset : AuditDataset
        Named ``biased_circles_n{n}_seed{random_state}.csv``; text column ``text``.
    X : np.ndarray
        float32 features, one row per dataset row (for the *precomputed* representation).
    """
    from aflite_core.io import load_dataset  # lazy: +141 ms to import

    X, y, biased, flipped = make_biased_circles(n, flip=flip, random_state=random_state)
    buffer = io.BytesIO()
    biased_circles_frame(X, y, biased, flipped).to_csv(buffer, index=False)
    name = f"biased_circles_n{n}_seed{random_state}.csv"
    dataset = load_dataset(buffer.getvalue(), name=name, hypothesis="text", label="label")
    return dataset, np.ascontiguousarray(X, dtype=np.float32)
