"""Measures still being moved into their own modules (temporary home).

The five measures below move into their modules of :mod:`aflite_core.measures` (each with its
``MEASURE`` declaration) once those modules' current rework lands. New measures never go
here: see :mod:`aflite_core.measures.registry`.
"""

from __future__ import annotations

import numpy as np

from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option


def _knn(ctx: MeasureContext) -> MeasureResult:
    from aflite_core.measures import knn

    X, y, ids = ctx.X, ctx.y, ctx.row_ids
    held = knn.heldout_mask(y, splits=ctx.splits, random_state=ctx.random_state)
    result = knn.knn_distance_measures(
        X[~held], y[~held], X[held], y[held],
        retained_mask=ctx.keep[~held],
        train_row_ids=ids[~held], heldout_row_ids=ids[held],
        random_state=ctx.random_state,
        callback=ctx.callback(),
    )  # fmt: skip
    return MeasureResult(tables={"knn.parquet": result.table,
                                 "knn_examples.parquet": result.per_example},
                         info={"params": result.params})


def _projection(ctx: MeasureContext) -> MeasureResult:
    from aflite_core.measures import projection

    rep = ctx.representation
    params = {"random_state": ctx.random_state, **ctx.params}
    table = projection.project(rep.X, row_ids=np.asarray(rep.row_ids),
                               callback=ctx.callback(), **params)
    return MeasureResult(tables={"projection.parquet": table}, info={"params": params})


def _baselines(ctx: MeasureContext) -> MeasureResult:
    from aflite_core.measures import baselines as probes

    hypotheses, _premises = ctx.texts()
    params = {"random_state": ctx.random_state, **ctx.params}
    result = probes.run_baselines(ctx.y, ctx.keep, hypotheses=hypotheses, X=ctx.X,
                                  callback=ctx.callback(), **params)
    return MeasureResult(documents={"baselines.json": result}, info={"params": params})


def _duplicates(ctx: MeasureContext) -> MeasureResult:
    from aflite_core.measures import duplicates

    hyps, prems = ctx.texts()
    ctx.progress(0.0, "exact and near duplicates")
    result = duplicates.find_duplicates(hyps, premises=prems, X=ctx.X, retained_mask=ctx.keep,
                                        row_ids=ctx.row_ids, **ctx.params)
    return MeasureResult(
        tables={"duplicates_exact.parquet": result.exact_groups,
                "duplicates_near.parquet": result.near_pairs},
        documents={"duplicates.json": result.to_dict()}, info={"params": result.params})


def _inoculation(ctx: MeasureContext) -> MeasureResult:
    from aflite_core.measures import inoculation

    hyps, prems = ctx.texts()
    texts = np.asarray(inoculation.pair_texts(prems, hyps), dtype=object)
    labels = ctx.y
    params = {"random_state": ctx.random_state, **ctx.params}
    parts = inoculation.split_for_inoculation(len(labels), ctx.keep,
                                              random_state=params["random_state"])
    data = {k: (list(texts[idx]), labels[idx]) for k, idx in parts.items()}
    result = inoculation.inoculate(
        data["original_train"], data["original_test"], data["challenge_train"],
        data["challenge_test"], callback=ctx.callback(), **params,
    )
    return MeasureResult(documents={"inoculation.json": result.to_dict()},
                         info={"outcome": result.outcome_label})


PENDING = (
    Measure(name="knn", label="KNN distances (before vs after)", compute=_knn,
            files=("knn.parquet", "knn_examples.parquet"), order=20,
            exports={"knn": "knn.parquet"}),
    Measure(name="projection", label="2-D map (UMAP/PCA)", compute=_projection,
            files=("projection.parquet",), order=30, exports={"projection": "projection.parquet"},
            options=(Option("method", "Map method", "pca", choices=("pca", "umap"),
                            help="The 2-D map on the Explore page: PCA is instant; UMAP keeps "
                                 "neighbourhoods better, is fitted on at most 20,000 rows and "
                                 "compiles on first use."),)),
    Measure(name="baselines", label="Baselines vs random control", compute=_baselines,
            files=("baselines.json",), order=40, cost=2.0,
            options=(Option("n_random_draws", "Random-subset draws", 3, minimum=1, maximum=20,
                            help="Random subsets of the retained size: the control."),
                     Option("n_splits", "Cross-validation folds",
                            lambda n: 3 if n <= 20_000 else 5, minimum=2, maximum=10,
                            help="k-fold cross-validated accuracy of each baseline."))),
    Measure(name="duplicates", label="Duplicates (exact and near, before vs after)",
            compute=_duplicates, default=False, order=50,
            files=("duplicates.json", "duplicates_exact.parquet", "duplicates_near.parquet"),
            options=(Option("threshold", "Near-duplicate similarity", 0.95, minimum=0.8,
                            maximum=1.0, help="Two rows are near duplicates when the cosine "
                                              "similarity of their Φ is at least this."),)),
    Measure(name="inoculation", label="Inoculation curves (slow)", compute=_inoculation,
            files=("inoculation.json",), default=False, order=60),
)
