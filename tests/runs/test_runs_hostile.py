"""Runs never collide, never vanish, never leave debris.

* a kill -9 at any moment of an ``--overwrite`` swap leaves one complete visible run (or one
  that the next writer / ``list_runs`` / ``cleanup_stale`` makes visible again);
* every temporary file (export ``.part-``, run ``.tmp-``, dashboard session folders) is
  removed on error and on SIGTERM / exit, and stale ones are swept;
* ``list_runs`` flags a run whose ``scores.parquet`` is missing or corrupt;
* run names: NFC, ``__`` allowed, lengths checked in bytes, temporary names shortened.
"""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aflite_core.io import _tables as tables
from aflite_core.runs import _writer as run_writer
from aflite_core.runs import folder
from aflite_core.runs.exports import export_run
from aflite_core.runs.folder import cleanup_stale, list_runs, load_run

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
DAY = 24 * 3600

# A tiny complete run; shared by the in-process tests and the subprocess scripts.
MAKE_RUN = textwrap.dedent('''
    import numpy as np
    import pandas as pd
    from aflite_core.runs._writer import write_run

    def make_run(root, name, marker="x", overwrite=False, n=40):
        frame = pd.DataFrame(
            {"hypothesis": [f"h{i}" for i in range(n)], "label": ["a", "b"] * (n // 2)},
            index=pd.Index(np.arange(n, dtype=np.int64), name="row_id"),
        )
        status = np.array(["retained", "removed"] * (n // 2), dtype=object)
        scores = pd.DataFrame({
            "row_id": frame.index.to_numpy(), "status": status,
            "predictability": np.linspace(0, 1, n),
            "removal_round": np.where(status == "removed", 0, -1).astype(np.int64),
            "label": frame["label"].to_numpy(),
        })
        return write_run(root, name, frame=frame, scores=scores,
                         summary={"marker": marker, "input": {"name": "toy.csv"}},
                         overwrite=overwrite)
''')
_ns: dict = {}
exec(MAKE_RUN, _ns)  # noqa: S102 - our own helper source, also run in subprocesses
make_run = _ns["make_run"]


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _visible(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if not p.name.startswith("."))


def _hidden(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("."))


# ----------------------------------------------------------------------------- overwrite swap

KILL_SCRIPT = MAKE_RUN + textwrap.dedent('''
    import os, shutil, signal, sys
    from aflite_core.runs import _writer as folder

    root, step, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    state = {"active": False, "n": 0}

    def hook():
        if state["active"]:
            state["n"] += 1
            if state["n"] == step:
                os.kill(os.getpid(), signal.SIGKILL)

    def wrap(fn):
        def inner(*args, **kwargs):
            hook()
            return fn(*args, **kwargs)
        return inner

    real_exchange = getattr(folder, "_exchange", None)
    if mode == "rename" or real_exchange is None:
        folder._exchange = lambda a, b: False
    else:
        folder._exchange = wrap(real_exchange)
    folder.os.rename = wrap(os.rename)
    folder.shutil.rmtree = wrap(shutil.rmtree)
    real_commit = folder.RunWriter.commit

    def commit(self):
        state["active"] = True
        try:
            return real_commit(self)
        finally:
            state["active"] = False

    folder.RunWriter.commit = commit
    make_run(root, "same", marker="new", overwrite=True)
    print("completed")
''')


