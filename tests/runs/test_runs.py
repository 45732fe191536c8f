"""Run folders: atomic writing, names that stay inside the root, loading, listing, comparing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aflite_core.report.compare import compare_runs
from aflite_core.runs import folder as runs
from aflite_core.runs._writer import RunWriter, write_run
from aflite_core.runs.folder import (
    FORMAT_VERSION,
    RunError,
    default_run_name,
    list_runs,
    load_run,
    resolve_run_path,
    sanitize_run_name,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def small_frame(n: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "premise": [f"premise {i}, with \"quotes\"" for i in range(n)],
            "hypothesis": [f"hypothesis {i}\nsecond line" for i in range(n)],
            "label": rng.choice(["entailment", "neutral", "contradiction"], size=n),
        },
        index=pd.Index(np.arange(n, dtype=np.int64), name="row_id"),
    )


def fake_scores(frame: pd.DataFrame, status, predictability=None, rounds=None) -> pd.DataFrame:
    status = np.asarray(status, dtype=object)
    n = len(frame)
    pred = np.where(np.isin(status, ["retained", "removed"]), np.linspace(0, 1, n), np.nan)
    if predictability is not None:
        pred = np.asarray(predictability, dtype=float)
    rr = np.where(status == "removed", 0, -1) if rounds is None else np.asarray(rounds)
    return pd.DataFrame(
        {
            "row_id": frame.index.to_numpy(),
            "status": status,
            "predictability": pred,
            "removal_round": rr.astype(np.int64),
            "label": frame["label"].astype(str).to_numpy(),
        }
    )


STATUS_12 = ["retained", "removed", "retained", "warmup", "removed", "retained",
             "unfiltered", "excluded", "removed", "retained", "retained", "removed"]


def make_run(root, name="run", *, frame=None, status=STATUS_12, summary=None, **kwargs):
    frame = small_frame(len(status)) if frame is None else frame
    scores = fake_scores(frame, status, kwargs.pop("predictability", None))
    base = {"input": {"name": "toy.csv", "sha256": "0" * 64, "n_rows": len(frame),
                      "columns": {"premise": "premise", "hypothesis": "hypothesis",
                                  "label": "label"}}}
    base.update(summary or {})
    return write_run(root, name, frame=frame, scores=scores, summary=base, **kwargs)


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("good-name_1.2", "good-name_1.2"),
        ("../evil", "evil"),
        ("a/b\\c", "a_b_c"),
        (".hidden", "hidden"),
        ("x/../../y", "x_._._y"),
        ("données été", "données_été"),
        ("-rf", "rf"),
        ("name..", "name"),
    ],
)
def test_sanitize_run_name(raw, expected):
    assert sanitize_run_name(raw) == expected


@pytest.mark.parametrize("raw", ["", "..", "/", "../", "....//", " "])
def test_sanitize_refuses_names_with_nothing_usable(raw):
    with pytest.raises(ValueError, match="no usable characters"):
        sanitize_run_name(raw)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_any_name_stays_inside_the_root(tmp_path_factory, name):
    root = tmp_path_factory.getbasetemp() / "names-root"
    try:
        path = resolve_run_path(root, name)
    except ValueError:
        return
    assert path.parent == root.resolve()
    assert not path.name.startswith(".")
    assert ".." not in path.name and "/" not in path.name and "\\" not in path.name


def test_run_name_cannot_escape_through_a_symlink(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="outside the runs root"):
        resolve_run_path(root, "link")


def test_default_run_name_has_data_params_and_time():
    import datetime as dt

    when = dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc)
    name = default_run_name(
        "../data/snli_dev.csv.gz",
        {"representation": "tfidf_svd", "strategy": "greedy_slicing", "n_partitions": 16,
         "target_size": 0.5, "random_state": 3},
        created=when,
    )
    assert name == "snli_dev-tfidf_svd-greedy_slicing-m16-target0.5-seed3-20250304T050607Z"
    assert sanitize_run_name(name) == name


# ----------------------------------------------------------------------------- writing


def test_run_is_invisible_until_complete(tmp_path):
    root = tmp_path / "runs"
    with RunWriter(root, "r1") as writer:
        writer.write_json("summary.json", {"format_version": 1})
        assert writer.tmp.parent == root.resolve() and writer.tmp.name.startswith(".tmp-r1-")
        assert not (root / "r1").exists()
        assert list_runs(root) == []
    assert [r.name for r in list_runs(root)] == ["r1"]
    assert [p.name for p in root.iterdir()] == ["r1"]


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_failure_or_interrupt_leaves_nothing(tmp_path, error):
    root = tmp_path / "runs"
    with pytest.raises(type(error)), RunWriter(root, "r1") as writer:
        writer.write_json("summary.json", {"format_version": 1})
        raise error
    assert not root.exists()  # the writer created the root, and removes it again when empty


def test_commit_requires_a_summary(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    (root / "other-run").mkdir()
    with pytest.raises(RuntimeError, match="summary.json was not written"), RunWriter(root, "r"):
        pass
    assert [p.name for p in root.iterdir()] == ["other-run"]  # an existing root is kept


def test_killed_writer_leaves_only_an_ignored_dot_folder(tmp_path):
    root = tmp_path / "runs"
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from aflite_core.runs._writer import RunWriter
        w = RunWriter({str(root)!r}, "victim").__enter__()
        w.write_text("scores.parquet", "half written")
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    leftovers = list(root.iterdir())
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".tmp-victim-")
    assert list_runs(root) == []
    # a fresh temp folder is kept (it may be a run in progress) ...
    assert runs.cleanup_stale(root) == []
    # ... an old one is removed, and re-running under the same name works
    assert runs.cleanup_stale(root, max_age=0) == leftovers
    make_run(root, "victim")
    assert [r.name for r in list_runs(root)] == ["victim"]


def test_existing_run_is_never_modified_without_overwrite(tmp_path):
    root = tmp_path / "runs"
    first = make_run(root, "same")
    before = {p.name: p.read_bytes() for p in first.iterdir()}
    with pytest.raises(FileExistsError, match="already exists"):
        make_run(root, "same", status=["retained"] * 6 + ["removed"] * 6)
    assert {p.name: p.read_bytes() for p in first.iterdir()} == before
    assert [p.name for p in root.iterdir()] == ["same"]


def test_overwrite_replaces_a_run_but_not_other_folders(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "same")
    make_run(root, "same", status=["retained"] * 6 + ["removed"] * 6, overwrite=True)
    assert (load_run(root / "same").scores["status"] == "removed").sum() == 6
    assert [p.name for p in root.iterdir()] == ["same"]
    precious = root / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    with pytest.raises(FileExistsError, match="not a run folder"):
        make_run(root, "precious", overwrite=True)
    assert (precious / "thesis.tex").read_text() == "do not delete"


def test_written_run_round_trips(tmp_path):
    frame = small_frame()
    path = make_run(tmp_path, "r", frame=frame, summary={"sizes": {"input": 12}})
    run = load_run(path)
    assert run.format_version == FORMAT_VERSION and run.name == "r"
    assert run.summary["artifacts"] == sorted(p.name for p in path.iterdir())
    assert set(run.artifacts) >= {"summary.json", "scores.parquet", "dataset.parquet",
                                  "retained.csv", "removed.csv", "unfiltered.csv", "warmup.csv",
                                  "excluded.csv"}
    pd.testing.assert_frame_equal(run.frame, frame, check_dtype=False)
    assert run.frame.index.name == "row_id"
    assert run.scores["status"].tolist() == STATUS_12
    assert run.cues is None and run.knn is None and run.baselines is None
    assert sorted(run.row_ids("removed").tolist()) == [1, 4, 8, 11]


def test_row_csvs_hold_each_row_exactly_once(tmp_path):
    frame = small_frame()
    path = make_run(tmp_path, "r", frame=frame)
    parts = {s: pd.read_csv(path / f"{s}.csv", dtype=str, keep_default_na=False)
             for s in runs.STATUSES}
    for status, part in parts.items():
        assert list(part.columns) == ["row_id", "premise", "hypothesis", "label"]
        expected = [i for i, s in enumerate(STATUS_12) if s == status]
        assert part["row_id"].astype(int).tolist() == expected
    both = pd.concat(parts.values()).assign(row_id=lambda d: d.row_id.astype(int))
    both = both.sort_values("row_id").set_index("row_id")
    assert both.to_numpy().tolist() == frame.to_numpy().tolist()


def test_empty_status_gets_no_csv(tmp_path):
    path = make_run(tmp_path, "r", status=["retained"] * 6 + ["removed"] * 6)
    assert not (path / "warmup.csv").exists() and not (path / "excluded.csv").exists()


def test_dataset_with_own_row_id_column_and_mixed_types(tmp_path):
    frame = pd.DataFrame(
        {"row_id": ["x", "y", "z"], "label": ["a", "b", "a"], "mixed": [1, "two", None]},
        index=pd.Index(["q1", "q2", "q3"], name="row_id"),
    )
    scores = fake_scores(frame, ["retained", "removed", "retained"])
    path = write_run(tmp_path, "r", frame=frame, scores=scores)
    run = load_run(path)
    assert run.summary["dataset"]["row_id_column"] == "aflite_row_id"
    assert "mixed" in run.summary["dataset"]["converted_columns"]
    assert run.frame.index.tolist() == ["q1", "q2", "q3"]
    assert run.frame["row_id"].tolist() == ["x", "y", "z"]
    assert run.frame["mixed"].tolist()[:2] == ["1", "two"]
    assert pd.isna(run.frame["mixed"].iloc[2])


def test_scores_are_validated(tmp_path):
    frame = small_frame(3)
    bad_status = fake_scores(frame, ["retained", "kept", "removed"])
    with pytest.raises(ValueError, match="status must be one of"):
        write_run(tmp_path, "r", frame=frame, scores=bad_status)
    reordered = fake_scores(frame, ["retained"] * 3).iloc[::-1]
    with pytest.raises(ValueError, match="dataset's order"):
        write_run(tmp_path, "r", frame=frame, scores=reordered)
    assert list(tmp_path.iterdir()) == []


def test_scores_written_a_row_group_at_a_time_are_the_whole_tables_file(tmp_path,
                                                                          monkeypatch):
    """Above a row group of rows the scores are written a row group at a time: the same
    bytes as the whole table written with that row-group size (the default of pyarrow's
    write_table, which wrote them whole before), read back as the table."""
    import filecmp

    import pyarrow.parquet as pq

    from aflite_core.io._tables import parquet_safe_table
    from aflite_core.runs import _writer as writer_module

    monkeypatch.setattr(writer_module, "ROW_GROUP_ROWS", 16)
    rng = np.random.default_rng(3)
    n = 100
    scores = pd.DataFrame({
        "row_id": np.arange(n),
        "status": pd.Categorical.from_codes(rng.integers(0, 3, n).astype(np.int8),
                                            ["removed", "retained", "warmup"]),
        "predictability": np.where(rng.random(n) < 0.2, np.nan, rng.random(n)),
        "removal_round": rng.integers(-1, 9, n).astype(np.int32),  # as build_scores holds
        "label": pd.Categorical.from_codes(rng.integers(0, 2, n).astype(np.int8), ["a", "b"]),
    })
    with RunWriter(tmp_path, "r") as writer:
        writer.write_dataset(small_frame(n))
        path = writer.write_scores(scores)
        # the file's types: strings and int64 rounds
        whole = scores.astype({"status": "string", "label": "string", "removal_round": "int64"})
        pq.write_table(parquet_safe_table(whole)[0], tmp_path / "whole.parquet",
                       row_group_size=16)
        assert pq.ParquetFile(path).metadata.num_row_groups == 7
        assert filecmp.cmp(path, tmp_path / "whole.parquet", shallow=False)
        pd.testing.assert_frame_equal(pd.read_parquet(path), pd.read_parquet(
            tmp_path / "whole.parquet"))
        # a row group typed otherwise (a text column all missing in it): the whole table
        mixed = pd.DataFrame({"row_id": np.arange(40),
                              "note": pd.Series([f"n{i}" for i in range(16)] + [None] * 24,
                                                dtype=object),
                              "value": rng.random(40)})
        table_path = writer.write_parquet("mixed.parquet", mixed)
        pq.write_table(parquet_safe_table(mixed)[0], tmp_path / "mixed.parquet")
        assert filecmp.cmp(table_path, tmp_path / "mixed.parquet", shallow=False)
        writer.write_summary({})


# ----------------------------------------------------------------------------- loading


def test_load_run_says_what_is_missing(tmp_path):
    with pytest.raises(RunError, match="does not exist"):
        load_run(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RunError, match="summary.json is missing"):
        load_run(empty)
    path = make_run(tmp_path, "r")
    summary = json.loads((path / "summary.json").read_text())

    (path / "summary.json").write_text(json.dumps({**summary, "format_version": 99}))
    with pytest.raises(RunError, match="format 99 by a newer aflite_core"):
        load_run(path)
    (path / "summary.json").write_text(json.dumps({k: v for k, v in summary.items()
                                                   if k != "format_version"}))
    with pytest.raises(RunError, match="no 'format_version'"):
        load_run(path)
    (path / "summary.json").write_text("{not json")
    with pytest.raises(RunError, match="not valid JSON"):
        load_run(path)
    (path / "summary.json").write_text(json.dumps(summary))
    pd.read_parquet(path / "scores.parquet").drop(columns="removal_round").to_parquet(
        path / "scores.parquet")
    with pytest.raises(RunError, match=r"lacks column\(s\) \['removal_round'\]"):
        load_run(path)
    (path / "scores.parquet").unlink()
    with pytest.raises(RunError, match="scores.parquet is missing"):
        load_run(path)


def test_older_folder_without_dataset_parquet_is_rebuilt_from_csvs(tmp_path):
    frame = small_frame()
    path = make_run(tmp_path, "old", frame=frame)
    (path / "dataset.parquet").unlink()
    run = load_run(path)
    assert run.frame.index.tolist() == frame.index.tolist()
    assert run.frame.to_numpy().tolist() == frame.to_numpy().tolist()
    (path / "warmup.csv").unlink()
    with pytest.raises(RunError, match="neither dataset.parquet nor warmup.csv"):
        _ = load_run(path).frame


def test_list_runs_newest_first_and_ignores_incomplete(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "older", summary={"created": "2024-01-01T00:00:00Z", "sizes": {"input": 12}})
    make_run(root, "newer", summary={"created": "2025-01-01T00:00:00Z"})
    (root / ".tmp-half-abcd").mkdir()
    (root / "no-summary").mkdir()
    (root / "junk").mkdir()
    (root / "junk" / "summary.json").write_text("[]")
    (root / "file.txt").write_text("x")
    infos = list_runs(root)
    # a folder with a damaged summary is listed as damaged (to be seen and removed)
    assert [i.name for i in infos] == ["newer", "older", "junk"]
    assert infos[2].damaged == "summary.json: expected a JSON object, found list"
    infos = infos[:2]
    assert infos[1].sizes == {"input": 12} and infos[1].input_name == "toy.csv"
    assert infos[0].disk_bytes == sum(p.stat().st_size for p in (root / "newer").iterdir())
    assert list_runs(tmp_path / "missing") == []


# ----------------------------------------------------------------------------- compare


def test_compare_runs_counts_overlap_and_correlation(tmp_path):
    frame = small_frame(10)
    a_status = ["removed"] * 4 + ["retained"] * 6
    b_status = ["removed"] * 2 + ["retained"] * 2 + ["removed"] * 2 + ["retained"] * 4
    pred_a = np.linspace(0.1, 1.0, 10)
    pred_b = pred_a[::-1].copy()
    a = make_run(tmp_path, "a", frame=frame, status=a_status, predictability=pred_a,
                 summary={"parameters": {"random_state": 0, "tau": 0.75}},
                 tables={"cues.parquet": pd.DataFrame(
                     {"feature": ["not", "cat", "not", "cat"], "label": ["c", "c", "c", "c"],
                      "scope": ["full", "full", "retained", "retained"],
                      "lmi": [5.0, 1.0, 4.0, 1.0]})})
    b = make_run(tmp_path, "b", frame=frame, status=b_status, predictability=pred_b,
                 summary={"parameters": {"random_state": 1, "tau": 0.75}},
                 tables={"cues.parquet": pd.DataFrame(
                     {"feature": ["not", "cat", "not", "cat"], "label": ["c", "c", "c", "c"],
                      "scope": ["full", "full", "retained", "retained"],
                      "lmi": [5.0, 1.0, 1.0, 1.5]})})
    cmp = compare_runs(a, b)
    assert (cmp.n_removed_a, cmp.n_removed_b, cmp.n_removed_both) == (4, 4, 2)
    assert cmp.removed_jaccard == pytest.approx(2 / 6)
    assert cmp.expected_jaccard_random == pytest.approx(1.6 / 6.4)
    assert sorted(cmp.changed["row_id"].tolist()) == [2, 3, 4, 5]
    assert cmp.status_table.loc["removed", "retained"] == 2
    assert cmp.spearman == pytest.approx(-1.0) and cmp.pearson == pytest.approx(-1.0)
    assert cmp.parameter_changes == {"random_state": (0, 1)}
    top = cmp.cue_changes.iloc[0]
    assert top["feature"] == "not" and top["lmi_delta"] == pytest.approx(-3.0)
    json.dumps(cmp.to_dict())  # JSON-able


def test_compare_refuses_different_inputs(tmp_path):
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", summary={"input": {"sha256": "1" * 64}})
    with pytest.raises(ValueError, match="different inputs"):
        compare_runs(a, b)


def test_list_runs_reads_only_summaries(tmp_path):
    root = tmp_path / "runs"
    for i in range(3):
        make_run(root, f"r{i}", summary={"created": f"2025-01-0{i + 1}T00:00:00Z"})
    (root / "r1" / "scores.parquet").write_bytes(b"corrupt")
    assert [r.name for r in list_runs(root)] == ["r2", "r1", "r0"]
    with pytest.raises(Exception, match="(?i)parquet"):
        load_run(root / "r1")


def test_concurrent_runs_with_generated_names_never_collide(tmp_path):
    """Three audits started in the same second all land, under name, name-2, name-3, and
    each summary names its own folder."""
    from concurrent.futures import ThreadPoolExecutor

    from aflite_core.runs._writer import RunWriter
    from aflite_core.runs.folder import AuditRun

    def write(i: int):
        writer = RunWriter(tmp_path, "snli-m32-20261123T090000Z", unique=True)
        with writer:
            writer.write_json("extra.json", {"i": i})
            writer.write_summary({"i": i})
        return writer.path

    with ThreadPoolExecutor(3) as pool:
        paths = list(pool.map(write, range(3)))
    assert sorted(p.name for p in paths) == ["snli-m32-20261123T090000Z",
                                             "snli-m32-20261123T090000Z-2",
                                             "snli-m32-20261123T090000Z-3"]
    for path in paths:
        run = AuditRun(path)
        assert run.name == path.name
        assert run.read_json("extra.json")["i"] == run.summary["i"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_generated_name_taken_during_the_run_gets_a_suffix(tmp_path):
    from aflite_core.runs._writer import RunWriter
    from aflite_core.runs.folder import AuditRun

    writer = RunWriter(tmp_path, "run", unique=True)
    with writer:
        writer.write_summary({})
        (tmp_path / "run").mkdir()  # another audit committed "run" meanwhile
        (tmp_path / "run" / "summary.json").write_text("{}")
    assert writer.path.name == "run-2" and AuditRun(writer.path).name == "run-2"
    other = RunWriter(tmp_path, "run")  # a chosen name still refuses to collide
    with pytest.raises(FileExistsError), other:
        other.write_summary({})


def test_frame_rows_reads_some_rows_of_the_frame_alone(tmp_path):
    """The rows of some positions, some columns, from dataset.parquet without the whole
    frame; the same rows as the frame's."""
    from aflite_core.runs._writer import RunWriter

    frame = pd.DataFrame({"premise": [f"p{i}" for i in range(50)],
                          "hypothesis": [f"h{i}" for i in range(50)], "n": range(50)},
                         index=pd.Index([f"id{i}" for i in range(50)], name="row_id"))
    with RunWriter(tmp_path, "rows") as writer:
        writer.write_dataset(frame)
        writer.write_scores(pd.DataFrame({"row_id": frame.index, "status": "retained",
                                          "predictability": np.nan, "removal_round": -1}))
        writer.write_summary({})
    run = load_run(writer.path)
    picked = np.array([7, 3, 49, 0])
    got = run.frame_rows(picked, ["hypothesis", "n"])
    assert "frame" not in run.__dict__  # the whole frame was not read
    pd.testing.assert_frame_equal(got, frame.iloc[picked][["hypothesis", "n"]],
                                  check_dtype=False)
    pd.testing.assert_frame_equal(run.frame_rows(picked), run.frame.iloc[picked])
    with pytest.raises(KeyError, match="nope"):
        run.frame_rows(picked, ["nope"])


