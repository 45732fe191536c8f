"""Search a run by meaning: the rows nearest a typed sentence, or a row, in Φ.

A run made since 2026-11-29 keeps a compact Φ (``phi_compact.parquet``: each row's direction
in 4 bits a dimension, :mod:`aflite_core.represent._compact`) and, for the default ``tfidf_svd``
Φ built on one machine, what places a typed text in Φ (``phi_text_model.npz``,
:mod:`aflite_core.represent._text_search`). :func:`nearest_rows` places the sentence, puts it on
the compact codes and returns the ``k`` most similar rows by cosine; the Review page's
neighbours of a row use :func:`phi_codes` the same way. Both files are read once per file
version. Bad input gets a :class:`ValueError` that says what to do (an empty or over-long
text, words the run's vocabulary never had, a run that kept no model).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aflite_core.represent import (
    COMPACT_FILE,
    MAX_QUERY_CHARS,
    TEXT_MODEL_FILE,
    code_norms,
    load_text_model,
    nearest_codes,
    place,
    place_text,
)

__all__ = ["nearest_rows", "phi_codes"]

#: Said when a run cannot be searched by meaning.
NEEDS_NEW_AUDIT = ("search by meaning needs a new audit of this data: this run kept no {what} "
                   "(runs made before 2026-11-29, and runs whose Φ is an encoder's or was built "
                   "on a cluster, have none)")


@functools.lru_cache(maxsize=4)
def _read_codes(path: str, stamp: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(row_ids, codes, norms)`` of a run's compact Φ (read once per file version)."""
    import pyarrow.parquet as pq  # lazy: +19 ms to import

    try:
        table = pq.read_table(path)
        phi = table.column("phi").combine_chunks()
        width = phi.type.byte_width
        codes = np.frombuffer(phi.buffers()[1], dtype=np.uint8,
                              count=len(phi) * width).reshape(len(phi), width)
        return table.column("row_id").to_numpy(), codes, code_norms(codes)
    except Exception:  # noqa: BLE001 - a damaged file: as if the run had none
        return None


def _stamp(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def phi_codes(run: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The run's compact Φ ``(row_ids, codes, norms)``, or None when it kept none (made
    before it was kept, Φ stayed on a cluster, or the file is damaged)."""
    path = Path(run.path) / COMPACT_FILE
    stamp = _stamp(path)
    return None if stamp is None else _read_codes(str(path), stamp)


@functools.lru_cache(maxsize=4)
def _read_text_model(path: str, stamp: int) -> dict:
    return load_text_model(path)


def nearest_rows(run: Any, text: str, *, k: int = 20) -> pd.DataFrame:
    """The ``k`` rows of ``run`` nearest ``text`` in Φ: ``row_id`` and ``similarity`` (cosine,
    most similar first; of the compact Φ's codes).

    Raises
    ------
    ValueError
        An empty text, one over :data:`~aflite_core.represent.MAX_QUERY_CHARS`
        characters, one none of whose words the run's vocabulary holds, or a run without
        a compact Φ or a text model (the message says a new audit is needed).
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
    ids, all_codes, norms = codes
    rows, similarity = nearest_codes(all_codes, place(vector[None, :])[0], k, norms=norms)
    return pd.DataFrame({"row_id": ids[rows], "similarity": np.round(similarity, 4)})
