"""First start as a new user sees it: the bundled sample's automatic audit, in a real browser.

Starts ``streamlit run serve.py`` exactly as the README does (default file watcher, autorun on)
on a free loopback port with a throw-away runs root, opens it in Debian's headless chromium,
and prints:

- seconds from opening the page until the automatic audit's run folder is complete, and until
  the sidebar names the finished run;
- what the sidebar said while the audit was running (it must not claim the rows were audited);
- every request the page made to a host other than the server (must be none: offline use);
- the size of the server's log and whether it holds a warning or traceback.

Usage::

    python benchmarks/bench_sample_autorun.py [--repeat 3] [--screenshots DIR]

Needs ``chromium`` (``apt-get install -y chromium``) and ``playwright`` (requirements-dev).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests" / "e2e"))

from conftest import CHROMIUM_ARGS, free_port, stop_server, wait_healthy  # noqa: E402

TIMEOUT_S = 300


def _start(runs_root: Path, log_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "AFLITE_RUNS_DIR": str(runs_root), "AFLITE_AUTORUN": "1"}
    log = open(log_path, "wb")  # noqa: SIM115 - closed by stop_server
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true",
         "--server.port", str(port)],
        cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    process.log = log  # type: ignore[attr-defined]
    return process, f"http://localhost:{port}"


def _complete_run(runs_root: Path) -> Path | None:
    if not runs_root.is_dir():
        return None
    for folder in runs_root.iterdir():
        if not folder.name.startswith(".") and (folder / "summary.json").is_file():
            return folder
    return None


def one_start(chromium: str, shots: Path | None, index: int) -> dict:
    """Start a server, open it, wait for the automatic audit; return what was seen."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="aflite-autorun-") as tmp:
        runs_root, log_path = Path(tmp) / "runs", Path(tmp) / "streamlit.log"
        process, url = _start(runs_root, log_path)
        outside: list[str] = []
        sidebar_during: list[str] = []
        try:
            wait_healthy(url, process)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                host = urlparse(url).hostname

                def note(request) -> None:
                    target = urlparse(request.url)
                    if target.scheme in ("http", "https", "ws", "wss") and \
                            target.hostname not in (host, "127.0.0.1", "localhost"):
                        outside.append(request.url)

                page.on("request", note)
                start = time.monotonic()
                page.goto(url)
                sidebar = page.get_by_test_id("stSidebar")
                sidebar.get_by_text("Dataset").wait_for(timeout=TIMEOUT_S * 1000)
                run_done = None
                while time.monotonic() - start < TIMEOUT_S:
                    if run_done is None and _complete_run(runs_root) is not None:
                        run_done = time.monotonic() - start
                    text = sidebar.inner_text()
                    if run_done is None and "Audit running" in text:
                        sidebar_during.append(text)
                        if shots and len(sidebar_during) == 1:
                            page.screenshot(path=str(shots / f"autorun-{index}-running.png"))
                    folder = _complete_run(runs_root)
                    if folder is not None and folder.name in text.replace("\n", ""):
                        break
                    time.sleep(0.25)
                shown = time.monotonic() - start
                if shots:
                    page.wait_for_timeout(1500)
                    page.screenshot(path=str(shots / f"autorun-{index}-done.png"))
                browser.close()
        finally:
            stop_server(process)
        log = log_path.read_text(errors="replace")
    return {"run_complete_s": run_done, "sidebar_shows_run_s": shown, "outside": outside,
            "sidebar_during": sidebar_during[:1], "log_bytes": len(log.encode()),
            "log_problems": [ln for ln in log.splitlines()
                             if "Warning" in ln or "Traceback" in ln or "Error" in ln][:5]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--screenshots", type=Path, default=None)
    args = parser.parse_args()
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("error: Debian chromium is not installed (apt-get install -y chromium)",
              file=sys.stderr)
        return 2
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    results = []
    for i in range(args.repeat):
        r = one_start(chromium, args.screenshots, i)
        results.append(r)
        print(f"start {i + 1}: run complete {r['run_complete_s']:.1f} s, sidebar shows it "
              f"{r['sidebar_shows_run_s']:.1f} s, requests to other hosts {len(r['outside'])}, "
              f"server log {r['log_bytes']:,} bytes")
        for line in r["log_problems"]:
            print(f"  log: {line[:200]}")
        for url in r["outside"][:5]:
            print(f"  outside request: {url}")
        for text in r["sidebar_during"]:
            print("  sidebar while running: " + " | ".join(text.splitlines()))
    done = [r["run_complete_s"] for r in results if r["run_complete_s"] is not None]
    if done:
        print(f"sample autorun: median {statistics.median(done):.1f} s over {len(done)} starts "
              f"(min {min(done):.1f}, max {max(done):.1f}); cores: {os.cpu_count()}")
    return 0 if len(done) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
