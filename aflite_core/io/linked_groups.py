"""Groups of rows linked by a shared text: the connected components of the graph joining
each row to its premise and its hypothesis (what ``load_dataset`` groups NLI rows by when
they share texts; see :mod:`aflite_core.io.datasets`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def linked_text_groups(premises: Sequence[str] | None, hypotheses: Sequence[str]) -> np.ndarray:
    """Group id (as str) of every row: rows sharing a premise or a hypothesis, transitively
    (connected components of the row-premise-hypothesis graph)."""
    hyp = pd.factorize(pd.Series(list(hypotheses), dtype=object))[0]
    prem = None if premises is None else pd.factorize(pd.Series(list(premises), dtype=object))[0]
    return linked_components(prem, hyp).astype(str)


def linked_components(premises: np.ndarray | None, hypotheses: np.ndarray) -> np.ndarray:
    """Component (int, 0, 1, ... in order of each component's first row) of every row in the
    graph linking rows to their premise and hypothesis codes; premise -1: no premise."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(hypotheses)
    hyp = np.asarray(hypotheses, dtype=np.int64)
    prem = (np.zeros(n, dtype=np.int64) - 1 if premises is None
            else np.asarray(premises, dtype=np.int64))
    n_p, n_h = int(prem.max(initial=-1)) + 1, int(hyp.max(initial=-1)) + 1
    rows = np.r_[np.arange(n), np.arange(n)]
    cols = np.r_[np.where(prem >= 0, n + prem, np.arange(n)), n + n_p + hyp]
    size = n + n_p + n_h
    graph = coo_matrix((np.ones(2 * n), (rows, cols)), shape=(size, size))
    return connected_components(graph, directed=False)[1][:n]
