"""Representations Φ of a dataset and the one builder of text models.

Its face (``_FACE``, ``_NAMESPACES``) is what the rest of the code may import from it, resolved
on first use (:func:`aflite_core.faces.lazy_face`; ``docs/architecture.md``, *Public faces*).
"""

from __future__ import annotations

from aflite_core.faces import lazy_face

#: Public name -> the module of this package that defines it.
_FACE = {
    "MAX_QUERY_CHARS": "text_search",
    "TEXT_MODEL_FILE": "text_search",
    "load_text_model": "text_search",
    "place_text": "text_search",
    "save_text_model": "text_search",
    "place": "compact",
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
__getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)
