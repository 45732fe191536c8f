"""What two run folders of the same audit share whatever ran it (the core count, Φ in memory
or on disk): every file byte for byte, and ``summary.json`` but for its times."""

from __future__ import annotations

import json
from pathlib import Path

#: summary.json keys that hold times: they differ run to run whatever else is the same.
TIMING_KEYS = {"seconds", "timings", "created", "elapsed", "peak_rss", "duration"}


def without_times(value):
    """``value`` (parsed JSON) without the keys of :data:`TIMING_KEYS`, at any depth."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def summaries_without_times(*runs: Path) -> list:
    """Each run's ``summary.json`` without its times."""
    return [without_times(json.loads((run / "summary.json").read_text(encoding="utf-8")))
            for run in runs]
