"""Run one audit in a process of its own: ``python -m aflite_core.worker JOB_FOLDER``.

The dashboard runs every audit this way (``ui/jobs.py``), so that an audit's CPU time,
memory and any crash stay out of the server process: four audits running leave the server
free to answer, and a worker that dies takes only its own audit with it.

The job folder holds what :func:`write_job` wrote:

``job.json``
    the dataset's column roles, name, content hash and validation report, the
    :class:`~aflite_core.config.AuditConfig` as plain values, the runs root and the run name;
``frame.parquet``
    the dataset's rows (every original column, the row id and the exclusion reason);
``cancel``
    created by the parent to ask the audit to stop at its next progress report.

The worker writes one JSON object per line to its standard output: ``{"type": "progress",
...}`` for each progress event of :func:`aflite_core.pipeline.run_audit` (the first one
names the run's temporary folder, ``temp_folder``, so the parent can remove it if the worker
is killed), then exactly one of ``{"type": "done", "path": ...}``, ``{"type": "cancelled"}``
or ``{"type": "error", "expected": bool, "message": ...}``. Anything a library prints goes to
standard error. The worker runs at a lower CPU priority than the server
(:data:`NICENESS`), so a server whose cores are all busy auditing still answers and paints
new sessions at once. SIGTERM stops the audit and removes its temporary folder (nothing is left
under the run's name); a closed standard output (the parent is gone) does too, at the next
progress report.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import IO, Any

from aflite_core.cgroup_limits import limit_native_threads
from aflite_core.heap_trim import arrow_on_c_heap, limit_arenas, numpy_small_pages
from aflite_core.json_files import read_json_file
from aflite_core.process_exit import exit_now

#: Files of a job folder.
JOB_FILE = "job.json"
FRAME_FILE = "frame.parquet"
CANCEL_FILE = "cancel"
#: How much lower than its parent's the worker's CPU priority is (``nice``).
NICENESS = 10
#: Exceptions whose message is the user's to read (bad data or parameters), not a bug.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, OSError,
                                                     LookupError)


def write_job(folder: str | os.PathLike, dataset: Any, config: Any, *,
              runs_root: str | os.PathLike, name: str | None = None) -> Path:
    """Write what a worker needs to audit ``dataset`` with ``config`` into ``folder``.

    Parameters
    ----------
    folder : path
        The job folder (created; it should be private to the session).
    dataset : AuditDataset
    config : AuditConfig
    runs_root : path
        Where the run folder goes.
    name : str, optional
        The run's name (``None``: derived by :func:`~aflite_core.pipeline.run_audit`).

    Returns
    -------
    pathlib.Path
        ``folder``.
    """
    # lazy: pyarrow and pandas, which a worker imports after its cue child has started
    import pyarrow.parquet as pq

    from aflite_core.io import parquet_safe_table, unique_column_name  # lazy: as above
    from aflite_core.runs import to_jsonable  # lazy: as above

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    frame = dataset.frame
    taken = [str(c) for c in frame.columns]
    id_col = unique_column_name("row_id", taken)
    why_col = unique_column_name("exclusion", [*taken, id_col])
    data = frame.copy(deep=False)
    data.columns = taken
    data.insert(0, id_col, frame.index.to_numpy())
    data[why_col] = dataset.exclusion.reindex(frame.index).to_numpy()
    table, converted = parquet_safe_table(data)
    pq.write_table(table, folder / FRAME_FILE)
    job = {
        "dataset": {"name": dataset.name, "content_hash": dataset.content_hash,
                    "columns": dataset.columns.to_dict(), "report": dataset.report.to_dict(),
                    "id_column": id_col, "exclusion_column": why_col,
                    "column_names": taken, "converted_columns": converted},
        "config": to_jsonable(config.to_dict()),
        "runs_root": str(Path(runs_root).resolve()),
        "name": name,
    }
    (folder / JOB_FILE).write_text(json.dumps(job), encoding="utf-8")
    return folder


def read_job(folder: str | os.PathLike) -> tuple[Any, Any, Path, str | None]:
    """The ``(dataset, config, runs_root, name)`` that :func:`write_job` wrote."""
    import pyarrow.parquet as pq  # lazy: after the worker's cue child has started

    from aflite_core.config import AuditConfig  # lazy: +48 ms to import

    # lazy: +83 ms to import
    from aflite_core.io import AuditDataset, ColumnMapping, ValidationReport

    folder = Path(folder)
    job = read_json_file(folder / JOB_FILE)
    info = job["dataset"]
    frame = pq.read_table(folder / FRAME_FILE).to_pandas()
    exclusion = frame.pop(info["exclusion_column"]).astype(str)
    frame = frame.set_index(info["id_column"])
    frame.index.name = "row_id"
    exclusion.index = frame.index
    exclusion.name = "exclusion"
    dataset = AuditDataset(frame=frame, columns=ColumnMapping(**info["columns"]),
                           exclusion=exclusion, name=info["name"],
                           content_hash=info["content_hash"],
                           report=ValidationReport(**info["report"]))
    config = AuditConfig(**_config_values(job["config"]))
    return dataset, config, Path(job["runs_root"]), job.get("name")


def _config_values(values: dict) -> dict:
    """``AuditConfig.to_dict`` values back to constructor arguments (tuples where the
    dataclass holds tuples)."""
    out = dict(values)
    if isinstance(out.get("measures"), list):
        out["measures"] = tuple(out["measures"])
    return out


class _Channel:
    """The worker's line-per-event output to its parent."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def send(self, event: dict) -> None:
        from aflite_core.runs import to_jsonable  # lazy: after the cue child has started

        self.stream.write(json.dumps(to_jsonable(event)) + "\n")
        self.stream.flush()


