"""A bad ``--scheduler`` is refused at once with a message, never a hang (issue 27's bad input):
an address nothing listens on, a web server, a service that answers garbage, and ``local:N``
beyond what one machine can run."""

from __future__ import annotations

import http.server
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from aflite_core.config import AuditConfig
from aflite_core.filter._scheduler import (
    MAX_LOCAL_WORKERS_PER_CORE,
    PROBE_TIMEOUT_S,
    check_scheduler,
    probe_scheduler,
    probe_timeout,
)

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Garbage(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"\xff" * 64)  # a length of 2**64 - 1 bytes: not Dask's


class _Stall(socketserver.BaseRequestHandler):
    """Sends a plausible handshake length (200 bytes), then nothing: once a hang."""

    def handle(self) -> None:
        import struct

        self.request.sendall(struct.pack("<Q", 200) + b"\x00" * 10)
        self.server.release.wait(30)  # type: ignore[attr-defined]


@pytest.fixture
def server(request):
    """A web server or a garbage server on a free loopback port; yields its address."""
    handler = request.param
    if handler == "http":
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

        handler = Quiet
    else:
        handler = {"garbage": _Garbage, "stall": _Stall}[handler]
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    srv.release = threading.Event()
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{srv.server_address[1]}"
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def test_nothing_listening_is_a_connection_error_at_once():
    with pytest.raises(ConnectionError, match="nothing answers at 127.0.0.1"):
        probe_scheduler(f"tcp://127.0.0.1:{_free_port()}", timeout=1.0)


@pytest.mark.parametrize("server, message", [
    ("http", "sent no Dask handshake within 1 s"),
    ("garbage", "not as a Dask scheduler"),
    ("stall", "began a Dask handshake \\(200 bytes announced\\) but did not finish it within "
              "1 s"),
], indirect=["server"])
def test_a_service_that_is_not_dask_is_refused_within_the_timeout(server, message,
                                                                  monkeypatch):
    """The timeout that fires is the one given: every read of the handshake is given what
    is left of one deadline (the stalling listener once made the client wait forever)."""
    import aflite_core.filter._scheduler as backends

    given = []
    real = backends._read_until

    def read_until(sock, n, deadline):
        given.append(deadline - time.monotonic())
        return real(sock, n, deadline)

    monkeypatch.setattr(backends, "_read_until", read_until)
    with pytest.raises(ValueError, match=message):
        probe_scheduler(server, timeout=1.0)
    assert given and all(left <= 1.0 for left in given)


@pytest.mark.parametrize("address", ["inproc://x", "ws://127.0.0.1:8786", "ucx://h:1",
                                     "http://127.0.0.1:8787"])
def test_an_unsupported_scheme_is_named(address, tmp_path):
    with pytest.raises(ValueError, match="is not supported; expected tcp://HOST:PORT or "
                                         "tls://HOST:PORT"):
        probe_scheduler(address)
    with pytest.raises(ValueError, match="is not supported"):
        AuditConfig(backend="dask", scheduler=address).validate()


def test_a_real_scheduler_passes_the_probe():
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        probe_scheduler(cluster.scheduler_address, timeout=5.0)


def test_local_workers_are_bounded_by_the_cores():
    cores = os.cpu_count() or 1
    check_scheduler(f"local:{MAX_LOCAL_WORKERS_PER_CORE * cores}", "dask")
    with pytest.raises(ValueError, match="at most 4 per core"):
        check_scheduler("local:99999", "dask")
    with pytest.raises(ValueError, match="asks for 99,999 local workers"):
        AuditConfig(backend="dask", scheduler="local:99999").validate()
    with pytest.raises(ValueError, match="not an address"):
        probe_scheduler("tcp://127.0.0.1")


@pytest.mark.parametrize("server", ["http", "stall"], indirect=True)
def test_the_cli_refuses_a_web_server_before_reading_the_data(server, tmp_path):
    """Once this hung with no output; now one line, within the probe's timeout (the message
    names the timeout that fired: Dask's connect timeout, set to 1 s here, as it is shorter
    than the probe's 5 s; how long it takes is for benchmarks, not this test)."""
    result = subprocess.run(
        [sys.executable, "-m", "aflite_core", "run", "aflite_core/data/snli_sample.csv",
         "--scheduler", server, "--out", str(tmp_path / "run")],
        cwd=REPO, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"})
    assert result.returncode == 2, result.stderr
    assert "within 1 s" in result.stderr
    assert "not a Dask scheduler" in result.stderr or "not a working Dask" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "run").exists()


def test_the_cli_names_an_unsupported_scheme_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "aflite_core", "run", "aflite_core/data/snli_sample.csv",
         "--scheduler", "inproc://x", "--out", str(tmp_path / "run")],
        cwd=REPO, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    assert "'inproc' of 'inproc://x' is not supported" in result.stderr
    assert "Traceback" not in result.stderr and "unpack" not in result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("server", ["http"], indirect=True)
def test_the_probe_waits_5_s_or_dasks_connect_timeout_when_shorter(server):
    """By default the probe waits 5 s, or Dask's connect timeout when a user set it shorter
    (a web server says nothing: the timeout fires, and the message names it)."""
    import dask

    assert PROBE_TIMEOUT_S == 5.0
    with dask.config.set({"distributed.comm.timeouts.connect": "30s"}):
        assert probe_timeout() == 5.0
    with dask.config.set({"distributed.comm.timeouts.connect": "1500ms"}):
        assert probe_timeout() == 1.5
        with pytest.raises(ValueError, match="sent no Dask handshake within 1.5 s"):
            probe_scheduler(server)
