"""Load benchmark: concurrent browser sessions driving the dashboard on loopback.

Starts ``streamlit run app.py`` headless on a free 127.0.0.1 port with a throw-away runs
root, then drives it with N concurrent sessions (one browser context each, Debian chromium
through Playwright's async API; Playwright's own browser download is never used). Each
session:

1. opens the app (the bundled sample loads),
2. uploads its own dataset (a different number of rows per session) and checks that the
   Data page and the sidebar show exactly its row count,
3. runs a small audit on the Audit page and waits for it to finish,
4. then, until the time budget is spent, cycles through the pages (Explore, Cues, Report,
   Data, Audit), checking after every step that the sidebar still shows its own file and
   run, never another session's.

At the end every run folder is matched to the session that made it (input name and row
count in ``summary.json``). Prints latency percentiles per action and the per-session check.

Usage::

    python benchmarks/bench_load.py [--sessions 4] [--duration 60] [--rows 200]

Needs ``chromium`` (``apt-get install -y chromium``) and ``playwright`` (requirements-dev).
Timings depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests" / "e2e"))

from conftest import (  # noqa: E402 - the e2e helpers start the server and the browser
    CHROMIUM_ARGS,
    start_server,
    stop_server,
    wait_healthy,
)

PAGES = ["Explore", "Cues", "Report", "Data", "Audit"]
TIMEOUT_MS = 180_000


@dataclass
class Session:
    """One simulated user: its dataset, what it saw, and its timings."""

    index: int
    name: str
    rows: int
    csv: bytes
    timings: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    rows_shown: str = ""
    run_name: str = ""
    steps: int = 0
    violations: list[str] = field(default_factory=list)
    error: str = ""


def make_csv(rows: int, seed: int) -> bytes:
    """A small NLI-style CSV with a planted cue (``never`` marks contradictions)."""
    lines = ["premise,hypothesis,label"]
    for i in range(rows):
        label = ("entailment", "contradiction", "neutral")[(i + seed) % 3]
        cue = " never" if label == "contradiction" and i % 4 else ""
        lines.append(f"Person {i} of group {seed} walks a dog in the park.,"
                     f"Someone{cue} is outside with animal number {i % 17}.,{label}")
    return ("\r\n".join(lines) + "\r\n").encode()


async def settle(page) -> None:
    """Wait until the app has finished its rerun (no 'Running' status)."""
    await page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || !/Running/.test(document.querySelector('[data-testid=\"stStatusWidget\"]')"
        ".innerText)", timeout=TIMEOUT_MS)


async def timed(session: Session, action: str, coro) -> None:
    start = time.perf_counter()
    await coro
    session.timings[action].append(time.perf_counter() - start)


async def nav(page, name: str) -> None:
    await page.get_by_test_id("stSidebarNavLink").filter(has_text=name).click()
    await page.get_by_role("heading", name=name, exact=True).first.wait_for(timeout=TIMEOUT_MS)
    await settle(page)


async def check_sidebar(page, session: Session, others: list[Session]) -> None:
    text = await page.get_by_test_id("stSidebar").inner_text()
    if session.name not in text:
        session.violations.append(f"step {session.steps}: own file not in the sidebar")
    for other in others:
        if other.name in text or (other.run_name and other.run_name in text):
            session.violations.append(f"step {session.steps}: saw session {other.index}")


async def drive(browser, url: str, session: Session, others: list[Session],
                duration: float, audit_params: dict) -> None:
    context = await browser.new_context(viewport={"width": 1400, "height": 1600})
    page = await context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    try:
        await timed(session, "open app", _open(page, url))
        await timed(session, "upload + load", _upload(page, session))
        value = await page.get_by_test_id("stMetricValue").first.inner_text()
        session.rows_shown = value.strip()
        await timed(session, "page: Audit", nav(page, "Audit"))
        await timed(session, "audit run", _audit(page, audit_params))
        text = await page.get_by_test_id("stSidebar").inner_text()
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        heading = [k for k, ln in enumerate(lines) if ln.endswith("Run")]
        if heading and heading[0] + 1 < len(lines):
            session.run_name = lines[heading[0] + 1]
        await check_sidebar(page, session, others)
        deadline = time.monotonic() + duration  # page cycling after this session's audit
        i = 0
        while time.monotonic() < deadline:
            name = PAGES[i % len(PAGES)]
            await timed(session, f"page: {name}", nav(page, name))
            session.steps += 1
            await check_sidebar(page, session, others)
            i += 1
    except Exception as exc:  # noqa: BLE001 - reported in the summary
        session.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    finally:
        if dialogs:
            session.violations.append(f"dialogs opened: {dialogs}")
        await context.close()


async def _open(page, url: str) -> None:
    await page.goto(url)
    await page.get_by_text("The bundled sample is loaded.").wait_for(timeout=TIMEOUT_MS)
    await settle(page)


async def _upload(page, session: Session) -> None:
    await page.get_by_text("Upload a file").click()
    await page.locator("input[type=file]").first.set_input_files(
        files=[{"name": session.name, "mimeType": "text/csv", "buffer": session.csv}])
    expected = f"{session.rows:,} of {session.rows:,} rows audited"
    await page.get_by_test_id("stSidebar").get_by_text(expected).wait_for(timeout=TIMEOUT_MS)
    await settle(page)


async def _set_number(page, label: str, value: int) -> None:
    box = page.get_by_label(label, exact=True)
    await box.fill(str(value))
    await box.press("Enter")
    await settle(page)


#: Optional measures switched off in the benchmark's audits (the 2-D map stays on).
SKIPPED_MEASURES = ("Lexical cues (before vs after)", "KNN distances (before vs after)",
                    "Baselines vs random control")


async def _audit(page, params: dict) -> None:
    await page.get_by_role("button", name="Run audit").wait_for(timeout=TIMEOUT_MS)
    await _set_number(page, "Partitions m", params["m"])
    for label in SKIPPED_MEASURES:
        await page.get_by_role("button", name=f"Remove {label}").first.click()
        await settle(page)
    await page.get_by_role("button", name="Run audit").click()
    await page.get_by_text("Last audit finished").wait_for(timeout=TIMEOUT_MS)
    await settle(page)


async def run_sessions(url: str, sessions: list[Session], duration: float,
                       chromium: str, audit_params: dict) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium,
                                                   args=CHROMIUM_ARGS)
        await asyncio.gather(*(
            drive(browser, url, s, [o for o in sessions if o is not s], duration, audit_params)
            for s in sessions))
        await browser.close()


def percentiles(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    if not ms:
        return "-"

    def q(p: float) -> float:
        return ms[min(len(ms) - 1, int(round(p * (len(ms) - 1))))]

    return (f"{len(ms):4d}  p50 {q(0.5):7.0f}  p90 {q(0.9):7.0f}  p99 {q(0.99):7.0f}  "
            f"max {ms[-1]:7.0f}  mean {statistics.fmean(ms):7.0f}")


def match_runs(runs_root: Path, sessions: list[Session]) -> dict[int, list[str]]:
    """Session index -> names of the run folders whose input is that session's file."""
    found: dict[int, list[str]] = defaultdict(list)
    for folder in sorted(p for p in runs_root.iterdir() if not p.name.startswith(".")):
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        for s in sessions:
            if (summary["input"]["name"] == s.name
                    and summary["input"]["n_rows"] == s.rows):
                found[s.index].append(folder.name)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--duration", type=float, default=60.0,
                        help="seconds each session keeps cycling through the pages")
    parser.add_argument("--rows", type=int, default=200,
                        help="rows of the first session's dataset (the k-th has k times it)")
    parser.add_argument("--partitions", type=int, default=4, help="AFLite m of each audit")
    args = parser.parse_args()

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium not found: apt-get install -y chromium", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="aflite-bench-load-"))
    runs_root = folder / "runs"
    sessions = [Session(i, f"load-session-{i}.csv", args.rows * (i + 1),
                        make_csv(args.rows * (i + 1), i)) for i in range(args.sessions)]
    server, url = start_server(runs_root, folder / "streamlit.log")
    try:
        started = wait_healthy(url, server, timeout=120.0)
        print(f"server healthy after {started:.1f} s on {url}; {args.sessions} sessions, "
              f"{args.duration:.0f} s of page cycling each")
        wall = time.perf_counter()
        asyncio.run(run_sessions(url, sessions, args.duration, chromium,
                                 {"m": args.partitions}))
        wall = time.perf_counter() - wall
    finally:
        stop_server(server)

    print(f"\nwall time {wall:.1f} s (startup, upload and audit included)\n")
    print("latency per action, all sessions (ms):")
    actions: dict[str, list[float]] = defaultdict(list)
    for s in sessions:
        for action, values in s.timings.items():
            actions[action].extend(values)
    order = ["open app", "upload + load", "audit run"] + [f"page: {p}" for p in PAGES]
    for action in order:
        print(f"  {action:15s} n={percentiles(actions.get(action, []))}")
    pages = [v for a, vals in actions.items() if a.startswith("page:") for v in vals]
    print(f"  {'all page views':15s} n={percentiles(pages)}")

    runs = match_runs(runs_root, sessions) if runs_root.exists() else {}
    print("\nper session:")
    ok = True
    for s in sessions:
        expected = f"{s.rows:,}"
        own_run = runs.get(s.index, [])
        good = (s.rows_shown == expected and len(own_run) == 1 and own_run[0] == s.run_name
                and not s.violations and not s.error)
        ok &= good
        print(f"  session {s.index}: {s.name} {s.rows:5d} rows | shown {s.rows_shown or '-':>6} | "
              f"run {s.run_name or '-'} ({'matches' if own_run == [s.run_name] else own_run}) | "
              f"{s.steps} page views | isolation violations {len(s.violations)}"
              + (f" | error {s.error}" if s.error else "") + ("  OK" if good else "  FAILED"))
        for v in s.violations[:5]:
            print(f"      {v}")
    print(f"\nall sessions saw their own, correct result: {'yes' if ok else 'NO'}")
    shutil.rmtree(folder, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
