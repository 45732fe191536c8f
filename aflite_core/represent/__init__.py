"""Representations Φ of a dataset and the one builder of text models.

Its face (``_FACE``, ``_NAMESPACES``) is what the rest of the code may import from it, resolved
on first use (:func:`aflite_core.faces.lazy_face`; ``docs/architecture.md``, *Public faces*).
"""

from __future__ import annotations

from aflite_core.faces import lazy_face

#: Public name -> the module of this package that defines it.
_FACE = {
    "MAX_QUERY_CHARS": "_text_search",
    "TEXT_MODEL_FILE": "_text_search",
    "load_text_model": "_text_search",
    "place_text": "_text_search",
    "save_text_model": "_text_search",
    "place": "_compact",
    "word_counts": "_term_counts",
    "BASIS_KEY": "_compact",
    "BASIS_SHAPE_KEY": "_compact",
    "COMPACT_FILE": "_compact",
    "code_norms": "_compact",
    "compact_phi": "_compact",
    "nearest_codes": "_compact",
    "ENCODER_METHODS": "_builders",
    "PAIR_SEPARATOR": "_pair_inputs",
    "RowsOnWorkers": "_partitioned_rows",
    "add_rows": "_partitioned_rows",
    "build_representation": "_builders",
    "cluster_workers": "_fold_pool",
    "counts_evaluator": "_on_use",
    "dask_folds": "_fold_pool",
    "default_cache_dir": "_embedding_cache",
    "departed_workers": "_fold_pool",
    "distill_static": "_distill",
    "evaluator": "_on_use",
    "fold_threads": "_fold_pool",
    "is_partitioned": "_partitioned_rows",
    "on_cluster": "_partitioned_rows",
    "phi_folder_for": "_phi_on_disk",
    "phi_on_disk": "_phi_on_disk",
    "rows_times": "_row_products",
    "lost_data": "_fold_pool",
    "lost_on_cluster": "_fold_pool",
    "map_folds": "_fold_pool",
    "map_streamed": "_fold_pool",
    "ngram_counts_on_workers": "_partitioned_counts",
    "on_dask": "_fold_pool",
    "pair_texts": "_pair_inputs",
    "scatter_within": "_partitions",
    "single_blas_thread": "_text_models",
    "stream_ordered": "_fold_pool",
    "text_model": "_on_use",
}
#: Modules whose names are used as a namespace from outside (``views.rows_table``).
_NAMESPACES = ("encoders",)

__all__ = sorted([*_FACE, *_NAMESPACES])
__getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)
