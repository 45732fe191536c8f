"""Same numbers on any machine (issue 63, item 3): the default audit pinned to one core and
given every core this machine has writes the same run folder, byte for byte, timings aside;
pools follow the cores the process may use (its CPU affinity), and a process pinned to one
core finishes (no pool of one thread waiting on itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from run_files import summaries_without_times

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "aflite_core" / "data" / "snli_sample.csv"
pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                                reason="CPU affinity is a Linux facility")


def _audit(data: Path, out: Path, cores: set[int]) -> subprocess.CompletedProcess:
    code = (f"import os, sys; os.sched_setaffinity(0, {sorted(cores)!r}); "
            "from aflite_core.cli import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run(
        [sys.executable, "-c", code, "run", str(data), "--out", str(out), "-q"],
        cwd=REPO, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)})


def test_one_core_and_every_core_write_the_same_run(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("this machine gives the process one core: nothing to compare")
    data = tmp_path / "small.csv"
    pd.read_csv(SAMPLE).head(600).to_csv(data, index=False)
    one = _audit(data, tmp_path / "one" / "run", {cores[0]})
    every = _audit(data, tmp_path / "every" / "run", set(cores))
    assert one.returncode == 0, one.stderr
    assert every.returncode == 0, every.stderr
    a, b = tmp_path / "one" / "run", tmp_path / "every" / "run"
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    assert "scores.parquet" in names and "projection.parquet" in names
    differ = [n for n in names if n not in ("summary.json", "report.html")
              and (a / n).read_bytes() != (b / n).read_bytes()]
    assert differ == [], f"files that depend on the core count: {differ}"
    summaries = summaries_without_times(a, b)
    assert summaries[0] == summaries[1]
    # the pinned run's pools saw one core: its summary says so where it records threads
    assert json.loads((a / "summary.json").read_text())["sizes"] == \
        json.loads((b / "summary.json").read_text())["sizes"]


def test_pools_follow_the_affinity_not_the_machine(tmp_path):
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from aflite_core._validation import available_cores, resolve_n_jobs; "
            "from aflite_core.represent._fold_pool import fold_threads; "
            "from aflite_core.filter._backends import resolve_workers; "
            "print(available_cores(), resolve_n_jobs(-1), fold_threads(), "
            "resolve_workers(None, 'dask'), os.cpu_count())")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    cores, n_jobs, threads, workers, machine = map(int, out.stdout.split())
    assert (cores, n_jobs, threads, workers) == (1, 1, 1, 1), out.stdout
    assert machine >= 1  # os.cpu_count() would have said the machine's, not the process's


def test_too_many_fold_threads_for_the_cores_allowed_is_one_message(tmp_path):
    data = tmp_path / "small.csv"
    pd.read_csv(SAMPLE).head(300).to_csv(data, index=False)
    code = ("import os, sys; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from aflite_core.cli import main; sys.exit(main(sys.argv[1:]))")
    out = subprocess.run([sys.executable, "-c", code, "run", str(data), "--out",
                          str(tmp_path / "r"), "-q"], cwd=REPO, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(REPO),
                                           "AFLITE_FOLD_THREADS": "2"})
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: AFLITE_FOLD_THREADS must be a positive integer")
    assert "of at most 1" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "r").exists()
