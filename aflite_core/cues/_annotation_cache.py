"""The on-disk cache of per-text annotations: ``.npz`` files (never pickle) keyed by the kind
of annotation, the texts' content hash and :data:`EXTRACTOR_VERSION`; written atomically, and
a read-only or full cache folder only costs time.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

#: Bump when any extraction rule changes: it is part of every cache key.
EXTRACTOR_VERSION = "1"


def cache_key(kind: str, texts_hash: str, *parts: str) -> str:
    raw = "|".join((EXTRACTOR_VERSION, kind, texts_hash, *parts))
    return f"{kind}-{hashlib.sha256(raw.encode()).hexdigest()[:40]}"


def cache_load(cache_dir: Path | None, key: str) -> dict[str, np.ndarray] | None:
    if cache_dir is None:
        return None
    path = cache_dir / f"{key}.npz"
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None  # unreadable or truncated entry: recompute (and overwrite)
    except SystemError:
        # CPython 3.11's AST constructor (the .npy header's literal_eval) can raise "AST
        # constructor recursion depth mismatch" when another thread parses at the same time
        # (python/cpython#106905; met on a Dask worker at 5M rows): a miss, not a failure
        return None


def cache_save(cache_dir: Path | None, key: str, arrays: dict[str, np.ndarray]) -> None:
    if cache_dir is None:
        return
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=f".{key}-", suffix=".npz")
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **arrays)
        os.replace(tmp, cache_dir / f"{key}.npz")
    except OSError:
        # A read-only or full cache folder must not stop the analysis; it only costs time.
        return


def encode_strings(values: Sequence[str]) -> np.ndarray:
    return np.frombuffer("\n".join(values).encode("utf-8"), dtype=np.uint8)


def decode_strings(buffer: np.ndarray) -> list[str]:
    text = buffer.tobytes().decode("utf-8")
    return text.split("\n") if text else []

