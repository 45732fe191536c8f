"""Multiple choice from every door: per-choice (long) files such as ARCT's, detected or named
with ``question=`` / ``--question``, and wide files from the CLI with ``--choices`` and
``--answer``; per-question AFLite keeps or removes a question whole in both layouts."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aflite_core.cli import main
from aflite_core.filter._policy import question_ids
from aflite_core.io._per_choice import REASON_NOT_ONE_CORRECT
from aflite_core.io.datasets import ColumnError, load_dataset
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.runs.folder import load_run

ARCT = Path(__file__).resolve().parents[1] / "data" / "arct" / "arct_dev.csv"
FAST = {"representation_params": {"n_components": 16}, "n_partitions": 8, "tau": 0.6,
        "target_size": 0.6, "measures": (), "report": False}


def _write(path: Path, rows: list[list]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return path


def _split_questions(run_path: Path, question_column: str) -> int:
    """Questions whose rows did not all get the same status."""
    run = load_run(run_path)
    frame = run.frame
    scores = run.scores.set_index("row_id").loc[frame.index]
    statuses = pd.DataFrame({"q": frame[question_column].astype(str).to_numpy(),
                             "status": scores["status"].to_numpy()})
    return int((statuses.groupby("q")["status"].nunique() > 1).sum())


def test_arcts_published_per_choice_file_is_detected_as_multiple_choice():
    dataset = load_dataset(ARCT)
    assert dataset.report.n_questions == 316
    assert any("per-choice multiple-choice layout (detected)" in n for n in dataset.report.notes)
    ids = question_ids(dataset)
    assert ids is not None and len(np.unique(ids)) == 316
    # the file's own columns are kept as they were
    original = pd.read_csv(ARCT, dtype=str, keep_default_na=False)
    for column in original.columns:
        assert dataset.frame[column].astype(str).tolist() == original[column].tolist()
    assert set(dataset.labels()) == {"right", "wrong"}


def test_per_question_aflite_keeps_or_removes_a_question_whole_in_the_long_layout(tmp_path):
    dataset = load_dataset(ARCT)
    path = run_audit(dataset, AuditConfig(**FAST), runs_root=tmp_path, name="arct")
    run = load_run(path)
    assert run.sizes["removed"] > 0
    assert _split_questions(path, "id") == 0


def test_rows_one_by_one_when_asked_and_then_questions_do_split(tmp_path):
    """question='' turns detection off: the rows are instances again, as before."""
    dataset = load_dataset(ARCT, question="")
    assert dataset.report.n_questions is None and question_ids(dataset) is None
    path = run_audit(dataset, AuditConfig(**FAST), runs_root=tmp_path, name="rows")
    assert _split_questions(path, "id") > 0  # the control: row instances split questions


@pytest.mark.parametrize(("right", "wrong"), [("1", "0"), ("True", "False"), ("yes", "no"),
                                              ("Correct", "INCORRECT")])
def test_a_named_question_column_with_any_correct_vocabulary(tmp_path, right, wrong):
    rows = [["qid", "context", "ending", "is_gold"]]
    for q in range(40):
        for j in range(3):
            rows.append([f"q{q}", f"context {q}", f"ending {j} of {q}",
                         right if j == q % 3 else wrong])
    dataset = load_dataset(_write(tmp_path / "long.csv", rows), question="qid",
                           premise="context", hypothesis="ending", label="is_gold")
    assert dataset.report.n_questions == 40
    assert any("from question='qid'" in n for n in dataset.report.notes)


def test_a_question_without_exactly_one_correct_choice_is_excluded_with_its_reason(tmp_path):
    rows = [["question_id", "text", "label"]]
    for q in range(30):
        for j in range(2):
            rows.append([q, f"choice {j} of {q}", "correct" if j == 0 else "incorrect"])
    rows += [[99, "a", "correct"], [99, "b", "correct"]]  # two correct choices
    dataset = load_dataset(_write(tmp_path / "bad.csv", rows), question="question_id",
                           hypothesis="text", label="label")
    assert dataset.report.n_questions == 30
    assert dataset.report.excluded.get(REASON_NOT_ONE_CORRECT) == 2
    assert any("1 question" in w and "exactly one correct" in w
               for w in dataset.report.warnings)


def test_a_question_column_that_groups_nothing_is_refused_clearly(tmp_path):
    rows = [["uid", "text", "label"]] + [[i, f"t{i}", "1" if i % 2 else "0"]
                                         for i in range(20)]
    with pytest.raises(ColumnError, match="every row has its own value"):
        load_dataset(_write(tmp_path / "x.csv", rows), question="uid", hypothesis="text")


def test_detection_leaves_ordinary_data_alone(tmp_path):
    """NLI labels are not correct/incorrect, and a binary task whose id is unique per row is
    not multiple choice."""
    nli = [["id", "premise", "hypothesis", "label"]] + [
        [i // 3, f"p{i // 3}", f"h{i}", ("entailment", "neutral", "contradiction")[i % 3]]
        for i in range(60)]
    assert load_dataset(_write(tmp_path / "nli.csv", nli)).report.n_questions is None
    binary = [["id", "text", "label"]] + [[i, f"t{i}", i % 2] for i in range(60)]
    assert load_dataset(_write(tmp_path / "bin.csv", binary)).report.n_questions is None


def _wide(tmp_path: Path) -> Path:
    rows = [["qid", "stem", "A", "B", "C", "answer"]]
    for q in range(60):
        options = [f"option {k} of {q}" for k in range(3)]
        answer = q % 3
        options[answer] = f"the cat option {q}" if q % 2 else f"a true answer {q}"
        rows.append([f"q{q}", f"question {q}", *options, "ABC"[answer]])
    return _write(tmp_path / "wide.csv", rows)


@pytest.mark.parametrize("layout", ["wide", "long"])
def test_multiple_choice_from_the_cli_keeps_or_removes_questions_whole(tmp_path, layout):
    if layout == "wide":
        data = _wide(tmp_path)
        flags = ["--choices", "A,B,C", "--answer", "answer", "--id", "qid", "--premise", "stem"]
        question_column = "question_id"
    else:
        data = ARCT
        flags = ["--question", "id"]
        question_column = "id"
    out = tmp_path / f"mc-{layout}"
    code = main(["run", str(data), "--out", str(out), *flags, "--target-size", "0.6",
                 "--partitions", "8", "--tau", "0.6", "--n-components", "16",
                 "--measures", "none", "--no-report", "-q"])
    assert code == 0
    run = load_run(out)
    assert run.parameters["instance"] == "auto"
    assert run.summary["sizes"]["removed"] > 0
    assert _split_questions(out, question_column) == 0


def test_cli_question_for_data_that_is_not_multiple_choice_says_how(tmp_path, capsys):
    data = _write(tmp_path / "nli.csv", [["premise", "hypothesis", "label"]] + [
        [f"p{i}", f"h{i}", ("entailment", "neutral")[i % 2]] for i in range(40)])
    code = main(["run", str(data), "--out", str(tmp_path / "r"), "--instance", "question",
                 "--measures", "none", "--no-report", "-q"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--choices" in err and "--question" in err
