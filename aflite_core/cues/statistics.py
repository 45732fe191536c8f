"""Lexical cue statistics: ICQ's mse / jsd / cueness with PMI, LMI and z side by side.

Everything works on a sparse example-by-feature indicator matrix (see
:mod:`aflite_core.cues.linguistic`): the per-label counts of every feature come from one sparse
product ``X.T @ one_hot(labels)``, and every statistic is a vectorised function of the
``(n_features, n_labels)`` count table. Each formula is written once, in :data:`FORMULAS`
(LaTeX, plain text and source), and implemented once, below.

Train and test: the statistics compare a feature's label distribution on the training rows
``R_f`` with that on the test rows ``S_f`` (:func:`dataset_inputs`: the split column, a second
file, or a seeded stratified hold-out; :mod:`aflite_core.splits`, re-exported here).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import rel_entr

from aflite_core.cues._inputs import CueInputs as CueInputs  # re-exported
from aflite_core.cues._inputs import dataset_inputs
from aflite_core.cues.linguistic import FAMILIES, FeatureMatrix, extract_features
from aflite_core.splits import TEST_VALUES as TEST_VALUES  # re-exported
from aflite_core.splits import TRAIN_VALUES as TRAIN_VALUES  # re-exported
from aflite_core.splits import Split
from aflite_core.splits import holdout_split as holdout_split  # re-exported
from aflite_core.splits import resolve_split as resolve_split  # re-exported

#: Sort keys of the cue table; the first is the default ranking.
SORT_KEYS = ("cueness_shrunk", "cueness", "cueness_proportion", "z", "pmi", "lmi")
#: The default ranking of the cue table, the Report's cue section and the CLI.
DEFAULT_SORT = "cueness_shrunk"
#: Pseudo-rows of the shrinkage behind ``cueness_shrunk``: a feature's label shares are
#: pulled towards the training label prior as if it had this many more rows with the prior's
#: shares. Chosen on the shared SNLI train sample vs dev (benchmarks/bench_cue_ranking.py):
#: with k = 50 the curator's known artifacts (nobody, sleeping, no, cat; outdoors, outside)
#: are all in the top 15 and the, a, to are not; ICQ's count form puts the, to, for first
#: (mse grows with the count squared) and the plain proportion form ranks words seen five
#: times with one label (tournament, upcoming) above outside.
SHRINKAGE = 50.0

#: Every statistic of the cue table and of model probing, written once: ``latex`` for the
#: dashboard, ``text`` for terminals and CSV readers, ``source`` for the citation.
FORMULAS: dict[str, dict[str, str]] = {
    "mse": {
        "latex": r"\mathrm{mse}(R_f)=\frac{1}{|L|}\sum_{l\in L}\left(n_l-\bar n\right)^2,"
                 r"\quad \bar n=\frac{1}{|L|}\sum_{l\in L} n_l",
        "text": "mse = mean over labels of (n_l - mean_count)^2, n_l = training examples "
                "with the feature and label l",
        "source": "Huang & Zhu, Statistically Profiling Biases in Natural Language Reasoning "
                  "Datasets and Models (ICQ), Findings of EMNLP 2023",
    },
    "mse_proportion": {
        "latex": r"\mathrm{mse}_p(R_f)=\frac{1}{|L|}\sum_{l\in L}\left(p_l-\frac{1}{|L|}"
                 r"\right)^2,\quad p_l=\frac{n_l}{|R_f|}",
        "text": "mse_proportion = mean over labels of (p_l - 1/|L|)^2, p_l = n_l / |R_f| "
                "(shares instead of counts: rare-but-pure cues rank high)",
        "source": "share form of ICQ's mse (this project)",
    },
    "jsd": {
        "latex": r"\mathrm{JSD}(P\|Q)=\tfrac12\mathrm{KL}(P\|M)+\tfrac12\mathrm{KL}(Q\|M),"
                 r"\quad M=\tfrac12(P+Q)",
        "text": "jsd = Jensen-Shannon divergence (natural log, 0..ln 2) between the label "
                "distributions of R_f and S_f; scipy's jensenshannon returns its square root",
        "source": "Lin, Divergence measures based on the Shannon entropy, IEEE Trans. Inf. "
                  "Theory 1991; used by ICQ (Huang & Zhu 2023)",
    },
    "cueness": {
        "latex": r"\mathrm{cueness}(f)=\frac{\mathrm{mse}(R_f)}{\exp\mathrm{JSD}(R_f\|S_f)}",
        "text": "cueness = mse / exp(jsd): skewed in training and the same skew in test",
        "source": "Huang & Zhu (ICQ), Findings of EMNLP 2023",
    },
    "cueness_proportion": {
        "latex": r"\mathrm{cueness}_p(f)=\frac{\mathrm{mse}_p(R_f)}"
                 r"{\exp\mathrm{JSD}(R_f\|S_f)}",
        "text": "cueness_proportion = mse_proportion / exp(jsd)",
        "source": "share form of ICQ's cueness (this project)",
    },
    "cueness_shrunk": {
        "latex": r"\mathrm{cueness}_s(f)=\frac{\frac{1}{|L|}\sum_{l}\left(\tilde p_l-"
                 r"\frac{1}{|L|}\right)^2}{\exp\mathrm{JSD}(R_f\|S_f)},\quad \tilde p_l="
                 r"\frac{n_l+k\,\pi_l}{|R_f|+k}",
        "text": "cueness_shrunk = mse of the label shares shrunk towards the training label "
                "prior pi (k = 50 pseudo-rows), / exp(jsd). The default ranking: frequent "
                "function words with a mild skew and rare words seen 5 times both fall back",
        "source": "ICQ's cueness (Huang & Zhu 2023) on empirically-Bayes shrunk shares "
                  "(this project; measured in benchmarks/bench_cue_ranking.py)",
    },
    "pmi": {
        "latex": r"\mathrm{PMI}(f,l)=\log\frac{p(f,l)}{p(f)\,p(l)}=\log\frac{p(l\mid f)}"
                 r"{p(l)},\quad p(l\mid f)=\frac{c(f,l)+k}{n_f+k|L|},\quad p(l)=\frac{N_l}{N}",
        "text": "pmi = log p(l|f) / p(l), p(l|f) = (c(f,l) + k) / (n_f + k|L|) (add-k on "
                "the joint counts), p(l) = share of label l among training examples; counts "
                "are training examples with the feature",
        "source": "Gururangan et al., Annotation Artifacts in Natural Language Inference "
                  "Data, NAACL 2018 (add-100 smoothing on training hypotheses)",
    },
    "lmi": {
        "latex": r"\mathrm{LMI}(f,l)=p(f,l)\,\log\frac{p(l\mid f)}{p(l)},\quad "
                 r"p(f,l)=\frac{c(f,l)}{N}",
        "text": "lmi = p(f,l) * log(p(l|f) / p(l)); p(f,l) = c(f,l) / N and p(l) = N_l / N "
                "over the N training examples (Schuster et al. count word occurrences; "
                "with per-example presence this rescales LMI by a constant)",
        "source": "Schuster et al., Towards Debiasing Fact Verification Models, EMNLP 2019",
    },
    "z": {
        "latex": r"z(f,l)=\frac{\hat p(l\mid f)-p_0}{\sqrt{p_0(1-p_0)/n_f}},\quad "
                 r"p_0=\frac{1}{|L|}",
        "text": "z = (p_hat - p0) / sqrt(p0 (1 - p0) / n), p_hat = n_l / n, n = training "
                "examples with the feature, p0 = 1/|L|",
        "source": "Gardner et al., Competency Problems: On Finding and Removing Artifacts "
                  "in Language Data, EMNLP 2021",
    },
    "z_threshold": {
        "latex": r"z^{*}=\Phi^{-1}\!\left(1-\frac{\alpha}{m}\right)",
        "text": "z_threshold = one-sided normal quantile at alpha / m (Bonferroni), m = "
                "number of (feature, label) tests = qualifying features x labels",
        "source": "Gardner et al. 2021 (Bonferroni-corrected significance of z)",
    },
    "accuracy_delta": {
        "latex": r"\Delta(f)=\mathrm{acc}(S_f)-\mathrm{acc}(S_{\neg f})",
        "text": "delta = model accuracy on test examples with the feature minus accuracy on "
                "test examples without it",
        "source": "Huang & Zhu (ICQ) accuracy test, Findings of EMNLP 2023",
    },
    "distribution_test": {
        "latex": r"\mathrm{JSD}\big(P_{\mathrm{pred}}(\tilde S_f)\,\|\,P(R_f)\big)",
        "text": "S_f flattened (seeded replication of every label but the most frequent "
                "until balanced); the model's predicted label distribution on it vs the "
                "label distribution of R_f, and their JSD",
        "source": "Huang & Zhu (ICQ) distribution test, Findings of EMNLP 2023",
    },
}

# --------------------------------------------------------------------------------------
# statistics on a (n_features, n_labels) count table
# --------------------------------------------------------------------------------------


def label_counts(X: sp.spmatrix, label_codes: np.ndarray, n_labels: int,
                 rows: np.ndarray | None = None) -> np.ndarray:
    """Per-feature label counts: ``X.T @ one_hot(labels)`` over the selected rows.

    Parameters
    ----------
    X : sparse matrix, shape (n_examples, n_features)
        0/1 indicators.
    label_codes : np.ndarray of int, shape (n_examples,)
        Label index per example, in ``range(n_labels)``.
    n_labels : int
    rows : np.ndarray of bool, optional
        Only count these examples.

    Returns
    -------
    np.ndarray of int64, shape (n_features, n_labels)
    """
    n = X.shape[0]
    weight = np.ones(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    onehot = sp.csr_matrix((weight, (np.arange(n), label_codes)), shape=(n, n_labels))
    counts = sp.csr_matrix(X, dtype=np.int64).T @ onehot
    return np.asarray(counts.toarray(), dtype=np.int64)


def split_label_counts(X: sp.spmatrix, label_codes: np.ndarray, n_labels: int, split: Split
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature label counts on the training and on the test rows, in one product.

    ``X.T @ [one_hot(labels) * train | one_hot(labels) * test]``; returns two
    ``(n_features, n_labels)`` arrays.
    """
    codes = np.asarray(label_codes, dtype=np.int64)
    side = np.where(split.train, 0, np.where(split.test, 1, -1))
    rows = np.flatnonzero(side >= 0)
    targets = sp.csr_matrix(
        (np.ones(rows.size, dtype=np.int64), (rows, side[rows] * n_labels + codes[rows])),
        shape=(X.shape[0], 2 * n_labels),
    )
    counts = np.asarray((sp.csr_matrix(X, dtype=np.int64).T @ targets).toarray())
    return counts[:, :n_labels], counts[:, n_labels:]


