"""Dashboard at SNLI scale: a 550,000-row run open in Explore and Report.

Builds a run folder of ``--rows`` rows (default 550,000) *without* running AFLite: the rows of
``../shared/data/snli/snli_train_sample.csv`` (``split, id, premise, hypothesis, label``)
repeated with unique ids, fake but plausible scores (about a third removed, removed rows more
predictable, removal rounds of at most 5,000 rows, most predictable first) and a 2-D
projection (``projection.parquet``), written with :func:`aflite_core.runs.writer.write_run`.
Then, each phase in a fresh Python process (``AFLITE_RUNS_DIR`` = the runs root,
``AFLITE_AUTORUN=0``) so that memory figures do not leak from one phase into the next:

``server``
    The cached wrappers of :mod:`ui.cache` called directly (cold, then cached):
    ``open_run``, ``rows_table``, ``predictability_bins``, ``map_points`` (points returned,
    total, whether it sampled), the map figure at 100k and 25k points with what
    ``st.plotly_chart`` does to it on every rerun (validation, JSON), and every piece of
    work one Explore rerun does on the rows table (facets of the filter widgets,
    ``filters.apply``, ``filters.sort_rows``, ``components.with_row_id``, the page slice, the
    ids kept for the filtered download), with no filter and with a typical filter; next to
    them the cheaper alternatives proposed (``unique()``, cached sort positions); and
    ``cache.duplicate_counts``, which the Report page computes when a run has no
    duplicates measure.
``apptest``
    ``streamlit.testing.v1.AppTest`` on ``app.py``: the Explore page with the run opened
    (``app:run_path`` in the session, as ``tests/apptest_support.open_run`` does), first
    render, cached reruns, a search and the *Removed* view; then the Report page. Asserts no
    exception, a 50-row page with its "of N" caption, and (above ``MAX_MAP_POINTS``) that
    the map states its sample.
``compare``
    The Compare page (``app_pages/compare.py``) on the run and a second fake run of the same
    input written as a Z-filter run (other seed, about a tenth removed, a label-shift table
    and Z-filter statistics in its summary): the first render (the comparison computed and
    cached), cached reruns (median, the figure held against the 3 s budget), and a new
    session's first render with the data cached.
``export-memory`` / ``export-filtered`` / ``export-stream``
    The Report page's *Retained CSV* download (``ui.cache.export_bytes``, built in memory);
    the Explore page's *Download these N rows* (``export_bytes`` with ``row_ids``) for 200
    and 800 ids, extrapolated to every id (matching ids is O(rows x ids) today, so the
    real no-filter case would run for most of an hour), the id matching alone, and the
    same download without ``row_ids``; and, for comparison, the retained export streamed
    to a file with ``aflite_core.runs.exports.export_run``. Each in its own process.

Every measured step prints its wall time, the resident memory before it, the peak during it
(``VmHWM`` reset through ``/proc/self/clear_refs`` before the step) and the growth.

Run: ``.venv/bin/python benchmarks/bench_dashboard_scale.py [--rows 550000]
[--runs-root DIR] [--keep]``. Takes about 1.5-3 minutes on 2 cores; timings depend on the
machine's load, say so when reporting.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import logging
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SNLI_SAMPLE = REPO_ROOT.parent / "shared" / "data" / "snli" / "snli_train_sample.csv"
RUN_NAME = "snli-scale-bench"
#: The second run of the ``compare`` phase (a fake Z-filter run of the same input).
COMPARE_RUN_NAME = "snli-scale-bench-z"
#: Budget of a cached Compare render of two 550k-row runs (issue 14), seconds.
COMPARE_BUDGET_S = 3.0
COLUMNS = ["split", "id", "premise", "hypothesis", "label"]
#: Rows removed per fake AFLite round (the issue's k).
ROUND_SIZE = 5000
PHASES = ("server", "apptest", "compare", "export-memory", "export-filtered", "export-stream")

sys.path.insert(0, str(REPO_ROOT))


# --------------------------------------------------------------------------- memory meter
def _status_kb(field: str) -> int:
    text = Path("/proc/self/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+)\s+kB", text, flags=re.MULTILINE)
    return int(match.group(1)) if match else 0


def rss_mb() -> float:
    """Current resident set size of this process, MiB."""
    return _status_kb("VmRSS") / 1024


def _reset_peak() -> bool:
    """Reset this process's peak RSS (``VmHWM``) to its current RSS; False if not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class Meter:
    """Time and memory of named steps, collected in :attr:`results`."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[dict[str, Any]]:
        """Measure the ``with`` block; extra figures go into the yielded dict."""
        gc.collect()
        before = rss_mb()
        exact = _reset_peak()
        extra: dict[str, Any] = {}
        start = time.perf_counter()
        try:
            yield extra
        finally:
            seconds = time.perf_counter() - start
            peak = _status_kb("VmHWM") / 1024
            record = {"seconds": round(seconds, 3), "rss_before_mb": round(before, 1),
                      "peak_rss_mb": round(peak, 1),
                      "peak_growth_mb": round(peak - before, 1),
                      "rss_after_mb": round(rss_mb(), 1), **extra}
            if not exact:
                record["peak_is_process_peak"] = True
            self.results[name] = record
            print(f"  {name:<44} {_line(record)}", flush=True)


def _line(record: dict[str, Any]) -> str:
    text = (f"{record['seconds']:8.3f} s  rss {record['rss_before_mb']:7.1f} MiB  "
            f"peak {record['peak_rss_mb']:7.1f} (+{record['peak_growth_mb']:.1f})")
    rest = {k: v for k, v in record.items() if k not in (
        "seconds", "rss_before_mb", "peak_rss_mb", "peak_growth_mb", "rss_after_mb")}
    return text + ("  " + json.dumps(rest) if rest else "")


def _quiet_streamlit() -> None:
    """No 'missing ScriptRunContext' warnings when the cache is used outside a session."""
    import streamlit.logger

    streamlit.logger.set_log_level("error")
    logging.getLogger("streamlit").setLevel(logging.ERROR)


# --------------------------------------------------------------------------- the run
def build_run(root: Path, n_rows: int, *, seed: int = 0, row_csvs: bool = False,
              zfilter: bool = False) -> Path:
    """Write a fake ``n_rows``-row SNLI run (no AFLite) into ``root``; return its folder.

    Parameters
    ----------
    root : Path
        Runs root.
    n_rows : int
        Rows of the run (the 20,000-row SNLI sample repeated, ids made unique).
    seed : int
        Seed of the fake scores and projection.
    row_csvs : bool
        Also write ``retained.csv`` / ``removed.csv`` (as the pipeline does; the dashboard
        does not read them).
    zfilter : bool
        Write it as a Z-filter run (:data:`COMPARE_RUN_NAME`): about a tenth removed, the
        Z-filter's statistics in the summary and a ``label_shift.parquet``; the same input
        (sha256, row ids) as the default run, for the ``compare`` phase.
    """
    import numpy as np
    import pandas as pd

    from aflite_core.runs.writer import write_run

    source = pd.read_csv(SNLI_SAMPLE, usecols=COLUMNS)[COLUMNS]
    reps = math.ceil(n_rows / len(source))
    frame = pd.concat([source] * reps, ignore_index=True).iloc[:n_rows]
    copy_no = np.repeat(np.arange(reps), len(source))[:n_rows].astype(str)
    frame["id"] = frame["id"].to_numpy(dtype=object) + "#" + copy_no.astype(object)
    frame.index = pd.Index(frame["id"].to_numpy(dtype=object), name="row_id")

    rng = np.random.default_rng(seed)
    removed = rng.random(n_rows) < (1 / 10 if zfilter else 1 / 3)
    predictability = np.where(removed, rng.beta(8, 2, n_rows), rng.beta(3, 3, n_rows))
    removal_round = np.full(n_rows, -1, dtype=np.int64)
    order = np.flatnonzero(removed)[np.argsort(-predictability[removed], kind="stable")]
    removal_round[order] = 1 + np.arange(len(order)) // ROUND_SIZE
    labels = frame["label"].astype(str).to_numpy()
    scores = pd.DataFrame({
        "row_id": frame.index.to_numpy(),
        "status": pd.array(np.where(removed, "removed", "retained"), dtype="string"),
        "predictability": predictability,
        "removal_round": removal_round,
        "label": pd.array(labels, dtype="string"),
    })

    centres = {lab: rng.normal(0, 4, 2) for lab in sorted(set(labels))}
    centre = np.array([centres[lab] for lab in labels])
    xy = centre + rng.normal(0, 1.5, (n_rows, 2)) + removed[:, None] * 1.0
    projection = pd.DataFrame({"row_id": frame.index.to_numpy(), "x": xy[:, 0].astype("float32"),
                               "y": xy[:, 1].astype("float32"), "method": "umap"})

    n_rounds = int(removal_round.max())
    history, size = [], n_rows
    for r in range(1, n_rounds + 1):
        k = int((removal_round == r).sum())
        history.append({"round": r, "size": size, "removed": k, "size_after": size - k})
        size -= k

    def counts(mask: np.ndarray) -> dict[str, int]:
        values, n = np.unique(labels[mask], return_counts=True)
        return {str(v): int(c) for v, c in zip(values, n, strict=True)}

    n_removed = int(removed.sum())
    tables = {"projection.parquet": projection}
    measures = {"projection": {"status": "ok", "artifacts": ["projection.parquet"]}}
    aflite = {"n_rounds": n_rounds, "stop_reason": "target"}
    if zfilter:
        from aflite_core.measures.label_shift import label_shift_table

        tables["label_shift.parquet"] = label_shift_table(
            labels, ~removed, frame["split"].astype(str).to_numpy())
        measures["label_shift"] = {"status": "ok", "artifacts": ["label_shift.parquet"]}
        aflite = {"n_rounds": n_rounds, "stop_reason": "converged",
                  "zfilter": {"threshold": 4.9, "max_abs_z_before": 41.2,
                              "max_abs_z_after": 4.8, "n_over_threshold_before": 120,
                              "n_over_threshold_after": 0}}
    summary = {
        "parameters": {"representation": "precomputed", "strategy": "greedy_slicing",
                       "n_partitions": 64, "target_size": n_rows - n_removed,
                       "random_state": seed, "filter": "z" if zfilter else "aflite",
                       "note": "fake scores written by "
                       "benchmarks/bench_dashboard_scale.py, not an AFLite run"},
        "aflite": aflite,
        "input": {"name": f"snli_train_{n_rows}.csv",
                  "sha256": hashlib.sha256(f"bench-scale-{n_rows}".encode()).hexdigest(),
                  "n_rows": n_rows,
                  "columns": {"hypothesis": "hypothesis", "label": "label",
                              "premise": "premise", "split": "split", "id": "id"},
                  "excluded": {}, "warnings": []},
        "sizes": {"input": n_rows, "included": n_rows, "filtered": n_rows,
                  "retained": n_rows - n_removed, "removed": n_removed, "warmup": 0,
                  "excluded": 0},
        "labels": {"before": counts(np.ones(n_rows, bool)), "after": counts(~removed),
                   "removed": counts(removed), "warmup": {}},
        "history": history,
        "measures": measures,
    }
    return write_run(root, COMPARE_RUN_NAME if zfilter else RUN_NAME, frame=frame,
                     scores=scores, summary=summary, tables=tables, row_csvs=row_csvs,
                     overwrite=True)


# --------------------------------------------------------------------------- phases
def phase_server(run_path: Path, meter: Meter) -> None:
    """The cached wrappers and one Explore rerun's work on the rows table, directly."""
    import numpy as np

    with meter.step("import ui (streamlit, pandas, plotly)"):
        _quiet_streamlit()
        from ui import cache, charts, components, filters
    with meter.step("open_run (cold)"):
        run = cache.open_run(run_path)
    with meter.step("rows_table (cold: reads dataset+scores)") as info:
        table = cache.rows_table(run_path)
        info["rows"] = len(table)
        info["deep_mb"] = round(table.memory_usage(deep=True).sum() / 2**20, 1)
    with meter.step("rows_table (cached)"):
        cache.rows_table(run_path)
    with meter.step("predictability_bins (cold)") as info:
        info["bins_rows"] = len(cache.predictability_bins(run_path))
    with meter.step("predictability_bins (cached)"):
        cache.predictability_bins(run_path)
    with meter.step("predictability_bins by label (cold)") as info:
        info["bins_rows"] = len(cache.predictability_bins(run_path, by_label=True))
    with meter.step("map_points (cold)") as info:
        points, total = cache.map_points(run_path)
        info.update(points=len(points), total=total, sampled=len(points) < total,
                    max_points=cache.MAX_MAP_POINTS)
    with meter.step("map_points (cached: cache_data unpickles)"):
        points, total = cache.map_points(run_path)
    for n_points in (len(points), min(len(points), 25_000)):
        # Per rerun: explore_view.map_panel builds the figure, then st.plotly_chart validates
        # it again (plotly.tools.return_figure_from_figure_or_data(validate_figure=True)) and
        # serialises it (plotly.io.to_json) into the message sent to the browser.
        sample = points.iloc[:n_points]
        with meter.step(f"map {n_points:,} pts: projection_scatter") as info:
            fig = charts.projection_scatter(sample, color="status")
            info["traces"] = len(fig.data)
        with meter.step(f"map {n_points:,} pts: st.plotly_chart validate+to_json") as info:
            import plotly.io
            import plotly.tools

            checked = plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True)
            info["json_mb"] = round(len(plotly.io.to_json(checked, validate=False)) / 2**20, 2)
    with meter.step("histogram figure + to_json") as info:
        hist = charts.predictability_histogram(cache.predictability_bins(run_path))
        info["json_kb"] = round(len(hist.to_json()) / 1024, 1)

    label_col = run.columns.get("label")
    text = [c for c in (run.columns.get("premise"), run.columns.get("hypothesis")) if c]
    # What explore_view.filter_panel computes on every rerun.
    with meter.step("rerun: filter_panel label values (strip+unique)") as info:
        labels = sorted(table[label_col].astype(str).str.strip().unique().tolist())
        info["labels"] = len(labels)
    with meter.step("rerun: filter_panel statuses present") as info:
        # As explore_view.filter_panel writes it: set(table["status"]) inside the
        # comprehension's condition, so the 550k-element set is built once per status.
        present = [s for s in ("retained", "removed", "warmup", "excluded")
                   if s in set(table["status"])]
        info["statuses"] = len(present)
    with meter.step("proposed: statuses via .unique() once") as info:
        found = set(table["status"].unique().tolist())
        info["statuses"] = len([s for s in ("retained", "removed", "warmup", "excluded")
                                if s in found])
    with meter.step("rerun: filter_panel removal_round max") as info:
        info["max_round"] = int(np.nanmax(table["removal_round"].to_numpy(dtype=float)))

    def rows_panel(name: str, flt: Any) -> None:
        # What explore_view.rows_panel / _table / paged_table / export_filtered do per rerun.
        with meter.step(f"rerun {name}: filters.apply") as info:
            rows = filters.apply(table, flt)
            info["rows"] = len(rows)
        with meter.step(f"rerun {name}: filters.sort_rows(predictability)"):
            rows = filters.sort_rows(rows, "predictability", ascending=False)
        with meter.step(f"rerun {name}: components.with_row_id (whole)"):
            shown = components.with_row_id(rows)
        with meter.step(f"rerun {name}: page slice iloc[0:50]") as info:
            part = shown.iloc[0:50]
            info["page_rows"] = len(part)
        with meter.step(f"rerun {name}: export_filtered ids tolist"):
            ids = rows.index.tolist()
        del rows, shown, part, ids

    rows_panel("no filter", filters.RowFilter(predictability=(0.0, 1.0), label_column=label_col,
                                              search_columns=text))
    rows_panel("filtered", filters.RowFilter(
        statuses=["removed"], labels=["entailment"], label_column=label_col,
        predictability=(0.5, 1.0), search="dog", search_columns=text))
    with meter.step("rerun regex search only (\\bdogs?\\b)") as info:
        info["rows"] = len(filters.apply(table, filters.RowFilter(
            search=r"\bdogs?\b", regex=True, search_columns=text)))
    with meter.step("rerun view 'removed' (sort + status mask)") as info:
        rows = filters.sort_rows(table, "predictability", ascending=False)
        info["rows"] = len(rows[rows["status"] == "removed"])
    import numpy as np

    # The fix proposed for rows_panel: sort positions once per (run, column), cached; per
    # rerun only a boolean mask over them and the one page taken from the table.
    with meter.step("proposed: argsort once per (run, column)"):
        order = np.argsort(-table["predictability"].to_numpy(dtype=float), kind="stable")
    with meter.step("proposed: per rerun mask[order] + page") as info:
        mask = table["status"].to_numpy(dtype=object) == "removed"
        positions = order[mask[order]]
        info["page_rows"] = len(table.iloc[positions[:50]])
        info["rows"] = len(positions)
    with meter.step("Report: duplicate_counts (no duplicates measure)") as info:
        info["rows"] = int(cache.duplicate_counts(run_path).shape[0])


