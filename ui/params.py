"""AFLite parameters as the Audit page offers them: one-line help and size-scaled defaults.

The defaults follow the scale of the data (``n`` = rows that take part in the audit):

============  ====  =====================  =====================  =======
rows n        m     train size t           slice size k           target
============  ====  =====================  =====================  =======
<= 10,000     32    50% of the set         5% of n                50%
<= 100,000    64    50% of the set         2.5% of n              50%
> 100,000     64    min(50,000, n/10)      min(10,000, n/50)      1/3
============  ====  =====================  =====================  =======

The last row is the AFLite paper's SNLI setting (m=64, t=50k, k=10k, target 182k of 550k);
tau is 0.75 throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: One-line explanation of each parameter (shown as widget help).
HELP = {
    "target_size": "How many rows AFLite keeps at most; it never goes below this size.",
    "n_partitions": "m: random train/held-out splits per round; more gives steadier scores.",
    "train_size": "t: rows each split trains on; the rest of the current set is held out.",
    "slice_size": "k: at most this many of the most predictable rows are removed per round.",
    "tau": "Only rows predicted right at least this share of the time can be removed.",
    "strategy": "greedy slicing = the paper's AFLite; slice sampling draws k by predictability.",
    "random_state": "Seed of every random choice; same data + parameters + seed = same result.",
    "representation": "Features Φ the linear models see (AFLite needs a fixed representation).",
    "n_components": "Dimension of Φ (TF-IDF reduced by SVD, or the warm-up model's hidden layer).",
    "warmup_fraction": "Share of rows used to train the warm-up model; they are not filtered.",
    "measures": "Extra measures computed after AFLite (each adds time; all are optional).",
}

#: Human names of the representations.
REPRESENTATION_NAMES = {
    "tfidf_svd": "TF-IDF + SVD (built in, fast)",
    "warmup": "Warm-up model (the paper's recipe)",
    "precomputed": "Uploaded embeddings (.npy / .npz / .parquet)",
    "sentence_transformers": "Sentence-transformers model (optional extra)",
}

#: Human names of the optional measures.
MEASURE_NAMES = {
    "cues": "Lexical cues (before vs after)",
    "knn": "KNN distances (before vs after)",
    "projection": "2-D map (UMAP/PCA)",
    "baselines": "Baselines vs random control",
    "duplicates": "Duplicates (exact and near, before vs after)",
    "inoculation": "Inoculation curves (slow)",
}


@dataclass
class Suggested:
    """Size-scaled defaults for a dataset of ``n`` audited rows."""

    n: int
    target_fraction: float
    n_partitions: int
    train_fraction: float | None  # None: use train_rows
    train_rows: int
    slice_size: int
    tau: float = 0.75
    measures: tuple[str, ...] = field(default=("cues", "knn", "projection", "baselines"))

    @property
    def target_rows(self) -> int:
        """Target size in rows."""
        return max(1, int(round(self.target_fraction * self.n)))


def suggest(n: int) -> Suggested:
    """Return the size-scaled defaults for ``n`` rows (see the module docstring).

    Parameters
    ----------
    n : int
        Rows that take part in the audit (included rows).
    """
    n = max(int(n), 2)
    if n <= 10_000:
        return Suggested(n, 0.5, 32, 0.5, n // 2, max(1, n // 20))
    if n <= 100_000:
        return Suggested(n, 0.5, 64, 0.5, n // 2, max(1, n // 40))
    train = min(50_000, max(n // 10, 10_000))
    return Suggested(n, 1 / 3, 64, None, train, min(10_000, max(1, n // 50)))


def default_config(pipeline: Any, n: int) -> Any:
    """The Audit page's default parameters for ``n`` rows, as an ``AuditConfig``.

    Mirrors the form's initial widget values (TF-IDF + SVD with 256 dimensions, the PCA map,
    3 random draws and 3 folds for the baselines), so pressing Run with untouched widgets
    reopens the run this config produced instead of recomputing it.
    """
    hint = suggest(n)
    measures = tuple(m for m in pipeline.DEFAULT_MEASURES if m in pipeline.MEASURES)
    measure_params: dict[str, dict] = {}
    if "projection" in measures:
        measure_params["projection"] = {"method": "pca"}
    if "baselines" in measures:
        measure_params["baselines"] = {"n_random_draws": 3,
                                       "n_splits": 3 if n <= 20_000 else 5}
    train = hint.train_fraction if hint.train_fraction is not None else hint.train_rows
    return pipeline.AuditConfig(
        representation="tfidf_svd",
        representation_params={"n_components": 256},
        target_size=hint.target_rows,
        n_partitions=hint.n_partitions,
        train_size=train,
        slice_size=hint.slice_size,
        tau=hint.tau,
        strategy="greedy_slicing",
        random_state=0,
        measures=measures,
        measure_params=measure_params,
    )


def estimate_rounds(n: int, target: int, slice_size: int) -> int:
    """Upper bound on AFLite rounds: ``ceil((n - target) / k)``."""
    if slice_size < 1 or target >= n:
        return 0
    return -(-(n - target) // slice_size)
