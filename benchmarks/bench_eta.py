"""The ETA on a busy machine: the plain estimate against the one that follows the CPU.

Runs the default audit as the dashboard does (``--via worker``, the default: the job written
as ``ui/jobs.py`` writes it, ``python -m aflite_core.worker`` at its own lower priority,
``nice`` +10, :data:`aflite_core.worker.NICENESS`, every progress event read as the dashboard
reads it) or as the CLI at that priority (``--via cli``: one ``[nn%]`` line a stage, so the
bar moves less often than the dashboard's), on ``--rows`` SNLI-like rows
(``bench_cues.build``), once on a quiet machine and then under each load of ``--loads``:
``--hogs`` processes (default: one per core) that burn CPU at the normal priority

* ``steady``: from the start to the end,
* ``starts``: from 30 % of the quiet run's time on,
* ``stops``: from the start until 50 % of the quiet run's time.

Every 0.5 s it reads the audit's progress and the CPU its process tree ran and waited for
(:class:`aflite_core.progress_eta.CpuShare`), and computes what the dashboard would show: the
plain ETA (``elapsed * (1 - f) / f``) and the :class:`~aflite_core.progress_eta.EtaClock`'s.
Printed per run: the wall time, the share of the CPU the audit got, and each ETA's worst
factor against the time that really remained, from 10 % of the run on: where the bar moved
(as ``bench_pipeline.py`` judges it), at every reading (a bar standing still included), and
from 20 s after a load changed (the clock's window plus a little: before that no estimate
can know).

Usage::

    python benchmarks/bench_eta.py [--rows 20000] [--loads steady,starts,stops] [--hogs 2]
        [--via worker|cli]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

from aflite_core._validation import available_cores  # noqa: E402
from aflite_core.progress_eta import CpuShare, EtaClock  # noqa: E402
from aflite_core.worker import NICENESS  # noqa: E402

HOG = "while True: pass"


def _start(data: Path, out: Path, via: str) -> subprocess.Popen:
    """The audit in a process of its own, as the dashboard runs it (``worker``: the job
    written as ``ui/jobs.py`` writes it, every progress event a JSON line on stdout, the
    worker lowering its own priority) or as the CLI (``cli``: one ``[nn%]`` line a stage on
    stderr, at the worker's priority)."""
    if via == "cli":
        return subprocess.Popen(
            [sys.executable, "-m", "aflite_core", "run", str(data), "--out", str(out)],
            cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: os.nice(NICENESS))
    from aflite_core.config import AuditConfig
    from aflite_core.io import load_dataset
    from aflite_core.worker import write_job

    job = write_job(out.with_name(out.name + "-job"), load_dataset(data), AuditConfig(),
                    runs_root=out, name="eta")
    return subprocess.Popen([sys.executable, "-m", "aflite_core.worker", str(job)],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)


def _fractions(proc: subprocess.Popen, via: str):
    """Each progress fraction the audit reports, as it reports it."""
    if via == "cli":
        for line in proc.stderr:
            found = re.match(r"\[\s*(\d+)%\]", line)
            if found:
                yield int(found.group(1)) / 100
        return
    for line in proc.stdout:
        event = json.loads(line)
        if event.get("type") == "progress" and "fraction" in event:
            yield float(event["fraction"])


def _audit(data: Path, out: Path, hog_plan: tuple[float, float] | None, hogs: int,
           via: str = "worker"
           ) -> tuple[float, list[tuple[float, float, float | None, float | None]], float]:
    """Run the audit; ``hog_plan=(start, stop)`` seconds for the hogs. Returns the wall
    time, ``[(t, fraction, plain, clock)]`` every 0.5 s, and the CPU share it got."""
    proc = _start(data, out, via)  # the worker's job is written first: not timed
    start = time.monotonic()
    fraction = [0.0, None]  # the latest fraction, when the first progress report came

    def read() -> None:
        for f in _fractions(proc, via):
            fraction[0] = max(fraction[0], f)
            if fraction[1] is None:
                fraction[1] = time.monotonic()

    threading.Thread(target=read, daemon=True).start()
    cpu = CpuShare(proc.pid)
    clock: EtaClock | None = None
    running: list[subprocess.Popen] = []
    trace = []
    while proc.poll() is None:
        now = time.monotonic() - start
        if hog_plan is not None:
            if not running and hog_plan[0] <= now < hog_plan[1]:
                running = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
            elif running and now >= hog_plan[1]:
                for hog in running:
                    hog.kill()
                running = []
        counts = cpu.sample()
        f, first = fraction
        if first is not None:
            if clock is None:
                clock = EtaClock()
            clock.update(time.monotonic(), f, counts)
            elapsed = time.monotonic() - first
            plain = elapsed * (1 - f) / f if 0.02 <= f < 1 else None
            trace.append((now, f, plain, clock.eta()))
        time.sleep(0.5)
    for hog in running:
        hog.kill()
    wall = time.monotonic() - start
    ran, waited = cpu.ran, cpu.waited
    share = ran / (ran + waited) if ran + waited else 1.0
    return wall, trace, share


def _worst(trace, wall: float, since_t: float = 0.0, *, at_changes: bool = False
           ) -> tuple[float | None, float | None]:
    """Each ETA's worst factor against the time really left, from 10 % of the bar and
    ``since_t`` seconds on (readings with under 2 s left aside); ``at_changes``: only where
    the bar moved (as ``bench_pipeline.py`` judges it), else every reading."""
    moved = [i == 0 or row[1] != trace[i - 1][1] for i, row in enumerate(trace)]

    def factor(index: int) -> float | None:
        values = [max(row[index] / (wall - row[0]), (wall - row[0]) / row[index])
                  for row, move in zip(trace, moved, strict=True)
                  if row[1] >= 0.1 and row[0] >= since_t and row[index]
                  and wall - row[0] >= 2 and (move or not at_changes)]
        return max(values) if values else None

    return factor(2), factor(3)


def _show(pair: tuple[float | None, float | None]) -> str:
    return " / ".join("-" if v is None else f"{v:.2f}" for v in pair)


def main() -> int:
    # every ETA a first audit's on this machine: no pace learned by earlier audits
    # (aflite_core.progress_pace), unless AFLITE_PACE_FILE names a file to use
    os.environ.setdefault("AFLITE_PACE_FILE", "off")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--loads", default="steady,starts,stops")
    parser.add_argument("--hogs", type=int, default=available_cores())
    parser.add_argument("--via", choices=("worker", "cli"), default="worker",
                        help="run the audit as the dashboard does (its worker, every "
                             "progress event) or as the CLI (one progress line a stage)")
    args = parser.parse_args()
    from bench_cues import build

    folder = Path(tempfile.mkdtemp(prefix="bench-eta-"))
    data = folder / "data.csv"
    build(args.rows).to_csv(data, index=False)
    print(f"{args.rows:,} rows, audit at nice +{NICENESS} ({args.via}), {args.hogs} hog(s) at "
          f"nice 0, {available_cores()} core(s)")
    print("  worst ETA factor, plain / CPU-following, from 10 % of the bar on: where the bar "
          "moved (bench_pipeline.py's judge) | at every 0.5 s reading | every reading from 20 s "
          "after the load changed")
    quiet, trace, share = _audit(data, folder / "quiet", None, args.hogs, args.via)
    print(f"  quiet   wall {quiet:6.1f} s  CPU share {share:4.2f}  "
          f"{_show(_worst(trace, quiet, at_changes=True))} | {_show(_worst(trace, quiet))}")
    plans = {"steady": (0.0, float("inf")), "starts": (0.3 * quiet, float("inf")),
             "stops": (0.0, 0.5 * quiet)}
    for load in filter(None, args.loads.split(",")):
        plan = plans[load]
        wall, trace, share = _audit(data, folder / load, plan, args.hogs, args.via)
        change = plan[0] if plan[0] > 0 else plan[1]
        late = _worst(trace, wall, since_t=change + 20) if change != float("inf") else None
        print(f"  {load:<7} wall {wall:6.1f} s  CPU share {share:4.2f}  "
              f"{_show(_worst(trace, wall, at_changes=True))} | {_show(_worst(trace, wall))}"
              f" | {'-' if late is None else _show(late)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
