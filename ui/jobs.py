"""The background audit job of one session: progress snapshots and cancellation.

The dashboard's audits run in a process of their own (:class:`WorkerAuditJob`, started by
:func:`start_audit`): ``python -m aflite_core.worker`` does the work, and a thread of the
server only reads its progress lines. An audit's CPU time, memory and any crash stay out of
the server, so with several audits running the server still answers every session, and a
worker that dies (out of memory, killed) fails its own audit only: the job says so and its
temporary run folder is removed. :class:`AuditJob` is the in-process form (a thread running
any ``runner``), kept for tests and for callers that audit in their own process.

The Audit page polls :meth:`AuditJob.snapshot` from a fragment that reruns every half
second, and the Cancel button calls :meth:`AuditJob.cancel`, which makes the pipeline
callback return ``True`` (the core then raises ``AuditCancelled`` and leaves no run folder
behind). The job object lives in the session's state, never in a module global, so two
sessions never see each other's runs. Neither the worker nor the thread calls Streamlit.

When the dashboard process stops (Ctrl+C, or SIGTERM, which Streamlit turns into a normal
exit), an ``atexit`` hook cancels every job still running and waits for it (up to
:data:`SHUTDOWN_WAIT_SECONDS`), so the run's temporary folder is removed instead of being
left behind by a worker thread killed mid-audit.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aflite_core.cgroup_limits import available_cores, usable_memory
from aflite_core.json_files import loads_json

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
        self._beside: dict[str, str] | None = None  # the measure running beside, if any
        self._aflite: dict[str, Any] = {}
        self._first_event: float | None = None
        self._clock: Any = None  # the ETA's clock (EtaClock), from the first report on
        self._cpu: Any = None  # the audit's CPU counts (CpuShare)
        self._sampled = float("-inf")  # when they were last read
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
            ``elapsed`` and ``eta`` (``None`` until it can be estimated). ``stage`` and
            ``message`` are those of the stage run in order; while a measure runs beside
            it, ``beside`` holds that measure's ``stage`` and ``message``.
        """
        with self._lock:
            # the filter's round counters belong to its stage: during the measures the
            # snapshot names the measure, not the last round
            rounds = self._aflite if self._last.get("stage") == "aflite" else {}
            info = {**rounds, **self._last}
            side = dict(self._beside) if self._beside else None
        if side is not None:
            if side["stage"] == info.get("stage"):  # waiting for it: its news is the news
                info["message"] = side["message"]
            else:
                info["beside"] = side
        end = self.finished if self.finished is not None else time.monotonic()
        elapsed = end - self.started
        fraction = float(info.get("fraction") or 0.0)
        info["fraction"] = min(max(fraction, 0.0), 1.0)
        info["elapsed"] = elapsed
        # the ETA's clock starts with the audit's first report (starting the worker and
        # reading the data say nothing about the audit's pace) and follows the CPU the audit
        # gets (aflite_core.progress_eta): on a machine shared with other jobs it changes
        info["eta"] = self._eta(end, info["fraction"])
        info["state"] = self.state
        return info

    def _eta(self, now: float, fraction: float) -> float | None:
        """The clock's ETA; the CPU counts (a walk of /proc) read at most every
        :data:`ETA_SAMPLE_SECONDS`, however many sessions rerun meanwhile."""
        with self._lock:
            clock = self._clock
            if clock is None or self.finished is not None:
                return None
            if now - self._sampled >= ETA_SAMPLE_SECONDS:
                self._sampled = now
                clock.update(now, fraction, self._cpu.sample())
            return clock.eta()

    def _audit_pid(self) -> int:
        """The process the audit runs in (its children counted with it)."""
        return os.getpid()

    def _callback(self, event: dict[str, Any]) -> bool:
        if self._first_event is None:
            from aflite_core.progress_eta import CpuShare, EtaClock  # lazy: +180 ms to import

            self._first_event = time.monotonic()
            cpu = CpuShare(self._audit_pid())
            clock = EtaClock()
            clock.update(self._first_event, 0.0, cpu.sample())
            with self._lock:
                self._cpu, self._clock = cpu, clock
        with self._lock:
            if event.get("beside"):  # a measure beside the others: the bar moves, the stage stays
                self._beside = {"stage": event.get("stage", ""),
                                "message": event.get("message", "")}
                self._last["fraction"] = event.get("fraction", self._last.get("fraction"))
                return self._cancel.is_set()
            if self._beside and event.get("stage") == self._beside["stage"] \
                    and "status" in event:  # it finished
                self._beside = None
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


