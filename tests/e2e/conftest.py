"""Fixtures of the real-browser tests: a `streamlit run serve.py` server and Debian chromium.

The server runs on a free loopback port with its own runs root (a temporary folder), so the
tests never touch the user's ``runs/``. Chromium is Debian's package driven through
Playwright's Python API (``executable_path``); Playwright's own browser download is never
used. When chromium or Playwright is missing the tests fail under ``CI=true`` (the CI image
installs both) and are skipped elsewhere.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"
#: Flags for a headless, quiet, offline chromium in a container.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (required in CI: .ci/run installs it)")
    pytest.skip(reason)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 90.0) -> float:
    """Wait until the server answers its health check; return the seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return time.monotonic() - start
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"streamlit did not become healthy within {timeout:.0f} s")


def start_server(runs_root: Path, log_path: Path, *, port: int | None = None
                 ) -> tuple[subprocess.Popen, str]:
    """Start ``streamlit run serve.py`` (the README's command) headless on 127.0.0.1; return the
    process and its URL."""
    port = port or free_port()
    env = {**os.environ, "AFLITE_RUNS_DIR": str(runs_root), "AFLITE_AUTORUN": "0",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the process by the caller
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
        cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    process.log = log  # type: ignore[attr-defined]
    return process, f"http://127.0.0.1:{port}"


def stop_server(process: subprocess.Popen) -> None:
    """Terminate the server started by :func:`start_server`."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)
    process.log.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Path of Debian's chromium (fails in CI, skips elsewhere, when it is missing)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        _missing("Debian's chromium is not installed (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("playwright is not installed (pip install -r requirements-dev.txt)")
    return str(path)


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """``test-artifacts/`` (gitignored): screenshots and downloads of the browser tests."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           chromium_path: str) -> Iterator[SimpleNamespace]:
    """A running dashboard with an empty runs root; yields ``url`` and ``runs_root``."""
    folder = tmp_path_factory.mktemp("e2e")
    runs_root = folder / "runs"
    process, url = start_server(runs_root, folder / "streamlit.log")
    try:
        wait_healthy(url, process)
    except RuntimeError as exc:
        stop_server(process)
        log = (folder / "streamlit.log").read_text(errors="replace")[-3000:]
        pytest.fail(f"{exc}\n{log}")
    yield SimpleNamespace(url=url, runs_root=runs_root)
    stop_server(process)


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[object]:
    """A headless Debian chromium driven by Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield instance
        instance.close()
