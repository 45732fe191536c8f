"""Many linear classifiers trained at once: the inner loop of AFLite.

An AFLite round trains one linear classifier per random partition of the current set S and
scores the held-out rows. Training ``m`` models independently costs ``m`` passes over the
training rows plus ``m`` d x d covariance estimates (``m * t * d**2`` flops); this module trains
all of them with work that is shared between the partitions:

* a **label-free** scatter matrix (count, column sums, Gram matrix) of the current set S,
  maintained across rounds by subtracting the rows that AFLite removes (``k * d**2`` per round
  instead of ``|S| * d**2``) and factorised once per round;
* the per-partition **class sums over the training rows**, for all partitions in one matrix
  product per class: ``(m x n_c) @ (n_c x d)``;
* one **prediction pass** ``X_S @ W`` with the margins of all partitions stacked as columns.

The classifier is linear discriminant analysis (LDA): class means from the partition's training
rows only, a covariance shared by the partitions of the round. The covariance is the total
(label-free) covariance of S with the partition's between-class scatter removed by a rank
``C - 1`` Woodbury update, so it estimates the within-class covariance without ever reading a
held-out label. Held-out *features* enter only through that unsupervised covariance estimate,
never through a class mean, so a held-out row's label cannot leak into the model that scores it.

The functions working on a block of rows (:func:`row_stats`, :func:`partition_class_sums`,
:func:`count_correct`) are pure functions of their inputs, so the local and the Dask backend of
:class:`aflite_core.filter.AFLite` call the very same code and get bit-identical results.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg

from aflite_core.represent import add_rows, is_partitioned

__all__ = [
    "FIT_BLOCK_ROWS",
    "PartitionLDA",
    "ScatterStats",
    "count_correct",
    "covariance_factor",
    "fit_lda_partitions",
    "fit_partition_lda",
    "heldout_stats",
    "partition_class_sums",
    "row_stats",
]

#: Up to this many classes the within-class correction (a C x C system per partition) is used;
#: above it the shared total covariance of S is used as is.
MAX_CLASSES_WITHIN_CORRECTION = 64
#: Up to this many classes predictions use the C - 1 margins against class 0 (fewer columns in
#: the prediction pass); above it full logits are computed in row chunks and arg-maxed.
MAX_CLASSES_MARGINS = 16
_LOGIT_CHUNK_ELEMENTS = 1 << 22
PREDICT_CHUNK_ROWS = 2048


@dataclass
class ScatterStats:
    """Label-free sufficient statistics of a set of rows: count, column sums and Gram matrix.

    All accumulated in float64. ``add`` and ``subtract`` combine the statistics of disjoint row
    sets, which is how AFLite keeps the statistics of the shrinking set S up to date.
    """

    n: int
    total: np.ndarray
    gram: np.ndarray

    @classmethod
    def zeros(cls, n_features: int) -> ScatterStats:
        """Statistics of the empty set in ``n_features`` dimensions."""
        return cls(0, np.zeros(n_features), np.zeros((n_features, n_features)))

    def add(self, n: int, total: np.ndarray, gram: np.ndarray) -> None:
        """Add the statistics of ``n`` more rows (in place)."""
        self.n += int(n)
        self.total += total
        self.gram += gram

    def subtract(self, n: int, total: np.ndarray, gram: np.ndarray) -> None:
        """Remove the statistics of ``n`` rows that belong to the set (in place)."""
        self.n -= int(n)
        self.total -= total
        self.gram -= gram

    def covariance(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and (biased) covariance of the rows, float64."""
        if self.n < 1:
            raise ValueError("covariance of an empty set is undefined")
        mean = self.total / self.n
        cov = self.gram / self.n
        cov -= np.outer(mean, mean)
        return mean, cov


