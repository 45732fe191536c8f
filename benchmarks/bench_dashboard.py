"""Dashboard benchmark in a real browser: first paint and page switches.

Starts ``streamlit run app.py`` on a free loopback port (runs root in a temporary folder, with
one finished audit of the bundled sample prepared beforehand so the pages have results to
show), drives headless Debian chromium through Playwright and prints:

* ``server_ready_s``: from process start to a healthy ``/_stcore/health``;
* ``first_paint_s``: from navigating to the app, with the server up, until the bundled
  sample's validation report is on screen (the "Rows read 4,000" metric, the first rendered
  table), for the first session after start-up (cold: the server imports its libraries) and
  for a second session (warm);
* ``start_to_first_paint_s`` (goal <= 3 s, issue 63): a cold server's start to that first
  table -- ``server_ready_s + first_paint_cold_s`` (the browser's own launch left out): what
  issue 63's browser test measured (3.7-5.0 s then);
* ``page_switch_s`` (goal <= 1 s): clicking a page in the sidebar until that page's content is
  on screen and the app is idle, with results already cached; median and max per page over
  several rounds.

Run: ``.venv/bin/python benchmarks/bench_dashboard.py [--rounds 5]``. Needs Debian chromium
(``apt-get install chromium``). Timings depend on the machine's load; say so when reporting.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "e2e"))

from conftest import (  # noqa: E402 - the e2e helpers start the server and the browser
    CHROMIUM_ARGS,
    start_server,
    stop_server,
    wait_healthy,
)

#: What marks each page as drawn (text on screen) -- and, for Explore, its three charts.
SENTINELS = {
    "Data": "Rows read",
    "Audit": "Previous runs",
    "Explore": "Map of the rows",
    "Cues": "PMI, LMI and z side by side",
    "Report": "Removal rate by column",
}
IDLE_JS = ("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
           " || !/Running/.test(document.querySelector('[data-testid=\"stStatusWidget\"]')"
           ".innerText)")


def prepare_run(runs_root: Path) -> Path:
    """One complete audit of the bundled sample (every measure, PCA map)."""
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    dataset = load_dataset(REPO_ROOT / "aflite_core" / "data" / "snli_sample.csv")
    config = AuditConfig(target_size=2000, n_partitions=32, slice_size=200,
                         measure_params={"projection": {"method": "pca"},
                                         "baselines": {"n_random_draws": 3, "n_splits": 3}})
    return run_audit(dataset, config, runs_root=runs_root)


def first_paint(browser, url: str) -> float:
    """Seconds from navigation until the sample's validation report shows."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    start = time.perf_counter()
    page.goto(url)
    page.get_by_test_id("stMetricValue").filter(has_text="4,000").first.wait_for(
        timeout=60_000)
    elapsed = time.perf_counter() - start
    page.close()
    return elapsed


def switch(page, name: str) -> float:
    """Seconds from clicking ``name`` in the sidebar until its content shows and it is idle."""
    start = time.perf_counter()
    page.get_by_test_id("stSidebarNavLink").filter(has_text=name).click()
    page.get_by_text(SENTINELS[name], exact=False).first.wait_for(timeout=60_000)
    if name == "Explore":
        page.locator("[data-testid='stPlotlyChart'] .js-plotly-plot").nth(2).wait_for(
            timeout=60_000)
    page.wait_for_function(IDLE_JS, timeout=60_000)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="page-switch rounds")
    parser.add_argument("--runs-root", type=Path, default=None,
                        help="use this runs root (holding an audit of the sample) instead of "
                             "preparing a new run")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("error: Debian chromium is not installed (apt-get install chromium)",
              file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    if "NLTK_DATA" not in os.environ and (REPO_ROOT.parent / "shared" / "nltk_data").is_dir():
        os.environ["NLTK_DATA"] = str(REPO_ROOT.parent / "shared" / "nltk_data")
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        runs_root = args.runs_root or folder / "runs"
        run = prepare_run(runs_root) if args.runs_root is None else next(
            p for p in sorted(runs_root.iterdir()) if not p.name.startswith("."))
        prepare_s = time.perf_counter() - t0
        started = time.perf_counter()
        process, url = start_server(runs_root, folder / "streamlit.log")
        results: dict[str, object] = {"prepared_run": run.name,
                                      "prepare_run_s": round(prepare_s, 2)}
        try:
            wait_healthy(url, process)
            results["server_ready_s"] = round(time.perf_counter() - started, 2)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium,
                                                     args=CHROMIUM_ARGS)
                results["first_paint_cold_s"] = round(first_paint(browser, url), 2)
                results["first_paint_warm_s"] = round(first_paint(browser, url), 2)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(url)
                page.get_by_text(SENTINELS["Data"]).first.wait_for(timeout=60_000)
                for name in SENTINELS:  # warm every cache once
                    switch(page, name)
                timings: dict[str, list[float]] = {name: [] for name in SENTINELS}
                for _ in range(args.rounds):
                    for name in ("Audit", "Explore", "Cues", "Report", "Data"):
                        timings[name].append(switch(page, name))
                results["page_switch_s"] = {
                    name: {"median": round(statistics.median(v), 3), "max": round(max(v), 3)}
                    for name, v in timings.items()
                }
                every = [x for v in timings.values() for x in v]
                results["page_switch_median_s"] = round(statistics.median(every), 3)
                results["page_switch_max_s"] = round(max(every), 3)
                browser.close()
        finally:
            stop_server(process)
    if "first_paint_cold_s" in results:
        results["start_to_first_paint_s"] = round(
            float(results["server_ready_s"]) + float(results["first_paint_cold_s"]), 2)
    results["goals"] = {"start_to_first_paint_s": 3.0, "page_switch_s": 1.0}
    results["cpu_count"] = os.cpu_count()
    results["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
