"""The compact Φ's scoring loop (:mod:`aflite_core.represent._compact`), compiled by numba and
kept on disk (:mod:`aflite_core.numba_cache`); a module of its own so that importing the
compact Φ does not import numba (0.3 s) until a query needs it."""

from __future__ import annotations

import numpy as np

from aflite_core.numba_cache import jit

__all__ = ["lookup_sums"]


@jit
def _lookup_sums(codes: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:
    n, width = codes.shape
    for i in range(n):
        total = 0.0
        for j in range(width):
            total += table[j, codes[i, j]]
        out[i] = total


def lookup_sums(codes: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``out[i] = sum_j table[j, codes[i, j]]`` (float32): a row's dot product with a query,
    or its squared norm, one byte (two dimensions) at a time from a 256-entry table."""
    out = np.empty(len(codes), dtype=np.float32)
    _lookup_sums(np.ascontiguousarray(codes, dtype=np.uint8),
                 np.ascontiguousarray(table, dtype=np.float32), out)
    return out
