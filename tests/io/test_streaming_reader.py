"""The streamed readers (issue 31): CSV, TSV and JSON Lines read a chunk and a batch at a time
give what reading the whole text at once gives -- rows, line numbers, warnings, errors -- and
the loader's whole-column statistics agree between Arrow-backed and Python columns."""

from __future__ import annotations

import csv
import gzip
import io
import json

import numpy as np
import pandas as pd
import pytest

from aflite_core.io import _delimited as delimited
from aflite_core.io import _inflow as inflow
from aflite_core.io import _json_tables as json_tables
from aflite_core.io import _text_columns as tc
from aflite_core.io._readers import decode_text, read_table
from aflite_core.io.datasets import DatasetFormatError, load_dataset


@pytest.fixture
def tiny_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 3 rows and chunks of 16 bytes: every boundary is crossed many times."""
    monkeypatch.setattr(delimited, "BATCH_ROWS", 3)
    monkeypatch.setattr(json_tables, "BATCH_RECORDS", 3)
    monkeypatch.setattr(inflow, "CHUNK", 16)
    monkeypatch.setattr(delimited, "_TEXT_CHUNK", 16)


ROWS = [
    ["premise", "hypothesis", "label"],
    ["A man, tall.", 'He said "hi"', "entailment"],
    ["Two\nlines", "ü ñ 漢字 😀", "neutral"],
    ["", "   ", "contradiction"],
    ["x", "y", "-"],
    ["NA", "null", ""],
    ["p6", "h6", "entailment"],
    ["p7", "h7\r\nstill", "neutral"],
]


def _csv_bytes(rows: list[list[str]], *, blank_after: int | None = None,
               newline: str = "\n") -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=newline)
    for i, row in enumerate(rows):
        writer.writerow(row)
        if i == blank_after:
            out.write(newline)
    return out.getvalue().encode("utf-8")


def _reference_lines(data: bytes) -> list[int]:
    """First line of every data row, from Python's csv over the whole text."""
    reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""), strict=True)
    starts, start, header = [], 1, False
    for row in reader:
        if row:
            if header:
                starts.append(start)
            header = True
        start = reader.line_num + 1
    return starts


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_csv_streamed_in_tiny_batches_matches_the_whole_text(tiny_batches: None,
                                                             newline: str) -> None:
    data = _csv_bytes(ROWS, blank_after=3, newline=newline)
    raw = read_table(data, name="rows.csv")
    expected = pd.DataFrame(ROWS[1:], columns=ROWS[0])
    pd.testing.assert_frame_equal(raw.frame.astype(object), expected.astype(object))
    assert raw.lines.tolist() == _reference_lines(data)
    assert raw.warnings == ["1 blank line(s) skipped"]
    assert str(raw.frame["premise"].dtype) == "str"  # Arrow-backed text, as pandas reads it
    whole, lines, _ = delimited.read_delimited_text(data.decode(), "rows.csv", ",")
    pd.testing.assert_frame_equal(raw.frame, whole)
    assert raw.lines.tolist() == lines.tolist()


def test_gzip_stream_hash_equals_the_hash_of_the_decompressed_bytes(tiny_batches: None) -> None:
    import hashlib

    data = _csv_bytes(ROWS * 5)
    raw = read_table(gzip.compress(data), name="rows.csv.gz")
    assert raw.content_hash == hashlib.sha256(data).hexdigest()
    assert len(raw.frame) == len(ROWS) * 5 - 1  # later header copies are rows too


def test_tsv_keeps_quotes_and_extra_boms_are_removed_with_a_warning(tiny_batches: None) -> None:
    text = "\ufeff\ufeffpremise\thypothesis\tlabel\n" + "".join(
        f'"p{i}\th {i}"\tlabel{i % 2}\n' for i in range(7))
    raw = read_table(text.encode("utf-8"), name="rows.tsv")
    assert list(raw.frame.columns) == ["premise", "hypothesis", "label"]
    assert raw.frame["premise"].tolist() == [f'"p{i}' for i in range(7)]
    assert raw.frame["hypothesis"].tolist() == [f'h {i}"' for i in range(7)]
    assert raw.lines.tolist() == list(range(2, 9))
    assert any("1 more byte-order mark" in w for w in raw.warnings)


