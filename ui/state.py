"""Namespaced session-state keys and per-session accessors.

Everything a session owns (its dataset, its open run, its background audit job) lives in
``st.session_state`` under a key of the form ``"<namespace>:<name>"``; nothing is kept in module
globals, so two browser tabs are two independent sessions. Widget keys are built with
:func:`key` so that two pages never collide (``key("explore", "search")`` ->
``"explore:search"``).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import streamlit as st

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
DATASET_ORIGIN = "app:dataset_origin"  # "sample" | "upload" | "synthetic"
EMBEDDINGS = "app:embeddings"  # path of precomputed features tied to the dataset, or None
RUN_PATH = "app:run_path"  # str path of the run folder opened in Explore/Cues/Report
AUTOLOAD_DONE = "app:autoload_done"  # True once the bundled sample was offered
SESSION_DIR = "app:session_dir"  # private temporary folder of this session
NOTICE = "app:notice"  # one-shot message shown after the next rerun
JOB = "audit:job"  # the background AuditJob of this session (ui.jobs)
EXPLORE_SELECTION = "explore:selected_row_ids"  # row ids picked on the map


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
    """Return the folder that holds run folders (``$AFLITE_RUNS_DIR`` or ``./runs``)."""
    configured = os.environ.get(RUNS_ENV, "").strip()
    return Path(configured) if configured else Path.cwd() / "runs"


def sample_path() -> Path:
    """Return the bundled sample (``assets/snli_sample.csv`` unless ``$AFLITE_SAMPLE`` is set)."""
    configured = os.environ.get(SAMPLE_ENV, "").strip()
    return Path(configured) if configured else REPO_ROOT / "assets" / "snli_sample.csv"


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


def session_dir() -> Path:
    """Return a private temporary folder for this session's uploads (created on first use)."""
    existing = st.session_state.get(SESSION_DIR)
    if existing and Path(existing).is_dir():
        return Path(existing)
    base = Path(tempfile.gettempdir()) / "aflite-dashboard"
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"session-{uuid.uuid4().hex[:8]}-", dir=base))
    st.session_state[SESSION_DIR] = str(path)
    return path


def notify(message: str, *, icon: str = ":material/check_circle:") -> None:
    """Queue a one-shot message shown by :func:`pop_notice` on the next rerun."""
    st.session_state[NOTICE] = (message, icon)


def pop_notice() -> tuple[str, str] | None:
    """Return and forget the queued one-shot message, if any."""
    return st.session_state.pop(NOTICE, None)
