"""Exports: exact round trip for machine use, spreadsheet-safe CSV, streaming, selection."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from planted import run_from_dataset, statuses_for

from aflite_core.io.datasets import load_dataset
from aflite_core.runs._writer import write_run
from aflite_core.runs.exports import (
    FORMULA_PREFIXES,
    export_bytes,
    export_run,
    neutralize_cell,
    neutralize_frame,
)
from aflite_core.runs.folder import STATUSES, load_run

HOSTILE_ROWS = [
    ["premise", "hypothesis", "label", "note"],
    ['He said "hi", then left.', "=1+2", "entailment", "a,b"],
    ["line1\nline2", "-x", "neutral", "cr\rinside"],
    ["ünïcödé 中文 😀 עברית", "@SUM(A1)", "contradiction", "\ttab"],
    ["crlf\r\nin", "<script>alert(1)</script>", "-", ""],
    ["  spaces  ", "+plus", "", "'quote"],
    ['""', "=HYPERLINK(\"http://x\")", "entailment", "\rcr first"],
    ["plain", "ordinary text", "neutral", "NaN"],
    ["NA", "null", "contradiction", "None"],
]


def write_csv_rows(path: Path, rows: list[list[str]]) -> Path:
    # RFC 4180 writer: CRLF line ends so that a lone \r inside a value is quoted
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\r\n").writerows(rows)
    return path


def read_csv_rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


@pytest.fixture
def hostile_run(tmp_path):
    data = write_csv_rows(tmp_path / "hostile.csv", HOSTILE_ROWS)
    dataset = load_dataset(data)
    status = np.array(["retained", "removed", "warmup", "excluded", "excluded", "retained",
                       "removed", "retained"], dtype=object)
    return data, dataset, run_from_dataset(tmp_path, dataset, status)


# ----------------------------------------------------------------------------- sanitising


@pytest.mark.parametrize("prefix", FORMULA_PREFIXES)
def test_formula_prefixes_are_neutralised(prefix):
    assert neutralize_cell(prefix + "cmd|' /C calc'!A0") == "'" + prefix + "cmd|' /C calc'!A0"


@pytest.mark.parametrize("value", ["plain", "", " =not first", "'already", "a=b", 3, -1.5, None])
def test_other_cells_are_untouched(value):
    assert neutralize_cell(value) == value


def test_neutralize_frame_leaves_numbers_alone():
    frame = pd.DataFrame({"=head": ["=1", "ok", None], "n": [-1, 2, 3], "f": [-0.5, 1.0, 2.0],
                          "o": pd.Series(["-x", 5, None], dtype=object),
                          "c": pd.Categorical(["@a", "b", "@a"])})
    out = neutralize_frame(frame)
    assert list(out.columns) == ["'=head", "n", "f", "o", "c"]
    assert out["c"].tolist() == ["'@a", "b", "'@a"]
    assert out["'=head"].tolist()[:2] == ["'=1", "ok"]
    assert out["n"].tolist() == [-1, 2, 3] and out["f"].tolist() == [-0.5, 1.0, 2.0]
    assert out["o"].tolist() == ["'-x", 5, None]
    assert frame["=head"].iloc[0] == "=1"  # input not modified


# ----------------------------------------------------------------------------- round trips


def test_csv_round_trip_is_byte_exact_for_machine_use(tmp_path, hostile_run):
    data, dataset, path = hostile_run
    original = read_csv_rows(data.read_bytes())
    header, body = original[0], original[1:]
    rebuilt = {}
    for what in STATUSES:
        out = tmp_path / f"{what}.csv"
        export_run(path, what, out, sanitize=False)
        rows = read_csv_rows(out.read_bytes())
        assert rows[0] == ["row_id", *header, "status", "predictability", "removal_round"]
        for row in rows[1:]:
            assert row[-3] == what
            assert int(row[0]) not in rebuilt, "row exported twice"
            rebuilt[int(row[0])] = row[1 : 1 + len(header)]
    assert sorted(rebuilt) == list(range(len(body)))
    assert [rebuilt[i] for i in range(len(body))] == body


def test_parquet_round_trip_is_exact(tmp_path, hostile_run):
    data, dataset, path = hostile_run
    parts = []
    for what in STATUSES:
        out = tmp_path / f"{what}.parquet"
        export_run(path, what, out)
        parts.append(pd.read_parquet(out))
    both = pd.concat(parts).sort_values("row_id")
    assert both["row_id"].tolist() == dataset.frame.index.tolist()
    original = read_csv_rows(data.read_bytes())
    assert both[original[0]].to_numpy().tolist() == original[1:]


def test_run_folder_csvs_are_exact(hostile_run):
    data, dataset, path = hostile_run
    original = read_csv_rows(data.read_bytes())
    rebuilt = {}
    for status in STATUSES:
        if not (path / f"{status}.csv").exists():  # an empty status gets no CSV
            assert status not in set(load_run(path).scores["status"])
            continue
        rows = read_csv_rows((path / f"{status}.csv").read_bytes())
        assert rows[0] == ["row_id", *original[0]]
        rebuilt.update({int(r[0]): r[1:] for r in rows[1:]})
    assert [rebuilt[i] for i in range(len(original) - 1)] == original[1:]


def test_spreadsheet_safe_export(tmp_path, hostile_run):
    _, _, path = hostile_run
    out = tmp_path / "all.csv"
    result = export_run(path, "all", out)
    assert result.sanitized and result.n_rows == len(HOSTILE_ROWS) - 1
    rows = read_csv_rows(out.read_bytes())
    cells = [c for row in rows[1:] for c in row[1:5]]
    assert not any(c[:1] in FORMULA_PREFIXES for c in cells)
    assert "'=1+2" in cells and "'@SUM(A1)" in cells and "'\ttab" in cells
    assert "'\rcr first" in cells and "'-x" in cells and "'+plus" in cells
    assert "'quote" in cells  # a cell already starting with ' is unchanged
    # numeric columns stay numbers (removal round 1, not '1 or 1.0), and a kept row has no
    # removal round (an empty cell, not -1)
    assert {row[-1] for row in rows[1:]} == {"", "1"}
    status = {row[-3] for row in rows[1:] if row[-1] == ""}
    assert "removed" not in status and {row[-3] for row in rows[1:] if row[-1]} == {"removed"}


def test_chunked_writing_gives_identical_files(tmp_path, hostile_run):
    _, _, path = hostile_run
    for fmt in ("csv", "parquet"):
        small = tmp_path / f"small.{fmt}"
        big = tmp_path / f"big.{fmt}"
        export_run(path, "all", small, chunk_rows=2, sanitize=False)
        export_run(path, "all", big, chunk_rows=10_000, sanitize=False)
        if fmt == "csv":
            assert small.read_bytes() == big.read_bytes()
        else:
            pd.testing.assert_frame_equal(pd.read_parquet(small), pd.read_parquet(big))


def test_columns_and_row_filter(tmp_path, hostile_run):
    _, _, path = hostile_run
    out = tmp_path / "sel.csv"
    export_run(path, "all", out, columns=["hypothesis", "status"], row_ids=[6, 0, 2],
               sanitize=False)
    rows = read_csv_rows(out.read_bytes())
    assert rows[0] == ["row_id", "hypothesis", "status"]
    assert [r[0] for r in rows[1:]] == ["0", "2", "6"]  # input order, not filter order
    assert rows[1][1] == "=1+2"
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['nope'\]"):
        export_run(path, "all", tmp_path / "x.csv", columns=["nope"])
    with pytest.raises(ValueError, match="not in this run"):
        export_run(path, "all", tmp_path / "y.csv", row_ids=[0, 999])
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "y.csv").exists()


def test_empty_selection_still_has_a_header(tmp_path, hostile_run):
    _, _, path = hostile_run
    out = tmp_path / "none.csv"
    result = export_run(path, "removed", out, row_ids=[0], sanitize=False)
    assert result.n_rows == 0
    assert read_csv_rows(out.read_bytes())[0][0] == "row_id"
    pq_out = tmp_path / "none.parquet"
    export_run(path, "removed", pq_out, row_ids=[0])
    assert len(pd.read_parquet(pq_out)) == 0 and "premise" in pd.read_parquet(pq_out).columns


def test_table_exports(tmp_path, hostile_run):
    _, _, path = hostile_run
    export_run(path, "scores", tmp_path / "scores.parquet")
    scores = load_run(path).scores
    # the run folder's -1 (not removed) is exported as an empty removal round
    expected = scores.assign(removal_round=scores["removal_round"].where(
        scores["removal_round"] >= 0).astype("Int64"))
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "scores.parquet")
                                  .astype({"removal_round": "Int64"}), expected)
    data = export_bytes(path, "scores", format="csv", row_ids=[1, 2])
    assert [r[0] for r in read_csv_rows(data)[1:]] == ["1", "2"]
    with pytest.raises(FileNotFoundError, match="cues was not computed"):
        export_run(path, "cues", tmp_path / "cues.csv")


def test_existing_target_needs_overwrite(tmp_path, hostile_run):
    _, _, path = hostile_run
    out = tmp_path / "x.csv"
    out.write_text("keep me")
    with pytest.raises(FileExistsError):
        export_run(path, "retained", out)
    assert out.read_text() == "keep me"
    export_run(path, "retained", out, overwrite=True)
    assert out.read_text().startswith("row_id,")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_added_column_names_do_not_clobber_originals(tmp_path):
    frame = pd.DataFrame({"status": ["gold", "silver"], "label": ["a", "b"], "text": ["x", "y"]},
                         index=pd.Index([0, 1], name="row_id"))
    scores = pd.DataFrame({"row_id": [0, 1], "status": ["retained", "removed"],
                           "predictability": [0.1, 0.9], "removal_round": [-1, 0]})
    path = write_run(tmp_path, "r", frame=frame, scores=scores)
    out = tmp_path / "all.parquet"
    export_run(path, "all", out)
    table = pd.read_parquet(out)
    assert table["status"].tolist() == ["gold", "silver"]
    assert table["aflite_status"].tolist() == ["retained", "removed"]


# ----------------------------------------------------------------------------- properties

# any text except NUL (not representable in CSV) and lone surrogates (not UTF-8)
CELL = st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
               max_size=12)
NAMES = st.lists(st.text(alphabet="abcdefghij_", min_size=1, max_size=6), min_size=1,
                 max_size=3, unique=True).filter(lambda ns: not {"premise", "hypothesis",
                                                                 "label"} & set(ns))


@settings(max_examples=25, deadline=None)
@given(extra=NAMES, data=st.data())
def test_any_string_table_survives_load_and_export(tmp_path_factory, extra, data):
    n = data.draw(st.integers(min_value=1, max_value=6))
    columns = ["premise", "hypothesis", "label", *extra]
    table = [[data.draw(CELL) for _ in columns] for _ in range(n)]
    table[0][1], table[0][2] = "a valid hypothesis", "yes"  # at least one row is auditable
    tmp = tmp_path_factory.mktemp("prop")
    source = write_csv_rows(tmp / "in.csv", [columns, *table])
    dataset = load_dataset(source, premise="premise", hypothesis="hypothesis", label="label")
    path = run_from_dataset(tmp, dataset, statuses_for(n, seed=n))
    csv_rows, pq_parts = {}, []
    for what in STATUSES:
        export_run(path, what, tmp / f"{what}.csv", sanitize=False)
        rows = read_csv_rows((tmp / f"{what}.csv").read_bytes())
        assert rows[0][1 : 1 + len(columns)] == columns
        csv_rows.update({int(r[0]): r[1 : 1 + len(columns)] for r in rows[1:]})
        export_run(path, what, tmp / f"{what}.parquet")
        pq_parts.append(pd.read_parquet(tmp / f"{what}.parquet"))
    assert [csv_rows[i] for i in range(n)] == table
    both = pd.concat(pq_parts).sort_values("row_id")
    assert both[columns].to_numpy().tolist() == table


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(CELL, min_size=2, max_size=2), min_size=1, max_size=8))
def test_any_frame_round_trips_through_pandas_reader(tmp_path_factory, cells):
    tmp = tmp_path_factory.mktemp("frame")
    frame = pd.DataFrame(cells, columns=["a", "label"],
                         index=pd.Index(np.arange(len(cells)), name="row_id"))
    scores = pd.DataFrame({"row_id": np.arange(len(cells)), "status": "retained",
                           "predictability": 0.5, "removal_round": -1})
    path = write_run(tmp, "r", frame=frame, scores=scores)
    back = pd.read_csv(path / "retained.csv", dtype=str, keep_default_na=False)
    assert back[["a", "label"]].to_numpy().tolist() == frame.to_numpy().tolist()


def test_exports_never_write_into_a_run(hostile_run):
    _, _, path = hostile_run
    with pytest.raises(ValueError, match="never modified"):
        export_run(path, "retained", path / "extra.csv")
    with pytest.raises(ValueError, match="never modified"):
        export_run(path, "retained", path / "retained.csv", overwrite=True)
    assert not (path / "extra.csv").exists()
    assert sorted(p.name for p in path.iterdir()) == load_run(path).summary["artifacts"]