def _spec_sizes(at: Any) -> list[float]:
    sizes = []
    for element in at.get("plotly_chart"):
        spec = getattr(getattr(element, "proto", None), "spec", "") or ""
        sizes.append(round(len(spec) / 2**20, 2))
    return sizes


def _rows_caption(shown: str) -> str:
    match = re.search(r"Rows [\d,]+\S[\d,]+ of [\d,]+", shown)
    return match.group(0) if match else ""


def phase_apptest(run_path: Path, meter: Meter) -> None:
    """Explore and Report pages through AppTest with the big run opened."""
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    with meter.step("import AppTest + ui + plotly"):
        _quiet_streamlit()
        import plotly.graph_objects  # noqa: F401 - imported here, not inside the timed render
        from apptest_support import assert_clean, goto, new_app, open_run, texts

        import ui.explore.view  # noqa: F401
        import ui.report.view  # noqa: F401
    at = new_app(autoload=False)
    at.default_timeout = 300
    open_run(at, run_path)
    n = len(__import__("pandas").read_parquet(run_path / "scores.parquet", columns=["row_id"]))
    with meter.step("Explore first render (cold caches)") as info:
        goto(at, "explore")
        assert_clean(at)
        info["charts_spec_mb"] = _spec_sizes(at)
    page = at.dataframe[-1].value
    shown = texts(at)
    assert len(page) == 50, f"expected a 50-row page, got {len(page)}"
    assert f"of {n:,}" in shown, "the 'Rows 1-50 of N' caption is missing"
    sample_note = re.search(r"Drawing a uniform random sample of [\d,]+ of [\d,]+ points",
                            shown)
    all_note = re.search(r"[\d,]+ points(, \d+ named regions)?\.", shown)
    caption = (sample_note or all_note).group(0) if (sample_note or all_note) else "NONE"
    print(f"  map caption: {caption}")
    first = meter.results["Explore first render (cold caches)"]
    first.update(map_caption=caption, page_caption=_rows_caption(shown))
    from ui.cache import MAX_MAP_POINTS

    if n > MAX_MAP_POINTS:
        assert sample_note, "the map is downsampled but the page does not say so"
    reruns = []
    for i in range(3):
        with meter.step(f"Explore rerun {i + 1} (cached)"):
            at.run()
            assert_clean(at)
        reruns.append(meter.results[f"Explore rerun {i + 1} (cached)"]["seconds"])
    meter.results["Explore rerun median"] = {"seconds": statistics.median(reruns)}
    print(f"  {'Explore rerun median':<44} {statistics.median(reruns):8.3f} s")
    with meter.step("Explore search 'dog' (text_input)") as info:
        at.text_input(key="explore:search").input("dog").run()
        assert_clean(at)
        info["caption"] = _rows_caption(texts(at))
    with meter.step("Explore view 'removed'") as info:
        at.text_input(key="explore:search").input("").run()
        at.segmented_control(key="explore:view").set_value("removed").run()
        assert_clean(at)
        info["caption"] = _rows_caption(texts(at))
    with meter.step("Report first render"):
        goto(at, "report")
        assert_clean(at)
    with meter.step("Report rerun"):
        at.run()
        assert_clean(at)


