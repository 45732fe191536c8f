"""Property tests: any table of strings survives load -> run folder -> export unchanged.

Hypothesis draws tables whose cells and column names hold quotes, separators, CR/LF,
leading formula characters, BOMs, NUL (JSON only), right-to-left text and emoji. Each table
is written as CSV (RFC 4180), TSV or JSON Lines, loaded with ``load_dataset``, written as a
real run folder (``runs.write_run``, the building block of ``run_audit``, with random
statuses), and read back from the run folder's machine-exact CSVs and from the CSV
(``sanitize=False``) and Parquet exports: every original value must come back unchanged.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aflite_core.io.datasets import load_dataset
from aflite_core.runs._writer import write_run
from aflite_core.runs.exports import export_run
from aflite_core.runs.folder import ROW_CSV_FILES, load_run

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

#: Characters worth over-sampling: CSV syntax, line ends, formula prefixes, BOM, bidi, emoji.
SPECIAL = ['"', ",", "\n", "\r", "\r\n", "\t", ";", "=", "+", "-", "@", "'", " ", "\ufeff",
           "\u202e", "\u200f", "é", "ß", "中", "👩‍👩‍👧", "\\", "NA", "null", "1.0", "007"]


def texts(*, exclude: str = "\x00", max_size: int = 12) -> st.SearchStrategy[str]:
    """Strings mixing arbitrary characters (no surrogates) with the special ones."""
    chars = st.characters(blacklist_categories=("Cs",), blacklist_characters=exclude)
    pieces = st.one_of(st.text(chars, max_size=4),
                       st.sampled_from([s for s in SPECIAL if not set(s) & set(exclude)]))
    return st.lists(pieces, max_size=max_size // 2).map("".join)


def tables(cell: st.SearchStrategy[str], name: st.SearchStrategy[str],
           extra_cells: st.SearchStrategy[st.SearchStrategy] | None = None
           ) -> st.SearchStrategy:
    """(column names, rows, statuses): a text column, a label column (cells from ``cell``)
    and 0-2 extra columns, each with cells from a strategy drawn from ``extra_cells``
    (default: ``cell``)."""

    @st.composite
    def build(draw):
        extra = draw(st.lists(name.filter(lambda s: s not in ("hypothesis", "label")),
                              max_size=2, unique=True))
        columns = ["hypothesis", "label", *extra]
        kinds = [cell, cell] + [draw(extra_cells) if extra_cells is not None else cell
                                for _ in extra]
        n = draw(st.integers(min_value=1, max_value=8))
        rows = [[draw(kind) for kind in kinds] for _ in range(n)]
        rows.append(["a valid text", "a"] + [draw(kind) for kind in kinds[2:]])  # auditable
        statuses = draw(st.lists(st.sampled_from(["retained", "removed", "warmup"]),
                                 min_size=len(rows), max_size=len(rows)))
        return columns, rows, statuses

    return build()


def write_delimited(path: Path, columns: list[str], rows: list[list[str]], sep: str) -> None:
    if sep == "\t":  # TSV: no quoting at all
        text = "".join("\t".join(r) + "\n" for r in [columns, *rows])
        path.write_bytes(text.encode("utf-8"))
        return
    buffer = io.StringIO(newline="")
    csv.writer(buffer, lineterminator="\r\n").writerows([columns, *rows])
    path.write_bytes(buffer.getvalue().encode("utf-8"))


def make_run(dataset, statuses: list[str], root: Path) -> Path:
    """A complete run folder for ``dataset`` with the drawn statuses (excluded rows kept)."""
    frame = dataset.frame
    status = np.where(dataset.included_mask, statuses, "excluded")
    scores = pd.DataFrame({
        "row_id": frame.index.to_numpy(),
        "status": status,
        "predictability": np.where(status == "removed", 0.9, np.nan),
        "removal_round": np.where(status == "removed", 1, -1),
        "label": dataset.labels(included_only=False),
    })
    return write_run(root, "prop", frame=frame, scores=scores, summary={"sizes": {}},
                     overwrite=True)


def read_rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def assert_csv_exact(path_or_rows, columns: list[str], rows: list[list[str]],
                     n_extra: int = 0) -> None:
    """Row-id column first, then the original columns exactly, then ``n_extra`` added ones."""
    table = read_rows(path_or_rows) if isinstance(path_or_rows, Path) else path_or_rows
    header, body = table[0], table[1:]
    assert header[1 : 1 + len(columns)] == columns and len(header) == 1 + len(columns) + n_extra
    got = {int(r[0]): r[1 : 1 + len(columns)] for r in body}
    assert got == dict(enumerate(rows))


def check_round_trip(tmp_path: Path, data: Path, columns: list[str], rows: list[list[Any]],
                     statuses: list[str], *, strings: bool = True) -> None:
    dataset = load_dataset(data, hypothesis="hypothesis", label="label")
    assert list(map(str, dataset.frame.columns)) == columns
    assert dataset.frame.values.tolist() == rows  # loading changes nothing
    run_dir = make_run(dataset, statuses, tmp_path / "runs")
    if strings:
        # the run folder's per-status CSVs together hold every row once, exactly
        table = []
        for filename in ROW_CSV_FILES.values():
            if (run_dir / filename).is_file():
                part = read_rows(run_dir / filename)
                table = table or part[:1]
                assert part[0] == table[0]
                table += part[1:]
        assert_csv_exact(table, columns, rows)
        # machine-mode CSV export of every row
        export_run(load_run(run_dir), "all", tmp_path / "all.csv", sanitize=False,
                   overwrite=True)
        assert_csv_exact(tmp_path / "all.csv", columns, rows, n_extra=3)
    # Parquet export keeps values and types
    export_run(load_run(run_dir), "all", tmp_path / "all.parquet", overwrite=True)
    back = pq.read_table(tmp_path / "all.parquet").to_pandas()
    original = back.iloc[:, 1 : 1 + len(columns)]
    assert list(original.columns) == columns
    assert original.astype(object).where(original.notna(), None).values.tolist() == rows


@SETTINGS
@given(table=tables(texts(), texts(max_size=8).filter(bool)))
def test_csv_round_trip(table, tmp_path_factory) -> None:
    tmp_path = tmp_path_factory.mktemp("csv")
    columns, rows, statuses = table
    data = tmp_path / "data.csv"
    write_delimited(data, columns, rows, ",")
    check_round_trip(tmp_path, data, columns, rows, statuses)


@SETTINGS
@given(table=tables(texts(exclude="\x00\t\n\r"),
                    texts(exclude="\x00\t\n\r", max_size=8).filter(bool)))
def test_tsv_round_trip(table, tmp_path_factory) -> None:
    tmp_path = tmp_path_factory.mktemp("tsv")
    columns, rows, statuses = table
    data = tmp_path / "data.tsv"
    write_delimited(data, columns, rows, "\t")
    check_round_trip(tmp_path, data, columns, rows, statuses)


#: Cell strategies of one JSON column: one type per column, nulls allowed (a column mixing
#: types is stored as text in the run's Parquet files; see docs/hostile-inputs.md).
JSON_COLUMNS = st.sampled_from([
    texts(exclude=""),
    st.one_of(st.none(), st.integers(-(2**53), 2**53)),
    st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
    st.one_of(st.none(), st.booleans()),
])


@SETTINGS
@given(table=tables(texts(exclude=""), texts(exclude="", max_size=8).filter(bool),
                    JSON_COLUMNS),
       pure=st.booleans())
def test_jsonl_round_trip(table, pure, tmp_path_factory) -> None:
    """JSON Lines keeps types (Parquet export); with only strings the CSV exports are exact
    too. NUL and every other character survive (JSON escapes them)."""
    tmp_path = tmp_path_factory.mktemp("jsonl")
    columns, rows, statuses = table
    if pure:  # strings only
        rows = [[v if isinstance(v, str) else json.dumps(v) for v in row] for row in rows]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(dict(zip(columns, r, strict=True))) + "\n"
                            for r in rows), encoding="utf-8")
    check_round_trip(tmp_path, data, columns, rows, statuses, strings=pure)