@pytest.mark.parametrize("mode", ["exchange", "rename"])
@pytest.mark.parametrize("step", [1, 2, 3, 4, 5])
def test_kill_9_at_any_step_of_an_overwrite_leaves_one_complete_visible_run(
    tmp_path, mode, step
):
    root = tmp_path / "runs"
    make_run(root, "same", marker="old")
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(root), str(step), mode],
                          env=ENV, capture_output=True, text=True, timeout=120)
    killed = proc.returncode == -signal.SIGKILL
    assert killed or (proc.returncode == 0 and "completed" in proc.stdout), proc.stderr
    # whatever was on disk at the moment of death, the run is listed, complete, once
    runs = list_runs(root)
    assert [r.name for r in runs] == ["same"] and runs[0].damaged == ""
    run = load_run(root / "same")
    assert run.summary["marker"] in ("old", "new")
    if not killed:
        assert run.summary["marker"] == "new"
    # the next writer and the sweep neither lose it nor keep debris
    cleanup_stale(root, max_age=0)
    assert _visible(root) == ["same"] and _hidden(root) == []
    assert load_run(root / "same").summary["marker"] in ("old", "new")


def _hide_mid_swap(root: Path) -> tuple[Path, Path]:
    """The state a kill between the two renames of the fallback swap leaves."""
    make_run(root, "same", marker="old")
    old = root / folder.hidden_name(folder.OLD_PREFIX, "same")
    os.rename(root / "same", old)
    other = root / "staging"
    make_run(other, "same", marker="new")
    new = root / folder.hidden_name(folder.NEW_PREFIX, "same")
    os.rename(other / "same", new)
    other.rmdir()
    return old, new


def test_recovery_restores_the_newest_complete_run_instead_of_deleting_it(tmp_path):
    root = tmp_path / "runs"
    old, new = _hide_mid_swap(root)
    for path in (old, new):
        _age(path, 2 * DAY)
    cleanup_stale(root)  # older than a day: used to delete both
    assert _visible(root) == ["same"]
    assert load_run(root / "same").summary["marker"] == "new"
    assert _hidden(root) == []  # the replaced one is swept once the new one is back


def test_an_old_run_is_restored_when_it_is_the_only_complete_one(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "same", marker="old")
    old = root / ".old-same-0123abcd"
    os.rename(root / "same", old)
    (root / ".tmp-same-89abcdef").mkdir()  # an incomplete new run: never restored
    assert [r.name for r in list_runs(root)] == ["same"]
    assert load_run(root / "same").summary["marker"] == "old"
    assert (root / ".tmp-same-89abcdef").is_dir()


def test_a_writer_restores_a_hidden_run_before_it_starts(tmp_path):
    root = tmp_path / "runs"
    _hide_mid_swap(root)
    make_run(root, "other")
    assert _visible(root) == ["other", "same"]
    assert load_run(root / "same").summary["marker"] == "new"


def test_a_run_in_progress_is_never_made_visible_by_recovery(tmp_path):
    root = tmp_path / "runs"
    with run_writer.RunWriter(root, "busy") as writer:
        writer.write_json("summary.json", {"format_version": 1, "name": "busy"})
        assert list_runs(root) == [] and cleanup_stale(root, max_age=3600) == []
        assert writer.tmp.is_dir()
        writer.write_summary({})
    assert _visible(root) == ["busy"]


# ----------------------------------------------------------------------------- debris


class _FullDisk(io.FileIO):
    """A file on a disk with ``room`` bytes left: writes beyond fail with ENOSPC."""

    room = 1000

    def write(self, data):  # noqa: D102
        if self.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


def _full_disk_open(path, mode="rb", *args, **kwargs):
    assert mode == "wb"
    return io.BufferedWriter(_FullDisk(path, "w"))


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_to_a_full_disk_leaves_no_part_file(tmp_path, monkeypatch, fmt):
    root = tmp_path / "runs"
    path = make_run(root, "r", n=2000)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    monkeypatch.setattr(tables, "open", _full_disk_open, raising=False)
    with pytest.raises(OSError, match="No space left"):
        export_run(path, "all", out_dir / f"all.{fmt}", chunk_rows=100)
    assert list(out_dir.iterdir()) == []


