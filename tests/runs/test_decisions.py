"""Review decisions are data (issue 62, items 2-4): ``decisions.parquet`` in the run folder,
``AuditRun.decide`` / ``decisions``, the CLI's spreadsheet round trip, and the curated
dataset, audited again."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from aflite_core.cli import main
from aflite_core.errors import RunError
from aflite_core.io.datasets import load_dataset
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.runs import decisions as decisions_module
from aflite_core.runs._curated import export_curated
from aflite_core.runs.folder import list_runs, load_run

REPO = Path(__file__).resolve().parents[2]
N = 240
FAST = AuditConfig(target_size=0.6, n_partitions=8, measures=(), report=False, random_state=0)


def _records() -> list[dict]:
    return [{"pid": f"p{i}", "premise": f"A man number {i} walks a dog in the park.",
             "hypothesis": (f"Nobody {i} ever walks." if i % 2 else f"A person {i} is outside."),
             "label": i % 2, "source": f"s{i % 3}"} for i in range(N)]


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> Path:
    """A run of JSON Lines data with integer labels and an id column."""
    folder = tmp_path_factory.mktemp("decisions")
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _records()), encoding="utf-8")
    return run_audit(load_dataset(data, id="pid"), FAST, runs_root=folder / "runs", name="r")


@pytest.fixture
def run_dir(audited, tmp_path) -> Path:
    copy = tmp_path / "runs" / "r"
    shutil.copytree(audited, copy)
    return copy


def test_the_latest_decision_of_a_row_is_in_force_and_revert_takes_it_back(run_dir):
    run = load_run(run_dir)
    assert run.decisions().empty and not (run_dir / "decisions.parquet").exists()
    assert run.decide(["p1", "p2"], "drop", note="duplicate", reviewer="ana") == 2
    assert run.decide("p2", "relabel", label="0", reviewer="bo") == 1
    assert run.decide("p1", "revert") == 1
    assert run.decide(["p5"], "keep") == 1
    force = run.decisions()
    assert force["row_id"].tolist() == ["p2", "p5"]
    assert force["decision"].tolist() == ["relabel", "keep"]
    assert force.loc[0, "label"] == "0" and force.loc[0, "reviewer"] == "bo"
    assert str(force["decided_at"].dt.tz) == "UTC"
    every = decisions_module.all_decisions(run)
    assert every["decision"].tolist() == ["drop", "drop", "relabel", "revert", "keep"]
    assert every["note"].tolist()[:2] == ["duplicate", "duplicate"]
    assert load_run(run_dir).decisions().equals(force)  # on disk: a restart loses nothing


@pytest.mark.parametrize("rows, decision, label, fragment", [
    (["p1", "nope"], "drop", None, "row_id 'nope' is not a row of run r (row 2 of the batch)"),
    (["p1"], "relabel", "7", "relabel needs one of the run's labels (0, 1), got '7'"),
    (["p1"], "relabel", None, "relabel needs one of the run's labels"),
    (["p1"], "delete", None, "decision 'delete' is not one of keep, drop, relabel, revert"),
    (["p1"], "drop", "1", "a label is given only with relabel"),
])
def test_a_bad_decision_records_nothing(run_dir, rows, decision, label, fragment):
    run = load_run(run_dir)
    with pytest.raises(ValueError, match="nothing was recorded") as caught:
        run.decide(rows, decision, label=label)
    assert fragment in str(caught.value)
    assert not (run_dir / "decisions.parquet").exists()


def test_two_sessions_deciding_at_once_lose_nothing(run_dir):
    script = ("import sys; from aflite_core.runs.folder import load_run\n"
              "run = load_run(sys.argv[1]); first = int(sys.argv[2])\n"
              "for i in range(first, first + 40):\n"
              "    run.decide([f'p{i}'], 'drop', reviewer=sys.argv[2])\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(run_dir), str(start)],
                              cwd=REPO, stderr=subprocess.PIPE, text=True)
             for start in (0, 100)]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    every = decisions_module.all_decisions(load_run(run_dir))
    assert len(every) == 80
    assert sorted(every["row_id"]) == sorted([f"p{i}" for i in range(40)]
                                             + [f"p{i}" for i in range(100, 140)])


def test_a_damaged_or_foreign_decisions_file_is_said_so(run_dir, tmp_path):
    run = load_run(run_dir)
    run.decide(["p1"], "drop")
    good = (run_dir / "decisions.parquet").read_bytes()
    (run_dir / "decisions.parquet").write_bytes(good[: len(good) // 2])
    with pytest.raises(RunError, match="decisions.parquet is damaged"):
        run.decisions()
    [info] = list_runs(run_dir.parent)
    assert info.damaged.startswith("decisions.parquet is unreadable")
    # a decisions file copied from a run of other data
    other = tmp_path / "other.csv"
    pd.DataFrame({"hypothesis": [f"h {i}" for i in range(60)], "label": ["a", "b"] * 30,
                  "pid": [f"p{i}" for i in range(60)]}).to_csv(other, index=False)
    foreign = run_audit(load_dataset(other, id="pid"), FAST, runs_root=tmp_path / "o",
                        name="o")
    load_run(foreign).decide(["p1"], "drop")
    shutil.copy(foreign / "decisions.parquet", run_dir / "decisions.parquet")
    with pytest.raises(RunError, match="belongs to another input"):
        load_run(run_dir).decisions()
    with pytest.raises(RunError, match="belongs to another input"):
        load_run(run_dir).decide(["p2"], "drop")  # nothing is appended to a foreign file


def test_a_run_folder_that_cannot_be_written_records_nothing(run_dir, monkeypatch):
    """As root, CI cannot make a folder read-only: the refusal of the lock file's creation
    is planted where the operating system would give it."""
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(decisions_module.os, "open", refuse)
    with pytest.raises(RunError, match="decisions cannot be recorded: the run folder is not "
                                       "writable"):
        load_run(run_dir).decide(["p1"], "drop")
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        p.name for p in run_dir.iterdir() if p.name != "decisions.parquet")
    assert not (run_dir / "decisions.parquet").exists()


def test_the_spreadsheet_round_trip(run_dir, tmp_path, capsys):
    sheet = tmp_path / "d.csv"
    sheet.write_text("row_id,decision,label,note,reviewer\np1,drop,,spam,\np2,relabel,0,"
                     "wrong,cy\np3,keep,,,\n", encoding="utf-8")
    assert main(["decide", str(run_dir), "--import", str(sheet), "--reviewer", "ana"]) == 0
    out = tmp_path / "out.csv"
    assert main(["decide", str(run_dir), "--export", str(out)]) == 0
    back = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert back[["row_id", "decision", "label", "note", "reviewer"]].values.tolist() == [
        ["p1", "drop", "", "spam", "ana"], ["p2", "relabel", "0", "wrong", "cy"],
        ["p3", "keep", "", "", "ana"]]
    capsys.readouterr()
    bad = tmp_path / "bad.csv"
    bad.write_text("row_id,decision,label\np4,drop,\nzz,drop,\np5,relabel,7\n",
                   encoding="utf-8")
    assert main(["decide", str(run_dir), "--import", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bad.csv: line 3: row_id 'zz' is not a row of run r")
    assert "(2 rows have problems)" in err and "nothing was recorded" in err
    assert len(err.strip().splitlines()) == 1
    assert len(decisions_module.all_decisions(load_run(run_dir))) == 3  # p4 not recorded
    missing = tmp_path / "nocol.csv"
    missing.write_text("id,verdict\np1,drop\n", encoding="utf-8")
    assert main(["decide", str(run_dir), "--import", str(missing)]) == 2
    assert "expected the columns row_id, decision" in capsys.readouterr().err


def test_the_curated_dataset_applies_the_decisions_and_audits_again(run_dir, tmp_path):
    run = load_run(run_dir)
    run.decide(["p1", "p3"], "drop", note="spam")
    run.decide(["p2"], "relabel", label="1", note="wrong")
    removed = [r for r in run.row_ids("removed") if r not in ("p1", "p2", "p3")]
    run.decide([removed[0]], "keep")
    out = tmp_path / "curated.jsonl"
    result = export_curated(run_dir, out)
    assert (result.format, result.dropped, result.relabelled, result.filtered) == \
        ("jsonl", 2, 1, 0)
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    original = [r for r in _records() if r["pid"] not in ("p1", "p3")]
    assert [r["pid"] for r in lines] == [r["pid"] for r in original]  # input order
    assert list(lines[0]) == ["pid", "premise", "hypothesis", "label", "source"]  # nothing added
    by_id = {r["pid"]: r for r in lines}
    assert by_id["p2"]["label"] == 1 and isinstance(by_id["p2"]["label"], int)  # its type
    assert all(by_id[r["pid"]] == r for r in original if r["pid"] != "p2")
    changes = pd.read_csv(result.changes, dtype=str, keep_default_na=False)
    assert changes[["row_id", "pid", "change", "old_label", "new_label", "note"]].values.tolist() \
        == [["p1", "p1", "dropped", "1", "", "spam"], ["p2", "p2", "relabelled", "0", "1", "wrong"],
            ["p3", "p3", "dropped", "1", "", "spam"]]
    # audited again: the rows and labels are the decisions'
    again = load_dataset(out, id="pid")
    assert len(again.frame) == N - 2 and again.frame.loc["p2", "label"] == 1
    # with the filter: AFLite's removals out too, but the row decided keep stays
    filtered = export_curated(run_dir, tmp_path / "filtered.parquet", apply_filter=True)
    kept = pd.read_parquet(tmp_path / "filtered.parquet")
    assert removed[0] in set(kept["pid"]) and not set(removed[1:]) & set(kept["pid"])
    assert filtered.filtered == len(removed) - 1 and len(kept) == filtered.n_rows
    assert kept["label"].dtype.kind == "i"


def test_the_cli_writes_the_curated_dataset_and_refuses_what_does_not_apply(run_dir,
                                                                          tmp_path, capsys):
    load_run(run_dir).decide(["p1"], "drop")
    assert main(["export", str(run_dir), "--what", "curated", "--out",
                 str(tmp_path / "c.csv")]) == 0
    frame = pd.read_csv(tmp_path / "c.csv")
    assert len(frame) == N - 1 and list(frame.columns) == ["pid", "premise", "hypothesis",
                                                           "label", "source"]
    assert "1 dropped" in capsys.readouterr().err
    assert main(["export", str(run_dir), "--what", "all", "--format", "jsonl", "--out",
                 str(tmp_path / "a.jsonl")]) == 2
    assert "only with --what curated" in capsys.readouterr().err
    assert main(["export", str(run_dir), "--what", "curated", "--out",
                 str(run_dir / "inside.csv")]) == 2
    assert "refusing to write inside.csv into the run folder" in capsys.readouterr().err