#: Least seconds between two readings of an audit's CPU counts for its ETA.
ETA_SAMPLE_SECONDS = 0.5
#: The folder that holds ``aflite_core`` (the worker imports it from there).
REPO_ROOT = Path(__file__).resolve().parent.parent
#: After a cancel request, how long the worker may take to reach its next progress report
#: before it is terminated (SIGTERM: it still removes its temporary folder).
CANCEL_GRACE_SECONDS = 20.0
#: Lines of the worker's standard error kept for a crash message.
STDERR_TAIL_LINES = 20


#: Environment variable: how many audit workers may run at once in this server (the rest
#: wait in a queue, first come first served).
MAX_AUDITS_VARIABLE = "AFLITE_MAX_AUDITS"
#: Memory one audit worker is given room for when the cap is derived from the machine
#: (a default audit of the sample peaks near 0.5 GB; larger data more).
WORKER_MEMORY_BYTES = 1 << 30


def default_max_audits() -> int:
    """Audit workers the machine allows at once: one per core this process may use, and no
    more than its memory holds at :data:`WORKER_MEMORY_BYTES` each (at least one); a
    container's CPU quota and memory limit count (:mod:`aflite_core.cgroup_limits`)."""
    cores = available_cores()
    memory = usable_memory() or WORKER_MEMORY_BYTES
    return max(1, min(cores, memory // WORKER_MEMORY_BYTES))


def max_audits() -> int:
    """The cap on audit workers at once: :data:`MAX_AUDITS_VARIABLE`, else
    :func:`default_max_audits`.

    Raises
    ------
    ValueError
        The variable is set to anything but a whole number >= 1.
    """
    raw = os.environ.get(MAX_AUDITS_VARIABLE, "").strip()
    if not raw:
        return default_max_audits()
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{MAX_AUDITS_VARIABLE}: expected a whole number >= 1 (audit workers "
                         f"at once), got {raw[:40]!r}")
    return int(raw)


class _WorkerQueue:
    """First come, first served slots for audit workers: at most :func:`max_audits` run at
    once in this server; the others wait, each knowing its place."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._waiting: list[str] = []
        self._running: set[str] = set()

    def position(self, job_id: str) -> int:
        """1 for the next to start; 0 once started (or not queued)."""
        with self._changed:
            return self._waiting.index(job_id) + 1 if job_id in self._waiting else 0

    def running(self) -> int:
        with self._changed:
            return len(self._running)

    def wait(self, job_id: str, cap: int, cancelled: threading.Event,
             report: Callable[[int], None]) -> bool:
        """Wait for a slot; ``report(position)`` whenever the place in the queue changes.
        False when ``cancelled`` is set first."""
        with self._changed:
            self._waiting.append(job_id)
            last = 0
            try:
                while True:
                    place = self._waiting.index(job_id) + 1
                    if place == 1 and len(self._running) < cap:
                        self._waiting.remove(job_id)
                        self._running.add(job_id)
                        return True
                    if cancelled.is_set():
                        self._waiting.remove(job_id)
                        return False
                    if place != last:
                        report(place)
                        last = place
                    self._changed.wait(0.25)
            finally:
                self._changed.notify_all()

    def release(self, job_id: str) -> None:
        with self._changed:
            self._running.discard(job_id)
            self._changed.notify_all()


#: The server's one queue of audit workers.
WORKER_QUEUE = _WorkerQueue()


class WorkerAuditJob(AuditJob):
    """An audit run by ``python -m aflite_core.worker`` in a process of its own.

    Same interface as :class:`AuditJob`; ``job_dir`` is a private folder of the session
    that receives the job's files (the dataset's rows, the parameters, the worker's log)
    and is removed when the job ends.
    """

    def __init__(self, dataset: Any, config: Any, *, runs_root: Path, job_dir: Path,
                 name: str | None = None) -> None:
        super().__init__(_unused_runner, dataset, config, runs_root=runs_root, name=name)
        self.job_dir = Path(job_dir) / f"job-{self.id}"
        self.process: subprocess.Popen | None = None
        self.exit_code: int | None = None
        self._temp_folder: Path | None = None

    def _audit_pid(self) -> int:
        return self.process.pid if self.process is not None else os.getpid()

    def cancel(self) -> None:
        """Ask the worker to stop at its next progress report (terminated if it does not
        within :data:`CANCEL_GRACE_SECONDS`)."""
        super().cancel()
        with contextlib.suppress(OSError):
            (self.job_dir / "cancel").touch()

    def _work(self) -> None:
        from aflite_core.worker import write_job  # lazy: +786 ms to import

        outcome: dict[str, Any] | None = None
        log = None
        slot = False
        try:
            cap = max_audits()
            write_job(self.job_dir, self._dataset, self.config, runs_root=self._runs_root,
                      name=self._name)
            self._dataset = None  # the worker has its own copy now
            slot = WORKER_QUEUE.wait(self.id, cap, self._cancel,
                                     lambda place: self._queued(place, cap))
            if not slot:
                outcome = {"type": "cancelled"}
                return
            log = (self.job_dir / "worker.log").open("w", encoding="utf-8")
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
            self.process = subprocess.Popen(
                [sys.executable, "-m", "aflite_core.worker", str(self.job_dir)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env,
                text=True, encoding="utf-8")
            if self._cancel.is_set():
                (self.job_dir / "cancel").touch()
            watchdog = threading.Thread(target=self._watch_cancel, daemon=True,
                                        name=f"audit-{self.id}-cancel")
            watchdog.start()
            assert self.process.stdout is not None
            for line in self.process.stdout:
                event = _parse(line)
                if event is None:
                    continue
                kind = event.pop("type", "progress")
                if kind == "progress":
                    if event.get("temp_folder"):
                        self._temp_folder = Path(str(event["temp_folder"]))
                    self._callback(event)
                else:
                    outcome = {"type": kind, **event}
            self.exit_code = self.process.wait()
        except (OSError, ValueError) as exc:
            outcome = {"type": "error", "expected": True,
                       "message": f"the audit could not be started: {exc}"}
        finally:
            if slot:
                WORKER_QUEUE.release(self.id)
            if log is not None:
                log.close()
            self._finish(outcome)

    def _queued(self, place: int, cap: int) -> None:
        """Progress while waiting for a free worker: the place in the queue (not an audit
        report: the ETA's clock does not start)."""
        ahead = "next to start" if place == 1 else f"{place - 1} audit(s) ahead of it"
        with self._lock:
            self._last = {
                "stage": "queued", "fraction": 0.0, "queue_position": place,
                "message": (f"Waiting for a free audit worker: {ahead} (at most {cap} run at "
                            f"once on this server; {MAX_AUDITS_VARIABLE} sets it)")}

    def _watch_cancel(self) -> None:
        """Terminate the worker if a cancel request is not honoured in time."""
        process = self.process
        while process is not None and process.poll() is None:
            if self._cancel.wait(0.5):
                try:
                    process.wait(CANCEL_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    LOGGER.warning("audit job %s: terminating the worker after a cancel",
                                   self.id)
                    process.terminate()
                return

    def _finish(self, outcome: dict[str, Any] | None) -> None:
        try:
            kind = (outcome or {}).get("type")
            if kind == "done":
                self.result = Path(str(outcome["path"]))
                self.state = DONE
            elif kind == "cancelled" or (kind is None and self._cancel.is_set()):
                self.state = CANCELLED
                self.error = "The audit was cancelled; nothing was written."
            elif kind == "error":
                self.state = FAILED
                self.error = (str(outcome.get("message")) if outcome.get("expected")
                              else f"Unexpected {outcome.get('message')}")
                if not outcome.get("expected"):
                    LOGGER.error("audit job %s failed: %s\n%s", self.id,
                                 outcome.get("message"), self._stderr_tail())
            else:
                self.state = FAILED
                self.error = (f"The audit's worker process stopped unexpectedly (exit code "
                              f"{self.exit_code}{_signal_name(self.exit_code)}); nothing was "
                              "written. The data may be too large for this machine's memory.")
                LOGGER.error("audit job %s: worker exited with %s\n%s", self.id,
                             self.exit_code, self._stderr_tail())
            if self.state != DONE:
                self._remove_temp_folder()
        finally:
            self.finished = time.monotonic()
            self._dataset = None
            shutil.rmtree(self.job_dir, ignore_errors=True)
            _RUNNING_JOBS.discard(self)

    def _remove_temp_folder(self) -> None:
        """Remove the run's temporary folder a killed worker left (only that one)."""
        from aflite_core.runs import TEMP_PREFIX  # lazy: +17 ms to import

        folder = self._temp_folder
        if (folder is not None and folder.name.startswith(TEMP_PREFIX)
                and folder.parent.resolve() == self._runs_root.resolve() and folder.is_dir()):
            shutil.rmtree(folder, ignore_errors=True)

    def _stderr_tail(self) -> str:
        try:
            lines = (self.job_dir / "worker.log").read_text(encoding="utf-8",
                                                          errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-STDERR_TAIL_LINES:])


def _unused_runner(*args: Any, **kwargs: Any) -> Path:  # pragma: no cover - never called
    raise RuntimeError("WorkerAuditJob runs the pipeline in a worker process")


def _parse(line: str) -> dict[str, Any] | None:
    try:
        event = loads_json(line, name="progress line")
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return ""

    try:
        return f", {signal.Signals(-code).name}"
    except ValueError:
        return ""


def start_audit(dataset: Any, config: Any, *, runs_root: Path, job_dir: Path,
                name: str | None = None) -> WorkerAuditJob:
    """Start auditing ``dataset`` in a worker process; return the running job."""
    job = WorkerAuditJob(dataset, config, runs_root=runs_root, job_dir=job_dir, name=name)
    job.start()
    return job
