"""Adding a measure to a finished run: its files, ``summary.json``, then ``report.html``.

Above both the run folder code and the report builder, so that neither imports the other.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from aflite_core.io import parquet_safe_table
from aflite_core.report.html import build_report
from aflite_core.runs import (
    REPORT_FILE,
    SUMMARY_FILE,
    TEMP_PREFIX,
    AuditRun,
    check_file_name,
    dump_json,
    load_run,
)


def add_measure(path: str | os.PathLike, name: str, *,
                documents: Mapping[str, Any] | None = None,
                tables: Mapping[str, pd.DataFrame] | None = None,
                info: Mapping[str, Any] | None = None) -> AuditRun:
    """Add one measure's files to a finished run folder (e.g. ``ood`` computed later).

    Each file is written under a hidden temporary name and renamed over its final name, so
    a reader sees the old run or the new file, never half a file; ``summary.json`` is
    updated the same way last (``measures[name]`` and ``artifacts``), then ``report.html``
    is rebuilt if the run has one.

    Returns
    -------
    AuditRun
        The run, re-read.
    """
    run = load_run(path)
    written = []

    def replace_atomically(filename: str, write: Any) -> None:
        final = run.path / check_file_name(filename)
        tmp = run.path / f"{TEMP_PREFIX}{filename}-{secrets.token_hex(4)}"
        try:
            write(tmp)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        written.append(filename)

    for filename, document in (documents or {}).items():
        replace_atomically(filename, lambda p, d=document: dump_json(d, p))
    for filename, frame in (tables or {}).items():
        replace_atomically(filename,
                           lambda p, f=frame: pq.write_table(parquet_safe_table(f)[0], p))
    summary = dict(run.summary)
    summary.setdefault("measures", {})[name] = {"status": "ok", "artifacts": written,
                                                **dict(info or {})}
    summary["artifacts"] = sorted({*run.artifacts, *written, SUMMARY_FILE})
    replace_atomically(SUMMARY_FILE, lambda p: dump_json(summary, p))
    run = load_run(path)
    if run.has(REPORT_FILE):
        text = build_report(run)
        replace_atomically(REPORT_FILE, lambda p: p.write_text(text, encoding="utf-8"))
    return run
