"""Groups of rows linked by a shared text: the connected components of the graph joining
each row to its premise and its hypothesis (what ``load_dataset`` groups NLI rows by when
they share texts; see :mod:`aflite_core.io.datasets`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from aflite_core.io._text_columns import KERNEL_MIN_ROWS


def linked_text_groups(premises: Sequence[str] | None, hypotheses: Sequence[str]) -> np.ndarray:
    """Group id (as str) of every row: rows sharing a premise or a hypothesis, transitively
    (connected components of the row-premise-hypothesis graph)."""
    hyp = pd.factorize(pd.Series(list(hypotheses), dtype=object))[0]
    prem = None if premises is None else pd.factorize(pd.Series(list(premises), dtype=object))[0]
    return linked_components(prem, hyp).astype(str)


def linked_components(premises: np.ndarray | None, hypotheses: np.ndarray) -> np.ndarray:
    """Component (int32, 0, 1, ... in order of each component's first row) of every row in
    the graph linking rows to their premise and hypothesis codes; premise -1: no premise.

    The components are found on the graph of the texts alone (a node per premise and per
    hypothesis, an edge per row joining its two): a row's component is its hypothesis's.
    The graph with a node per row as well held 2n edges as int64 pairs and float64 weights,
    and scipy's symmetric copy of them: 0.8 GB at 5M rows, the peak of the load; this one
    holds n edges with int32 indices. From :data:`~aflite_core.io._text_columns.
    KERNEL_MIN_ROWS` rows on, union-find in compiled code gives the same numbers
    (:func:`~aflite_core.io._load_kernels.linked_row_components`: 1M rows 0.25 s -> 0.03 s).
    """
    if len(hypotheses) >= KERNEL_MIN_ROWS:
        from aflite_core.io._load_kernels import linked_row_components  # lazy: numba
        return linked_row_components(premises, hypotheses)
    from scipy.sparse import csr_matrix  # lazy: +187 ms to import
    from scipy.sparse.csgraph import connected_components  # lazy: +301 ms to import

    hyp = np.asarray(hypotheses, dtype=np.int64)
    if not len(hyp):
        return np.zeros(0, dtype=np.int32)
    prem = None if premises is None else np.asarray(premises, dtype=np.int64)
    n_p = 0 if prem is None else int(prem.max(initial=-1)) + 1
    size = n_p + int(hyp.max()) + 1
    with_premise = np.zeros(len(hyp), dtype=bool) if prem is None else prem >= 0
    graph = csr_matrix((np.ones(int(with_premise.sum())),
                        (prem[with_premise] if prem is not None else with_premise[:0],
                         n_p + hyp[with_premise])), shape=(size, size))
    texts = connected_components(graph, directed=False)[1]
    del graph
    of_row = texts[n_p + hyp]  # a row's component: its hypothesis's
    del texts
    # numbered in order of each component's first row, as the graph of rows numbered them
    _, first, inverse = np.unique(of_row, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int32)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=np.int32)
    return rank[inverse.reshape(-1)]
