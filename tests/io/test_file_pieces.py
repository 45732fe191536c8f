"""One data file read a piece at a time (``aflite_core.io._file_pieces``) and loaded by the
streamed load: the pieces joined are the whole read's table (rows, lines, warnings, dropped
columns, hash), the dataset is ``load_dataset(...).with_texts_on_disk(path)``'s with the
file byte for byte, errors are the whole read's and leave no file, and what cannot be
promised piece by piece is loaded whole.

The sizes that cut a file into pieces are a tenth of the product's here (:data:`PIECE`
rows a piece or a batch, the files a tenth as long, Arrow's reader from 256 KB), so the
same cuts fall on files of thousands of rows instead of tens of thousands."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from planted import assert_same_dataset, planted_snli_frame

import aflite_core.io._arrow_delimited as arrow_delimited
import aflite_core.io._delimited as delimited
import aflite_core.io._file_pieces as file_pieces_module
import aflite_core.io._json_tables as json_tables
import aflite_core.io._streamed_load as streamed_load
import aflite_core.io._texts_on_disk as texts_on_disk
from aflite_core.io._file_pieces import Unstreamable, file_pieces
from aflite_core.io._readers import read_table
from aflite_core.io._streamed_load import load_to_disk
from aflite_core.io.datasets import DatasetError, load_dataset

#: Rows of a piece (Parquet), a batch (CSV, TSV) or a batch of records (JSON Lines), and of a
#: row group of the texts file: a tenth of the product's 65,536.
PIECE = 6_554


@pytest.fixture(autouse=True)
def _pieces_a_tenth(monkeypatch):
    """The product's piece, batch and row-group sizes a tenth, for every test here."""
    monkeypatch.setattr(file_pieces_module, "PIECE_ROWS", PIECE)
    monkeypatch.setattr(delimited, "BATCH_ROWS", PIECE)
    monkeypatch.setattr(json_tables, "BATCH_RECORDS", PIECE)
    monkeypatch.setattr(texts_on_disk, "ROW_GROUP", PIECE)
    monkeypatch.setattr(streamed_load, "ROW_GROUP", PIECE)
    monkeypatch.setattr(arrow_delimited, "FAST_MIN_BYTES", 256 << 10)


def _pieces_of(path, **options):
    """Every piece of ``path`` (read here) and the joined table."""
    pieces = file_pieces(path, **options)
    got = []
    source = pieces.local() if pieces.read is None else map(pieces.read, pieces.items)
    for piece in source:
        got.append(pieces.take(piece))
    pieces.close()
    return got, pieces.join([p.frame for p in got], [p.lines for p in got])


def _assert_same_raw(joined, whole) -> None:
    pd.testing.assert_frame_equal(joined.frame, whole.frame, check_exact=True)
    for name in ("name", "format", "content_hash", "encoding", "warnings", "column_types",
                 "dropped"):
        assert getattr(joined, name) == getattr(whole, name), name
    if whole.lines is None:
        assert joined.lines is None
    else:
        np.testing.assert_array_equal(joined.lines, whole.lines)


@pytest.mark.parametrize("kind", ["csv", "tsv", "csv.gz", "jsonl", "parquet"])
def test_pieces_joined_are_the_whole_read(tmp_path, kind):
    frame = planted_snli_frame(9_000, seed=5, premises=200)
    frame.loc[7, "sentence2"] = 'quoted, "with"\nnewline'  # a CSV record over two lines
    path = tmp_path / f"data.{kind}"
    if kind == "parquet":
        frame.to_parquet(path, index=False, row_group_size=2_000)
    elif kind == "jsonl":  # numbers, text and a key missing here and there in every piece
        frame.assign(n=np.arange(len(frame))).to_json(path, orient="records", lines=True)
        text = path.read_text().split("\n")
        for i in range(0, len(text) - 1, 100):
            text[i] = text[i].replace('"score":', '"other":')
        path.write_text("\n".join(text))
    elif kind == "tsv":
        frame.assign(sentence2=frame["sentence2"].str.replace("\n", " ")).to_csv(
            path, sep="\t", index=False)
        with open(path, "a") as out:
            out.write("\n\n")  # blank lines: a warning, as the whole read gives
    else:
        text = frame.to_csv(index=False).encode()
        path.write_bytes(gzip.compress(text) if kind.endswith(".gz") else text)
    pieces, joined = _pieces_of(path)
    _assert_same_raw(joined, read_table(path))
    sizes = [len(p.frame) for p in pieces]
    if kind == "parquet":  # whole row groups of 2,000 rows, PIECE or more a piece
        assert sizes == [8_000, 1_000]
    else:
        assert sizes == [PIECE, 9_000 - PIECE]