def test_frame_rows_across_row_groups(tmp_path, monkeypatch):
    """Rows spread over several of dataset.parquet's row groups, out of order and repeated:
    read a group at a time, given back in the order asked; a position past the end is
    refused."""
    import pyarrow.parquet as pq

    from aflite_core.runs import _writer as writer_module
    from aflite_core.runs._writer import RunWriter

    monkeypatch.setattr(writer_module, "DATASET_ROW_GROUP", 7)
    frame = pd.DataFrame({"hypothesis": [f"h{i}" for i in range(50)], "n": range(50)},
                         index=pd.Index(range(50), name="row_id"))
    with RunWriter(tmp_path, "groups") as writer:
        writer.write_dataset(frame)
        writer.write_scores(pd.DataFrame({"row_id": frame.index, "status": "retained",
                                          "predictability": np.nan, "removal_round": -1}))
        writer.write_summary({})
    assert pq.ParquetFile(writer.path / "dataset.parquet").num_row_groups == 8
    run = load_run(writer.path)
    for picked in ([49, 0, 13, 13, 6, 7, 42], [], [20]):
        picked = np.array(picked, dtype=np.int64)
        got = run.frame_rows(picked, ["hypothesis", "n"])
        assert got.index.tolist() == picked.tolist()
        assert got["hypothesis"].tolist() == [f"h{i}" for i in picked]
    assert "frame" not in run.__dict__
    with pytest.raises(IndexError, match="position < 50"):
        run.frame_rows(np.array([3, 50]))