EXPORT_SIGTERM = MAKE_RUN + textwrap.dedent('''
    import os, signal, sys
    from aflite_core import cli
    from aflite_core.runs import exports

    root, out = sys.argv[1], sys.argv[2]
    real = exports.iter_row_chunks

    def chunks(*args, **kwargs):
        kwargs["chunk_rows"] = 50
        for i, chunk in enumerate(real(*args, **kwargs)):
            if i == 1:
                os.kill(os.getpid(), signal.SIGTERM)
            yield chunk

    exports.iter_row_chunks = chunks
    path = make_run(root, "r", n=400)
    sys.exit(cli.main(["export", str(path), "--what", "all", "--out", out]))
''')


def test_export_stopped_with_sigterm_removes_its_part_file(tmp_path):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = subprocess.run([sys.executable, "-c", EXPORT_SIGTERM, str(tmp_path / "runs"),
                           str(out_dir / "all.csv")],
                          env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert "terminated" in proc.stderr and "Traceback" not in proc.stderr
    assert list(out_dir.iterdir()) == []


def test_stale_part_files_are_swept(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "r")
    stale = root / ".scores.csv.part-0123abcd"
    young = root / ".other.csv.part-89abcdef"
    for p in (stale, young):
        p.write_bytes(b"half")
    _age(stale, 2 * DAY)
    with open(young, "ab") as writing:  # an export in progress holds its file's lock
        tables._hold(writing)
        cleanup_stale(root)
        assert not stale.exists() and young.exists()
    cleanup_stale(root)  # its writer gone (the lock with it): swept at once
    assert not young.exists()
    # the next export to the same target sweeps a stale one next to it
    out = tmp_path / "all.csv"
    left = tmp_path / ".all.csv.part-0123abcd"
    left.write_bytes(b"half")
    _age(left, 2 * DAY)
    export_run(root / "r", "all", out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.csv", "runs"]


KILLED_EXPORT = textwrap.dedent('''
    import os, sys
    from aflite_core.io import _tables as tables
    handle, tmp, final = tables._open_target(sys.argv[1], False)
    handle.write(b"half of an export")
    handle.flush()
    print(tmp.name, flush=True)
    os.kill(os.getpid(), 9)  # killed mid-export: its .part file stays behind
''')

HELD_EXPORT = textwrap.dedent('''
    import sys, time
    from aflite_core.io import _tables as tables
    handle, tmp, final = tables._open_target(sys.argv[1], False)
    print(tmp.name, flush=True)
    sys.stdin.readline()  # an export in progress until told to stop
''')


def test_a_killed_exports_part_file_is_swept_by_the_next_export_at_once(tmp_path):
    """Its lock died with it: the next export to the folder removes it without waiting a
    day, and keeps the .part file of an export that is still being written (locked)."""
    root = tmp_path / "runs"
    path = make_run(root, "r")
    out = tmp_path / "out"
    out.mkdir()
    killed = subprocess.run([sys.executable, "-c", KILLED_EXPORT, str(out / "a.csv")],
                            env=ENV, capture_output=True, text=True, timeout=60)
    assert killed.returncode == -9
    left = out / killed.stdout.strip()
    assert left.exists()
    held = subprocess.Popen([sys.executable, "-c", HELD_EXPORT, str(out / "b.csv")],
                            env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        busy = out / held.stdout.readline().strip()
        assert busy.exists()
        export_run(path, "all", out / "c.csv")  # another target in the same folder
        assert not left.exists() and busy.exists()
        assert sorted(p.name for p in out.iterdir()) == sorted([busy.name, "c.csv"])
    finally:
        held.communicate("\n", timeout=30)


def test_export_temp_name_fits_when_the_target_name_fits(tmp_path):
    root = tmp_path / "runs"
    path = make_run(root, "r")
    out = tmp_path / ("表" * 82 + ".csv")  # 250 bytes: fits, its .part- twin did not
    export_run(path, "all", out)
    assert out.is_file() and [p.name for p in tmp_path.iterdir() if p.name != "runs"] == [
        out.name]


JOB_EXIT = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from aflite_core.runs._writer import RunWriter
    from ui import jobs

    class Cancelled(Exception):
        pass

    def runner(dataset, config, *, runs_root, name, callback):
        with RunWriter(runs_root, "slow") as writer:
            writer.write_text("partial.txt", "x")
            while not callback({"stage": "aflite", "fraction": 0.1}):
                time.sleep(0.02)
            raise Cancelled()

    root = Path(sys.argv[1])
    job = jobs.AuditJob(runner, object(), None, runs_root=root, cancelled_error=Cancelled)
    job.start()
    for _ in range(500):
        if root.is_dir() and any(p.name.startswith(".tmp-") for p in root.iterdir()):
            break
        time.sleep(0.01)
    print("running", flush=True)
    sys.exit(0)  # the dashboard stops (Streamlit turns SIGTERM into a normal exit)
''')


def test_dashboard_exit_during_a_background_audit_leaves_no_temp_run(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    proc = subprocess.run([sys.executable, "-c", JOB_EXIT, str(root)], env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "running" in proc.stdout, proc.stderr
    assert list(root.iterdir()) == []


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_session_folders_of_gone_dashboards_are_swept(tmp_path):
    from ui import state

    base = tmp_path / "aflite-dashboard"
    base.mkdir()
    dead, alive = _dead_pid(), os.getpid()
    folders = {
        "dead_old": base / f"session-{dead}-0123abcd-x1",
        "dead_young": base / f"session-{dead}-0123abcd-x2",
        "alive_old": base / f"session-{alive}-0123abcd-x3",
        "legacy_old": base / "session-0123abcd-x4",
    }
    for name, path in folders.items():
        path.mkdir()
        (path / "upload.csv").write_text("a\n")
        if name.endswith("old"):
            _age(path, 2 * DAY)
    part = base / ".x.csv.part-0123abcd"
    part.write_bytes(b"")
    _age(part, 2 * DAY)
    removed = state.sweep_stale_sessions(base)
    assert sorted(removed) == sorted([folders["dead_old"], folders["legacy_old"], part])
    assert folders["dead_young"].is_dir() and folders["alive_old"].is_dir()


def test_session_folders_are_removed_when_the_dashboard_exits(tmp_path):
    script = textwrap.dedent('''
        import os, sys, tempfile
        from ui import state
        state.session_root().mkdir(parents=True, exist_ok=True)
        path = tempfile.mkdtemp(prefix=f"session-{os.getpid()}-0123abcd-",
                                dir=state.session_root())
        open(os.path.join(path, "upload.csv"), "w").write("a\\n")
        print(path)
    ''')
    env = {**ENV, "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip())
    assert path.parent == tmp_path / "aflite-dashboard" and not path.exists()


# ----------------------------------------------------------------------------- damaged runs


def test_list_runs_marks_a_run_without_scores_as_damaged(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "good")
    (make_run(root, "gone") / "scores.parquet").unlink()
    (make_run(root, "torn") / "scores.parquet").write_bytes(b"PAR1 not really")
    damaged = {r.name: r.damaged for r in list_runs(root)}
    assert damaged["good"] == ""
    assert damaged["gone"] == "scores.parquet is missing"
    assert damaged["torn"].startswith("scores.parquet is unreadable")
    status = {r.name: r.status for r in list_runs(root)}
    assert status["good"] == "ok" and status["gone"].startswith("damaged: ")


def test_list_runs_marks_a_run_that_lost_a_listed_file(tmp_path):
    root = tmp_path / "runs"
    (make_run(root, "r") / "dataset.parquet").unlink()
    assert list_runs(root)[0].damaged == "file(s) missing: dataset.parquet"


# ----------------------------------------------------------------------------- names

NFD_CAFE = unicodedata.normalize("NFD", "café")
NFC_CAFE = unicodedata.normalize("NFC", "café")


def test_an_nfd_name_is_the_same_name_as_its_nfc_twin(tmp_path):
    assert NFD_CAFE != NFC_CAFE
    assert folder.sanitize_run_name(NFD_CAFE) == NFC_CAFE
    assert folder.run_name_problems(NFD_CAFE) == []
    assert folder.check_run_name(NFD_CAFE) == NFC_CAFE
    path = make_run(tmp_path, NFD_CAFE)
    assert path.name == NFC_CAFE


def test_double_underscores_are_kept():
    assert folder.sanitize_run_name("my__run") == "my__run"
    assert folder.check_run_name("my__run") == "my__run"
    assert folder.sanitize_run_name("a / b") == "a_b"  # a run of bad characters: one _


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("my run", "' ' (U+0020 SPACE)"),
        ("a\u202eb", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        (".hidden", "starts with '.'"),
        ("a..b", "contains '..'"),
        ("表" * 86, "is 258 bytes long in UTF-8"),
    ],
)
def test_check_run_name_says_precisely_what_is_wrong(raw, fragment):
    with pytest.raises(ValueError, match="not a safe run folder name") as info:
        folder.check_run_name(raw, what="--out")
    assert fragment in str(info.value) and str(info.value).startswith("--out: ")


def test_a_long_cjk_name_that_fits_is_written_and_listed(tmp_path):
    name = "漢" * 84  # 252 bytes: fits a file name; ".tmp-<name>-<token>" would not
    path = make_run(tmp_path, name)
    assert path.name == name and [r.name for r in list_runs(tmp_path)] == [name]
    make_run(tmp_path, name, marker="again", overwrite=True)  # .new-/.old- names fit too
    assert load_run(tmp_path / name).summary["marker"] == "again"
    assert _hidden(tmp_path) == []


def test_a_too_long_name_is_cut_in_bytes_and_a_suffix_still_fits(tmp_path):
    safe = folder.sanitize_run_name("漢" * 120)
    assert len(safe.encode()) <= 255 and safe == "漢" * 85
    make_run(tmp_path, safe)
    assert len(folder.unique_run_name(tmp_path, safe).encode()) <= 255
    with run_writer.RunWriter(tmp_path, safe, unique=True) as writer:
        frame = pd.DataFrame({"h": ["a"]}, index=pd.Index([0], name="row_id"))
        writer.write_dataset(frame)
        writer.write_scores(pd.DataFrame({"row_id": [0], "status": ["retained"],
                                          "predictability": [np.nan], "removal_round": [-1]}))
        writer.write_summary({})
    assert writer.path.name.endswith("-2") and len(writer.path.name.encode()) <= 255


def test_summary_records_the_nfc_name(tmp_path):
    path = make_run(tmp_path, NFD_CAFE)
    assert json.loads((path / "summary.json").read_text())["name"] == NFC_CAFE


@pytest.mark.parametrize(("ids", "given", "ok"), [
    (np.arange(5), np.arange(5), True),
    (np.arange(5), np.arange(5)[::-1], False),
    (np.arange(5), np.arange(5).astype(np.int32), True),
    (np.array(["a", "b"], dtype=object), np.array(["a", "b"], dtype=object), True),
    (np.array(["a", "b"], dtype=object), np.array(["b", "a"], dtype=object), False),
    (np.array([0, 1]), np.array(["0", "1"], dtype=object), False),
])
def test_scores_must_list_the_datasets_row_ids_in_its_order(tmp_path, ids, given, ok):
    with run_writer.RunWriter(tmp_path, "ids") as writer:
        frame = pd.DataFrame({"h": ["x"] * len(ids)}, index=pd.Index(ids, name="row_id"))
        writer.write_dataset(frame)
        scores = pd.DataFrame({"row_id": given, "status": ["retained"] * len(ids),
                               "predictability": np.nan, "removal_round": -1})
        if ok:
            writer.write_scores(scores)
        else:
            with pytest.raises(ValueError, match="dataset's row ids in the dataset's order"):
                writer.write_scores(scores)
        writer.write_summary({})
