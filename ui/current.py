"""The session's current dataset and the run shown with it.

Shared by the session start-up (the bundled sample) and the Data page (an upload, the
synthetic demo): a dataset made current opens its newest complete run, or none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from ui import cache, components, state


def use_dataset(dataset, *, origin: str, embeddings: str | None = None) -> None:
    """Make ``dataset`` current and open its newest run (or none)."""
    state.set_dataset(dataset, origin=origin, embeddings=embeddings)
    state.set_run_path(newest_run_of(dataset.content_hash))


def newest_run_of(content_hash: str) -> Path | None:
    """Newest complete run in the runs root whose input has this SHA-256."""
    return cache.newest_run_of(state.runs_root(), content_hash)


def open_run_or_stop(purpose: str) -> tuple[Path, Any]:
    """The session's open run (its path and the run), or the page stops here: an empty state
    that says where to open one (``purpose``: what this page then shows), or the reason the
    run cannot be opened."""
    path = state.get_run_path()
    if path is None:
        components.empty_state("No audit run is open yet: run an audit on the Audit page (or "
                               f"reopen a previous one there), {purpose}.",
                               page="app_pages/audit.py", label="Go to Audit")
        st.stop()
    try:
        return path, cache.open_run(path)
    except (ValueError, OSError) as exc:
        components.show_error(f"The run {path.name} cannot be opened: {exc}",
                              hint="Reopen another run on the Audit page.")
        st.stop()