def test_columns_read_alone_with_strings_as_sorted_codes(tmp_path):
    """score_columns / table_columns read only the columns asked (status and label as
    categoricals whose categories sort as the strings do), or take them from a table read
    already; a column the file lacks is refused (optional ones skipped)."""
    status = ["retained", "removed", "warmup", "removed", "excluded", "unfiltered"] * 2
    run = load_run(make_run(tmp_path, status=status))
    got = run.score_columns(["row_id", "status"], optional=("label", "nope"))
    assert "scores" not in run.__dict__  # the whole table was not read
    assert list(got.columns) == ["row_id", "status", "label"]
    for column in ("status", "label"):
        assert list(got[column].cat.categories) == sorted(set(got[column].astype(str)))
        assert got[column].astype(str).tolist() == run.scores[column].astype(str).tolist()
    # sorted codes group and order as the strings do
    by_code = got.groupby("status", observed=True, sort=True).size()
    by_text = run.scores.groupby("status", sort=True).size()
    assert by_code.index.astype(str).tolist() == by_text.index.tolist()
    assert by_code.tolist() == by_text.tolist()
    # once the whole table is read, its columns are taken from it
    assert run.score_columns(["status"])["status"].dtype == run.scores["status"].dtype
    with pytest.raises(RunError, match=r"lacks column\(s\) \['nope'\]"):
        run.score_columns(["row_id", "nope"])
    assert run.table_columns("projection.parquet", ["row_id"]) is None  # no map in this run