def run_job(folder: str | os.PathLike, channel: _Channel) -> int:
    """Audit the job in ``folder``, reporting on ``channel``; return the exit code."""
    from aflite_core.pipeline import AuditCancelled, run_audit  # lazy: +464 ms to import

    folder = Path(folder)
    cancel = folder / CANCEL_FILE
    try:
        dataset, config, root, name = read_job(folder)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        channel.send({"type": "error", "expected": False,
                      "message": f"the audit job could not be read: {type(exc).__name__}: "
                                 f"{exc}"})
        return 1

    def callback(event: dict) -> bool:
        channel.send({"type": "progress", **event})  # BrokenPipeError: the parent is gone
        return cancel.exists()

    try:
        path = run_audit(dataset, config, runs_root=root, name=name, callback=callback)
    except AuditCancelled:
        channel.send({"type": "cancelled"})
        return 0
    except EXPECTED_ERRORS as exc:
        if isinstance(exc, BrokenPipeError):
            return 1
        channel.send({"type": "error", "expected": True, "message": str(exc)})
        return 0
    except Exception as exc:  # noqa: BLE001 - report every failure to the parent
        traceback.print_exc(file=sys.stderr)
        channel.send({"type": "error", "expected": False,
                      "message": f"{type(exc).__name__}: {exc}"})
        return 1
    channel.send({"type": "done", "path": str(path)})
    return 0


def warm_early(folder: str | os.PathLike) -> bool:
    """Start the cue measure's child (:func:`aflite_core.cues.start_spare_child`) before the
    worker imports the pipeline and reads the rows (about a second and more of one core),
    when the job's audit will do work ahead: the cue measure chosen, no cluster, and the
    cores and rows of :func:`aflite_core.ahead_bounds.ahead_possible`. Returns whether it was
    started; the audit takes it, else :func:`main` ends it. A job that cannot be read starts
    nothing (:func:`run_job` says why)."""
    try:
        job = read_json_file(Path(folder) / JOB_FILE)
        config, report = job["config"], job["dataset"]["report"]
        chosen = "cues" in (config.get("measures") or ())
        local = config.get("backend", "local") == "local" and not config.get("scheduler")
        n_rows = int(report["n_included"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    from aflite_core._validation import available_cores  # lazy: numpy, 0.1 s
    from aflite_core.ahead_bounds import ahead_possible  # lazy: as above

    if not (chosen and ahead_possible(n_rows, cores=available_cores(), local=local)):
        return False
    from aflite_core.cues import start_spare_child  # lazy: as above

    return start_spare_child()


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds run_audit: its temporary folder is removed


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m aflite_core.worker JOB_FOLDER``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m aflite_core.worker JOB_FOLDER", file=sys.stderr)
        return 2
    # events go to the original stdout; whatever a library prints goes to stderr
    events = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    signal.signal(signal.SIGTERM, _stop)
    with contextlib.suppress(OSError, AttributeError):  # not on every platform
        # below the server's priority: with audits on every core, the server still answers
        # and paints new sessions at once (the audits get what is left)
        os.nice(NICENESS)
    limit_arenas()  # as the command line's audit: a peak that does not grow with the cores
    numpy_small_pages()  # as the command line's audit
    arrow_on_c_heap()
    limit_native_threads()  # as the command line's: a CPU quota holds BLAS too (children's)
    early = warm_early(args[0])  # loads NLTK while this process imports and reads
    try:
        return run_job(args[0], _Channel(events))
    finally:
        if early:  # ended unless the audit's work ahead took it
            from aflite_core.cues import discard_spare_child  # lazy: only after warm_early

            discard_spare_child()


if __name__ == "__main__":
    # the dashboard shows the run once this process has left: not after 0.4 s of teardown
    exit_now(main())


__all__ = ["write_job", "read_job", "run_job", "warm_early", "main", "JOB_FILE",
           "FRAME_FILE", "CANCEL_FILE"]
