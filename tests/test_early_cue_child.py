"""The cue measure's child started first thing (``commands.warm_early``, ``worker.warm_early``):
only for an audit that will do work ahead, taken by that audit, ended when nothing takes it.

The command line's ``run`` and the dashboard's audit worker spend a second and more importing
before the audit starts; the child loads NLTK and the tagger meanwhile on a core they leave
idle. It must change nothing else: the audit takes it instead of starting its own, and a
run that fails, or whose rows need no work ahead, ends it.
"""

from __future__ import annotations

import io
import subprocess

import pytest

from aflite_core import _validation, ahead_bounds, cgroup_limits, heap_trim, measure_runs, pipeline
from aflite_core.commands import run as run_command
from aflite_core.commands import warm_early
from aflite_core.config import AuditConfig
from aflite_core.cues import _annotations_ahead, _spare_child
from aflite_core.io.datasets import load_dataset
from aflite_core.runs.folder import load_run
from aflite_core.worker import warm_early as worker_warm_early
from aflite_core.worker import write_job


class _Child:
    """What ``start_child`` returns, without a process: a standard input to close."""

    def __init__(self, *args, **kwargs) -> None:
        self.args = args
        self.stdin = io.BytesIO()


@pytest.fixture
def fake_children(monkeypatch):
    """The spare's ``start_child`` recorded, no process started; nothing left behind."""
    started: list[_Child] = []

    def start(*args, **kwargs):
        started.append(_Child(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(_spare_child, "start_child", start)
    yield started
    _spare_child.discard_spare_child()


def _cores(monkeypatch, count: int) -> None:
    monkeypatch.setattr(_validation, "available_cores", lambda: count)


def test_the_command_line_starts_it_for_a_default_audit_on_two_cores(fake_children,
                                                                     monkeypatch):
    _cores(monkeypatch, 2)
    not_default = [["export", "runs/x"], ["run", "d.csv", "--measures", "cues,knn"],
                   ["run", "d.csv", "--measures=cues"], ["run", "d.csv", "--meas", "cues"],
                   ["run", "d.csv", "--scheduler", "local:2"], ["run", "d.csv", "--sched=x"],
                   ["run", "--help"], ["run", "d.csv", "-h"], ["--debug"], []]
    for argv in not_default:
        assert not warm_early(argv), argv
    assert fake_children == []
    held: list[tuple] = []  # the children's BLAS held to a CPU quota before the child starts,
    # and NumPy's page size set for it
    monkeypatch.setattr(cgroup_limits, "limit_native_threads",
                        lambda: held.append(("threads", len(fake_children))))
    monkeypatch.setattr(heap_trim, "numpy_small_pages",
                        lambda: held.append(("pages", len(fake_children))))
    assert warm_early(["run", "d.csv", "--seed", "3", "--no-report"])
    assert len(fake_children) == 1 and fake_children[0].args[0] == _spare_child.AHEAD_MODULE
    assert held == [("threads", 0), ("pages", 0)]
    assert not warm_early(["--debug", "run", "d.csv"])  # one spare at a time
    _spare_child.discard_spare_child()
    assert warm_early(["--debug", "run", "d.csv"])  # after --debug, the command is run
    _spare_child.discard_spare_child()
    assert all(child.stdin.closed for child in fake_children)
    _cores(monkeypatch, 1)  # no work ahead on one core: nothing to start
    assert not warm_early(["run", "d.csv"]) and len(fake_children) == 2


def test_a_failed_run_ends_the_child_it_started_first(spare_children, tmp_path, monkeypatch):
    """The data is missing: ``run`` fails after the child started; the child is ended (its
    input closed) and exits once it has loaded what it was loading."""
    from aflite_core.cli import main

    started = spare_children
    _cores(monkeypatch, 2)
    assert main(["run", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "r")]) == 2
    assert len(started) == 1 and _spare_child._SPARE == []
    assert started[0].wait(timeout=120) == 0
    assert not (tmp_path / "r").exists()


def test_the_audit_takes_the_child_the_command_line_started(snli_dev_head, tmp_path,
                                                            monkeypatch):
    """A default audit on two cores with work ahead (its rows bound lowered for these 1,200):
    one child in all, the one started before the parser; the cue table as without it."""
    started: list[tuple[str, subprocess.Popen]] = []
    spare_start, ahead_start = _spare_child.start_child, _annotations_ahead.start_child

    def recording(where, start):
        def record(*args, **kwargs):
            started.append((where, start(*args, **kwargs)))
            return started[-1][1]
        return record

    monkeypatch.setattr(_spare_child, "start_child", recording("first", spare_start))
    monkeypatch.setattr(_annotations_ahead, "start_child", recording("ahead", ahead_start))
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cache"))
    _cores(monkeypatch, 2)
    for module in (pipeline, measure_runs, run_command):
        monkeypatch.setattr(module, "available_cores", lambda: 2)
    monkeypatch.setattr(measure_runs, "AHEAD_MIN_ROWS", 0)
    from aflite_core import cli

    build = cli.build_parser

    def parser():
        started.append(("parser", None))
        return build()

    monkeypatch.setattr(cli, "build_parser", parser)
    data = snli_dev_head(1200)
    assert cli.main(["run", str(data), "--out", str(tmp_path / "run"), "--no-report", "-q",
                     "--partitions", "8"]) == 0
    assert [where for where, _ in started] == ["first", "parser"]  # before the imports
    assert started[0][1].wait(timeout=120) == 0 and _spare_child._SPARE == []
    run = load_run(tmp_path / "run")
    assert run.measures["cues"]["status"] == "ok", run.measures["cues"]
    assert len(run.read_parquet("cues.parquet")) > 0


def test_the_worker_starts_it_when_its_job_will_do_work_ahead(snli_dev_head, fake_children,
                                                              tmp_path, monkeypatch):
    dataset = load_dataset(snli_dev_head(1200))
    config = AuditConfig(measures=("cues", "knn"))

    def job(name: str, cfg: AuditConfig = config):
        return write_job(tmp_path / name, dataset, cfg, runs_root=tmp_path / "runs")

    _cores(monkeypatch, 2)
    assert not worker_warm_early(job("few"))  # 1,200 rows: below the work ahead's bound
    monkeypatch.setattr(ahead_bounds, "AHEAD_MIN_ROWS", 1000)
    assert not worker_warm_early(job("no_cues", AuditConfig(measures=("knn",))))
    assert not worker_warm_early(tmp_path / "nothing")  # no job: run_job says why
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "job.json").write_text("{", encoding="utf-8")
    assert not worker_warm_early(tmp_path / "broken")
    _cores(monkeypatch, 1)
    assert not worker_warm_early(job("one_core"))
    assert fake_children == []
    _cores(monkeypatch, 2)
    assert worker_warm_early(job("ahead"))
    assert len(fake_children) == 1 and fake_children[0].args[0] == _spare_child.AHEAD_MODULE