@pytest.mark.parametrize("case", [
    ("csv", {}, 2_500),              # linked-text groups
    ("tsv", {"id": "pairID"}, 400),
    ("jsonl", {}, 400),
    ("parquet", {}, 3),              # one giant linked group: grouped by the premise
    ("parquet", {"group": "pairID", "split": ""}, 400),
])
def test_one_file_streamed_is_the_whole_load_with_its_texts_on_disk(tmp_path, case):
    fmt, options, premises = case
    frame = planted_snli_frame(9_000, seed=len(str(case)), premises=premises)
    path = tmp_path / f"data.{fmt}"
    if fmt == "parquet":  # two pieces: 8,000 rows (PIECE or more), then 1,000
        frame.to_parquet(path, index=False, row_group_size=4_000)
    elif fmt == "jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_csv(path, sep="\t" if fmt == "tsv" else ",", index=False)
    streamed = load_to_disk(path, tmp_path / "a.parquet", **options)
    whole = load_dataset(path, **options).with_texts_on_disk(tmp_path / "b.parquet")
    assert (streamed.loaded_by, whole.loaded_by) == ("streamed", "whole")
    assert streamed.loaded_whole_because == ""
    assert_same_dataset(streamed, whole)
    assert "sentence2" in streamed.texts_file.columns and "sentence2" not in streamed.frame


def test_parquet_pieces_are_read_by_the_mapper_one_at_a_time(tmp_path):
    """A Parquet file's pieces go through ``map_shards.stream`` (a cluster's workers), each
    let go before the next is taken; workers that cannot open the file leave it here."""
    import gc
    import weakref

    frame = planted_snli_frame(10_000, seed=8, premises=100)
    path = tmp_path / "data.parquet"
    frame.to_parquet(path, index=False, row_group_size=1_000)
    alive: list[weakref.ref] = []
    held: list[int] = []

    class Reader:
        engine = "test"

        def stream(self, read, items):
            for item in items:
                gc.collect()
                held.append(sum(ref() is not None for ref in alive))
                piece = read(item)
                alive.append(weakref.ref(piece[0].frame))
                yield piece
                del piece

    streamed = load_to_disk(path, tmp_path / "a.parquet", map_shards=Reader())
    assert streamed.read_by == "test" and held == [0, 0]
    assert_same_dataset(streamed, load_dataset(path).with_texts_on_disk(tmp_path / "b.parquet"))

    class Elsewhere:
        engine = "test"

        def stream(self, read, items):
            raise FileNotFoundError("not on the workers' storage")
            yield  # pragma: no cover

    here = load_to_disk(path, tmp_path / "c.parquet", map_shards=Elsewhere())
    assert here.read_by == "local"
    assert any(w.startswith("the file was read here: the cluster's workers could not open it")
               for w in here.report.warnings)


def test_files_it_cannot_stream_are_loaded_whole(tmp_path):
    """JSON Lines whose pieces type a column differently, a Categorical column, a column
    whose pandas type differs between row groups, a binary column UTF-8 in one row group
    only: the whole load, the same dataset."""
    rows, group = 7_000, 6_600  # two pieces: a row group of PIECE or more, and one
    frame = planted_snli_frame(rows, seed=9, premises=300)
    cases = {}
    # integers in the first piece, a float among them in the second
    def jsonl(path):
        frame.assign(n=np.arange(rows)).to_json(path, orient="records", lines=True)
        path.write_text(path.read_text().replace(f'"n":{rows - 5}}}', f'"n":{rows - 5}.5}}'))

    cases["data.jsonl"] = jsonl
    cases["categorical.parquet"] = lambda p: frame.astype({"split": "category"}).to_parquet(
        p, index=False)
    counts = list(range(rows))
    counts[-10] = None  # no pandas metadata: int64 in the first row group, float64 after
    cases["nulls.parquet"] = lambda p: pq.write_table(
        pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
        .append_column("count", pa.array(counts, pa.int64())), p, row_group_size=group)
    blobs = [b"text"] * rows
    blobs[-10] = b"\xff\xfe\x00"
    cases["binary.parquet"] = lambda p: pq.write_table(
        pa.Table.from_pandas(frame, preserve_index=False).append_column(
            "blob", pa.array(blobs, pa.binary())), p, row_group_size=group)
    for file, write in cases.items():
        path = tmp_path / file
        write(path)
        streamed = load_to_disk(path, tmp_path / f"{file}.texts")
        assert streamed.loaded_by == "whole" and streamed.loaded_whole_because, file
        assert_same_dataset(streamed, load_dataset(path).with_texts_on_disk(tmp_path / f"{file}.b"))
    (tmp_path / "document.json").write_text(frame.iloc[:5].to_json(orient="records"))
    with pytest.raises(Unstreamable, match="JSON document"):
        file_pieces(tmp_path / "document.json")


