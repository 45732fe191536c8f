"""``python -m aflite_core run|export|report`` end to end on real SNLI rows."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from aflite_core.cli import main

REPO_ROOT = Path(__file__).resolve().parents[2]
N_ROWS = 3000


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "aflite_core", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def read_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))


@pytest.fixture(scope="module")
def snli_sample(snli_dir, tmp_path_factory) -> Path:
    rows = read_rows(snli_dir / "snli_train_sample.csv")[: N_ROWS + 1]
    path = tmp_path_factory.mktemp("data") / "snli_train_3k.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    return path


@pytest.fixture(scope="module")
def cli_run(snli_sample, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "snli-audit"
    proc = cli("run", snli_sample, "--out", out, "--partitions", "8", "--n-components", "32",
               "--target-size", "0.6", "--seed", "1", "--measures", "knn")
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_run_writes_the_folder(cli_run, snli_sample):
    out, proc = cli_run
    assert proc.stdout.strip().splitlines()[-1] == str(out)
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temp folder left
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    params = summary["parameters"]
    assert (params["n_partitions"], params["random_state"], params["target_size"]) == (8, 1, 0.6)
    assert params["target_size_rows"] == 1800
    assert summary["input"]["name"] == "snli_train_3k.csv"
    assert summary["input"]["sha256"] == hashlib.sha256(snli_sample.read_bytes()).hexdigest()
    sizes = summary["sizes"]
    assert sizes["input"] == sizes["filtered"] == N_ROWS and sizes["excluded"] == 0
    assert 1800 <= sizes["retained"] < N_ROWS and sizes["removed"] == N_ROWS - sizes["retained"]
    assert set(summary["labels"]["before"]) == {"entailment", "neutral", "contradiction"}
    assert summary["measures"]["knn"]["status"] == "ok"
    for name in ("scores.parquet", "dataset.parquet", "retained.csv", "removed.csv",
                 "knn.parquet", "report.html"):
        assert (out / name).is_file(), name
    scores = pd.read_parquet(out / "scores.parquet")
    assert list(scores.columns[:4]) == ["row_id", "status", "predictability", "removal_round"]
    assert scores["row_id"].tolist() == list(range(N_ROWS))


def test_progress_line_per_round(cli_run):
    out, proc = cli_run
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    rounds = [line for line in proc.stderr.splitlines() if " AFLite round " in line]
    assert len(rounds) == summary["aflite"]["n_rounds"] >= 2
    assert "round 1: " in rounds[0] and "target 1,800" in rounds[0]
    assert "Traceback" not in proc.stderr


def test_retained_and_removed_csvs_hold_every_row_once(cli_run, snli_sample):
    out, _ = cli_run
    original = read_rows(snli_sample)
    retained, removed = read_rows(out / "retained.csv"), read_rows(out / "removed.csv")
    assert retained[0] == removed[0] == ["row_id", *original[0]]
    rows = {int(r[0]): r[1:] for r in retained[1:]}
    rows.update({int(r[0]): r[1:] for r in removed[1:]})
    assert len(rows) == len(retained) + len(removed) - 2 == N_ROWS
    assert [rows[i] for i in range(N_ROWS)] == original[1:]


def test_export_and_report_commands(cli_run, tmp_path, capsys):
    out, _ = cli_run
    csv_out = tmp_path / "removed.csv"
    proc = cli("export", out, "--what", "removed", "--format", "csv", "--out", csv_out,
               "--no-sanitize")
    assert proc.returncode == 0, proc.stderr
    exported = read_rows(csv_out)
    assert exported[0][-3:] == ["status", "predictability", "removal_round"]
    assert {r[-3] for r in exported[1:]} == {"removed"}
    # in-process for the rest (same code path, no interpreter start-up)
    pq_out = tmp_path / "retained.parquet"
    assert main(["export", str(out), "--what", "retained", "--out", str(pq_out)]) == 0
    assert len(pd.read_parquet(pq_out)) + len(exported) - 1 == N_ROWS
    html_out = tmp_path / "report.html"
    capsys.readouterr()
    assert main(["report", str(out), "--out", str(html_out)]) == 0
    text = html_out.read_text(encoding="utf-8")
    assert '<section id="knn">' in text and "plotly" in text.lower()
    progress = capsys.readouterr().err.splitlines()  # a line per section, then where it went
    assert "(1 of " in progress[0] and progress[-2].endswith("done")
    assert progress[-1] == f"wrote {html_out}"


def test_bad_input_exits_cleanly(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("premise,text,gold\na,b,c\n", encoding="utf-8")
    out = tmp_path / "runs" / "r"
    proc = cli("run", bad, "--out", out, "--hypothesis", "text", "--label", "golden")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "golden" in lines[-1] and "gold" in lines[-1]
    assert "Traceback" not in proc.stderr
    assert not out.exists() and not (tmp_path / "runs").exists()


def test_missing_file_exits_cleanly(tmp_path):
    proc = cli("run", tmp_path / "nope.csv", "--out", tmp_path / "r")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: DATA: no such file: {tmp_path}/nope.csv"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tau", "1.5"], "tau: expected a number in [0, 1]"),
        (["--target-size", "5000"], "target_size"),
        (["--measures", "knn,magic"], "unknown measure(s) magic"),
        (["--seed", "abc"], "--seed: expected a whole number, got 'abc'"),
        (["--target-size", "1.5"], "a fraction must be between 0 and 1"),
        (["--representation", "bert"], "expected tfidf-svd, warmup"),
    ],
)
def test_bad_parameters(snli_sample, tmp_path, capsys, extra, message):
    args = ["run", str(snli_sample), "--out", str(tmp_path / "r"), "--n-components", "8",
            "--partitions", "2", "--measures", "none", "--no-report", "-q", *extra]
    try:
        code = main(args)
    except SystemExit as exc:  # argparse rejects malformed values itself
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_out_is_protected(snli_sample, tmp_path, capsys):
    existing = tmp_path / "taken"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    base = ["run", str(snli_sample), "--measures", "none", "-q"]
    assert main([*base, "--out", str(existing)]) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert main([*base, "--out", str(existing), "--overwrite"]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert (existing / "notes.txt").read_text() == "mine"
    assert main([*base, "--out", str(tmp_path / ".hidden")]) == 2
    assert "not a safe run folder name" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_terminated_run_leaves_nothing(snli_sample, tmp_path):
    import signal

    root = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "aflite_core", "run", str(snli_sample), "--out",
         str(root / "r"), "--n-components", "16", "--partitions", "8", "--slice-size", "1",
         "--target-size", "10", "--tau", "0", "--measures", "none"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        for line in proc.stderr:
            if " AFLite round " in line:
                break
        assert [p.name[:5] for p in root.iterdir()] == [".tmp-"]  # mid-run: only a temp folder
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert "terminated" in err and "Traceback" not in err
    assert not root.exists()


def test_dask_scheduler_gives_the_same_scores(snli_sample, tmp_path, cli_run):
    """``--scheduler local:2`` fans rounds out on a local Dask cluster: same scores as local."""
    out = tmp_path / "dask-run"
    code = main(["run", str(snli_sample), "--out", str(out), "--partitions", "8",
                 "--n-components", "32", "--target-size", "0.6", "--seed", "1",
                 "--measures", "knn", "--no-report", "-q", "--scheduler", "local:2"])
    assert code == 0
    local = pd.read_parquet(cli_run[0] / "scores.parquet")
    dask = pd.read_parquet(out / "scores.parquet")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["parameters"]["backend"] == "dask"
    assert (dask["status"] == local["status"]).all()
    pd.testing.assert_series_equal(dask["predictability"], local["predictability"])


def test_a_scheduler_run_reads_its_texts_from_a_file_it_removes(snli_sample, tmp_path,
                                                                 monkeypatch, capsys):
    """With ``--scheduler`` the audit gets the dataset with its texts moved to a hidden folder
    beside the runs (the run's dataset.parquet); the folder goes when the audit ends, also
    when it fails."""
    import aflite_core.pipeline as pipeline

    seen = []

    def failing(dataset, *args, **kwargs):
        mapping = dataset.columns
        seen.append((dataset.texts_file.path, dataset.texts_file.path.is_file(),
                     {mapping.premise, mapping.hypothesis} & set(dataset.frame.columns),
                     dataset.loaded_by))
        raise RuntimeError("the audit failed here")

    monkeypatch.setattr(pipeline, "run_audit", failing)
    code = main(["run", str(snli_sample), "--out", str(tmp_path / "r"), "-q",
                 "--scheduler", "local:2"])
    assert code != 0 and "the audit failed here" in capsys.readouterr().err
    (path, existed, texts_in_memory, loaded_by), = seen
    assert existed and path.parent.parent == tmp_path and path.parent.name.startswith(".tmp-")
    assert texts_in_memory == set() and loaded_by == "streamed"  # one CSV, a piece at a time
    assert not path.parent.exists() and not (tmp_path / "r").exists()

    # a JSON document is parsed whole: the driver held every row's text, and says so
    document = tmp_path / "data.json"
    pd.read_csv(snli_sample).to_json(document, orient="records")
    code = main(["run", str(document), "--out", str(tmp_path / "r"), "--scheduler", "local:2"])
    err = capsys.readouterr().err
    assert code != 0 and seen[-1][3] == "whole"
    assert "data.json was loaded whole" in err and "JSON document is parsed whole" in err


def test_scheduler_address_must_be_valid(snli_sample, tmp_path, capsys):
    code = main(["run", str(snli_sample), "--out", str(tmp_path / "r"), "-q",
                 "--scheduler", "nonsense"])
    assert code == 2
    err = capsys.readouterr().err
    assert "scheduler" in err and "nonsense" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_cli_can_unset_a_guessed_column_and_the_grouping(snli_sample, tmp_path):
    out = tmp_path / "r"
    assert main(["run", str(snli_sample), "--out", str(out), "--partitions", "4",
                 "--n-components", "16", "--measures", "none", "--no-report", "-q",
                 "--premise", "", "--split", ""]) == 0
    columns = json.loads((out / "summary.json").read_text(encoding="utf-8"))["input"]["columns"]
    assert columns["premise"] is None and columns["split"] is None and columns["group"] is None
    out2 = tmp_path / "r2"
    assert main(["run", str(snli_sample), "--out", str(out2), "--partitions", "4",
                 "--n-components", "16", "--measures", "none", "--no-report", "-q",
                 "--group", ""]) == 0
    columns = json.loads((out2 / "summary.json").read_text(encoding="utf-8"))["input"]["columns"]
    assert columns["premise"] == "premise" and columns["group"] is None


def _changed_value(option):
    """A valid value of ``option`` other than its default (as command-line text)."""
    default = option.value_for(10_000)
    if option.kind == "strs":
        return str(option.choices[0]) if option.choices else "a.csv"
    if option.kind == "ints":
        return ",".join(str(v + 1) for v in default)
    if option.choices:
        return str(next(c for c in option.choices if c != default))
    if default is None:  # automatic: a value inside the bounds
        return str(option.minimum + 1 if option.kind == "int"
                   else (option.minimum + option.maximum) / 2)
    if isinstance(default, float):
        lo = option.minimum if option.minimum is not None else default - 1
        hi = option.maximum if option.maximum is not None else default + 1
        return str((default + (hi if hi > default else lo)) / 2)
    value = default + 1 if option.maximum is None or default + 1 <= option.maximum \
        else default - 1
    return str(value)


def test_every_measure_option_is_a_run_flag():
    """Walk the registry: each option is --<measure>-<option>, reaches the audit's
    measure_params, and an out-of-bounds value is refused naming the flag."""
    from aflite_core.cli import build_parser
    from aflite_core.commands.run import audit_config
    from aflite_core.measures import registry

    flags, expected = [], {}
    for measure in registry.measures():
        for option in measure.options:
            if option.name in measure.inputs:  # files: --challenge FILE
                continue
            flag = f"--{measure.name.replace('_', '-')}-{option.name.replace('_', '-')}"
            text = _changed_value(option)
            flags += [flag, text]
            expected[(measure.name, option.name)] = text
    assert "--projection-method" in flags and "--knn-max-queries" in flags
    args = build_parser().parse_args(["run", "data.csv", "--out", "r", *flags])
    config = audit_config(args, 10_000)
    for (measure, option), text in expected.items():
        value = config.measure_params[measure][option]
        shown = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
        assert shown == text, (measure, option)
    # the defaults are the dashboard form's when no flag is given
    plain = audit_config(build_parser().parse_args(["run", "data.csv", "--out", "r"]), 10_000)
    assert plain.measure_params["projection"]["method"] == "umap"


@pytest.mark.parametrize("flag, value, message", [
    ("--knn-max-queries", "5", "argument --knn-max-queries: expected an int in [100, "),
    ("--knn-ks", "1,0", "argument --knn-ks: expected whole numbers in [1, 1,000], got (1, 0)"),
    ("--projection-min-dist", "2", "--projection-min-dist: expected a number in [0, 1]"),
    ("--projection-method", "tsne", "--projection-method: expected one of umap, pca"),
    ("--baselines-n-splits", "two", "--baselines-n-splits: expected a whole number"),
])
def test_bad_measure_options_name_the_flag(flag, value, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "data.csv", "--out", "r", flag, value])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_running_out_of_memory_is_a_message_not_an_unexpected_error(monkeypatch, capsys):
    """MemoryError (and pyarrow's ArrowMemoryError) come from inputs too large for the
    machine, not from a bug: exit 2 and a message that says what to do."""
    import pyarrow as pa

    from aflite_core.commands import run as run_command

    for error in (MemoryError(), pa.ArrowMemoryError("realloc of size 3277848576 failed")):
        def boom(args, error=error):
            raise error
        monkeypatch.setattr(run_command, "run", boom)
        assert main(["run", "data.csv", "--out", "r"]) == 2
        err = capsys.readouterr().err
        assert "out of memory" in err and "unexpected" not in err


def test_an_audit_larger_than_the_memory_it_may_use_is_said_before_it_starts(
        snli_sample, tmp_path, monkeypatch, capsys):
    """A container of 256 MB: the note says what the audit needs and what to do, once, before
    the audit (which still runs: the estimate is of SNLI-like texts); with memory to spare,
    or -q, nothing is said."""
    from aflite_core.commands import run as run_command

    args = ["--measures", "none", "--partitions", "4", "--n-components", "16"]
    monkeypatch.setattr(run_command, "usable_memory", lambda: 256 << 20)
    assert main(["run", str(snli_sample), "--out", str(tmp_path / "small"), *args]) == 0
    err = capsys.readouterr().err
    assert err.count("note: a local audit of 3,000 rows peaks at about 0.5 GB") == 1, err
    assert "more than the 0.2 GB this process may use" in err
    assert err.index("note: a local audit") < err.index("AFLite round 1")
    assert main(["run", str(snli_sample), "--out", str(tmp_path / "quiet"), *args, "-q"]) == 0
    assert "note: a local audit" not in capsys.readouterr().err
    monkeypatch.setattr(run_command, "usable_memory", lambda: 16 << 30)
    assert main(["run", str(snli_sample), "--out", str(tmp_path / "large"), *args]) == 0
    assert "note: a local audit" not in capsys.readouterr().err


@pytest.mark.parametrize("other_thread", [False, True])
def test_the_command_runs_exit_handlers_and_keeps_its_exit_code(tmp_path, other_thread):
    """The command leaves without the interpreter's teardown, but only after the exit
    handlers ran and the streams were flushed; with another thread still running, it exits
    normally so that the thread finishes."""
    code = "\n".join([
        "import atexit, sys, threading, time",
        "atexit.register(lambda: print('handler ran'))",
        "if sys.argv[3] == '1':",
        "    threading.Thread(target=lambda: (time.sleep(0.5), print('thread done'))).start()",
        "sys.argv = ['aflite_core', 'run', sys.argv[1], '--out', sys.argv[2]]",
        "from aflite_core.cli import console",
        "print('x' * 100_000)",  # more than a pipe's buffer: flushed before the exit
        "console()",
    ])
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "missing.csv"),
                           str(tmp_path / "out"), "1" if other_thread else "0"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no such file" in proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "x" * 100_000 and "handler ran" in lines
    assert ("thread done" in lines) is other_thread
    assert not (tmp_path / "out").exists()


def test_the_held_out_scoring_after_the_last_round_has_its_own_line(capsys):
    """At 5M rows scoring the dev and test rows after AFLite's last round takes minutes: a
    line says so instead of the last round's line standing for it."""
    from aflite_core.commands.run import _Printer

    printer = _Printer(quiet=False)
    printer({"stage": "aflite", "round": 3, "fraction": 0.3, "message": "AFLite round 3: x"})
    printer({"stage": "aflite", "fraction": 0.31, "message": "AFLite done"})
    printer({"stage": "aflite", "fraction": 0.32, "message": "scoring 2,000 held-out rows",
             "heldout": True})
    printer({"stage": "cues", "fraction": 0.4, "message": "cue statistics"})
    assert capsys.readouterr().err.splitlines() == [
        "[ 30%] AFLite round 3: x", "[ 32%] aflite: scoring 2,000 held-out rows",
        "[ 40%] cues: cue statistics"]