def _shares(counts: np.ndarray) -> np.ndarray:
    total = counts.sum(axis=1, keepdims=True).astype(float)
    return np.divide(counts, total, out=np.zeros(counts.shape, dtype=float), where=total > 0)


def mse_counts(counts: np.ndarray) -> np.ndarray:
    """ICQ's mse of each row of label counts (see ``FORMULAS['mse']``)."""
    c = np.asarray(counts, dtype=float)
    return ((c - c.mean(axis=1, keepdims=True)) ** 2).mean(axis=1)


def mse_proportions(counts: np.ndarray) -> np.ndarray:
    """mse of each row of label shares (see ``FORMULAS['mse_proportion']``)."""
    return mse_counts(_shares(np.asarray(counts)))


def shrunk_shares(counts: np.ndarray, prior: np.ndarray, *,
                  strength: float = SHRINKAGE) -> np.ndarray:
    """Label shares of each row pulled towards ``prior`` by ``strength`` pseudo-rows:
    ``(n_l + k * prior_l) / (n + k)``."""
    c = np.asarray(counts, dtype=float)
    prior = np.asarray(prior, dtype=float)
    prior = prior / prior.sum() if prior.sum() > 0 else np.full(c.shape[1], 1 / c.shape[1])
    return (c + strength * prior) / (c.sum(axis=1, keepdims=True) + strength)


