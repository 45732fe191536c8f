"""Dashboard at scale: a 550,000- or 1,000,000-row run open in Explore and Report.

Builds a run folder of ``--rows`` rows (default 550,000), by default with the **real CLI
audit** (``python -m aflite_core run``, default parameters) of a seeded SNLI-like input
(``bench_cues.build``: the rows of ``../shared/data/snli/snli_train_sample.csv`` with light
seeded perturbation, as bench_pipeline.py builds its sizes), and reports the CLI's wall time
and peak RSS. ``--build fake`` writes plausible fake scores and a map directly instead
(seconds; needed by the ``compare`` phase, whose twin run must share the input). Then each
phase in a fresh Python process (``AFLITE_RUNS_DIR`` = the runs root, ``AFLITE_AUTORUN=0``)
so that memory figures do not leak from one phase into the next:

``server``
    The cached wrappers of :mod:`ui.cache` called directly, cold then cached: ``open_run``,
    ``rows_table``, the histogram bins, ``map_points`` and the map figure with what
    ``st.plotly_chart`` does to it on every rerun; the run's ``RowIndex`` and every Explore
    interaction as ``ui/explore/view.py`` does it (the filter's mask over the decoded
    columns, the sort's positions, the 50-row page) for no filter, a view, label and status
    filters, a predictability range, searches (substring, whole-word regex), a sort on a
    text column and a map selection of 100,000 ids; the removal-rate breakdown; and
    ``cache.duplicate_counts``, which the Report computes when a run has no duplicates
    measure.
``apptest``
    ``streamlit.testing.v1.AppTest`` on ``app.py``: the Explore page with the run opened,
    first render, cached reruns, a search and the *Removed* view; then the Report page.
``browser``
    The README's ``streamlit run serve.py`` on a loopback port and Debian's headless
    Chromium (Playwright): a first session on the home page (the server "already
    running"), then sessions opening the run by its link (``/explore?run=NAME``), each timed
    to the rows table's caption (the page's last element) and to the map drawn; page
    switches (each from a page left idle for ``SETTLE_MS``); a search, a narrower search,
    the *Removed* view and a cleared search typed into the page (time until the count shown
    changes); the server's RSS (its process tree) with one and three sessions; and the first
    session's download of every row through the streaming route, read over HTTP while the
    server's RSS is sampled.
``export``
    The downloads as the route streams them, drained in this process: the Report's
    *Retained CSV* (``cache.stream_export``), Explore's *Download these N rows* for the
    retained view (every retained row, by position) and for a 5,000-row filter.
``compare``
    The Compare page (``app_pages/compare.py``) on the run and a second fake run of the same
    input written as a Z-filter run: first render, cached reruns, a new session
    (``--build fake`` only).

Every measured step prints its wall time, the resident memory before it, the peak during it
(``VmHWM`` reset through ``/proc/self/clear_refs`` before the step) and the growth.

Run: ``.venv/bin/python benchmarks/bench_dashboard_scale.py [--rows 1000000] [--build
audit|fake] [--runs-root DIR --reuse] [--phases server,browser,...]``. At 1,000,000 rows the
audit takes about 9 minutes on 2 cores and the phases about 3 more; timings depend on the
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
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SNLI_SAMPLE = REPO_ROOT.parent / "shared" / "data" / "snli" / "snli_train_sample.csv"
RUN_NAME = "snli-scale-bench"
#: The second run of the ``compare`` phase (a fake Z-filter run of the same input).
COMPARE_RUN_NAME = "snli-scale-bench-z"
#: Idle time before each timed page switch (the page before it has finished drawing).
SETTLE_MS = 1500
#: Budget of a cached Compare render of two 550k-row runs (issue 14), seconds.
COMPARE_BUDGET_S = 3.0
COLUMNS = ["split", "id", "premise", "hypothesis", "label"]
#: Rows removed per fake AFLite round (the issue's k).
ROUND_SIZE = 5000
PHASES = ("server", "apptest", "browser", "export", "compare")

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

    from aflite_core.runs._writer import write_run

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


def audit_run(root: Path, n_rows: int, *, seed: int = 0) -> tuple[Path, dict[str, Any]]:
    """Audit a seeded SNLI-like input of ``n_rows`` rows with the real CLI (default
    parameters) into ``root``/:data:`RUN_NAME`; return the run folder and the CLI's wall time
    and peak RSS.

    The input is ``bench_cues.build`` (the SNLI train sample's rows with light seeded
    perturbation, the builder bench_pipeline.py uses), written as CSV next to the runs root.
    """
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    from bench_cues import build
    from bench_pipeline import watch_peak  # the audit's own peak, not ru_maxrss

    root.mkdir(parents=True, exist_ok=True)
    data = root.parent / f"snli_like_{n_rows}_seed{seed}.csv"
    start = time.perf_counter()
    build(n_rows, seed=seed).to_csv(data, index=False)
    built = time.perf_counter() - start
    out = root / RUN_NAME
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "aflite_core", "run", str(data), "--out",
                             str(out)], cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    peak = [0.0]  # the audit's own peak (VmHWM): ru_maxrss would carry this process's memory
    watcher = threading.Thread(target=watch_peak, args=(proc.pid, peak), daemon=True)
    watcher.start()
    tail: list[str] = []
    for line in proc.stderr:  # progress lines; the last ones say what failed, if anything
        tail = [*tail[-4:], line.rstrip()]
    _, status, usage = os.wait4(proc.pid, 0)
    watcher.join(5)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the CLI audit failed: {' | '.join(tail)}")
    info = {"input_csv_s": round(built, 1), "cli_wall_s": round(wall, 1),
            "cli_peak_rss_mb": round(peak[0] or usage.ru_maxrss / 1024), "input_mb": round(
                data.stat().st_size / 2**20, 1)}
    print(f"  CLI audit of {n_rows:,} rows: {info}", flush=True)
    return out, info


# --------------------------------------------------------------------------- phases
def phase_server(run_path: Path, meter: Meter) -> None:
    """The cached wrappers and one Explore rerun's work on the rows table, directly."""

    with meter.step("import ui (streamlit, pandas, plotly)"):
        _quiet_streamlit()
        from ui import cache, components, filters
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
    with meter.step("map_points (cached, shared)"):
        points, total = cache.map_points(run_path)
    # Per rerun, explore_view.map_panel takes the map's figure from cache.map_figure (built
    # once per run, colour and window: the points, the density image of every row, the
    # regions), then st.plotly_chart validates it again (plotly.tools.
    # return_figure_from_figure_or_data(validate_figure=True)) and serialises it
    # (plotly.io.to_json) into the message sent to the browser.
    with meter.step("map figure (cold: points, density image, regions)") as info:
        fig = cache.map_figure(run_path, color="status")
        info.update(traces=len(fig.data), images=len(fig.layout.images))
    with meter.step("map figure (cached, shared)"):
        fig = cache.map_figure(run_path, color="status")
    with meter.step("map: st.plotly_chart validate+to_json") as info:
        import plotly.io
        import plotly.tools

        checked = plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True)
        info["json_mb"] = round(len(plotly.io.to_json(checked, validate=False)) / 2**20, 2)
    with meter.step("histogram figure (cold) + to_json") as info:
        hist = cache.histogram_figure(run_path)
        info["json_kb"] = round(len(hist.to_json()) / 1024, 1)

    label_col = run.columns.get("label")
    text = [c for c in (run.columns.get("premise"), run.columns.get("hypothesis")) if c]
    # One Explore interaction as ui/explore/view.py does it: the filter's mask over the run's
    # decoded columns (ui.filters.mask_of with the shared RowIndex), the chosen sort's
    # positions, the 50-row page. Each timed cold (first time for this run) and again.
    with meter.step("row_index: build (cold)"):
        index = cache.row_index(run_path)
    with meter.step("facets: labels, statuses, max round (cold)") as info:
        info["labels"] = len(index.categories(label_col, strip=True)) if label_col else 0
        info["statuses"] = len(index.categories("status"))
        info["max_round"] = index.max_number("removal_round")

    def interaction(name: str, flt: Any, sort_by: str = "predictability",
                    view: str = "all") -> None:
        with meter.step(f"interaction: {name}") as info:
            mask = filters.mask_of(table, flt, index)
            if view != "all":
                mask = mask & index.isin("status", [view])
            positions = filters.sorted_positions(index.order(sort_by, ascending=False), mask)
            page = components.with_row_id(index.page(positions, 0, 50))
            info.update(rows=len(positions), page_rows=len(page))

    base = {"predictability": (0.0, 1.0), "label_column": label_col, "search_columns": text}
    interaction("no filter (cold sort)", filters.RowFilter(**base))
    interaction("no filter", filters.RowFilter(**base))
    interaction("view removed", filters.RowFilter(**base), view="removed")
    interaction("status removed + label (cold codes)", filters.RowFilter(
        **{**base, "statuses": ["removed"], "labels": ["entailment"]}))
    interaction("predictability 0.5-1", filters.RowFilter(
        **{**base, "predictability": (0.5, 1.0)}))
    interaction("search 'dog' (cold text)", filters.RowFilter(**base, search="dog"))
    interaction("search 'dog' again (page/sort)", filters.RowFilter(**base, search="dog"))
    interaction("search 'cat'", filters.RowFilter(**base, search="cat"))
    interaction("regex \\bdogs?\\b whole word", filters.RowFilter(
        **base, search=r"dogs?", regex=True, whole_word=True))
    interaction("everything + search 'man'", filters.RowFilter(
        **{**base, "statuses": ["removed"], "labels": ["entailment"],
           "predictability": (0.5, 1.0)}, search="man"))
    interaction("sort by hypothesis (cold)", filters.RowFilter(**base), sort_by="hypothesis")
    interaction("sort by hypothesis", filters.RowFilter(**base), sort_by="hypothesis")
    ids = index.row_ids()[::10].tolist()
    interaction(f"map selection of {len(ids):,} ids", filters.RowFilter(**base, row_ids=ids))
    from ui.panels import breakdown as breakdown_view

    with meter.step("breakdown columns (cold)") as info:
        offered = breakdown_view.columns(run, run_path)
        info["columns"] = offered
    for column in offered[:2]:
        with meter.step(f"breakdown by {column} (cold)") as info:
            info["values"] = len(breakdown_view.table(run_path, column))
        with meter.step(f"breakdown by {column} (cached)"):
            breakdown_view.table(run_path, column)
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


