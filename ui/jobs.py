"""The background audit job of one session: progress snapshots and cancellation.

An audit runs in a worker thread so the page stays responsive: the Audit page polls
:meth:`AuditJob.snapshot` from a fragment that reruns every half second, and the Cancel button
calls :meth:`AuditJob.cancel`, which makes the pipeline callback return ``True`` (the core then
raises ``AuditCancelled`` and leaves no run folder behind). The job object lives in the
session's state, never in a module global, so two sessions never see each other's runs.
The worker never calls Streamlit.

When the dashboard process stops (Ctrl+C, or SIGTERM, which Streamlit turns into a normal
exit), an ``atexit`` hook cancels every job still running and waits for it (up to
:data:`SHUTDOWN_WAIT_SECONDS`), so the run's temporary folder is removed instead of being
left behind by a worker thread killed mid-audit.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOGGER = logging.getLogger(__name__)

#: Job states.
RUNNING, DONE, CANCELLED, FAILED = "running", "done", "cancelled", "failed"

#: How long the process waits at exit for cancelled audits to clean up (seconds).
SHUTDOWN_WAIT_SECONDS = 30.0

#: Jobs still running in this process, only so that exiting can cancel them. Holds no
#: user data and is never read by a page (weak: a finished job is forgotten).
_RUNNING_JOBS: weakref.WeakSet[AuditJob] = weakref.WeakSet()


def cancel_running_jobs(timeout: float = SHUTDOWN_WAIT_SECONDS) -> int:
    """Cancel every audit still running in this process and wait for them to clean up.

    Registered with :mod:`atexit`. Returns the number of jobs still alive after
    ``timeout`` seconds (their temporary folders are swept by a later start).
    """
    jobs = [job for job in list(_RUNNING_JOBS) if job._thread.is_alive()]
    for job in jobs:
        job.cancel()
    deadline = time.monotonic() + timeout
    for job in jobs:
        job.join(max(deadline - time.monotonic(), 0.0))
    return sum(job._thread.is_alive() for job in jobs)


atexit.register(cancel_running_jobs)

#: Exceptions whose message is shown to the user as is (bad data or parameters).
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, OSError, LookupError)


class AuditJob:
    """Run ``runner(dataset, config, runs_root=..., callback=...)`` in a worker thread.

    Parameters
    ----------
    runner : callable
        Normally :func:`aflite_core.pipeline.run_audit`; returns the completed run folder.
    dataset : AuditDataset
        The dataset to audit.
    config : AuditConfig
        The audit parameters.
    runs_root : pathlib.Path
        Folder receiving the run folder.
    name : str or None
        Run name passed to the runner (``None`` lets the core derive one).
    cancelled_error : type of Exception or None
        The exception the runner raises when the callback asks it to stop.
    """

    def __init__(
        self,
        runner: Callable[..., Path],
        dataset: Any,
        config: Any,
        *,
        runs_root: Path,
        name: str | None = None,
        cancelled_error: type[BaseException] | None = None,
    ) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.dataset_name = str(getattr(dataset, "name", "dataset"))
        self.dataset_hash = str(getattr(dataset, "content_hash", ""))
        self.config = config
        self.state = RUNNING
        self.result: Path | None = None
        self.error: str | None = None
        self.consumed = False  # True once the app has opened the result
        self.started = time.monotonic()
        self.finished: float | None = None
        self._runner = runner
        self._dataset = dataset
        self._runs_root = Path(runs_root)
        self._name = name
        self._cancelled_error = cancelled_error
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._last: dict[str, Any] = {"stage": "start", "message": "Starting", "fraction": 0.0}
        self._aflite: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._work, name=f"audit-{self.id}", daemon=True)

    # -- control ---------------------------------------------------------------------------
    def start(self) -> AuditJob:
        """Start the worker thread and return ``self``."""
        _RUNNING_JOBS.add(self)
        self._thread.start()
        return self

    def cancel(self) -> None:
        """Ask the audit to stop at its next progress report."""
        self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancel.is_set()

    @property
    def running(self) -> bool:
        """Whether the worker is still working."""
        return self.state == RUNNING

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the worker; return ``True`` when it has finished."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- progress ----------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Return a copy of the latest progress, with ``elapsed`` and ``eta`` seconds added.

        Returns
        -------
        dict
            ``stage``, ``message``, ``fraction`` (0..1), the latest AFLite round keys
            (``round``, ``size``, ``removed_total``, ``target_size``) when known, ``state``,
            ``elapsed`` and ``eta`` (``None`` until it can be estimated).
        """
        with self._lock:
            info = {**self._aflite, **self._last}
        end = self.finished if self.finished is not None else time.monotonic()
        elapsed = end - self.started
        fraction = float(info.get("fraction") or 0.0)
        info["fraction"] = min(max(fraction, 0.0), 1.0)
        info["elapsed"] = elapsed
        info["eta"] = elapsed * (1 - fraction) / fraction if 0.02 <= fraction < 1 else None
        info["state"] = self.state
        return info

    def _callback(self, event: dict[str, Any]) -> bool:
        with self._lock:
            self._last = dict(event)
            if event.get("stage") == "aflite" and "round" in event:
                self._aflite = {
                    k: event[k] for k in ("round", "size", "removed_total", "target_size")
                    if k in event
                }
        return self._cancel.is_set()

    def _work(self) -> None:
        try:
            path = self._runner(
                self._dataset, self.config, runs_root=self._runs_root, name=self._name,
                callback=self._callback,
            )
        except Exception as exc:  # noqa: BLE001 - the worker must always report back
            self._fail(exc)
        else:
            self.result = Path(path)
            self.state = DONE
        finally:
            self.finished = time.monotonic()
            self._dataset = None  # do not keep the data alive through the job
            _RUNNING_JOBS.discard(self)

    def _fail(self, exc: BaseException) -> None:
        if self._cancelled_error is not None and isinstance(exc, self._cancelled_error):
            self.state = CANCELLED
            self.error = "The audit was cancelled; nothing was written."
        elif isinstance(exc, EXPECTED_ERRORS):
            self.state = FAILED
            self.error = str(exc)
        else:
            LOGGER.exception("audit job %s failed", self.id)
            self.state = FAILED
            self.error = f"Unexpected {type(exc).__name__}: {exc}"