def test_errors_are_the_whole_reads_and_leave_no_file(tmp_path):
    """A ragged row past the first piece, a header with a name twice, a Parquet file past
    max_bytes: the whole read's refusal, and no texts file."""
    frame = planted_snli_frame(10_000, seed=10, premises=100)
    text = frame.to_csv(index=False)
    lines = text.split("\n")
    lines[9_000] += ",extra"
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("\n".join(lines))
    twice = tmp_path / "twice.csv"
    twice.write_text(text.replace("sentence2", "sentence1", 1))
    big = tmp_path / "big.parquet"
    frame.to_parquet(big, index=False, row_group_size=1_000)
    said = {}
    for path, options in ((ragged, {}), (twice, {}), (big, {"max_bytes": 400_000})):
        with pytest.raises(DatasetError) as streamed:
            load_to_disk(path, tmp_path / "out.parquet", **options)
        with pytest.raises(DatasetError) as whole:
            load_dataset(path, **options)
        assert type(streamed.value) is type(whole.value)
        if path is not big:  # (past max_bytes: counted a piece at a time, not a batch)
            assert str(streamed.value) == str(whole.value)
        assert not (tmp_path / "out.parquet").exists()
        said[path.name] = str(streamed.value)
    assert "line 9001: expected 6 fields" in said["ragged.csv"]
    assert "'sentence1'" in said["twice.csv"] and "past the limit" in said["big.parquet"]


def _parts_of(path, **options):
    """Every part of ``path`` parsed apart (``split=True``) and the joined table."""
    pieces = file_pieces(path, split=True, **options)
    assert pieces.read is not None, "not cut into parts"
    got = [t for t in (pieces.take(pieces.read(item)) for item in pieces.items)
           if t is not None]
    return pieces, got, pieces.join([p.frame for p in got], [p.lines for p in got])


def _tsv_and_jsonl(tmp_path, rows: int = 6_000):
    """A TSV file (a byte-order mark, blank lines before the header and inside, CRLF line
    ends, text past ASCII) and a JSON Lines file (a BOM, blank lines, keys in another order
    here and there, a key missing in every part)."""
    frame = planted_snli_frame(rows, seed=11, premises=500)
    frame["sentence2"] = frame["sentence2"] + " é ☃"
    tsv = tmp_path / "data.tsv"
    text = frame.to_csv(sep="\t", index=False, lineterminator="\r\n")
    lines = text.split("\r\n")
    for i in range(300, len(lines) - 1, 997):
        lines[i] = "\r\n" + lines[i]
    tsv.write_bytes(b"\xef\xbb\xbf\r\n\r\n" + "\r\n".join(lines).encode())
    jsonl = tmp_path / "data.jsonl"
    frame.to_json(jsonl, orient="records", lines=True, force_ascii=False)
    records = jsonl.read_text(encoding="utf-8").split("\n")
    for i in range(0, len(records) - 1, 50):
        records[i] = records[i].replace('"score":', '"other":')
    for i in range(7, len(records) - 1, 1300):
        head, tail = records[i][1:-1].split(",", 1)
        records[i] = "{" + tail + "," + head + "}"
        records[i] += "\n"
    jsonl.write_bytes(b"\xef\xbb\xbf" + "\n".join(records).encode())
    return tsv, jsonl


