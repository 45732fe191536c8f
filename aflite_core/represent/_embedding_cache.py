"""On-disk cache of text embeddings, keyed by model id and content hash (``.npy`` only).

An encoder embeds each *distinct* text once. :func:`cached_embed` sorts the distinct texts of
a list (so the key depends on which texts there are, not on row order or repetition), looks
for ``emb-<key>.npy`` in the cache folder and, on a miss, embeds them and writes that file.
The key is the SHA-256 of :data:`CACHE_VERSION`, the encoder's model id (its family, name and
a fingerprint of its files, see :mod:`aflite_core.represent.encoders`) and the SHA-256 of the
sorted distinct texts. The file holds one float32 row per distinct text, in sorted order; it is
read with ``allow_pickle=False``. Beside it, ``emb-<key>.json`` records the model id, the
number of rows, the dimension and a BLAKE2b checksum of the values: an entry is served only
when all of them match (a file from another model, with flipped bits, empty, truncated, or
without its record is a miss: recomputed and overwritten). Nothing else is written there.

Premises and hypotheses are cached separately, so every way of combining them (hypothesis
only, concatenation, ``[u, v, |u-v|, u*v]``) and every run over the same texts reuses the same
two files. A file that is unreadable or has the wrong shape is a miss (recomputed and
overwritten); a cache folder that cannot be written only costs time.

Location: :func:`default_cache_dir` (``$AFLITE_CACHE_DIR/embeddings``, else
``$XDG_CACHE_HOME/aflite-audit/embeddings``, else ``~/.cache/aflite-audit/embeddings``), the
folder the annotation and projection caches use.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from aflite_core.json_files import read_json_file
from aflite_core.text import default_cache_dir as user_cache_dir
from aflite_core.text import hash_texts

__all__ = ["CACHE_VERSION", "cache_key", "cache_path", "cached_embed", "default_cache_dir",
           "texts_digest"]

#: Bump when the way embeddings are computed changes, so stale files are not reused.
CACHE_VERSION = "1"
_PREFIX = "emb-"


def default_cache_dir() -> Path:
    """``<annotation cache folder>/embeddings`` (``$AFLITE_CACHE_DIR`` is respected)."""
    return user_cache_dir() / "embeddings"


def distinct_texts(texts: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """``(codes, uniques)``: the sorted distinct texts and each row's index into them."""
    codes, uniques = pd.factorize(pd.Series(list(texts), dtype=object).fillna(""), sort=True)
    return codes.astype(np.int64, copy=False), [str(t) for t in uniques]


def texts_digest(uniques: Sequence[str]) -> str:
    """SHA-256 of a list of texts: the annotation cache's content key
    (:func:`aflite_core.text.hash_texts`)."""
    return hash_texts(uniques)


def cache_key(model_id: str, digest: str) -> str:
    """File stem for a model id and a :func:`texts_digest`."""
    raw = "|".join((CACHE_VERSION, model_id, digest))
    return _PREFIX + hashlib.sha256(raw.encode("utf-8")).hexdigest()[:40]


def cache_path(cache_dir: str | os.PathLike, model_id: str, texts: Sequence[str]) -> Path:
    """Where the embeddings of ``texts`` by ``model_id`` are (or would be) cached."""
    _, uniques = distinct_texts(texts)
    return Path(cache_dir) / f"{cache_key(model_id, texts_digest(uniques))}.npy"


def checksum(E: np.ndarray) -> str:
    """BLAKE2b of an embedding array's values (float32, C order)."""
    data = np.ascontiguousarray(E, dtype=np.float32)
    return hashlib.blake2b(memoryview(data).cast("B"), digest_size=32).hexdigest()


def _record(path: Path) -> Path:
    return path.with_suffix(".json")


def _load(path: Path, n_rows: int, model_id: str) -> np.ndarray | None:
    """The cached array, or None unless its record matches the model, the rows, the
    dimension and the checksum (anything else is a miss, recomputed and overwritten)."""
    if not path.is_file():
        return None
    try:
        record = read_json_file(_record(path))
        E = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None  # no record, or an empty, truncated or foreign file
    if not isinstance(record, dict) or record.get("model_id") != model_id \
            or record.get("version") != CACHE_VERSION:
        return None
    if (E.dtype != np.float32 or E.ndim != 2 or len(E) != n_rows
            or record.get("n_rows") != n_rows or record.get("dim") != E.shape[1]):
        return None
    if record.get("blake2b") != checksum(E) or not np.isfinite(E).all():
        return None
    return E


def _atomic_write(path: Path, write: Callable[[object], None], suffix: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _save(path: Path, E: np.ndarray, model_id: str) -> bool:
    record = {"version": CACHE_VERSION, "model_id": model_id, "n_rows": int(E.shape[0]),
              "dim": int(E.shape[1]), "dtype": "float32", "blake2b": checksum(E)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _record(path).unlink(missing_ok=True)  # no record beside a half-replaced array
        _atomic_write(path, lambda h: np.save(h, E, allow_pickle=False), ".npy")
        _atomic_write(_record(path), lambda h: h.write(json.dumps(record).encode("utf-8")),
                      ".json")
    except OSError:
        return False  # read-only or full cache folder: the run goes on without the cache
    return True


def cached_embed(
    embed: Callable[[list[str]], np.ndarray],
    model_id: str,
    texts: Sequence[str],
    *,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
) -> tuple[np.ndarray, dict]:
    """Embeddings of ``texts`` (one float32 row per text), each distinct text embedded once.

    Parameters
    ----------
    embed : callable
        ``embed(distinct_texts) -> array (n_distinct, d)``; called only on a cache miss.
    model_id : str
        Identifies the encoder (family, name, fingerprint of its files).
    texts : sequence of str
    cache_dir : path, optional
        Default :func:`default_cache_dir`.
    use_cache : bool, default True
        False: neither read nor write the cache.

    Returns
    -------
    X : numpy.ndarray
        float32, shape (len(texts), d), C-contiguous.
    info : dict
        ``cache`` ("hit", "miss" or "off"), ``path`` (the cache file or None),
        ``n_texts``, ``n_distinct``.
    """
    codes, uniques = distinct_texts(texts)
    info: dict = {"n_texts": len(codes), "n_distinct": len(uniques), "cache": "off",
                  "path": None}
    path = None
    E = None
    if use_cache:
        folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        path = folder / f"{cache_key(model_id, texts_digest(uniques))}.npy"
        info["path"] = str(path)
        E = _load(path, len(uniques), model_id)
        info["cache"] = "hit" if E is not None else "miss"
    if E is None:
        if uniques:
            E = np.ascontiguousarray(np.asarray(embed(uniques)), dtype=np.float32)
        else:
            E = np.zeros((0, 0), dtype=np.float32)
        if E.ndim != 2 or len(E) != len(uniques):
            raise ValueError(f"encoder {model_id!r}: expected {len(uniques)} embedding rows, "
                             f"got shape {E.shape}")
        if path is not None and len(uniques) and not _save(path, E, model_id):
            info["path"] = None
    return np.ascontiguousarray(E[codes]), info
