"""The lexical-cue measure: ICQ cue statistics of the full data and of the retained rows.

The statistics themselves live in :mod:`aflite_core.cues.statistics`; this module runs them on
the two scopes of a run and turns ``cues.parquet`` back into a before/after table.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from aflite_core.chart_style import SET_COLORS, chart_text
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult
from aflite_core.progress_plan import along_points
from aflite_core.represent import cluster_workers, dask_folds, map_streamed

#: The run-folder file: the cue table with a leading ``scope`` column (full | retained).
FILE = "cues.parquet"


def compute(ctx: MeasureContext) -> MeasureResult:
    """Cue tables of the full (filterable + warm-up) data and of the retained rows.

    On a Dask cluster the tables come from a map-reduce over row chunks on the workers
    (:mod:`aflite_core.cues.count_tables`, the same table); here, from all rows at once.
    """
    ctx.progress(0.0, "cue statistics of the full and the retained data")
    scopes = {"full": None, "retained": ctx.retained_ids}
    cluster = dask_folds()
    if cluster is not None:
        from aflite_core.cues import count_tables  # lazy: +291 ms to import
        from aflite_core.measures.slices import features_on_workers  # lazy: +224 ms to import

        chunk_rows = _chunk_rows(ctx.dataset, cluster)
        # each chunk's texts read as its task is sent; the chunks' tagging seeded into this
        # process's cache only for a slices measure that extracts every row here
        table = count_tables.cue_tables(
            ctx.dataset, scopes, groups=ctx.dataset.group_codes(), random_state=ctx.random_state,
            chunk_rows=chunk_rows, progress=ctx.progress, mapper=map_streamed, streamed=True,
            seed_cache=not features_on_workers(ctx), **ctx.params)
    else:
        from aflite_core.cues import statistics  # lazy: +306 ms to import

        table = statistics.cue_tables(ctx.dataset, scopes, groups=ctx.dataset.group_codes(),
                                      random_state=ctx.random_state, **ctx.params)
    return MeasureResult(tables={FILE: table},
                         info={"n_rows": int(len(table)), "attrs": dict(table.attrs)})


def _chunk_rows(dataset, cluster) -> int:
    """Rows per task of the cue table on ``cluster`` (and of its tagging ahead: the same
    chunks), as the slices measure cuts the included rows on a cluster."""
    from aflite_core.cues import chunk_rows_for  # lazy: the cue modules load with the measure

    return chunk_rows_for(int(dataset.included_mask.sum()), len(cluster_workers(cluster.client)))


#: Seconds (two cores) that tagging the hypotheses adds when the annotation cache does not
#: hold them (a first audit of a dataset), at the sizes measured: the part-of-speech tagger,
#: the named-entity chunker and the spelling check on every distinct text, NLTK's import and
#: the tagging pool's start. ``benchmarks/bench_cues.py`` (a fresh cache each run,
#: 2026-11-30): the seven families took 1.19 / 1.93 / 4.57 / 9.22 / 21.56 s at 10k / 30k /
#: 100k / 300k / 1M rows against 0.03 / 0.06 / 0.14 / 0.31 / 1.01 s with their tags cached.
#: One rate of 8.0 s per 100,000 rows (fitted at 100k) planned 24 s of tagging at 300k rows
#: where the whole cue stage took 10.1 s: the ETA at the cues' start was 1.54x the time left
#: (``bench_cores.py --rows 300000 --cores 1,2``).
COLD_TAGGING_SECONDS = ((10_000, 1.16), (30_000, 1.87), (100_000, 4.43), (300_000, 8.91),
                        (1_000_000, 20.55))


def cold_tagging_seconds(n_rows: int) -> float:
    """The seconds tagging ``n_rows`` rows' hypotheses adds to a first audit (two cores):
    :data:`COLD_TAGGING_SECONDS` interpolated, in proportion below its first size, along its
    last slope beyond its last.

    Examples
    --------
    >>> cold_tagging_seconds(100_000), round(cold_tagging_seconds(2_000_000), 2)
    (4.43, 37.18)
    """
    return along_points(((0, 0.0), *COLD_TAGGING_SECONDS), max(int(n_rows), 0))


def _cold_cost(dataset, params) -> float:
    """:func:`cold_tagging_seconds` in the registry's unit (seconds per 100,000 rows), or 0
    when the annotation cache holds the tags of the texts :func:`compute` reads
    (:func:`aflite_core.cues.tags_cached`); the measure has no options, so ``params``
    changes nothing."""
    from aflite_core.cues import tags_cached  # lazy: the cue modules load with the measure

    # compute's cue tables read the hypotheses (text="hypothesis"); hashed a slice at a time
    # (no list of every row's text: 500 MB at 5M rows)
    if tags_cached(dataset.hypothesis_texts(), None):
        return 0.0
    n = max(int(dataset.included_mask.sum()), 1)
    return cold_tagging_seconds(n) * 100_000 / n


def _annotate_ahead(dataset, params, stop) -> None:
    """The texts' token counts and the hypotheses' tags into the annotation cache, beside Φ
    and the filter: what :func:`compute`'s extraction reads (the texts as its cue tables read
    them), so that it reads them from the cache (:func:`aflite_core.cues.annotate_ahead`);
    on a cluster, each of its chunks by a task on a worker, into that worker's cache
    (:func:`aflite_core.cues.count_tables.annotate_chunks_ahead`). The measure has no
    options, so ``params`` changes nothing."""
    from aflite_core.cues import annotate_ahead  # lazy: the cue modules load with the measure

    cluster = dask_folds()
    if cluster is not None:
        from aflite_core.cues import count_tables  # lazy: as above

        count_tables.annotate_chunks_ahead(dataset, chunk_rows=_chunk_rows(dataset, cluster),
                                           stop=stop)
        return
    # lazy columns: sent to the child a chunk at a time, never a list of every row's text
    annotate_ahead(dataset.hypothesis_texts(), dataset.premise_texts(), stop=stop)


def _warm_ahead() -> Callable[[], None]:
    """The child of :func:`_annotate_ahead` started before the data is read, loading NLTK
    and the tagger meanwhile (:func:`aflite_core.cues.start_spare_child`); returns what ends
    it if no work ahead takes it."""
    from aflite_core.cues import discard_spare_child, start_spare_child  # lazy: as above

    start_spare_child()
    return discard_spare_child


def before_after(cues: pd.DataFrame) -> pd.DataFrame:
    """Every cue of the full data beside its statistics in the retained rows.

    Rows keep the full table's order (its default ranking, ``cueness_shrunk`` in runs made
    since it exists, ICQ's ``cueness`` before); ``cueness`` here is that ranking statistic.
    A cue below the minimum support in the retained rows has no *after* value, and its
    ``after`` note says so with its count: ``below minimum support (n = 4)``.
    """
    key = ["feature_type", "feature"]
    stat = "cueness_shrunk" if "cueness_shrunk" in cues.columns else "cueness"
    full = cues[cues["scope"] == "full"].set_index(key)
    kept = cues[cues["scope"] == "retained"].set_index(key)
    kept = kept[~kept.index.duplicated()]
    n_after = kept["n_train"].reindex(full.index)
    out = pd.DataFrame({
        "majority label": full["majority_label"],
        "cueness before": full[stat],
        "cueness after": kept[stat].reindex(full.index),
        "n_train before": full["n_train"],
        "n_train after": n_after,
    })
    out["change"] = out["cueness after"] - out["cueness before"]
    supported = (kept["supported"].reindex(full.index).fillna(False).astype(bool)
                 if "supported" in kept.columns else out["cueness after"].notna())
    out["after"] = [
        "" if ok else (f"below minimum support (n = {int(n)})" if pd.notna(n)
                       else "below minimum support")
        for ok, n in zip(supported, n_after, strict=True)]
    out.attrs["statistic"] = stat
    return out.reset_index()


def tables(run) -> dict[str, pd.DataFrame]:
    """``{"Top cues before vs after": ...}`` from ``cues.parquet``."""
    cues = run.read_parquet(FILE)
    if cues is None or cues.empty or "scope" not in cues:
        return {}
    return {"Cues before vs after": before_after(cues)}


#: Cues the figure shows (the first of the table's default order).
FIGURE_TOP = 20


def figures(run) -> list:
    """The top cues of the full data: cueness before vs after, side by side."""
    import plotly.graph_objects as go  # lazy: +14 ms to import

    table = next(iter(tables(run).values()), None)
    if table is None or table.empty:
        return []
    shown = table.head(FIGURE_TOP)
    names = [chart_text(f"{t} · {f}") for t, f in zip(shown["feature_type"].astype(str),
                                                      shown["feature"].astype(str),
                                                      strict=True)]
    chart = go.Figure([
        go.Bar(name="full", y=names, x=shown["cueness before"], orientation="h",
               marker_color=SET_COLORS["full"]),
        go.Bar(name="retained", y=names, x=shown["cueness after"], orientation="h",
               marker_color=SET_COLORS["after"]),
    ])
    chart.update_layout(barmode="group", title="Top cues: cueness before vs after",
                        yaxis={"autorange": "reversed"}, height=max(360, 22 * len(names)))
    return [chart]


MEASURE = Measure(
    name="cues",
    label="Lexical cues (before vs after)",
    description="ICQ cue statistics per linguistic feature of the full data and of the "
                "retained rows: which features give the label away, and whether AFLite "
                "removed them.",
    compute=compute,
    files=(FILE,),
    tables=tables,
    figures=figures,
    exports={"cues": FILE},
    order=10,
    # seconds per 100k rows, the texts' tags cached (bench_pipeline.py on 2026-11-30's VM):
    # 0.41-0.50 s at SNLI dev's 9,842 rows (the cue families' set-up: word lists, the
    # tagger), 0.31-0.32 s at 20k SNLI-like rows, 0.42 s at 50k, 0.55-0.61 s at 100k, 3.45 s
    # at 1M, 7.51 s at 2M; the cost before (0.45 s of set-up) planned 0.61 s at 20k, where
    # the plan after the filter was already 1.3x heavier than the run
    cost=lambda n: 0.33 + 0.25 * 100_000 / max(n, 1),
    cold_cost=_cold_cost,
    ahead=_annotate_ahead,
    warm=_warm_ahead,
)