@pytest.mark.parametrize("kind", ["tsv", "jsonl"])
def test_line_parts_joined_are_the_whole_read(tmp_path, monkeypatch, kind):
    """A TSV or JSON Lines file cut at line ends and parsed part by part is the whole read:
    rows, the file's line numbers, warnings (BOM, blank lines), hash."""
    import aflite_core.io._line_parts as line_parts

    monkeypatch.setattr(line_parts, "PART_BYTES", 64 << 10)
    path = dict(zip(("tsv", "jsonl"), _tsv_and_jsonl(tmp_path), strict=True))[kind]
    pieces, got, joined = _parts_of(path)
    assert len(pieces.items) > 5 and len(got) == len(pieces.items)
    whole = read_table(path)
    _assert_same_raw(joined, whole)
    assert any("blank line" in w for w in whole.warnings) or kind == "jsonl"
    # the parts' bytes are the file's, each cut after a line end
    data = path.read_bytes()
    assert pieces.items[-1][1] == len(data)
    assert all(data[start - 1:start] == b"\n" for start, *_ in pieces.items[1:])


def test_line_parts_refuse_what_the_whole_read_refuses_naming_the_files_line(tmp_path,
                                                                          monkeypatch):
    """An error in a later part is the whole read's, with the file's line and byte offset."""
    import aflite_core.io._line_parts as line_parts

    monkeypatch.setattr(line_parts, "PART_BYTES", 64 << 10)
    tsv, jsonl = _tsv_and_jsonl(tmp_path)
    cases = []
    for path, bad in ((tsv, b"\tone more field"), (jsonl, b"{not json"),
                      (tsv, b"\xff\xfe"), (jsonl, b"\x00"), (tsv, b"x" * 5_000)):
        data = bytearray(path.read_bytes())
        at = data.index(b"\n", len(data) * 3 // 4)  # the end of a line in a later part
        at -= data[at - 1:at] == b"\r"
        data[at:at] = bad
        broken = tmp_path / f"broken-{len(cases)}{path.suffix}"
        broken.write_bytes(bytes(data))
        cases.append(broken)
    said = []
    for path in cases:
        options = {"max_line_bytes": 4_000}
        with pytest.raises(DatasetError) as whole:
            read_table(path, **options)
        with pytest.raises(DatasetError) as parts:
            _parts_of(path, **options)
        assert type(parts.value) is type(whole.value)
        assert str(parts.value) == str(whole.value)
        said.append(str(whole.value))
    assert "expected 6 fields" in said[0] and "invalid JSON" in said[1]
    assert "cannot decode" in said[2] and "NUL" in said[3] and "longer than" in said[4]


def test_files_the_parts_cannot_reproduce_are_parsed_in_order(tmp_path):
    """A lone carriage return (the csv module ends a TSV line there), gzip, a header past
    the first chunk: not cut (read in order, the same table); a CSV is never cut."""
    frame = planted_snli_frame(3_000, seed=12, premises=300)
    lone = tmp_path / "lone.tsv"
    text = frame.to_csv(sep="\t", index=False)
    lines = text.split("\n")
    lines[5] += "\r\r"  # the csv module: a line end, then a blank line; one "\n" here
    lone.write_text("\n".join(lines))
    packed = tmp_path / "packed.jsonl.gz"
    packed.write_bytes(gzip.compress(frame.to_json(orient="records", lines=True).encode()))
    wide = tmp_path / "wide.tsv"
    wide.write_text("h" * 1_100_000 + "\tlabel\n" + "x\ty\n" * 10)  # a header of 1.1 MB
    plain = tmp_path / "plain.csv"
    frame.to_csv(plain, index=False)
    for path in (lone, packed, wide, plain):
        pieces = file_pieces(path, split=True)
        assert pieces.read is None, path.name
        got = [pieces.take(p) for p in pieces.local()]
        pieces.close()
        _assert_same_raw(pieces.join([p.frame for p in got], [p.lines for p in got]),
                         read_table(path))


def test_one_tsv_file_is_parsed_by_the_mapper_part_by_part(tmp_path, monkeypatch):
    """The streamed load sends a TSV file's parts through ``map_shards.stream`` (the
    workers): the dataset and texts file are the whole load's."""
    import aflite_core.io._line_parts as line_parts

    monkeypatch.setattr(line_parts, "PART_BYTES", 32 << 10)
    tsv, _ = _tsv_and_jsonl(tmp_path, rows=8_000)
    taken = []

    class Reader:
        engine = "test"

        def stream(self, read, items):
            for item in items:
                taken.append(item)
                yield read(item)

    streamed = load_to_disk(tsv, tmp_path / "a.parquet", map_shards=Reader())
    assert streamed.loaded_by == "streamed" and streamed.read_by == "test"
    assert len(taken) > 10
    assert_same_dataset(streamed, load_dataset(tsv).with_texts_on_disk(tmp_path / "b.parquet"))