def phase_compare(run_path: Path, meter: Meter) -> None:
    """The Compare page on the run (A) and its fake Z-filter twin (B), through AppTest."""
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    with meter.step("import AppTest + ui.compare.view"):
        _quiet_streamlit()
        from apptest_support import assert_clean, goto, new_app, open_run

        import ui.compare.view  # noqa: F401
    other = run_path.parent / COMPARE_RUN_NAME
    at = new_app(autoload=False)
    at.default_timeout = 300
    open_run(at, run_path)
    with meter.step("Compare first render (comparison computed)") as info:
        goto(at, "compare")
        assert_clean(at)
        info["run_b"] = at.selectbox(key="compare:run_b").value
    assert Path(at.selectbox(key="compare:run_b").value) == other.resolve()
    metrics = {m.label: m.value for m in at.metric}
    print(f"  overlap: Jaccard {metrics.get('Removed-set Jaccard')}, random "
          f"{metrics.get('Jaccard of random removals')}")
    reruns = []
    for i in range(5):
        with meter.step(f"Compare rerun {i + 1} (cached)"):
            at.run()
            assert_clean(at)
        reruns.append(meter.results[f"Compare rerun {i + 1} (cached)"]["seconds"])
    heads = [h.value for h in at.subheader]
    assert heads.count("Sizes") == 2 and "Removed-set Jaccard" in metrics, heads
    median = statistics.median(reruns)
    verdict = "within" if median <= COMPARE_BUDGET_S else "OVER"
    meter.results["Compare rerun median"] = {"seconds": median, "budget_s": COMPARE_BUDGET_S}
    print(f"  {'Compare rerun median (cached)':<44} {median:8.3f} s  ({verdict} the "
          f"{COMPARE_BUDGET_S:g} s budget)")
    fresh = new_app(autoload=False)
    fresh.default_timeout = 300
    open_run(fresh, run_path)
    with meter.step("Compare new session (data cached)"):
        goto(fresh, "compare")
        assert_clean(fresh)