def test_utf16_with_bom_is_streamed_and_its_nul_free(tiny_batches: None) -> None:
    data = _csv_bytes(ROWS).decode("utf-8").encode("utf-16")
    raw = read_table(data, name="rows.csv")
    assert raw.encoding == "utf-16"
    assert raw.frame["hypothesis"].tolist()[1] == "ü ñ 漢字 😀"


def test_undecodable_bytes_are_located_exactly_across_chunk_boundaries(
        tiny_batches: None) -> None:
    good = _csv_bytes(ROWS)
    for cut in (40, 61, 90):  # inside several different 16-byte chunks
        cut = good.index(b"\n", cut) + 1
        data = good[:cut] + b"caf\xe9,x,y\n" + good[cut:]
        with pytest.raises(DatasetFormatError) as streamed:
            read_table(data, name="bad.csv")
        with pytest.raises(DatasetFormatError) as whole:
            decode_text(data, "bad.csv", None)
        assert str(streamed.value) == str(whole.value)
        assert f"byte offset {cut + 3}" in str(streamed.value)


def test_nul_bytes_name_their_line_and_undecodable_bytes_win(tiny_batches: None) -> None:
    rows = _csv_bytes(ROWS)
    with pytest.raises(DatasetFormatError, match=r"line 5: the text contains NUL"):
        read_table(rows.replace(b"contradiction", b"contra\x00diction"), name="nul.csv")
    both = rows.replace(b"x,y", b"x\x00,y") + b"\xff\xfe,1,2\n"
    with pytest.raises(DatasetFormatError, match="cannot decode"):
        read_table(both, name="nul.csv")


def test_ragged_rows_and_unclosed_quotes_are_refused_at_their_line(tiny_batches: None) -> None:
    rows = _csv_bytes(ROWS)
    with pytest.raises(DatasetFormatError, match=r"line 11: expected 3 fields"):
        read_table(rows + b"a,b\n", name="ragged.csv")
    with pytest.raises(DatasetFormatError, match=r"line 11: a quoted field starts"):
        read_table(rows + b'"open,b,c\n', name="open.csv")
    with pytest.raises(DatasetFormatError, match="the file is empty"):
        read_table(b"  \n\n   \n", name="blank.csv")


def test_jsonl_streamed_in_batches_keeps_types_and_late_keys(tiny_batches: None) -> None:
    records = [{"premise": f"p{i}", "hypothesis": f"h{i}", "label": "a" if i % 2 else "b"}
               for i in range(8)]
    records[5]["extra"] = 2**70  # a key first met in the second batch, an integer past 64 bits
    records[6]["label"] = 3  # a number among text labels in a later batch
    text = "\n".join(json.dumps(r) for r in records[:4]) + "\n\n" + \
        "\n".join(json.dumps(r) for r in records[4:]) + "\n"
    raw = read_table(text.encode(), name="rows.jsonl")
    assert raw.lines.tolist() == [1, 2, 3, 4, 6, 7, 8, 9]
    assert str(raw.frame["premise"].dtype) == "str"
    assert raw.frame["label"].tolist() == ["b", "a", "b", "a", "b", "a", 3, "a"]
    assert raw.frame["extra"].tolist() == [None] * 5 + [str(2**70)] + [None] * 2
    assert any("first at line 7" in w for w in raw.warnings)
    with pytest.raises(DatasetFormatError, match=r"line 3, column 1: invalid JSON"):
        read_table(b'{"a": 1}\n{"a": 2}\nnope\n', name="bad.jsonl")