def mse_shrunk(counts: np.ndarray, prior: np.ndarray, *,
               strength: float = SHRINKAGE) -> np.ndarray:
    """mse of the shrunk label shares (see ``FORMULAS['cueness_shrunk']``)."""
    return mse_counts(shrunk_shares(counts, prior, strength=strength))


def jensen_shannon(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence (natural log) between rows of ``p`` and ``q``.

    Rows are normalised to sum to one; the result lies in ``[0, ln 2]``. This is the
    square of ``scipy.spatial.distance.jensenshannon``.
    """
    p, q = _shares(np.atleast_2d(p)), _shares(np.atleast_2d(q))
    m = 0.5 * (p + q)
    return 0.5 * rel_entr(p, m).sum(axis=1) + 0.5 * rel_entr(q, m).sum(axis=1)


def cueness(mse: np.ndarray, jsd: np.ndarray) -> np.ndarray:
    """ICQ's cueness ``mse / exp(jsd)`` (see ``FORMULAS['cueness']``)."""
    return np.asarray(mse, dtype=float) / np.exp(np.asarray(jsd, dtype=float))


def pmi(counts: np.ndarray, label_totals: np.ndarray, *, smoothing: float = 100.0
        ) -> np.ndarray:
    """Add-k smoothed PMI of every (feature, label) cell (``FORMULAS['pmi']``).

    Parameters
    ----------
    counts : np.ndarray, shape (n_features, n_labels)
        Training examples with the feature, per label.
    label_totals : np.ndarray, shape (n_labels,)
        Training examples per label (all examples, not only those with a feature).
    smoothing : float
        k. Adding k to every cell of the joint table gives
        ``p(l|f) = (c(f,l) + k) / (n_f + k|L|)``, as in Gururangan et al. (2018).
    """
    c = np.asarray(counts, dtype=float)
    totals = np.asarray(label_totals, dtype=float)
    n_f = c.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_l_given_f = (c + smoothing) / (n_f + smoothing * c.shape[1])
        p_l = totals / totals.sum()
        return np.log(p_l_given_f / p_l[None, :])


def lmi(counts: np.ndarray, label_totals: np.ndarray) -> np.ndarray:
    """LMI of every (feature, label) cell (``FORMULAS['lmi']``).

    ``p(f,l)`` and ``p(l)`` are shares of all training examples (``label_totals`` per
    label). Cells with a zero count are 0 (the limit of p log p).
    """
    c = np.asarray(counts, dtype=float)
    totals = np.asarray(label_totals, dtype=float)
    n = totals.sum()
    if n == 0:
        return np.zeros_like(c)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = (c / n) * np.log(_shares(c) / (totals / n)[None, :])
    return np.where(c > 0, values, 0.0)


def z_statistic(counts: np.ndarray, prior: np.ndarray | None = None) -> np.ndarray:
    """Gardner et al.'s z of every (feature, label) cell (``FORMULAS['z']``).

    Parameters
    ----------
    counts : np.ndarray, shape (n_features, n_labels)
        Examples with the feature, per label.
    prior : np.ndarray, shape (n_labels,), optional
        ``p0`` per label. Default: uniform ``1/|L|`` (Gardner et al.; the cue table). The
        Z-filter (:mod:`aflite_core.filter._zfilter`) passes the empirical label shares, so
        label imbalance alone flags no feature.

    Rows with no examples give NaN; labels whose prior is 0 or 1 give NaN or infinities.
    """
    c = np.asarray(counts, dtype=float)
    n = c.sum(axis=1, keepdims=True)
    if prior is None:
        p0 = 1.0 / c.shape[1]
    else:
        p0 = np.asarray(prior, dtype=float)
        if p0.shape != (c.shape[1],):
            raise ValueError(f"prior: expected shape ({c.shape[1]},) (one share per label), "
                             f"got {p0.shape}")
        p0 = p0 / p0.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        return (c / n - p0) / np.sqrt(p0 * (1 - p0) / n)


def z_threshold(n_tests: int, *, alpha: float = 0.01) -> float:
    """Bonferroni-corrected one-sided threshold for z (``FORMULAS['z_threshold']``)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a probability in (0, 1), got {alpha!r}")
    from scipy.stats import norm  # noqa: PLC0415 - scipy.stats costs 0.3 s to import; only here

    return float(norm.isf(alpha / max(int(n_tests), 1)))


# --------------------------------------------------------------------------------------
# the cue table
# --------------------------------------------------------------------------------------


def encode_label_codes(labels: Sequence, label_order: Sequence | None) -> tuple[np.ndarray, list]:
    y = np.asarray(labels, dtype=object)
    order = list(label_order) if label_order is not None else sorted(pd.unique(y), key=str)
    index = {lab: k for k, lab in enumerate(order)}
    try:
        codes = np.fromiter((index[v] for v in y), dtype=np.int64, count=len(y))
    except KeyError as exc:
        raise ValueError(f"labels: value {exc.args[0]!r} is not in label_order {order}") \
            from None
    return codes, order




def cue_statistics(
    features: FeatureMatrix,
    labels: Sequence,
    split: Split,
    *,
    min_count: int = 5,
    pmi_smoothing: float = 100.0,
    alpha: float = 0.01,
    sort_by: str = DEFAULT_SORT,
    label_order: Sequence | None = None,
    also: np.ndarray | None = None,
) -> pd.DataFrame:
    """The cue table of precomputed features (the plain-input core of :func:`cue_table`).

    Parameters
    ----------
    features, labels : FeatureMatrix, sequence
        Indicator matrix, one row per example, and each example's gold label.
    split : Split
        Training and test rows (see :func:`aflite_core.splits.resolve_split`).
    min_count : int
        A feature qualifies when it occurs in at least this many training rows *and* at
        least this many test rows.
    pmi_smoothing, alpha : float
        k of the add-k smoothed PMI; family-wise level of the z test (Bonferroni).
    sort_by : {'cueness_shrunk', 'cueness', 'cueness_proportion', 'z', 'pmi', 'lmi'}
        Descending sort key (default :data:`DEFAULT_SORT`; see :data:`SHRINKAGE` for why).
    label_order : sequence, optional
        Label order of the per-label columns; default: sorted labels.
    also : ndarray of bool, optional
        Features to list even below ``min_count`` (e.g. the cues of the full data, in the
        retained rows): their counts are given, ``supported`` is False and their statistics
        are NaN, so a reader sees "below minimum support (n = 4)" rather than a missing row.

    Returns
    -------
    pandas.DataFrame
        One row per qualifying feature; columns ``feature_type, feature, n_train, n_test,
        train_<label>..., test_<label>..., majority_label, majority_share, mse,
        mse_proportion, jsd, cueness, cueness_proportion, pmi_label, pmi, lmi_label, lmi,
        z_label, z, z_significant, pmi_<label>..., lmi_<label>..., z_<label>...``.
        ``attrs`` records labels, the split, thresholds and the feature methods.

    Examples
    --------
    >>> from aflite_core import cue_statistics
    >>> from aflite_core.cues.linguistic import extract_features
    >>> from aflite_core.splits import resolve_split
    >>> hyps = ["nobody sleeps", "a man eats"] * 40
    >>> labels = ["contradiction", "entailment"] * 40
    >>> split = resolve_split(["train"] * 60 + ["test"] * 20, labels)
    >>> table = cue_statistics(extract_features(hyps, features=("word",), cache=False), labels,
    ...                        split)
    >>> table.set_index("feature").loc[["nobody", "a"], "majority_label"].tolist()
    ['contradiction', 'entailment']
    """
    _check_cue_arguments(features, labels, split, min_count=min_count,
                         pmi_smoothing=pmi_smoothing, sort_by=sort_by)
    codes, order = encode_label_codes(labels, label_order)
    train_counts, test_counts = split_label_counts(features.X, codes, len(order), split)
    counts = CueCounts(train_counts, test_counts, features.feature_type, features.feature,
                       features.text, dict(features.methods), dict(features.unavailable))
    return statistics_from_counts(
        counts, np.bincount(codes[split.train], minlength=len(order)), split, labels=order,
        min_count=min_count, pmi_smoothing=pmi_smoothing, alpha=alpha, sort_by=sort_by,
        also=also)


@dataclass
class CueCounts:
    """Per-feature label counts on the training and the test rows: all the cue statistics
    read of a :class:`~aflite_core.cues.linguistic.FeatureMatrix` and its rows' labels.

    Attributes
    ----------
    train, test : np.ndarray of int64, shape (n_features, n_labels)
        Rows having the feature, per label, among the training / test rows.
    feature_type, feature : np.ndarray of str, shape (n_features,)
        Family and value of each feature.
    text, methods, unavailable
        As in ``FeatureMatrix``: the text read, how each family was computed, why a family
        could not be.
    """

    train: np.ndarray
    test: np.ndarray
    feature_type: np.ndarray
    feature: np.ndarray
    text: str = "hypothesis"
    methods: dict[str, str] | None = None
    unavailable: dict[str, str] | None = None


def statistics_from_counts(
    counts: CueCounts,
    label_totals: np.ndarray,
    split: Split,
    *,
    labels: Sequence,
    min_count: int = 5,
    pmi_smoothing: float = 100.0,
    alpha: float = 0.01,
    sort_by: str = DEFAULT_SORT,
    also: np.ndarray | None = None,
) -> pd.DataFrame:
    """The cue table of per-feature count tables (what :func:`cue_statistics` computes once
    it has counted; the map-reduce of :mod:`aflite_core.cues.count_tables` sums the counts
    of row chunks instead).

    Parameters
    ----------
    counts : CueCounts
    label_totals : np.ndarray of int, shape (n_labels,)
        Training rows per label.
    split : Split
        The rows the counts were taken on (its sizes and description go into ``attrs``).
    labels : sequence
        The labels of the count columns, in order.
    min_count, pmi_smoothing, alpha, sort_by, also
        As in :func:`cue_statistics`.

    Returns
    -------
    pandas.DataFrame
        As :func:`cue_statistics`.
    """
    n_labels = len(labels)
    train_counts, test_counts = counts.train, counts.test
    n_train = train_counts.sum(axis=1)
    n_test = test_counts.sum(axis=1)
    supported = (n_train >= min_count) & (n_test >= min_count)
    keep = supported if also is None else supported | np.asarray(also, dtype=bool)
    names = [str(lab) for lab in labels]
    table: dict[str, object] = {
        "feature_type": counts.feature_type[keep].astype(str).astype(object),
        "feature": counts.feature[keep].astype(str).astype(object),
        "n_train": n_train[keep],
        "n_test": n_test[keep],
    }
    n_tests = int(supported.sum()) * n_labels
    threshold = z_threshold(n_tests, alpha=alpha)
    table.update(_cue_columns(train_counts[keep], test_counts[keep], label_totals, names,
                              pmi_smoothing=pmi_smoothing, z_cut=threshold))
    frame = pd.DataFrame(table)
    if also is not None:
        below = ~supported[keep]
        for column in frame.columns[4:]:
            if column.startswith(("train_", "test_")):
                continue
            if frame[column].dtype.kind == "f":
                frame.loc[below, column] = np.nan
            elif frame[column].dtype.kind == "b":
                frame[column] = frame[column].astype(object)
                frame.loc[below, column] = None
            else:
                frame.loc[below, column] = None
        frame["supported"] = ~below
    frame = frame.sort_values(
        [sort_by, "n_train", "feature_type", "feature"], ascending=[False, False, True, True],
        kind="mergesort", na_position="last",
    ).reset_index(drop=True)
    frame.attrs.update({
        "labels": names,
        "split_source": split.source,
        "split": split.description,
        "n_train_examples": int(split.train.sum()),
        "n_test_examples": int(split.test.sum()),
        "min_count": int(min_count),
        "pmi_smoothing": float(pmi_smoothing),
        "alpha": float(alpha),
        "z_threshold": threshold,
        "n_tests": n_tests,
        "n_features_extracted": int(len(counts.feature_type)),
        "text": counts.text,
        "methods": dict(counts.methods or {}),
        "unavailable": dict(counts.unavailable or {}),
    })
    return frame


def _check_cue_arguments(features: FeatureMatrix, labels: Sequence, split: Split, *,
                         min_count: int, pmi_smoothing: float, sort_by: str) -> None:
    check_cue_options(min_count=min_count, pmi_smoothing=pmi_smoothing, sort_by=sort_by)
    n = features.n_examples
    if len(labels) != n or len(split.train) != n or len(split.test) != n:
        raise ValueError(
            f"labels/split: expected {n} entries (one per feature row), got labels="
            f"{len(labels)}, train={len(split.train)}, test={len(split.test)}"
        )


def check_cue_options(*, min_count: int, pmi_smoothing: float, sort_by: str) -> None:
    """Raise ValueError when an option of the cue statistics is out of range."""
    if not isinstance(min_count, (int, np.integer)) or min_count < 1:
        raise ValueError(f"min_count: expected an integer >= 1, got {min_count!r}")
    if pmi_smoothing < 0:
        raise ValueError(f"pmi_smoothing: expected k >= 0, got {pmi_smoothing!r}")
    if sort_by not in SORT_KEYS:
        raise ValueError(f"sort_by: expected one of {list(SORT_KEYS)}, got {sort_by!r}")


def _cue_columns(tr: np.ndarray, te: np.ndarray, label_totals: np.ndarray, names: list[str],
                 *, pmi_smoothing: float, z_cut: float) -> dict[str, object]:
    """Every statistic column of the cue table, from the qualifying features' label counts.

    ``tr``/``te``: ``(n_features, n_labels)`` counts on the training / test rows;
    ``label_totals``: training examples per label; ``z_cut``: the z threshold.
    """
    n_train = tr.sum(axis=1)

    def best(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if values.shape[0] == 0:
            return np.empty(0, dtype=object), np.empty(0)
        arg = np.argmax(np.nan_to_num(values, nan=-np.inf), axis=1)
        return np.asarray(names, dtype=object)[arg], values[np.arange(len(arg)), arg]

    columns: dict[str, object] = {}
    for j, name in enumerate(names):
        columns[f"train_{name}"] = tr[:, j]
    for j, name in enumerate(names):
        columns[f"test_{name}"] = te[:, j]
    majority, majority_count = best(tr.astype(float))
    columns["majority_label"] = majority
    columns["majority_share"] = np.divide(majority_count, n_train,
                                          out=np.zeros(len(majority_count)),
                                          where=n_train > 0)
    mse, mse_p, jsd = mse_counts(tr), mse_proportions(tr), jensen_shannon(tr, te)
    mse_s = mse_shrunk(tr, label_totals)
    columns.update({"mse": mse, "mse_proportion": mse_p, "jsd": jsd,
                    "cueness": cueness(mse, jsd), "cueness_proportion": cueness(mse_p, jsd),
                    "mse_shrunk": mse_s, "cueness_shrunk": cueness(mse_s, jsd)})
    per_label = {
        "pmi": pmi(tr, label_totals, smoothing=pmi_smoothing),
        "lmi": lmi(tr, label_totals),
        "z": z_statistic(tr) if tr.shape[0] else np.zeros((0, len(names))),
    }
    for stat, values in per_label.items():
        label, value = best(values)
        columns[f"{stat}_label"] = label
        columns[stat] = value
    columns["z_significant"] = columns["z"] >= z_cut  # type: ignore[operator]
    for stat, values in per_label.items():
        for j, name in enumerate(names):
            columns[f"{stat}_{name}"] = values[:, j]
    return columns


def cue_table(
    dataset,
    *,
    features: Iterable[str] = FAMILIES,
    min_count: int = 5,
    test=None,
    text: str = "hypothesis",
    lemma: bool = False,
    sentiment_lexicon: str = "opinion",
    pmi_smoothing: float = 100.0,
    alpha: float = 0.01,
    sort_by: str = DEFAULT_SORT,
    test_size: float = 0.2,
    groups: Sequence | None = None,
    random_state: int | None = 0,
    row_ids: Sequence | None = None,
    also: Sequence[tuple[str, str]] | None = None,
    annotations: FeatureMatrix | None = None,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    n_jobs: int | None = None,
    on_missing: str = "report",
) -> pd.DataFrame:
    """The cue table of a dataset: which features give the label away, in train and test.

    A thin wrapper: reads texts, labels and the split from ``dataset`` (see
    :func:`dataset_inputs`), extracts features (:func:`aflite_core.cues.linguistic.
    extract_features`, cached on disk) and computes :func:`cue_statistics`.

    Parameters
    ----------
    dataset : AuditDataset
    features : iterable of str
        Feature families (default: all of :data:`aflite_core.cues.linguistic.FAMILIES`).
    min_count : int
        Minimum support in both train and test.
    test : AuditDataset, optional
        Second file as the test rows.
    row_ids : sequence, optional
        Restrict the table to these rows of ``dataset`` (e.g. the rows AFLite retained);
        the split is decided on the whole dataset first, so a hold-out keeps its rows.
    also : sequence of (feature_type, feature), optional
        Cues to list even below the minimum support (``supported`` False, counts given,
        statistics NaN); :func:`cue_tables` passes the first scope's cues.
    annotations : FeatureMatrix, optional
        Precomputed features for the same rows (as returned by ``extract_features`` on
        :func:`dataset_inputs`); skips extraction.
    text, lemma, sentiment_lexicon, cache, cache_dir, n_jobs, on_missing
        Passed to :func:`~aflite_core.cues.linguistic.extract_features`.
    pmi_smoothing, alpha, sort_by
        Passed to :func:`cue_statistics`.
    test_size, groups, random_state
        Hold-out parameters when there is no usable split column and no ``test`` (see
        :func:`dataset_inputs`).

    Returns
    -------
    pandas.DataFrame
        See :func:`cue_statistics`; ``attrs['split']`` says where the test rows came from.
    """
    inputs = dataset_inputs(dataset, test, test_size=test_size, groups=groups,
                            random_state=random_state, texts=annotations is None)
    if annotations is None:
        annotations = extract_features(
            inputs.hypotheses, inputs.premises, features=features, text=text,
            min_count=min_count, lemma=lemma, sentiment_lexicon=sentiment_lexicon,
            cache=cache, cache_dir=cache_dir, n_jobs=n_jobs, on_missing=on_missing,
        )
    elif annotations.n_examples != len(inputs.labels):
        raise ValueError(
            f"annotations: expected {len(inputs.labels)} rows (one per included row), got "
            f"{annotations.n_examples}"
        )
    split = inputs.split
    labels = inputs.labels
    if row_ids is not None:
        wanted = pd.Index(np.asarray(row_ids))
        keep = ~inputs.in_dataset | pd.Index(inputs.row_ids).isin(wanted)
        annotations = annotations.rows(keep)
        split = split.restrict(keep)
        labels = labels[keep]
    table = cue_statistics(
        annotations, labels, split, min_count=min_count, pmi_smoothing=pmi_smoothing,
        alpha=alpha, sort_by=sort_by, label_order=sorted(pd.unique(inputs.labels), key=str),
        also=listed_features(annotations.feature_type, annotations.feature, also),
    )
    table.attrs["dataset"] = str(getattr(dataset, "name", ""))
    return table


def cue_tables(dataset, scopes: Mapping[str, Sequence | None], **kwargs) -> pd.DataFrame:
    """Cue tables of several row subsets, stacked with a leading ``scope`` column.

    Features are extracted once. ``scopes`` maps a scope name (``full``, ``retained``) to
    the row ids it keeps, or None for all rows. Other arguments as :func:`cue_table`.
    The result is what the run folder stores as ``cues.parquet``.
    """
    if not scopes:
        raise ValueError("scopes: expected at least one scope, got none")
    annotations = kwargs.pop("annotations", None)
    if annotations is None:
        inputs = dataset_inputs(dataset, kwargs.get("test"),
                                test_size=kwargs.get("test_size", 0.2),
                                groups=kwargs.get("groups"),
                                random_state=kwargs.get("random_state", 0))
        annotations = extract_features(
            inputs.hypotheses, inputs.premises,
            features=kwargs.get("features", FAMILIES), text=kwargs.get("text", "hypothesis"),
            min_count=kwargs.get("min_count", 5), lemma=kwargs.get("lemma", False),
            sentiment_lexicon=kwargs.get("sentiment_lexicon", "opinion"),
            cache=kwargs.get("cache", True), cache_dir=kwargs.get("cache_dir"),
            n_jobs=kwargs.get("n_jobs"), on_missing=kwargs.get("on_missing", "report"),
        )
        del inputs  # the texts' lists, not held while the scopes' tables are made
    return stack_scopes(scopes, lambda _name, ids, also: cue_table(
        dataset, row_ids=ids, annotations=annotations, also=also, **kwargs))


def listed_features(feature_type: np.ndarray, feature: np.ndarray,
                    also: Sequence[tuple[str, str]] | None) -> np.ndarray | None:
    """Which features are among the ``(feature_type, feature)`` pairs of ``also`` (None when
    ``also`` is None): the ``also`` mask of :func:`cue_statistics`."""
    if also is None:
        return None
    wanted = set(map(tuple, also))
    return np.fromiter(((str(t), str(f)) in wanted for t, f in zip(
        feature_type, feature, strict=True)), dtype=bool, count=len(feature))


def stack_scopes(scopes: Mapping[str, Sequence | None],
                 table_of: Callable[[str, Sequence | None, list | None], pd.DataFrame]
                 ) -> pd.DataFrame:
    """The cue tables of ``scopes`` stacked with a leading ``scope`` column.

    ``table_of(name, row_ids, also)`` gives one scope's table; later scopes also list the first
    scope's cues (``also``) below the minimum support, with their counts, so "after" says
    "below minimum support (n = 4)", not nothing.
    """
    frames = []
    attrs: dict = {}
    first = None
    for name, ids in scopes.items():
        also = None if first is None else list(zip(first["feature_type"], first["feature"],
                                                   strict=True))
        frame = table_of(name, ids, also)
        first = frame if first is None else first
        attrs.setdefault("scopes", {})[name] = {
            "split": frame.attrs["split"], "n_train_examples": frame.attrs["n_train_examples"],
            "n_test_examples": frame.attrs["n_test_examples"], "z_threshold":
            frame.attrs["z_threshold"],
        }
        if not attrs.get("labels"):
            attrs.update({k: v for k, v in frame.attrs.items() if k != "scopes"})
        frame.insert(0, "scope", name)
        frames.append(frame)
    stacked = pd.concat(frames, ignore_index=True)
    stacked.attrs = attrs
    return stacked