def test_forget_row_tables_drops_what_was_read_but_what_is_kept(tmp_path):
    run = load_run(make_run(tmp_path))
    run.scores, run.frame  # noqa: B018 - read and kept
    run.forget_row_tables(keep={"frame"})
    assert "scores" not in run.__dict__ and "frame" in run.__dict__
    assert len(run.scores) == 12  # read again on use


def test_row_chunks_read_the_scores_columns_alone(tmp_path):
    """The rows of some statuses (the write stage's CSVs, the exports) from the scores' four
    columns, statuses as codes: the run keeps no whole scores table, and the rows are those
    of the whole table."""
    from aflite_core.runs._rows import iter_row_chunks

    run = load_run(make_run(tmp_path))
    chunks = list(iter_row_chunks(run, ("removed", "warmup"), chunk_rows=5))
    assert "scores" not in run.__dict__
    got = pd.concat([c.to_pandas() for c in chunks], ignore_index=True)
    expected = run.scores[run.scores["status"].isin(["removed", "warmup"])]
    assert got["row_id"].tolist() == expected["row_id"].tolist()
    assert got["status"].tolist() == expected["status"].astype(str).tolist()
    assert got["predictability"].tolist() == pytest.approx(expected["predictability"].tolist(),
                                                           nan_ok=True)


