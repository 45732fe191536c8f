"""The session's current dataset and the run shown with it.

Shared by the session start-up (the bundled sample) and the Data page (an upload, the
synthetic demo): a dataset made current opens its newest complete run, or none.
"""

from __future__ import annotations

from pathlib import Path

from ui import cache, state


def use_dataset(dataset, *, origin: str, embeddings: str | None = None) -> None:
    """Make ``dataset`` current and open its newest run (or none)."""
    state.set_dataset(dataset, origin=origin, embeddings=embeddings)
    state.set_run_path(newest_run_of(dataset.content_hash))


def newest_run_of(content_hash: str) -> Path | None:
    """Newest complete run in the runs root whose input has this SHA-256."""
    return cache.newest_run_of(state.runs_root(), content_hash)
