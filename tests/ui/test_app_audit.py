"""AppTest: the Audit page runs AFLite in the background, reports progress, reuses and
reopens runs, and turns bad parameters into one clear message."""

from __future__ import annotations

import io
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from apptest_support import (
    assert_clean,
    errors,
    goto,
    new_app,
    start_small_audit,
    texts,
    wait_for_job,
    widget_key,
)

from ui import jobs


def test_empty_state_without_dataset(runs_root) -> None:
    at = goto(new_app(autoload=False).run(), "audit")
    assert_clean(at)
    assert "Load a dataset first" in texts(at)
    assert not [b for b in at.button if b.key == "audit:run"]
    shown = texts(at).replace("\\", "")
    # the runs folder is named by its own name, never by the server's absolute path
    assert f"No run in the runs folder {runs_root.name} (AFLITE_RUNS_DIR) yet." in shown
    assert str(runs_root) not in shown


def test_defaults_are_scaled_to_the_dataset(runs_root) -> None:
    at = goto(new_app().run(), "audit")
    assert_clean(at)
    values = {n.label: n.value for n in at.number_input}
    # the sample has 3,000 train and 1,000 dev rows: AFLite filters the train split
    assert values["Target size (rows)"] == 1500  # half of the 3,000 train rows
    assert values["Slice size k (rows)"] == 150  # 5% of n for small data
    assert values["Train size t (share, or rows if ≥ 1)"] == 1200  # 40% of n, fixed rows
    assert values["Partitions m"] == 32
    assert at.selectbox(key=[k for k in at.session_state
                             if str(k).startswith("audit:split_policy")][0]).value == "auto"
    # every parameter explains itself in one line
    assert all(n.help for n in at.number_input)


def test_small_audit_runs_then_explore_shows_both_sides(runs_root) -> None:
    at = start_small_audit(new_app().run())
    assert not at.exception
    job = wait_for_job(at)
    assert job.state == jobs.DONE, job.error
    assert_clean(at)
    assert any("Last audit finished" in s.value for s in at.success)
    run_path = Path(at.session_state["app:run_path"])
    assert run_path.parent == runs_root and (run_path / "summary.json").is_file()

    goto(at, "explore")
    assert_clean(at)
    table = at.dataframe[-1].value
    assert "**4,000 rows** match" in texts(at)
    assert set(table["status"]) <= {"retained", "removed"}
    assert "hypothesis" in table.columns and table["hypothesis"].str.len().gt(0).all()
    # the side-by-side view shows one table per side
    at.segmented_control(key="explore:view").set_value("side").run()
    assert_clean(at)
    sides = [set(df.value["status"]) for df in at.dataframe if "status" in df.value]
    assert {"retained"} in sides and {"removed"} in sides

    # identical data + parameters: the finished run is reopened, nothing recomputed
    at.session_state["audit:job"] = None
    start_small_audit(at)
    assert at.session_state["audit:job"] is None
    assert len([p for p in runs_root.iterdir() if not p.name.startswith(".")]) == 1


def test_bad_parameters_give_one_clear_message(runs_root) -> None:
    # an int train size above the target size is invalid for AFLite
    at = start_small_audit(new_app().run(), t=3000.0)
    job = wait_for_job(at)
    assert job.state == jobs.FAILED
    assert not at.exception
    message = errors(at)[0]
    assert "train_size" in message and "Traceback" not in message
    assert not [p for p in runs_root.glob("*") if not p.name.startswith(".")]


def test_cancel_leaves_no_run_behind(runs_root) -> None:
    at = start_small_audit(new_app().run(), m=64, k=50)
    job = at.session_state["audit:job"]
    cancel = [b for b in at.button if str(b.key).startswith("audit:cancel:")]
    assert cancel and job.running
    cancel[0].click().run()
    job = wait_for_job(at)
    assert job.state == jobs.CANCELLED
    assert not at.exception
    assert "cancelled" in texts(at)
    assert not runs_root.exists() or not [p for p in runs_root.iterdir()
                                          if not p.name.startswith(".")]


def test_previous_runs_are_listed_and_reopenable(runs_root, shared_run) -> None:
    import shutil

    runs_root.mkdir(parents=True)
    copy = runs_root / shared_run.name
    shutil.copytree(shared_run, copy)
    at = new_app(autoload=False).run()
    goto(at, "audit")
    assert_clean(at)
    listed = at.dataframe[-1].value
    assert listed["run"].tolist() == [shared_run.name]
    at.selectbox(key="audit:open_choice").set_value(shared_run.name)
    at.button(key="audit:open").click().run()
    assert_clean(at)
    assert Path(at.session_state["app:run_path"]) == copy