def test_blank_mask_is_python_strip_on_arrow_and_on_objects() -> None:
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    values = ["", "a", " a ", "\u200b"] + spaces + ["".join(spaces)]
    expected = [not v.strip() for v in values]
    arrow = pd.Series(pd.array(values, dtype=delimited.TEXT_DTYPE))
    assert tc.blank_mask(arrow).tolist() == expected
    assert tc.blank_mask(pd.Series(values + [None], dtype=object)).tolist() == expected + [True]


@pytest.mark.parametrize("n", [400, tc.KERNEL_MIN_ROWS])  # a sort below, a hash table from
def test_equal_codes_and_counts_agree_with_pandas(n: int) -> None:
    rng = np.random.default_rng(0)
    values = rng.integers(0, n // 8, n).astype(np.uint64)
    labels = rng.integers(0, 3, n)
    series = pd.Series(values)
    assert tc.count_distinct(values) == series.nunique()
    codes = tc.equal_codes(values)
    assert (pd.factorize(codes)[0] == pd.factorize(values)[0]).all()  # equal where equal
    per_group = pd.DataFrame({"g": values, "l": labels}).groupby("g")["l"].nunique()
    assert tc.distinct_and_conflicting(values, labels) == (series.nunique(),
                                                           int((per_group > 1).sum()))
    assert tc.distinct_and_conflicting(values[:0], labels[:0]) == (0, 0)
    one_label = np.zeros(n, dtype=np.int64)
    assert tc.distinct_and_conflicting(values, one_label) == (series.nunique(), 0)


def test_first_codes_number_values_as_pandas_factorize() -> None:
    from aflite_core.io._load_kernels import first_codes

    rng = np.random.default_rng(1)
    hashes = rng.integers(0, 2**63, 5000, dtype=np.int64).astype(np.uint64)
    hashes[::3] = hashes[0]  # one value on a third of the rows
    hashes[1::7] += np.uint64(2**63)  # the top bit set
    for values in (hashes, np.arange(-2000, 2000, dtype=np.int64) // 3, hashes[:1]):
        codes, counts = first_codes(values)
        expected, _ = pd.factorize(values)
        np.testing.assert_array_equal(codes, expected)
        np.testing.assert_array_equal(counts, np.bincount(expected))
        _, _, firsts = first_codes(values, first_rows=True)  # each code's first row
        np.testing.assert_array_equal(firsts, np.unique(expected, return_index=True)[1])
    assert [len(part) for part in first_codes(hashes[:0])] == [0, 0]
    assert [len(part) for part in first_codes(hashes[:0], first_rows=True)] == [0, 0, 0]
    with pytest.raises(TypeError, match="64-bit integers"):
        first_codes(np.arange(3, dtype=np.int32))


def test_report_is_the_same_from_csv_text_and_from_python_objects() -> None:
    rng = np.random.default_rng(3)
    prem = rng.choice(["A dog.", "A dog", "a  DOG!", "", " cat ", "x\u3000y"], 300)
    hyp = rng.choice(["runs.", "Runs", " runs", "", "  ", "sits", "z"], 300)
    lab = rng.choice(["a", " a", "b", "-", "c"], 300)
    frame = pd.DataFrame({"premise": prem, "hypothesis": hyp, "label": lab}).astype(object)
    from_objects = load_dataset(frame)
    from_csv = load_dataset(frame.to_csv(index=False).encode(), format="csv")
    assert str(from_csv.frame["premise"].dtype) == "str"
    assert from_csv.report.to_dict() | {"source": None, "format": None, "encoding": None} == \
        from_objects.report.to_dict() | {"source": None, "format": None, "encoding": None}
    assert (from_csv.exclusion == from_objects.exclusion).all()
    assert (from_csv.groups() == from_objects.groups()).all()
    assert from_csv.report.duplicates["normalised"] > from_csv.report.duplicates["exact"] > 0