def phase_export(run_path: Path, meter: Meter, how: str) -> None:
    """One download as the dashboard builds it (in memory) or streamed to disk."""
    _quiet_streamlit()
    from aflite_core.runs import exports  # noqa: F401 - imported before the measured step
    from ui import cache

    cache.core("runs").load_run(run_path).summary  # noqa: B018 - warm the imports
    if how == "memory":
        with meter.step("Report 'Retained CSV': cache.export_bytes") as info:
            data = cache.export_bytes(run_path, "retained")
            info["bytes_mb"] = round(len(data) / 2**20, 1)
    elif how == "filtered":
        # Explore's "Download these N rows" passes the filtered ids (all of them when nothing
        # is filtered). exports.iter_row_chunks matches them with np.isin on object arrays,
        # which numpy does with one full-array comparison per wanted id: O(N x M). Measured
        # on small M and extrapolated; the full 550k would run for hours.
        import numpy as np
        import pandas as pd

        ids = pd.read_parquet(run_path / "scores.parquet", columns=["row_id"])["row_id"]
        every = ids.tolist()
        per_id = []
        for m in (200, 800):
            wanted = every[:: max(1, len(every) // m)][:m]
            with meter.step(f"Explore download, {m} filtered ids") as info:
                data = cache.export_bytes(run_path, "all", row_ids=wanted)
                info.update(rows=m, bytes_mb=round(len(data) / 2**20, 2))
            per_id.append(meter.results[f"Explore download, {m} filtered ids"]["seconds"])
        slope = (per_id[1] - per_id[0]) / 600
        estimate = {"seconds_per_id": round(slope, 5),
                    "extrapolated_all_ids_s": round(per_id[0] + slope * (len(every) - 200))}
        meter.results["Explore download, extrapolated to every id"] = estimate
        print(f"  {'Explore download, extrapolated to all ids':<44} {estimate}")
        scores_ids = ids.to_numpy(dtype=object)
        with meter.step(f"np.isin({len(every):,} object ids, 800 ids) (now)"):
            np.isin(scores_ids, np.array(every[:800], dtype=object))
        with meter.step("proposed: Series.isin(all ids) (hash)") as info:
            info["kept"] = int(ids.isin(every).sum())
        with meter.step("Explore download, no filter, if fixed") as info:
            data = cache.export_bytes(run_path, "all")
            info.update(rows=len(every), bytes_mb=round(len(data) / 2**20, 1))
    else:
        from aflite_core.runs.exports import export_run

        with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
            out = Path(tmp) / "retained.csv"
            with meter.step("retained CSV streamed: exports.export_run") as info:
                result = export_run(run_path, "retained", out)
                info.update(rows=result.n_rows, bytes_mb=round(out.stat().st_size / 2**20, 1))


def run_phase(phase: str, run_path: Path) -> dict[str, Any]:
    """Run one phase in this process; return its measurements."""
    meter = Meter()
    started = time.perf_counter()
    if phase == "server":
        phase_server(run_path, meter)
    elif phase == "apptest":
        phase_apptest(run_path, meter)
    elif phase == "compare":
        phase_compare(run_path, meter)
    else:
        phase_export(run_path, meter, phase.split("-", 1)[1])
    return {"steps": meter.results, "phase_seconds": round(time.perf_counter() - started, 2),
            "process_peak_rss_mb": round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


# --------------------------------------------------------------------------- driver
def _child(phase: str, run_path: Path, env: dict[str, str], timeout: float) -> dict[str, Any]:
    print(f"\n[{phase}]", flush=True)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        result_file = Path(handle.name)
    try:
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--phase", phase, "--run", str(run_path),
                 "--result", str(result_file)], env=env, cwd=REPO_ROOT, check=False,
                timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"  phase {phase} stopped after {timeout} s", flush=True)
            return {"error": f"phase {phase} did not finish in {timeout} s"}
        if proc.returncode != 0:
            return {"error": f"phase {phase} failed with exit code {proc.returncode}"}
        return json.loads(result_file.read_text())
    finally:
        result_file.unlink(missing_ok=True)


def _findings(results: dict[str, Any]) -> list[str]:
    out = []
    for phase, data in results["phases"].items():
        for name, rec in (data.get("steps") or {}).items():
            if ("rerun" in name.lower() or "render" in name) and rec.get("seconds", 0) > 2.0:
                out.append(f"SLOW (>2 s) {phase}: {name} {rec['seconds']} s")
            if rec.get("peak_growth_mb", 0) > 500:
                out.append(f"MEMORY {phase}: {name} +{rec['peak_growth_mb']} MiB peak")
            if "bytes_mb" in rec and ("export_bytes" in name or "download" in name):
                out.append(f"IN MEMORY {phase}: {name} holds {rec.get('bytes_mb')} MiB of CSV "
                           f"(peak +{rec.get('peak_growth_mb')} MiB)")
    return out


def main(argv: list[str] | None = None) -> int:
    """Build the run (unless given), run every phase in a child process, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=550_000, help="rows of the fake run")
    parser.add_argument("--runs-root", type=Path, default=None,
                        help="write the run here (default: a temporary folder, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary runs root")
    parser.add_argument("--reuse", action="store_true",
                        help=f"reuse RUNS_ROOT/{RUN_NAME} if it exists instead of rebuilding")
    parser.add_argument("--row-csvs", action="store_true",
                        help="also write retained.csv/removed.csv as the pipeline does")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"comma-separated subset of {','.join(PHASES)}")
    parser.add_argument("--phase-timeout", type=float, default=180.0,
                        help="seconds after which a phase is stopped (default 180)")
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--run", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.phase:  # child process
        result = run_phase(args.phase, args.run)
        args.result.write_text(json.dumps(result))
        return 0

    if args.rows < 1:
        parser.error(f"--rows: expected a positive integer, got {args.rows}")
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        parser.error(f"--phases: unknown {unknown}; choose from {list(PHASES)}")
    temp = None
    if args.runs_root is None:
        temp = Path(tempfile.mkdtemp(prefix="bench-dashboard-scale-"))
        root = temp / "runs"
    else:
        root = args.runs_root
    total_start = time.perf_counter()
    results: dict[str, Any] = {"rows": args.rows, "phases": {}}
    try:
        run_path = root / RUN_NAME
        if args.reuse and (run_path / "summary.json").is_file():
            print(f"reusing {run_path}")
        else:
            print(f"building a {args.rows:,}-row run in {root} ...", flush=True)
            start = time.perf_counter()
            run_path = build_run(root, args.rows, row_csvs=args.row_csvs)
            results["build_run_s"] = round(time.perf_counter() - start, 2)
            print(f"  built in {results['build_run_s']} s")
        if "compare" in phases and not (args.reuse and (
                root / COMPARE_RUN_NAME / "summary.json").is_file()):
            start = time.perf_counter()
            build_run(root, args.rows, seed=1, row_csvs=args.row_csvs, zfilter=True)
            results["build_compare_run_s"] = round(time.perf_counter() - start, 2)
            print(f"  built the Z-filter twin in {results['build_compare_run_s']} s")
        results["run_disk_mb"] = {p.name: round(p.stat().st_size / 2**20, 1)
                                  for p in sorted(run_path.iterdir()) if p.is_file()}
        phases = [p for p in phases if p != "compare"
                  or (root / COMPARE_RUN_NAME / "summary.json").is_file()]
        print(f"  files (MiB): {results['run_disk_mb']}")
        env = {**os.environ, "AFLITE_RUNS_DIR": str(root), "AFLITE_AUTORUN": "0"}
        env.setdefault("NLTK_DATA", str(REPO_ROOT.parent / "shared" / "nltk_data"))
        env.pop("AFLITE_SAMPLE", None)
        for phase in phases:
            results["phases"][phase] = _child(phase, run_path, env, args.phase_timeout)
    finally:
        if temp is not None and not args.keep:
            shutil.rmtree(temp, ignore_errors=True)
        elif temp is not None:
            print(f"kept {temp}")
    results["total_s"] = round(time.perf_counter() - total_start, 1)
    results["cpu_count"] = os.cpu_count()
    results["load_average_1m"] = round(os.getloadavg()[0], 2)
    results["findings"] = _findings(results)
    print("\nfindings:")
    for line in results["findings"] or ["none above the thresholds"]:
        print(f"  {line}")
    print("\n" + json.dumps(results, indent=1))
    failed = [p for p, d in results["phases"].items() if "error" in d]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