def test_job_reports_progress_and_stops_on_cancel() -> None:
    """ui.jobs with a planted runner: progress snapshots, ETA, cancellation."""
    release = threading.Event()

    class Cancelled(Exception):
        pass

    def runner(dataset, config, *, runs_root, name, callback):
        for i in range(1, 100):
            stop = callback({"stage": "aflite", "message": f"round {i}", "fraction": i / 100,
                             "round": i, "size": 1000 - 10 * i, "removed_total": 10 * i})
            if stop:
                raise Cancelled
            if i == 10:
                release.wait(5)
        return runs_root / "never"

    job = jobs.AuditJob(runner, object(), None, runs_root=Path("/nonexistent"),
                        cancelled_error=Cancelled).start()
    deadline = time.monotonic() + 5
    while job.snapshot().get("round") != 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    snap = job.snapshot()
    assert snap["round"] == 10 and snap["size"] == 900 and snap["removed_total"] == 100
    assert snap["state"] == jobs.RUNNING and snap["eta"] is not None and snap["eta"] > 0
    job.cancel()
    release.set()
    assert job.join(5)
    assert job.state == jobs.CANCELLED and job.result is None
    assert job.snapshot()["round"] == 11  # stopped at the first report after the request


@pytest.mark.parametrize("error, expected", [(ValueError("tau: expected ..."), "tau:"),
                                             (ZeroDivisionError("x"), "Unexpected")])
def test_job_failures_become_messages(error: Exception, expected: str) -> None:
    def runner(*args, **kwargs):
        raise error

    job = jobs.AuditJob(runner, object(), None, runs_root=Path("/nonexistent")).start()
    assert job.join(5)
    assert job.state == jobs.FAILED and job.error.startswith(expected)


def test_synthetic_demo_audit_removes_the_planted_bias(runs_root) -> None:
    at = new_app(autoload=False).run()
    at.segmented_control(key="data:source").set_value("synthetic").run()
    at.select_slider(key="data:synthetic_n").set_value(1000)
    at.button(key="data:synthetic_go").click().run()
    start_small_audit(at, m=16, k=50, target=500, measures=[])
    job = wait_for_job(at)
    assert job.state == jobs.DONE, job.error
    goto(at, "report")
    assert_clean(at)
    planted = next(i.value for i in at.info if "planted bias" in i.value)
    before, after = (int(x) for x in re.findall(r"(\d+)%", planted))
    assert after < before  # AFLite took the easy, biased rows first


def test_pickled_embeddings_are_refused_with_a_message(runs_root, tmp_path) -> None:
    at = goto(new_app().run(), "audit")
    at.selectbox(key=widget_key(at, "audit:representation:")).set_value("precomputed").run()
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}] * 4000, dtype=object), allow_pickle=True)
    at.file_uploader(key=widget_key(at, "audit:embeddings:")).upload(
        "evil.npy", buffer.getvalue())
    at.run()
    start_small_audit(at)
    job = wait_for_job(at)
    assert job.state == jobs.FAILED
    assert not at.exception
    message = errors(at)[0]
    assert "evil" in message and "Traceback" not in message


def test_new_session_audits_the_sample_by_itself_once(runs_root, monkeypatch):
    """A newcomer sees a finished audit without pressing anything; the next session reuses it."""
    monkeypatch.setenv("AFLITE_AUTORUN", "1")
    at = new_app()
    at.run()
    assert_clean(at)
    assert "audit:job" in at.session_state
    job = wait_for_job(at)
    assert job.state == jobs.DONE, job.error
    runs = [p for p in runs_root.iterdir() if not p.name.startswith(".")]
    assert len(runs) == 1 and (runs[0] / "summary.json").is_file()
    assert str(at.session_state["app:run_path"]) == str(runs[0])
    goto(at, "explore")
    assert_clean(at)

    second = new_app()
    second.run()
    assert_clean(second)
    assert "audit:job" not in second.session_state  # reopened, not recomputed
    assert [p for p in runs_root.iterdir() if not p.name.startswith(".")] == runs


def test_autorun_can_be_turned_off(runs_root, monkeypatch):
    monkeypatch.setenv("AFLITE_AUTORUN", "0")
    at = new_app()
    at.run()
    assert_clean(at)
    assert "audit:job" not in at.session_state
    assert not runs_root.exists() or not any(runs_root.iterdir())