@pytest.mark.parametrize("target", ["string", "str"])
def test_categorical_columns_cast_through_their_categories_are_astypes(tmp_path, target):
    """``cast_columns`` (what the writer casts a table's columns with) gives what
    ``DataFrame.astype`` gives: categorical columns (categories of Python strs and of Arrow
    strings, missing codes, a slice of the rows) cast through their categories, the other
    columns as astype casts them; the same dtypes, values and Parquet bytes."""
    import pyarrow.parquet as pq

    from aflite_core.io._tables import parquet_safe_table
    from aflite_core.runs._writer import cast_columns

    rng = np.random.default_rng(5)
    n = 3_000
    values = np.array(["retained", "removed", "ambiguous"], dtype=object)[rng.integers(0, 3, n)]
    values[::7] = None
    frame = pd.DataFrame({
        "row_id": np.arange(n),
        "status": pd.Categorical(values),
        "region": pd.Categorical(pd.array(values, dtype="str")),
        "fold": rng.integers(0, 5, n).astype(np.int8),
        "label": pd.Categorical.from_codes(rng.integers(0, 2, n).astype(np.int8), ["a", "b"]),
        "score": rng.random(n)})
    astype = {"status": target, "region": target, "label": "str", "fold": np.int64}
    for part in (frame, frame.iloc[100:2_000]):
        expected, got = part.astype(astype), cast_columns(part, astype)
        pd.testing.assert_frame_equal(got, expected, check_exact=True)
        assert got.dtypes.tolist() == expected.dtypes.tolist()
        for name, table in (("expected", expected), ("got", got)):
            pq.write_table(parquet_safe_table(table)[0], tmp_path / f"{name}.parquet")
        assert ((tmp_path / "got.parquet").read_bytes()
                == (tmp_path / "expected.parquet").read_bytes())
    assert cast_columns(frame, {}) is frame
