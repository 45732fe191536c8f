"""The lexical-cue measure: ICQ cue statistics of the full data and of the retained rows.

The statistics themselves live in :mod:`aflite_core.cues.statistics`; this module runs them on
the two scopes of a run and turns ``cues.parquet`` back into a before/after table.
"""

from __future__ import annotations

import pandas as pd

from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult

#: The run-folder file: the cue table with a leading ``scope`` column (full | retained).
FILE = "cues.parquet"


def compute(ctx: MeasureContext) -> MeasureResult:
    """Cue tables of the full (filterable + warm-up) data and of the retained rows."""
    from aflite_core.cues import statistics

    ctx.progress(0.0, "cue statistics of the full and the retained data")
    table = statistics.cue_tables(
        ctx.dataset, {"full": None, "retained": ctx.retained_ids},
        groups=ctx.dataset.groups(), random_state=ctx.random_state, **ctx.params,
    )
    return MeasureResult(tables={FILE: table},
                         info={"n_rows": int(len(table)), "attrs": dict(table.attrs)})


def before_after(cues: pd.DataFrame) -> pd.DataFrame:
    """Every cue of the full data beside its statistics in the retained rows.

    Rows keep the full table's order (its default ranking); an *after* value is missing
    when the cue falls below the minimum support in the retained rows.
    """
    key = ["feature_type", "feature"]
    full = cues[cues["scope"] == "full"].set_index(key)
    kept = cues[cues["scope"] == "retained"].set_index(key)
    out = pd.DataFrame({
        "majority label": full["majority_label"],
        "cueness before": full["cueness"],
        "cueness after": kept["cueness"].reindex(full.index),
        "n_train before": full["n_train"],
        "n_train after": kept["n_train"].reindex(full.index),
    })
    out["change"] = out["cueness after"] - out["cueness before"]
    return out.reset_index()


def tables(run) -> dict[str, pd.DataFrame]:
    """``{"Top cues before vs after": ...}`` from ``cues.parquet``."""
    cues = run.read_parquet(FILE)
    if cues is None or cues.empty or "scope" not in cues:
        return {}
    return {"Cues before vs after": before_after(cues)}


MEASURE = Measure(
    name="cues",
    label="Lexical cues (before vs after)",
    description="ICQ cue statistics per linguistic feature of the full data and of the "
                "retained rows: which features give the label away, and whether AFLite "
                "removed them.",
    compute=compute,
    files=(FILE,),
    tables=tables,
    exports={"cues": FILE},
    order=10,
    cost=0.5,
)
