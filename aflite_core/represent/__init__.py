"""Representations Φ of a dataset and the one builder of text models.

Its face: what the rest of ``aflite_core``, ``ui/`` and the pages may import from it
(``from aflite_core.represent import NAME``; never from one of its modules). Names are resolved
on first use, so importing the package stays as cheap as importing one of its modules
(the dashboard's first paint and ``python -m aflite_core --help`` import it).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module of this package that defines it.
_FACE = {
    "COMPACT_FILE": "compact",
    "code_norms": "compact",
    "compact_phi": "compact",
    "nearest_codes": "compact",
    "ENCODER_METHODS": "builders",
    "PAIR_SEPARATOR": "pair_inputs",
    "RowsOnWorkers": "partitioned_rows",
    "add_rows": "partitioned_rows",
    "build_representation": "builders",
    "cluster_workers": "fold_pool",
    "counts_evaluator": "on_use",
    "dask_folds": "fold_pool",
    "default_cache_dir": "embedding_cache",
    "departed_workers": "fold_pool",
    "distill_static": "distill",
    "evaluator": "on_use",
    "fold_threads": "fold_pool",
    "is_partitioned": "partitioned_rows",
    "lost_data": "fold_pool",
    "lost_on_cluster": "fold_pool",
    "map_folds": "fold_pool",
    "map_streamed": "fold_pool",
    "ngram_counts_on_workers": "partitioned_counts",
    "on_dask": "fold_pool",
    "pair_texts": "pair_inputs",
    "scatter_within": "partitions",
    "single_blas_thread": "text_models",
    "stream_ordered": "fold_pool",
    "text_model": "on_use",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = ("encoders",)

__all__ = sorted([*_FACE, *_NAMESPACES])


def __getattr__(name: str) -> Any:
    # not cached in the package: a test that patches the defining module is seen
    if name in _FACE:
        return getattr(importlib.import_module(f"{__name__}.{_FACE[name]}"), name)
    if name in _NAMESPACES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
