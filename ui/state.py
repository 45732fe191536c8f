"""Namespaced session-state keys and per-session accessors.

Everything a session owns (its dataset, its open run, its background audit job) lives in
``st.session_state`` under a key of the form ``"<namespace>:<name>"``; nothing is kept in module
globals, so two browser tabs are two independent sessions. Widget keys are built with
:func:`key` so that two pages never collide (``key("explore", "search")`` ->
``"explore:search"``).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import streamlit as st

from aflite_core.data import SAMPLE

#: Repository root (the folder holding ``app.py``).
REPO_ROOT = Path(__file__).resolve().parent.parent

#: Environment variable naming the runs root (default ``./runs``).
RUNS_ENV = "AFLITE_RUNS_DIR"
#: Environment variable overriding the bundled sample (tests and demos).
SAMPLE_ENV = "AFLITE_SAMPLE"
#: Set to ``0`` to stop a new session from auditing the bundled sample by itself.
AUTORUN_ENV = "AFLITE_AUTORUN"

# Session-level keys (namespace "app"): shared by every page of ONE session.
DATASET = "app:dataset"  # the AuditDataset being audited
DATASET_ORIGIN = "app:dataset_origin"  # "sample" | "upload" | "path" | "synthetic"
EMBEDDINGS = "app:embeddings"  # path of precomputed features tied to the dataset, or None
RUN_PATH = "app:run_path"  # str path of the run folder opened in Explore/Cues/Report
AUTOLOAD_DONE = "app:autoload_done"  # True once the bundled sample was offered
SESSION_DIR = "app:session_dir"  # private temporary folder of this session
NOTICE = "app:notice"  # one-shot message shown after the next rerun
JOB = "audit:job"  # the background AuditJob of this session (ui.jobs)
EXPLORE_SELECTION = "explore:selected_row_ids"  # row ids picked on the map
# columns Explore's next rows table should show first, before the texts (a one-shot request)
EXPLORE_COLUMNS_FIRST = "explore:columns_first"


def key(page: str, name: str) -> str:
    """Return the widget key ``"<page>:<name>"``.

    Parameters
    ----------
    page : str
        Page namespace, e.g. ``"data"``, ``"audit"``, ``"explore"``.
    name : str
        Widget name within the page.

    Returns
    -------
    str
        The namespaced key.
    """
    return f"{page}:{name}"


def runs_root() -> Path:
    """Return the folder that holds run folders (``$AFLITE_RUNS_DIR`` or ``./runs``), as an
    absolute path resolved once, when the server first asks for it: a relative setting
    means the folder the server started in, whatever the working folder later is."""
    return _resolved_root(os.environ.get(RUNS_ENV, "").strip())


def runs_root_label() -> str:
    """The runs folder as the pages name it: relative to the folder the server started in
    when it lies inside it (``runs``), else only its own name; never the server's absolute
    path, which a page opened from a shared link must not show."""
    root = runs_root()
    try:
        return str(root.relative_to(_START_FOLDER))
    except ValueError:
        return f"{root.name} (AFLITE_RUNS_DIR)"


#: The folder the server started in (relative runs folders are resolved against it once).
_START_FOLDER = Path.cwd().resolve()


@functools.lru_cache(maxsize=8)
def _resolved_root(configured: str) -> Path:
    path = Path(configured).expanduser() if configured else Path("runs")
    return path if path.is_absolute() else (_START_FOLDER / path).resolve()


def sample_path() -> Path:
    """Return the bundled sample (``aflite_core/data/snli_sample.csv`` unless
    ``$AFLITE_SAMPLE`` is set)."""
    configured = os.environ.get(SAMPLE_ENV, "").strip()
    return Path(configured) if configured else SAMPLE


def autorun_enabled() -> bool:
    """Whether a new session audits the bundled sample by itself (``$AFLITE_AUTORUN`` != 0)."""
    return os.environ.get(AUTORUN_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def get(name: str, default: Any = None) -> Any:
    """Read a session-state entry (``name`` is a full key such as :data:`DATASET`)."""
    return st.session_state.get(name, default)


def put(name: str, value: Any) -> None:
    """Write a session-state entry (``name`` is a full key such as :data:`DATASET`)."""
    st.session_state[name] = value


def get_dataset() -> Any:
    """Return the session's :class:`~aflite_core.io.datasets.AuditDataset`, or ``None``."""
    return st.session_state.get(DATASET)