def row_stats(Xb: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """Count, column sums and Gram matrix of the rows of a block.

    Parameters
    ----------
    Xb : ndarray of shape (n_rows, n_features), float32
        Rows of the (already centred) feature matrix.

    Returns
    -------
    n : int
    total : ndarray of shape (n_features,), float64
    gram : ndarray of shape (n_features, n_features), float32
        The float32 product ``Xb.T @ Xb``; accumulate several in float64
        (:meth:`ScatterStats.add` does).
    """
    d = Xb.shape[1]
    if Xb.shape[0] == 0:
        return 0, np.zeros(d), np.zeros((d, d), dtype=np.float32)
    return Xb.shape[0], Xb.sum(axis=0, dtype=np.float64), Xb.T @ Xb


def partition_class_sums(
    Xb: np.ndarray, class_bounds: np.ndarray, train: np.ndarray
) -> np.ndarray:
    """Per-partition, per-class sums of the training rows of a block.

    Parameters
    ----------
    Xb : ndarray of shape (n_rows, n_features), float32
        Rows of the block, ordered by class: rows ``class_bounds[c]:class_bounds[c + 1]`` have
        class ``c``.
    class_bounds : ndarray of shape (n_classes + 1,), int
        Offsets of each class's segment in ``Xb``.
    train : ndarray of shape (n_partitions, n_rows), bool
        ``train[j, i]`` is True when row ``i`` is a training row of partition ``j``.

    Returns
    -------
    ndarray of shape (n_partitions, n_classes, n_features), float32
    """
    m = train.shape[0]
    n_classes = len(class_bounds) - 1
    out = np.zeros((m, n_classes, Xb.shape[1]), dtype=np.float32)
    for c in range(n_classes):
        lo, hi = int(class_bounds[c]), int(class_bounds[c + 1])
        if hi > lo:
            out[:, c, :] = train[:, lo:hi].astype(np.float32) @ Xb[lo:hi]
    return out


@dataclass
class PartitionLDA:
    """``n_partitions`` linear discriminants over ``n_classes`` classes, stacked.

    Scores are ``(x - shift) @ coef[j, c] + intercept[j, c]``; the predicted class of partition
    ``j`` is the arg-max over ``c``. A class absent from a partition's training rows gets a copy
    of a present class's scores minus one, so it is never predicted.

    Attributes
    ----------
    coef : ndarray of shape (n_partitions, n_classes, n_features), float32
    intercept : ndarray of shape (n_partitions, n_classes), float32
    shift : ndarray of shape (n_features,), float32
        The centring subtracted from raw features before scoring (see :meth:`predict`).
    """

    coef: np.ndarray
    intercept: np.ndarray
    shift: np.ndarray
    _margins: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @property
    def n_partitions(self) -> int:
        return self.coef.shape[0]

    @property
    def n_classes(self) -> int:
        return self.coef.shape[1]

    def margins(self) -> tuple[np.ndarray, np.ndarray]:
        """Score differences against class 0, stacked for one prediction GEMM.

        Returns
        -------
        coef : ndarray of shape (n_features, (n_classes - 1) * n_partitions), float32
            Column ``(c - 1) * n_partitions + j`` holds ``coef[j, c] - coef[j, 0]``.
        intercept : ndarray of shape ((n_classes - 1) * n_partitions,), float32
        """
        if self._margins is None:
            m, c, d = self.coef.shape
            dc = (self.coef[:, 1:, :] - self.coef[:, :1, :]).transpose(1, 0, 2)
            di = (self.intercept[:, 1:] - self.intercept[:, :1]).T
            self._margins = (
                np.ascontiguousarray(dc.reshape((c - 1) * m, d).T),
                np.ascontiguousarray(di.reshape(-1)),
            )
        return self._margins

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Scores of every partition's model, shape (n_rows, n_partitions, n_classes)."""
        Xc = np.asarray(X, dtype=np.float32) - self.shift
        m, c, d = self.coef.shape
        scores = Xc @ self.coef.reshape(m * c, d).T + self.intercept.reshape(-1)
        return scores.reshape(len(Xc), m, c)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted class codes of every partition's model, shape (n_rows, n_partitions)."""
        return self.decision_function(X).argmax(axis=2)


def _factor_psd(cov: np.ndarray, reg: float) -> tuple:
    """Cholesky factor of ``cov + lam * I`` with ``lam = reg * mean variance`` (grown if needed)."""
    d = cov.shape[0]
    scale = float(np.trace(cov)) / d
    if not np.isfinite(scale) or scale <= 0:
        scale = 1.0
    lam = max(reg, 1e-12) * scale
    for _ in range(8):
        a = cov.copy()
        a.flat[:: d + 1] += lam
        try:
            return linalg.cho_factor(a, lower=True, overwrite_a=True, check_finite=False)
        except linalg.LinAlgError:
            lam *= 100.0
    raise np.linalg.LinAlgError("covariance of the current set could not be factorised")


def covariance_factor(stats: ScatterStats, *, reg: float = 1e-3) -> tuple:
    """Cholesky factor of the regularised covariance of S, as :func:`fit_partition_lda` uses it.

    It depends on the label-free statistics only, so it can be computed as soon as S is known
    (for instance while the next round's partitions are drawn) and passed as ``factor``.

    Parameters
    ----------
    stats : ScatterStats
        Label-free statistics of the current set S (centred features).
    reg : float, default=1e-3
        Ridge added to the covariance, relative to the mean feature variance.

    Returns
    -------
    tuple
        ``scipy.linalg.cho_factor`` output for ``cov + lam * I``.
    """
    _, cov = stats.covariance()
    return _factor_psd(cov, reg)


def fit_partition_lda(
    stats: ScatterStats | None,
    sums: np.ndarray,
    counts: np.ndarray,
    *,
    shift: np.ndarray | None = None,
    reg: float = 1e-3,
    within_class: bool = True,
    factor: tuple | None = None,
) -> PartitionLDA:
    """Fit one LDA per partition from shared scatter statistics and per-partition class sums.

    Parameters
    ----------
    stats : ScatterStats or None
        Label-free statistics of the current set S (centred features); may be None when
        ``factor`` is given.
    sums : ndarray of shape (n_partitions, n_classes, n_features)
        Sum of the training rows of each class in each partition (centred features).
    counts : ndarray of shape (n_partitions, n_classes), int
        Number of training rows of each class in each partition.
    shift : ndarray of shape (n_features,), optional
        The centring already subtracted from the features (kept on the model for
        :meth:`PartitionLDA.predict`); zeros when omitted.
    reg : float, default=1e-3
        Ridge added to the covariance, relative to the mean feature variance.
    within_class : bool, default=True
        Remove each partition's between-class scatter from the shared covariance (Woodbury,
        rank ``C - 1``). Skipped above ``MAX_CLASSES_WITHIN_CORRECTION`` classes.
    factor : tuple, optional
        ``covariance_factor(stats, reg=reg)`` computed beforehand (``stats`` and ``reg`` are
        then not used); computed here when omitted.

    Returns
    -------
    PartitionLDA
    """
    sums = np.asarray(sums, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    m, n_classes, d = sums.shape
    if factor is None:
        if stats is None:
            raise ValueError("fit_partition_lda needs stats or a precomputed factor; got neither")
        factor = covariance_factor(stats, reg=reg)

    present = counts > 0
    n_train = counts.sum(axis=1, keepdims=True)
    if np.any(n_train == 0):
        raise ValueError("every partition needs at least one training row")
    mu = sums / np.where(present, counts, 1.0)[:, :, None]
    pi = counts / n_train
    # V = A^-1 mu for every partition and class: one triangular solve with m * C right sides.
    V = linalg.cho_solve(factor, mu.reshape(m * n_classes, d).T, check_finite=False)
    V = V.T.reshape(m, n_classes, d)
    W = V
    if within_class and 1 < n_classes <= MAX_CLASSES_WITHIN_CORRECTION:
        W = _within_class_correction(mu, V, pi)

    log_pi = np.log(np.where(present, pi, 1.0))
    intercept = -0.5 * (W * mu).sum(axis=2) + log_pi
    coef = W
    if not present.all():
        coef = W.copy()
        for j in np.flatnonzero(~present.all(axis=1)):
            ref = int(np.flatnonzero(present[j])[0])
            coef[j, ~present[j]] = W[j, ref]
            intercept[j, ~present[j]] = intercept[j, ref] - 1.0
    if shift is None:
        shift = np.zeros(d, dtype=np.float32)
    return PartitionLDA(
        coef=np.ascontiguousarray(coef, dtype=np.float32),
        intercept=np.ascontiguousarray(intercept, dtype=np.float32),
        shift=np.asarray(shift, dtype=np.float32),
    )


def _within_class_correction(mu: np.ndarray, V: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """``(A - B_j)^-1 mu_j`` from ``V = A^-1 mu`` with ``B_j`` the between-class scatter.

    ``B_j = U U^T`` with ``U = (mu_j - mean_j) * sqrt(pi_j)`` (rank C - 1); Woodbury gives
    ``(A - U U^T)^-1 = A^-1 + A^-1 U K^-1 U^T A^-1`` with ``K = I - U^T A^-1 U`` (C x C).
    ``K``'s eigenvalues are floored so the correction stays bounded when the shared covariance
    barely exceeds the between-class scatter.
    """
    n_classes = mu.shape[1]
    pi_row = pi[:, None, :]
    mean = pi_row @ mu  # (m, 1, d)
    amean = pi_row @ V  # A^-1 mean_j
    sq = np.sqrt(pi)[:, :, None]
    U = (mu - mean) * sq
    AU = (V - amean) * sq
    K = np.eye(n_classes)[None] - U @ AU.transpose(0, 2, 1)
    K = (K + K.transpose(0, 2, 1)) / 2.0
    evals, evecs = np.linalg.eigh(K)
    evals = np.maximum(evals, 1e-3)
    k_inv = (evecs / evals[:, None, :]) @ evecs.transpose(0, 2, 1)
    utv = U @ V.transpose(0, 2, 1)  # U^T A^-1 mu, (m, C_u, C_mu)
    return V + (k_inv @ utv).transpose(0, 2, 1) @ AU


def count_correct(
    Xb: np.ndarray, class_bounds: np.ndarray, heldout: np.ndarray, model: PartitionLDA
) -> np.ndarray:
    """For each row of a block, the number of partitions that hold it out and predict it right.

    A prediction is right when the row's class scores strictly higher than every other class
    (exact ties, which have probability zero for continuous features, count as wrong).

    Parameters
    ----------
    Xb : ndarray of shape (n_rows, n_features), float32
        Centred rows ordered by class (see :func:`partition_class_sums`).
    class_bounds : ndarray of shape (n_classes + 1,), int
    heldout : ndarray of shape (n_partitions, n_rows), bool
    model : PartitionLDA

    Returns
    -------
    ndarray of shape (n_rows,), int32
    """
    return _heldout_kernel(Xb, class_bounds, heldout, model, gold_prob=False)[0]


def heldout_stats(
    Xb: np.ndarray, class_bounds: np.ndarray, heldout: np.ndarray, model: PartitionLDA
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`count_correct` plus the gold-label probability of every held-out prediction.

    The probability of class ``c`` under partition ``j`` is the softmax of the partition's
    linear class scores, ``exp(s_c) / sum_k exp(s_k)``: the LDA posterior (the scores are the
    log class densities plus the log class priors, up to a constant shared by the classes).
    It is computed as ``1 / (1 + sum_{k != gold} exp(s_k - s_gold))``, which cannot overflow
    into NaN. The correct counts are exactly those of :func:`count_correct` (same margins,
    same comparisons); the probabilities add a few element-wise passes over the margins.

    Parameters
    ----------
    Xb, class_bounds, heldout, model
        As for :func:`count_correct`.

    Returns
    -------
    correct : ndarray of shape (n_rows,), int32
        As :func:`count_correct`.
    prob_sum : ndarray of shape (n_rows,), float64
        Sum over the partitions holding the row out of its gold-label probability.
    prob_m2 : ndarray of shape (n_rows,), float64
        Sum over the same partitions of the squared deviation of that probability from its
        mean over them (two-pass, so a constant probability gives exactly 0). The mean is
        ``prob_sum / n`` and the population variance ``prob_m2 / n`` for ``n`` held-out
        partitions.
    """
    return _heldout_kernel(Xb, class_bounds, heldout, model, gold_prob=True)


def _gold_stats(prob: np.ndarray, heldout: np.ndarray, out_sum: np.ndarray,
                out_m2: np.ndarray) -> None:
    """Masked sum and two-pass squared deviations over partitions (axis 0) of ``prob``.

    ``prob`` (float32, ``(m, rows)``) is overwritten.
    """
    mask = heldout.astype(np.float32)  # float factors multiply faster than booleans
    np.multiply(prob, mask, out=prob)
    total = prob.sum(axis=0, dtype=np.float32)
    mean = total / np.maximum(mask.sum(axis=0, dtype=np.float32), 1.0)
    prob -= mean
    np.multiply(prob, mask, out=prob)
    out_sum[:] = total
    out_m2[:] = np.einsum("ij,ij->j", prob, prob)


def _heldout_kernel(Xb, class_bounds, heldout, model, *, gold_prob: bool):
    """Correct counts (and, with ``gold_prob``, gold-probability sums) of a block."""
    n_rows = Xb.shape[0]
    m, n_classes = model.n_partitions, model.n_classes
    prob_sum = np.zeros(n_rows) if gold_prob else None
    prob_m2 = np.zeros(n_rows) if gold_prob else None
    if n_rows == 0:
        return np.zeros(0, dtype=np.int32), prob_sum, prob_m2
    correct = np.zeros((m, n_rows), dtype=bool)
    if n_classes <= MAX_CLASSES_MARGINS:
        mcoef, mint = model.margins()
        # (C - 1, m, rows) layout, so every comparison below runs over long contiguous rows;
        # the product is taken in cache-sized row chunks, each written in that layout by BLAS
        # (coef^T @ X^T: the same sums, bit for bit, as (X @ coef)^T in the same chunks, and
        # 8 % faster than transposing the product: no temporary, no strided copy).
        margins = np.empty((mcoef.shape[1], n_rows), dtype=np.float32)
        mcoef_t = mcoef.T
        for lo in range(0, n_rows, PREDICT_CHUNK_ROWS):
            hi = min(n_rows, lo + PREDICT_CHUNK_ROWS)
            chunk = margins[:, lo:hi]
            np.matmul(mcoef_t, Xb[lo:hi].T, out=chunk)
            np.add(chunk, mint[:, None], out=chunk)
        margins = margins.reshape(n_classes - 1, m, n_rows)
        for c in range(n_classes):
            lo, hi = int(class_bounds[c]), int(class_bounds[c + 1])
            if hi == lo:
                continue
            seg = margins[:, :, lo:hi]
            if c == 0:
                top = seg[0].copy()
                for other in range(1, n_classes - 1):
                    np.maximum(top, seg[other], out=top)
                np.less(top, 0, out=correct[:, lo:hi])
            else:
                # own > every other score, class 0's score being 0: own > max(0, other margins)
                top = np.zeros(seg.shape[1:], dtype=np.float32)
                for other in range(n_classes - 1):
                    if other != c - 1:
                        np.maximum(top, seg[other], out=top)
                np.greater(seg[c - 1], top, out=correct[:, lo:hi])
            if gold_prob:
                _gold_stats(_gold_prob_margins(seg, c), heldout[:, lo:hi],
                            prob_sum[lo:hi], prob_m2[lo:hi])
    else:
        codes = np.repeat(np.arange(n_classes), np.diff(class_bounds))
        flat_coef = model.coef.reshape(m * n_classes, -1).T
        flat_int = model.intercept.reshape(-1)
        step = max(1, _LOGIT_CHUNK_ELEMENTS // (m * n_classes))
        for lo in range(0, n_rows, step):
            hi = min(n_rows, lo + step)
            scores = (Xb[lo:hi] @ flat_coef + flat_int).reshape(hi - lo, m, n_classes)
            correct[:, lo:hi] = (scores.argmax(axis=2) == codes[lo:hi, None]).T
            if gold_prob:
                own = np.take_along_axis(scores, codes[lo:hi, None, None], axis=2)
                with np.errstate(over="ignore"):
                    denom = np.exp(scores - own).sum(axis=2)
                prob = np.ascontiguousarray((1.0 / denom).T, dtype=np.float32)
                _gold_stats(prob, heldout[:, lo:hi], prob_sum[lo:hi], prob_m2[lo:hi])
    correct &= heldout
    return correct.sum(axis=0, dtype=np.int32), prob_sum, prob_m2


def _gold_prob_margins(seg: np.ndarray, c: int) -> np.ndarray:
    """Softmax probability of class ``c`` from margins against class 0, ``(m, rows)`` float32.

    ``seg[k]`` is ``s_{k+1} - s_0``; ``p_c = 1 / (1 + sum_{k != c} exp(s_k - s_c))``.
    """
    with np.errstate(over="ignore"):
        if c == 0:
            denom = np.exp(seg[0])
            for k in range(1, seg.shape[0]):
                denom += np.exp(seg[k])
        else:
            own = seg[c - 1]
            denom = np.negative(own)
            np.exp(denom, out=denom)  # class 0, whose score is 0
            tmp = np.empty_like(denom)
            for k in range(seg.shape[0]):
                if k != c - 1:
                    np.subtract(seg[k], own, out=tmp)
                    np.exp(tmp, out=tmp)
                    denom += tmp
        denom += 1.0
        return np.reciprocal(denom, out=denom)


def _mean_of_rows(X: np.ndarray, rows: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """``X[rows].mean(axis=0, dtype=float64)`` of float32 ``X`` without gathering every row
    at once (:func:`~aflite_core.represent.add_rows`, a chunk at a time: the
    same additions in the same order)."""
    if is_partitioned(X):  # summed where the rows are, the total passed along
        total = X.running_sum(rows, chunk)
    else:
        total = None
        for lo in range(0, len(rows), chunk):
            total = add_rows(total, np.asarray(X[rows[lo : lo + chunk]], dtype=np.float32),
                             chunk)
    if total is None:
        return np.full(X.shape[1], np.nan)
    return total / len(rows)


#: Rows of one block of :func:`fit_lda_partitions` (one float32 product each, accumulated in
#: float64): 64 MB of a 256-column Φ.
FIT_BLOCK_ROWS = 65_536


def fit_lda_partitions(
    X: np.ndarray,
    codes: np.ndarray,
    train: np.ndarray,
    n_classes: int | None = None,
    *,
    reg: float = 1e-3,
    within_class: bool = True,
    rows: np.ndarray | None = None,
) -> PartitionLDA:
    """Fit one LDA per partition on a whole in-memory matrix (a convenience over the kernels).

    The covariance is the label-free covariance of all rows of ``X`` (the set S), the class
    means come from each partition's training rows only.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
    codes : ndarray of shape (n_rows,), int
        Class codes in ``0 .. n_classes - 1``.
    train : ndarray of shape (n_partitions, n_rows), bool
    n_classes : int, optional
        Defaults to ``codes.max() + 1``.
    reg, within_class
        See :func:`fit_partition_lda`.
    rows : ndarray of int, optional
        Fit on ``X[rows]`` (``codes`` and ``train`` are then per row of ``X[rows]``) without
        materialising it: the rows are read :data:`FIT_BLOCK_ROWS` at a time, and their mean
        is summed chunk by chunk in the given order, the same sums as
        ``X[rows].mean(axis=0)``. For ``X`` left on a cluster's workers (``score_heldout`` at
        millions of rows) only one block of rows is ever on the driver.

    Returns
    -------
    PartitionLDA

    Notes
    -----
    The scatter and the class sums are float32 products of one block of
    :data:`FIT_BLOCK_ROWS` rows (in their order, each block's rows grouped by class)
    accumulated in float64, as AFLite's rounds accumulate theirs. Until the fifteenth session
    they were one float32 product over all rows, which needed every row in memory at once
    (2.0 GB of the 2M retained rows of the 5M-row benchmark audit); the models differ from those by
    float32 rounding only.
    """
    codes = np.asarray(codes)
    train = np.asarray(train, dtype=bool)
    if n_classes is None:
        n_classes = int(codes.max()) + 1
    if rows is None:
        X = np.asarray(X, dtype=np.float32)
        shift = X.mean(axis=0, dtype=np.float64).astype(np.float32)
        n_rows = X.shape[0]
    else:
        rows = np.asarray(rows)
        shift = _mean_of_rows(X, rows).astype(np.float32)
        n_rows = len(rows)
    d = X.shape[1]
    stats = ScatterStats.zeros(d)
    sums = np.zeros((train.shape[0], n_classes, d))
    counts = np.zeros((train.shape[0], n_classes), dtype=np.int64)
    for lo in range(0, n_rows, FIT_BLOCK_ROWS):
        hi = min(lo + FIT_BLOCK_ROWS, n_rows)
        order = np.argsort(codes[lo:hi], kind="stable")
        at = lo + order
        # the gather is a new array: centred in place, without a second copy
        Xb = np.asarray(X[at] if rows is None else X[rows[at]], dtype=np.float32)
        Xb -= shift
        bounds = np.searchsorted(codes[at], np.arange(n_classes + 1))
        tr = train[:, at]
        stats.add(*row_stats(Xb))
        sums += partition_class_sums(Xb, bounds, tr)
        counts += np.stack([tr[:, bounds[c] : bounds[c + 1]].sum(axis=1)
                            for c in range(n_classes)], 1)
        del Xb, tr
    return fit_partition_lda(stats, sums, counts, shift=shift, reg=reg, within_class=within_class)
