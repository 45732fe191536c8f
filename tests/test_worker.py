"""The dashboard's audits run in a worker process (``aflite_core/worker.py``, ``ui/jobs.py``):
the job files round-trip the dataset and the parameters exactly, the worker's run equals an
in-process run, cancel stops it, and a killed worker fails its own audit and leaves no run
folder and no temporary folder."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aflite_core import cgroup_limits
from aflite_core.config import AuditConfig
from aflite_core.io.datasets import load_dataset
from aflite_core.pipeline import run_audit
from aflite_core.worker import read_job, write_job
from ui import jobs

REPO = Path(__file__).resolve().parent.parent
SNLI = REPO / "tests" / "data" / "snli" / "snli_dev.csv"
FAST = {"representation_params": {"n_components": 16}, "n_partitions": 8,
        "measures": ("label_shift",), "report": False}


@pytest.fixture(scope="module")
def dataset():
    return load_dataset(SNLI, id="id")


def test_job_files_round_trip_the_dataset_and_parameters(dataset, tmp_path):
    frame = pd.DataFrame({"premise": ["a b", "c d", "e f", "g h"],
                          "hypothesis": ["x", "y", "z", "w"],
                          "label": ["p", "q", "p", "-"],
                          "score": [1.5, 2.0, None, 3.0],
                          "row_id": ["own", "ids", "kept", "too"]})  # a column named row_id
    small = load_dataset(frame, name="toy.csv")
    config = AuditConfig(target_size=0.5, measure_params={"baselines": {"n_splits": 3}},
                         measures=("cues", "knn"))
    for data in (small, dataset):
        folder = write_job(tmp_path / data.name, data, config, runs_root=tmp_path / "runs",
                           name="r")
        back, cfg, root, name = read_job(folder)
        pd.testing.assert_frame_equal(back.frame, data.frame, check_index_type=False)
        assert back.frame.index.tolist() == data.frame.index.tolist()
        assert back.exclusion.tolist() == data.exclusion.tolist()
        assert (back.columns, back.name, back.content_hash) == (data.columns, data.name,
                                                                data.content_hash)
        assert back.report.to_dict() == data.report.to_dict()
        assert cfg.to_dict() == config.to_dict()
        assert (root, name) == ((tmp_path / "runs").resolve(), "r")


def _wait(job, condition, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def test_a_worker_run_equals_an_in_process_run(dataset, tmp_path):
    config = AuditConfig(**FAST, random_state=3)
    local = run_audit(dataset, config, runs_root=tmp_path / "local", name="r")
    job = jobs.start_audit(dataset, config, runs_root=tmp_path / "worker", name="r",
                           job_dir=tmp_path / "session")
    assert job.join(300), "the worker did not finish"
    assert job.state == jobs.DONE, job.error
    assert job.exit_code == 0  # the worker leaves through process_exit.exit_now
    a = pd.read_parquet(local / "scores.parquet")
    b = pd.read_parquet(job.result / "scores.parquet")
    pd.testing.assert_frame_equal(a, b)
    assert json.loads((job.result / "summary.json").read_text())["sizes"] == json.loads(
        (local / "summary.json").read_text())["sizes"]
    assert not (tmp_path / "session" / f"job-{job.id}").exists()  # the job files are gone
    assert job.snapshot()["fraction"] == 1.0


def _slow_config() -> AuditConfig:
    # one row per round: hundreds of rounds, so the audit is still running when killed
    return AuditConfig(representation_params={"n_components": 16}, n_partitions=8,
                       slice_size=1, target_size=0.3, tau=0.0, measures=(), report=False)


def test_cancel_stops_the_worker_and_leaves_nothing(dataset, tmp_path):
    root = tmp_path / "runs"
    job = jobs.start_audit(dataset, _slow_config(), runs_root=root, job_dir=tmp_path / "s")
    assert _wait(job, lambda: "round" in job.snapshot()), job.snapshot()
    job.cancel()
    assert job.join(60)
    assert job.state == jobs.CANCELLED
    assert not root.exists() or list(root.iterdir()) == []


def test_a_killed_worker_fails_its_audit_and_leaves_no_folder(dataset, tmp_path):
    root = tmp_path / "runs"
    job = jobs.start_audit(dataset, _slow_config(), runs_root=root, job_dir=tmp_path / "s")
    assert _wait(job, lambda: "round" in job.snapshot()), job.snapshot()
    assert any(p.name.startswith(".tmp-") for p in root.iterdir())  # mid-run: its temp folder
    job.process.kill()  # as the kernel's out-of-memory killer would
    assert job.join(60)
    assert job.state == jobs.FAILED
    assert "stopped unexpectedly" in job.error and "SIGKILL" in job.error
    assert list(root.iterdir()) == []  # no run folder, no temporary folder
    assert not (tmp_path / "s" / f"job-{job.id}").exists()


def test_worker_errors_are_messages(tmp_path):
    frame = pd.DataFrame({"hypothesis": [f"t {i}" for i in range(20)],
                          "label": np.resize(["a", "b"], 20)})
    data = load_dataset(frame, name="tiny.csv")
    job = jobs.start_audit(data, AuditConfig(target_size=25), runs_root=tmp_path / "runs",
                           job_dir=tmp_path / "s")
    assert job.join(120)
    assert job.state == jobs.FAILED and job.error.startswith("target_size"), job.error


def test_audit_workers_beyond_the_cap_wait_in_a_queue_showing_their_place(dataset, tmp_path,
                                                                          monkeypatch):
    """With AFLITE_MAX_AUDITS=1 and the one slot taken (by a planted holder, so that no
    audit's speed decides the order), two audits wait, their places shown and no worker
    process started; cancelling a queued audit leaves the queue; when the slot is freed the
    next one runs to the end."""
    import threading

    monkeypatch.setenv(jobs.MAX_AUDITS_VARIABLE, "1")
    holder = threading.Event()
    assert jobs.WORKER_QUEUE.wait("holder", 1, holder, lambda place: None)
    try:
        second = jobs.start_audit(dataset, AuditConfig(**FAST), runs_root=tmp_path / "b",
                                  job_dir=tmp_path / "s")
        assert _wait(second, lambda: second.snapshot().get("queue_position") == 1)
        third = jobs.start_audit(dataset, AuditConfig(**FAST), runs_root=tmp_path / "c",
                                 job_dir=tmp_path / "s")
        assert _wait(third, lambda: third.snapshot().get("queue_position") == 2), \
            third.snapshot()
        snap = second.snapshot()
        assert snap["stage"] == "queued" and snap["queue_position"] == 1
        assert "next to start" in snap["message"] and "at most 1 run at once" in snap["message"]
        assert "1 audit(s) ahead of it" in third.snapshot()["message"]
        assert second.process is None and third.process is None  # no worker while queued
        assert snap["eta"] is None  # the ETA's clock has not started
        third.cancel()
        assert third.join(30) and third.state == jobs.CANCELLED
        assert jobs.WORKER_QUEUE.position(third.id) == 0
        assert second.running and second.process is None  # still waiting for the slot
    finally:
        jobs.WORKER_QUEUE.release("holder")
    assert second.join(300) and second.state == jobs.DONE, second.error
    assert jobs.WORKER_QUEUE.running() == 0


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5"])
def test_a_bad_worker_cap_is_one_message_naming_the_variable(value, dataset, tmp_path,
                                                             monkeypatch):
    monkeypatch.setenv(jobs.MAX_AUDITS_VARIABLE, value)
    job = jobs.start_audit(dataset, AuditConfig(**FAST), runs_root=tmp_path / "r",
                           job_dir=tmp_path / "s")
    assert job.join(60) and job.state == jobs.FAILED
    assert "AFLITE_MAX_AUDITS: expected a whole number >= 1" in job.error, job.error


def test_the_default_cap_follows_cores_and_memory(monkeypatch):
    # no container limits here (the machine's own, if any, are left out)
    monkeypatch.setattr(cgroup_limits, "quota_cores", lambda: None)
    monkeypatch.setattr(cgroup_limits, "cgroup_memory_limit", lambda: None)
    monkeypatch.setattr(jobs.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(jobs.os, "sysconf", lambda name: {"SC_PAGE_SIZE": 4096}.get(
        name, (3 << 30) // 4096))  # 3 GiB of memory: 3 workers of 1 GiB, though 4 cores
    assert jobs.default_max_audits() == 3
    monkeypatch.setattr(jobs.os, "sysconf", lambda name: {"SC_PAGE_SIZE": 4096}.get(
        name, (256 << 20) // 4096))  # too little memory for one: still one
    assert jobs.default_max_audits() == 1


def test_the_default_cap_follows_a_containers_cpu_quota_and_memory_limit(monkeypatch):
    """A container of 2 CPUs and 3 GiB on a host of 16 cores and much memory: 2 audits at
    once, then 3 GiB's worth with a quota of 8 CPUs."""
    monkeypatch.setattr(jobs.os, "sched_getaffinity", lambda pid: set(range(16)),
                        raising=False)
    monkeypatch.setattr(jobs.os, "sysconf", lambda name: {"SC_PAGE_SIZE": 4096}.get(
        name, (256 << 30) // 4096))
    monkeypatch.setattr(cgroup_limits, "cgroup_memory_limit", lambda: 3 << 30)
    monkeypatch.setattr(cgroup_limits, "quota_cores", lambda: 2)
    assert jobs.default_max_audits() == 2
    monkeypatch.setattr(cgroup_limits, "quota_cores", lambda: 8)
    assert jobs.default_max_audits() == 3