def set_dataset(dataset: Any, *, origin: str, embeddings: str | None = None) -> None:
    """Make ``dataset`` the session's current dataset.

    Parameters
    ----------
    dataset : AuditDataset
        The loaded dataset.
    origin : {"sample", "upload", "synthetic"}
        Where it came from (shown in the sidebar).
    embeddings : str or None
        Path of precomputed features that belong to this dataset (synthetic demo).
    """
    st.session_state[DATASET] = dataset
    st.session_state[DATASET_ORIGIN] = origin
    st.session_state[EMBEDDINGS] = embeddings


def clear_dataset() -> None:
    """Forget the session's dataset (the pages then show their empty states)."""
    for name in (DATASET, DATASET_ORIGIN, EMBEDDINGS):
        st.session_state.pop(name, None)


def get_run_path() -> Path | None:
    """Return the run folder opened in this session, or ``None``."""
    value = st.session_state.get(RUN_PATH)
    return Path(value) if value else None


def set_run_path(path: str | os.PathLike[str] | None) -> None:
    """Open the run folder ``path`` in this session (``None`` closes it)."""
    st.session_state[RUN_PATH] = str(path) if path else None
    st.session_state.pop(EXPLORE_SELECTION, None)


#: Sessions' temporary folders older than this whose process is gone are removed (seconds).
STALE_SESSION_SECONDS = 24 * 3600
_SESSION_PREFIX = "session-"
_SESSION_PID = re.compile(r"^session-(\d+)-[0-9a-f]{8}-")


def session_root() -> Path:
    """Folder holding every session's temporary folder (``<system temp>/aflite-dashboard``)."""
    return Path(tempfile.gettempdir()) / "aflite-dashboard"


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        import psutil  # optional dependency
    except ImportError:
        psutil = None
    if psutil is not None:
        return bool(psutil.pid_exists(pid))
    if sys.platform == "win32":  # os.kill would terminate the process: assume gone
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def sweep_stale_sessions(base: str | os.PathLike | None = None, *,
                         max_age: float = STALE_SESSION_SECONDS) -> list[Path]:
    """Remove session folders (and export ``.part-`` files) left by dashboards that are gone.

    A ``session-<pid>-...`` folder is removed when it is older than ``max_age`` seconds and
    process ``pid`` no longer runs (a folder of the older ``session-<hex>-...`` form, with
    no owner recorded, only by age); stale ``.part-`` files in the root go too.
    """
    from aflite_core.io import sweep_stale_parts  # lazy: +727 ms to import

    root = Path(base) if base is not None else session_root()
    removed: list[Path] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not entry.name.startswith(_SESSION_PREFIX):
            continue
        try:
            if entry.is_symlink() or not entry.is_dir():
                continue
            age = now - entry.stat().st_mtime
        except OSError:
            continue
        owner = _SESSION_PID.match(entry.name)
        if age < max_age or (owner is not None and _process_alive(int(owner.group(1)))):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    removed += sweep_stale_parts(root, max_age=max_age)
    return removed


def _remove_own_session_dirs() -> None:
    """At exit: remove the temporary folders of this process's sessions."""
    root = session_root()
    with contextlib.suppress(OSError):
        for entry in root.glob(f"{_SESSION_PREFIX}{os.getpid()}-*"):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)


atexit.register(_remove_own_session_dirs)


def session_dir() -> Path:
    """Return a private temporary folder for this session's uploads (created on first use).

    Its name records the dashboard's process id (``session-<pid>-<hex>-...``): the folder is
    removed when the process exits, and a later start sweeps the ones a killed process left
    (older than a day, process gone), together with stale temporary run folders and
    exports in the runs root.
    """
    existing = st.session_state.get(SESSION_DIR)
    if existing and Path(existing).is_dir():
        return Path(existing)
    base = session_root()
    base.mkdir(parents=True, exist_ok=True)
    sweep_stale_sessions(base)
    with contextlib.suppress(OSError):
        from aflite_core.runs import cleanup_stale  # lazy: +1006 ms to import

        cleanup_stale(runs_root())
    prefix = f"{_SESSION_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}-"
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    st.session_state[SESSION_DIR] = str(path)
    return path


def notify(message: str, *, icon: str = ":material/check_circle:") -> None:
    """Queue a one-shot message shown by :func:`pop_notice` on the next rerun."""
    st.session_state[NOTICE] = (message, icon)


def pop_notice() -> tuple[str, str] | None:
    """Return and forget the queued one-shot message, if any."""
    return st.session_state.pop(NOTICE, None)
