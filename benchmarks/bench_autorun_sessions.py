"""Several new users at once: N browser sessions open the dashboard together, autorun on.

Each new session audits the bundled sample in the background. Three sessions opened at once
once ended with 2 of 3 users seeing "run folder ... already exists". This starts the server as
the README does (autorun on, throw-away runs root), opens N sessions within a second in
Debian's headless chromium, waits until every sidebar names a finished run, and prints per
session: seconds until then, the run it shows, and any error text on its pages; then the run
folders in the runs root and the server log's warnings.

While the audits run (each in its worker process, ``ui/jobs.py``), it also measures what
the server still does for everyone else: the health endpoint's latency every quarter second
(median and max; goal <= 0.5 s) and, a few seconds in, how long a new session takes to paint
the sample's validation report (goal <= 5 s).

Usage::

    python benchmarks/bench_autorun_sessions.py [--sessions 4]

Needs ``chromium`` (``apt-get install -y chromium``) and ``playwright`` (requirements-dev).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sample_autorun import _start  # noqa: E402 - also puts tests/e2e on the path
from conftest import CHROMIUM_ARGS, stop_server, wait_healthy  # noqa: E402

TIMEOUT_S = 240
ERRORS = ("already exists", "failed", "Traceback", "Error")


def _runs(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if not p.name.startswith(".") and (p / "summary.json").is_file())


def _health_latency(url: str) -> float:
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10) as response:
            response.read()
    except OSError:
        return float("inf")
    return time.perf_counter() - start


def _paint_seconds(browser, url: str) -> float:
    """Seconds from opening a new session until the sample's validation report shows."""
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    start = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.get_by_test_id("stMetricValue").filter(has_text="4,000").first.wait_for(
        timeout=60_000)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="aflite-sessions-") as tmp:
        runs_root, log_path = Path(tmp) / "runs", Path(tmp) / "streamlit.log"
        process, url = _start(runs_root, log_path)
        results = []
        try:
            wait_healthy(url, process)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=shutil.which("chromium"),
                                             args=CHROMIUM_ARGS)
                pages = []
                start = time.monotonic()
                for _ in range(args.sessions):  # all within about a second
                    page = browser.new_context(viewport={"width": 1400, "height": 900}
                                               ).new_page()
                    page.goto(url, wait_until="commit")
                    pages.append(page)
                done: dict[int, tuple[float, str]] = {}
                errors: dict[int, list[str]] = {i: [] for i in range(len(pages))}
                latencies: list[float] = []
                painted: float | None = None
                for page in pages:  # every session has painted; its audit is running
                    page.get_by_test_id("stMetricValue").filter(has_text="4,000").first \
                        .wait_for(timeout=60_000)
                first_painted = time.monotonic() - start
                while len(done) < len(pages) and time.monotonic() - start < TIMEOUT_S:
                    latencies.append(_health_latency(url))
                    if painted is None and not _runs(runs_root):
                        painted = _paint_seconds(browser, url)  # audits running meanwhile
                    finished = _runs(runs_root)
                    for i, page in enumerate(pages):
                        if i in done:
                            continue
                        try:
                            body = page.inner_text("body", timeout=2000)
                        except Exception:  # noqa: BLE001 - page still loading
                            continue
                        errors[i] += [e for e in ERRORS if e in body and e not in errors[i]]
                        shown = [name for name in finished if name in body.replace("\n", "")]
                        if shown:  # the longest match: 'name-2' also contains 'name'
                            done[i] = (time.monotonic() - start, max(shown, key=len))
                    time.sleep(0.25)
                for i in range(len(pages)):
                    seconds, run = done.get(i, (None, "(none within the time limit)"))
                    results.append((i, seconds, run, errors[i]))
                browser.close()
        finally:
            stop_server(process)
        runs = _runs(runs_root)
        log = log_path.read_text(errors="replace")
    failures = 0
    print(f"{args.sessions} sessions opened at once (autorun on)")
    for i, seconds, run, errs in results:
        ok = seconds is not None and not errs
        failures += not ok
        when = f"{seconds:.1f} s" if seconds is not None else "-"
        print(f"  session {i + 1}: {'ok' if ok else 'FAILED'}  {when}  shows {run}"
              + (f"  errors: {errs}" if errs else ""))
    print(f"run folders: {len(runs)} {runs}")
    if latencies:
        print(f"health endpoint while the audits ran: median "
              f"{statistics.median(latencies):.3f} s, max {max(latencies):.3f} s over "
              f"{len(latencies)} probes (goal <= 0.5 s)")
    print(f"the {args.sessions} sessions painted within {first_painted:.1f} s of opening")
    print(f"a new session painted in {painted:.2f} s with the audits running (goal <= 5 s)"
          if painted is not None else "no new session was opened (the audits ended first)")
    problems = [ln for ln in log.splitlines() if "Traceback" in ln or "Error" in ln][:5]
    print(f"server log: {len(log.encode())} bytes; problems: {problems or 'none'}")
    print(f"failures: {failures} of {args.sessions}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
