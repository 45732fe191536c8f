"""Search a run by meaning: the rows nearest a typed sentence, or a row, in Φ.

A run made since 2026-11-29 keeps a compact Φ (``phi_compact.parquet``: each row's direction
in 4 bits a dimension, :mod:`aflite_core.represent._compact`) and, for the default ``tfidf_svd``
Φ built on one machine, what places a typed text in Φ (``phi_text_model.npz``,
:mod:`aflite_core.represent._text_search`); a run whose Φ is a text encoder's places the text
with that encoder, loaded from the folder the run names (checked to hold the same model).
:func:`nearest_rows` places the sentence, puts it on the compact codes and returns the ``k``
most similar rows by cosine; the Review page's neighbours of a row use :func:`phi_codes` the
same way. Both files are read once per file
version. Bad input gets a :class:`ValueError` that says what to do (an empty or over-long
text, words the run's vocabulary never had, a run that kept no model).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from aflite_core.represent import (
    BASIS_KEY,
    BASIS_SHAPE_KEY,
    COMPACT_FILE,
    MAX_QUERY_CHARS,
    TEXT_MODEL_FILE,
    code_norms,
    load_text_model,
    nearest_codes,
    place,
    place_text,
)

__all__ = ["CompactPhi", "nearest_rows", "phi_codes"]

#: Said when a run cannot be searched by meaning.
NEEDS_NEW_AUDIT = ("search by meaning needs a new audit of this data: this run kept no {what} "
                   "(runs made before 2026-11-29, and runs whose Φ was built on a cluster, "
                   "have none)")


class CompactPhi(NamedTuple):
    """A run's compact Φ, as :func:`phi_codes` reads it."""

    row_ids: np.ndarray
    codes: np.ndarray
    norms: np.ndarray
    #: The basis a vector of Φ's space is put on before it is coded (a Φ wider than the
    #: codes), or None.
    basis: np.ndarray | None


def _basis(metadata: dict | None) -> np.ndarray | None:
    """The basis kept in the compact file's metadata, or None (a Φ as narrow as the codes)."""
    if not metadata or BASIS_KEY not in metadata:
        return None
    d, dims = (int(v) for v in metadata[BASIS_SHAPE_KEY].decode().split(","))
    return np.frombuffer(metadata[BASIS_KEY], dtype="<f4").reshape(d, dims)


@functools.lru_cache(maxsize=4)
def _read_codes(path: str, stamp: int) -> CompactPhi | None:
    """A run's compact Φ (read once per file version), or None when it cannot be read."""
    import pyarrow.parquet as pq  # lazy: +19 ms to import

    try:
        table = pq.read_table(path)
        phi = table.column("phi").combine_chunks()
        width = phi.type.byte_width
        codes = np.frombuffer(phi.buffers()[1], dtype=np.uint8,
                              count=len(phi) * width).reshape(len(phi), width)
        return CompactPhi(table.column("row_id").to_numpy(), codes, code_norms(codes),
                          _basis(table.schema.metadata))
    except Exception:  # noqa: BLE001 - a damaged file: as if the run had none
        return None


def _stamp(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def phi_codes(run: Any) -> CompactPhi | None:
    """The run's compact Φ (row ids, codes, their norms and the basis of a wider Φ), or None
    when it kept none (made before it was kept, Φ stayed on a cluster, or the file is
    damaged)."""
    path = Path(run.path) / COMPACT_FILE
    stamp = _stamp(path)
    return None if stamp is None else _read_codes(str(path), stamp)


@functools.lru_cache(maxsize=4)
def _read_text_model(path: str, stamp: int) -> dict:
    return load_text_model(path)


def _placed_by_text_model(run: Any, text: str) -> np.ndarray:
    """``text`` read as a hypothesis in Φ by the run's text model (TF-IDF + SVD runs)."""
    model_path = Path(run.path) / TEXT_MODEL_FILE
    stamp = _stamp(model_path)
    if stamp is None:
        raise ValueError(NEEDS_NEW_AUDIT.format(what="text model"))
    try:
        model = _read_text_model(str(model_path), stamp)
    except ValueError as exc:
        raise ValueError(f"search: {exc}; run a new audit of this data") from None
    vector, known = place_text(text, model)
    if not known:
        raise ValueError("search: none of the text's words is in this run's vocabulary (a "
                         "language or words the data never had); try words from its texts")
    return vector


def _encoder_params(run: Any) -> dict | None:
    """The representation parameters of a run whose Φ is a text encoder's, else None."""
    # lazy: +70 ms to import (the builders load scipy.sparse), which opening a run never needs
    from aflite_core.represent import ENCODER_METHODS

    summary = getattr(run, "summary", None) or {}
    params = (summary.get("representation") or {}).get("params") or {}
    return params if params.get("method") in ENCODER_METHODS else None


def _encoded(text: str, params: dict) -> np.ndarray:
    """``text`` in Φ by the encoder the run used, read as a hypothesis without a premise (as
    the text model reads it): the run's own model, from its folder, never a download."""
    from aflite_core.represent import encoders  # lazy: +14 ms to import, encoder runs only

    model = params.get("model")
    if not params.get("local"):
        raise ValueError(f"search: this run's encoder {model!r} was loaded by name from a "
                         "model hub; search by meaning loads only a local folder or a packaged "
                         "model (no network): audit with one of those to search")
    try:
        encoder = encoders.load_encoder(params["method"], str(params.get("source") or model))
    except (ImportError, ValueError, OSError) as exc:
        raise ValueError(f"search: the encoder this run used ({model!r}) cannot be loaded "
                         f"here: {exc}") from None
    if encoder.model_id != params.get("model_id"):
        raise ValueError(f"search: the encoder folder {model!r} holds another model than "
                         "when this run was audited; its vectors would not be the run's Φ")
    V = encoder.encode([text])
    if not np.any(V):
        raise ValueError("search: the run's encoder knows none of the text's words (a "
                         "language or words it never had); try words from the texts")
    combine = params.get("combine", "hypothesis")
    U = None if combine == "hypothesis" else np.zeros_like(V)  # no premise
    return encoders.combine_pair(U, V, combine)[0]


def nearest_rows(run: Any, text: str, *, k: int = 20) -> pd.DataFrame:
    """The ``k`` rows of ``run`` nearest ``text`` in Φ: ``row_id`` and ``similarity`` (cosine,
    most similar first; of the compact Φ's codes).

    Raises
    ------
    ValueError
        An empty text, one over :data:`~aflite_core.represent.MAX_QUERY_CHARS`
        characters, one none of whose words the run's vocabulary (or encoder) knows, a run
        without a compact Φ or a text model (the message says a new audit is needed), or an
        encoder run whose model cannot be loaded here, holds another model, or was named
        on a hub (search loads no model from the network).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("search: type a sentence (the text is empty)")
    if len(text) > MAX_QUERY_CHARS:
        raise ValueError(f"search: the text has {len(text):,} characters; search takes at "
                         f"most {MAX_QUERY_CHARS:,} (a sentence or a paragraph)")
    k = int(k)
    if k < 1:
        raise ValueError(f"k: expected at least 1, got {k}")
    codes = phi_codes(run)
    if codes is None:
        raise ValueError(NEEDS_NEW_AUDIT.format(what="compact Φ"))
    encoder = _encoder_params(run)
    vector = _encoded(text, encoder) if encoder else _placed_by_text_model(run, text)
    rows, similarity = nearest_codes(codes.codes, place(vector[None, :], codes.basis)[0], k,
                                     norms=codes.norms)
    return pd.DataFrame({"row_id": codes.row_ids[rows], "similarity": np.round(similarity, 4)})
