"""Which process a hidden working folder belongs to, so that one a killed process left can go
at once instead of after :data:`~aflite_core.runs.folder.STALE_AGE_SECONDS`.

The CLI's audit on a cluster keeps the texts of its input in a hidden folder beside the runs
(``.tmp-texts-<token>``, the file that becomes the run's ``dataset.parquet``: 0.6 GB at 5M
rows) and removes it when the audit ends or fails; a process killed outright (SIGKILL, the
out-of-memory killer) cannot. :func:`claim` writes the owner into the folder (host, process
id, the process's start time) and :func:`abandoned` says whether that owner is gone: on this
host, no process of that id, or one started at another time (the id reused). A folder of
another host, or without a readable owner, is never called abandoned (its age decides).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from aflite_core.json_files import read_json_file

__all__ = ["OWNER_FILE", "abandoned", "claim"]

#: The owner's record inside a claimed folder.
OWNER_FILE = ".owner.json"


def _started(pid: int) -> float | None:
    """The start time of process ``pid`` (seconds since the epoch), None if there is none."""
    import psutil  # a dependency of dask.distributed

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.Error:  # exists, but cannot be inspected (access denied): alive
        return -1.0


def claim(folder: str | os.PathLike) -> None:
    """Record this process as the owner of ``folder`` (an existing folder)."""
    record = {"host": socket.gethostname(), "pid": os.getpid(), "started": _started(os.getpid())}
    (Path(folder) / OWNER_FILE).write_text(json.dumps(record), encoding="utf-8")


def abandoned(folder: str | os.PathLike) -> bool:
    """Whether ``folder``'s owner (:func:`claim`) is a process of this host that is gone."""
    try:
        record = read_json_file(Path(folder) / OWNER_FILE)
        host, pid, started = str(record["host"]), int(record["pid"]), record["started"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if host != socket.gethostname():
        return False
    now = _started(pid)
    if now is None:
        return True
    if now < 0 or started is None:
        return False
    return abs(now - float(started)) > 1.0  # the id taken by a later process