def _drain(chunks: Iterator[bytes], meter_info: dict[str, Any]) -> None:
    """Consume a streamed download as the server sends it (to nowhere), counting bytes."""
    size = 0
    for chunk in chunks:
        size += len(chunk)
    meter_info["bytes_mb"] = round(size / 2**20, 1)


def phase_export(run_path: Path, meter: Meter) -> None:
    """The dashboard's downloads, streamed as the download route sends them."""
    _quiet_streamlit()
    import numpy as np

    from aflite_core.runs import exports  # noqa: F401 - imported before the measured step
    from ui import cache

    cache.open_run(run_path).summary  # noqa: B018 - warm the imports
    with meter.step("Report 'Retained CSV' streamed (stream_export)") as info:
        _drain(cache.stream_export(run_path, "retained"), info)
    table = cache.rows_table(run_path)
    index = cache.row_index(run_path)
    columns = list(table.columns)
    retained = index.isin("status", ["retained"])
    order = index.order("predictability", ascending=False)
    positions = order[retained[order]]
    with meter.step("Explore 'Download these N rows', retained view") as info:
        _drain(cache.stream_rows(table, positions, columns), info)
        info["rows"] = len(positions)
    few = positions[:: max(1, len(positions) // 5_000)]
    with meter.step("Explore download, a 5,000-row filter") as info:
        _drain(cache.stream_rows(table, np.sort(few), columns), info)
        info["rows"] = len(few)


def _tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants, MiB."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        match = re.search(r"^VmRSS:\s+(\d+)\s+kB", status, flags=re.MULTILINE)
        total += int(match.group(1)) / 1024 if match else 0.0
        todo.extend(int(c) for c in children)
    return total


def _rows_match(page: Any) -> str:
    """The Explore table's "N rows match" line as the page shows it now ('' if none)."""
    found = page.get_by_text(re.compile(r"^[\d,]+ rows match$"))
    try:
        return found.first.inner_text(timeout=200) if found.count() else ""
    except Exception:  # noqa: BLE001 - the page is redrawing: nothing to read yet
        return ""


def _wait_change(page: Any, before: str, timeout_s: float = 60.0) -> str:
    """Poll until the "N rows match" line differs from ``before``; return it."""
    end = time.perf_counter() + timeout_s
    while time.perf_counter() < end:
        now = _rows_match(page)
        if now and now != before:
            return now
        page.wait_for_timeout(25)
    raise AssertionError(f"the rows count did not change from {before!r}")


def phase_browser(run_path: Path, meter: Meter) -> None:
    """The dashboard as a user meets it: ``streamlit run serve.py`` on this machine, the run
    opened by link in headless Chromium (Debian's), sessions one after the other, page
    switches, filters typed into the page, and the server's memory (its process tree)."""
    import statistics as stats

    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(REPO_ROOT))
    from tests.e2e.conftest import start_server, stop_server, wait_healthy

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise RuntimeError("Debian's chromium is not installed (apt-get install chromium)")
    log = Path(tempfile.mkdtemp(prefix="bench-browser-")) / "streamlit.log"
    process, url = start_server(run_path.parent, log)
    link = f"{url}/explore?run={run_path.name}"
    timeout = 300_000
    try:
        with meter.step("server start (healthy)") as info:
            info["healthy_s"] = round(wait_healthy(url, process, timeout=120), 2)
        meter.results["server RSS idle"] = {"rss_mb": round(_tree_rss_mb(process.pid), 1)}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=[
                "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking"])
            pages = []

            def open_session(name: str) -> Any:
                """A new browser context opens the run by its link. Interactive: the rows
                table's caption is drawn (the page's last element: every widget above it is
                usable); the map is timed too, scrolled into view (Plotly draws there)."""
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.set_default_timeout(timeout)
                start = time.perf_counter()
                page.goto(link)
                page.get_by_text(re.compile(r"^Rows 1–50 of [\d,]+$")).first.wait_for()
                seconds = time.perf_counter() - start
                charts = page.locator("[data-testid='stPlotlyChart']")
                charts.nth(2).scroll_into_view_if_needed()
                charts.nth(2).locator(".js-plotly-plot").wait_for()
                map_s = time.perf_counter() - start
                record = {"seconds": round(seconds, 2), "map_drawn_s": round(map_s, 2),
                          "server_rss_mb": round(_tree_rss_mb(process.pid), 1)}
                meter.results[f"Explore interactive, {name}"] = record
                print(f"  {'Explore interactive, ' + name:<44} {seconds:8.2f} s (map drawn "
                      f"{map_s:.2f} s), server RSS {record['server_rss_mb']} MiB", flush=True)
                pages.append(page)
                return page

            # The server is already running and has served a session (the setting):
            # its imports and the bundled sample are loaded; this run is not opened yet.
            warm = browser.new_context().new_page()
            warm.set_default_timeout(timeout)
            start = time.perf_counter()
            warm.goto(url)
            warm.get_by_text("The bundled sample is loaded.").wait_for()
            meter.results["server warm-up: a first session on the home page"] = {
                "seconds": round(time.perf_counter() - start, 2)}
            warm.context.close()
            meter.results["server RSS before the run is opened"] = {
                "rss_mb": round(_tree_rss_mb(process.pid), 1)}
            first = open_session("first session (cold)")
            shots = Path(os.environ.get("BENCH_SCREENSHOTS", tempfile.gettempdir()))
            first.screenshot(path=str(shots / "bench-scale-explore.png"), full_page=False)
            page = open_session("second session")
            switches = []
            for target, ready in (("Report", "Downloads"), ("Explore", None),
                                  ("Cues", None), ("Explore", None)):
                # from a settled page: the last page's sections and charts finish drawing
                # after its first heading (the Report's lazy sections, the map's WebGL),
                # and a reader does not click within milliseconds of it
                page.wait_for_timeout(SETTLE_MS)
                start = time.perf_counter()
                page.get_by_test_id("stSidebarNav").get_by_text(target, exact=True).click()
                if ready:
                    page.get_by_role("heading", name=ready).wait_for()
                elif target == "Explore":
                    page.get_by_text(re.compile(r"^Rows 1–50 of [\d,]+$")).first.wait_for()
                else:
                    page.get_by_role("heading", name=target, exact=True).wait_for()
                switches.append(time.perf_counter() - start)
                print(f"  page switch to {target:<30} {switches[-1]:8.2f} s", flush=True)
            meter.results["page switch median"] = {"seconds": round(stats.median(switches), 2),
                                                   "each_s": [round(v, 2) for v in switches]}
            # interactions typed into the page: the time until the count shown changes
            page.wait_for_timeout(1500)
            search = page.get_by_label("Search the text")
            for name, action in (
                    ("search 'dog'", lambda: (search.fill("dog"), search.press("Enter"))),
                    ("view Removed", lambda: page.get_by_test_id("stButtonGroup").filter(
                        has_text="side by side").get_by_text("Removed", exact=True).click()),
                    ("search 'dog man'", lambda: (search.fill("dog man"),
                                                  search.press("Enter"))),
                    ("search cleared", lambda: (search.fill(""), search.press("Enter")))):
                before = _rows_match(page)
                start = time.perf_counter()
                action()
                after = _wait_change(page, before)
                seconds = time.perf_counter() - start
                meter.results[f"browser: {name}"] = {"seconds": round(seconds, 3),
                                                     "shown": after}
                print(f"  browser: {name:<35} {seconds:8.3f} s  ({before} -> {after})",
                      flush=True)
            open_session("third session")
            meter.results["server RSS, three sessions open"] = {
                "rss_mb": round(_tree_rss_mb(process.pid), 1)}
            print(f"  server RSS, three sessions open: "
                  f"{meter.results['server RSS, three sessions open']['rss_mb']} MiB")
            # the streamed download of the first session's table (every row), over HTTP
            href = first.get_by_role("link", name=re.compile(r"^Download these")).first \
                .get_attribute("href")
            peak = {"rss": 0.0}
            done = threading.Event()

            def sample() -> None:
                while not done.is_set():
                    peak["rss"] = max(peak["rss"], _tree_rss_mb(process.pid))
                    time.sleep(0.1)

            before_rss = _tree_rss_mb(process.pid)
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            start = time.perf_counter()
            size = 0
            with urllib.request.urlopen(url + href, timeout=600) as response:
                header = response.readline()
                size += len(header)
                lines = 0
                while chunk := response.read(1 << 20):
                    size += len(chunk)
                    lines += chunk.count(b"\r\n")
            seconds = time.perf_counter() - start
            done.set()
            sampler.join()
            meter.results["download every row of the table (HTTP, streamed)"] = {
                "seconds": round(seconds, 2), "bytes_mb": round(size / 2**20, 1),
                "server_rss_before_mb": round(before_rss, 1),
                "server_peak_growth_mb": round(peak["rss"] - before_rss, 1),
                "header": header.decode("utf-8", "replace").strip()[:80]}
            print(f"  download every row over HTTP: {seconds:.1f} s, {size / 2**20:.0f} MiB, "
                  f"server RSS +{peak['rss'] - before_rss:.0f} MiB at peak", flush=True)
            browser.close()
    finally:
        stop_server(process)


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
    elif phase == "export":
        phase_export(run_path, meter)
    else:
        phase_browser(run_path, meter)
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
            if "bytes_mb" in rec and "export_bytes" in name:
                out.append(f"IN MEMORY {phase}: {name} holds {rec.get('bytes_mb')} MiB of CSV "
                           f"(peak +{rec.get('peak_growth_mb')} MiB)")
    return out


def main(argv: list[str] | None = None) -> int:
    """Build the run (unless given), run every phase in a child process, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=550_000, help="rows of the run")
    parser.add_argument("--build", choices=("audit", "fake"), default="audit",
                        help="audit: the real CLI audit of a seeded SNLI-like input (default); "
                             "fake: plausible fake scores and map written directly (seconds)")
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
            print(f"building a {args.rows:,}-row run ({args.build}) in {root} ...", flush=True)
            start = time.perf_counter()
            if args.build == "audit":
                run_path, results["cli_audit"] = audit_run(root, args.rows)
            else:
                run_path = build_run(root, args.rows, row_csvs=args.row_csvs)
            results["build_run_s"] = round(time.perf_counter() - start, 2)
            print(f"  built in {results['build_run_s']} s")
        if "compare" in phases and args.build == "audit":
            print("  compare: needs a twin of the same input; run it with --build fake")
            phases = [p for p in phases if p != "compare"]
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
