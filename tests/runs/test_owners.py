"""Hidden working folders a killed process left go at the next cleanup, not 24 h later: the
CLI's texts folder records its owner (``runs.owners.claim``) and ``cleanup_stale`` removes a
young one whose owner on this host is gone; a live owner's, another host's and an unclaimed
young folder stay."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from aflite_core.runs._owners import OWNER_FILE, abandoned, claim
from aflite_core.runs.folder import cleanup_stale


def _dead_process() -> tuple[int, float]:
    """The id and start time of a process that has exited."""
    import psutil

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    started = psutil.Process(child.pid).create_time()
    child.wait()
    return child.pid, started


def _record(folder, **record) -> None:
    folder.mkdir()
    (folder / OWNER_FILE).write_text(json.dumps(record), encoding="utf-8")


def test_an_owner_that_is_gone_abandons_its_folder(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    claim(mine)
    assert not abandoned(mine)
    pid, started = _dead_process()
    _record(tmp_path / "dead", host=socket.gethostname(), pid=pid, started=started)
    assert abandoned(tmp_path / "dead")
    # the id of a live process, but another start time: the id was reused
    me = json.loads((mine / OWNER_FILE).read_text())
    _record(tmp_path / "reused", host=me["host"], pid=me["pid"], started=me["started"] - 60)
    assert abandoned(tmp_path / "reused")
    _record(tmp_path / "elsewhere", host=me["host"] + "-other", pid=pid, started=started)
    assert not abandoned(tmp_path / "elsewhere")
    (tmp_path / "unclaimed").mkdir()
    assert not abandoned(tmp_path / "unclaimed")
    _record(tmp_path / "garbled", host=1)
    assert not abandoned(tmp_path / "garbled")


def test_cleanup_removes_young_folders_of_dead_owners_only(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    pid, started = _dead_process()
    _record(runs / ".tmp-texts-dead", host=socket.gethostname(), pid=pid, started=started)
    (runs / ".tmp-texts-dead" / "dataset.parquet").write_bytes(b"x" * 100)
    live = runs / ".tmp-texts-live"
    live.mkdir()
    claim(live)
    (runs / ".tmp-run-unclaimed").mkdir()
    removed = cleanup_stale(runs)
    assert [p.name for p in removed] == [".tmp-texts-dead"]
    assert sorted(p.name for p in runs.iterdir()) == [".tmp-run-unclaimed", ".tmp-texts-live"]
