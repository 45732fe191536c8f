"""Arrow's CSV/TSV reading stands for the csv module's: the same table, line numbers,
warnings and SHA-256, or the csv module reads the file (and says what is wrong).

Every file is read both ways: with Arrow's path forced on (``FAST_MIN_BYTES`` 0) and with it
off. Where the csv path accepts a file the two results must be equal; where it refuses one,
the forced run must refuse it with the same message. The files: every CSV/TSV case of
``hostile_cases.py``, planted edge cases (quotes, line ends, blank lines, BOMs, block
boundaries), and a few thousand random files over the characters that matter to a parser.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fast_read_support import assert_same, read, same_both_ways, single_file_cases, spy_on
from hostile_cases import base_frame, csv_text

import aflite_core.io._arrow_delimited as arrow_delimited
import aflite_core.io._byte_scan as byte_scan
import aflite_core.io._readers as readers
from aflite_core.io import read_table


def _same(path, monkeypatch, **options) -> None:
    same_both_ways(path, monkeypatch, **options)


DELIMITED = single_file_cases((".csv", ".tsv", ".txt", ".tab"))


@pytest.mark.parametrize("case", DELIMITED, ids=[c.id for c in DELIMITED])
def test_hostile_cases_read_the_same(case, tmp_path, monkeypatch):
    path = case.write(tmp_path)
    _same(path, monkeypatch, **{k: v for k, v in case.options.items()
                                if k in ("encoding", "format", "max_line_bytes")})


def test_hostile_cases_are_found():
    """The selection above found the CSV cases (TSV: the planted and random files below)."""
    assert len(DELIMITED) >= 40


EDGES = {
    "plain": b"a,b\n1,2\n3,4\n",
    "crlf": b"a,b\r\n1,2\r\n3,4\r\n",
    "lone-cr": b"a,b\r1,2\r3,4\r",
    "no-final-break": b"a,b\n1,2\n3,4",
    "blank-lines": b"\n\na,b\n\n1,2\r\n\r\n3,4\n\n",
    "quoted-newlines": b'a,b\n1,"x\ny"\n2,"p\r\nq"\n3,"r\rs"\n4,5\n',
    "quoted-blank-line": b'a,b\n1,"x\n\ny"\n2,3\n',
    "doubled-quotes": b'a,b\n1,"say ""hi"""\n2,""""\n3,""\n',
    "text-after-quote": b'a,b\n1,"x"y\n',
    "space-after-quote": b'a,b\n1,"x" \n',
    "unclosed-quote": b'a,b\n1,"x\n2,3\n',
    "quote-mid-field": b'a,b\n1,ab"c\n2,d"e"f\n',
    "ragged-long": b"a,b\n1,2,3\n",
    "ragged-short": b"a,b\n1\n",
    "space-row": b"a,b\n1,2\n  \n",
    "bom": b"\xef\xbb\xbfa,b\n1,2\n",
    "two-boms": b"\xef\xbb\xbf\xef\xbb\xbfa,b\n1,2\n",
    "nul": b"a,b\n1,2\x00\n",
    "latin1": b"a,b\n1,caf\xe9\n",
    "duplicate-names": b"a,a\n1,2\n",
    "header-only": b"a,b\n",
    "empty-cells": b"a,b,c\n,,\n1,,\n",
    "na-words": b"a,b\nNA,null\nNaN,None\n",
    "one-column": b"text\nhello\n\nworld\n",
    "one-column-quoted-empty": b'text\n""\nx\n',
    "spaces-kept": b"a,b\n 1 , 2 \n",
    "unicode": "a,b\n1,caf\u00e9 \u2014 na\u00efve \U0001f600\n".encode(),
    "cr-before-eof-quote": b'a,b\n1,"x\r',
    "trailing-delimiter": b"a,b,\n1,2,\n",
    "header-trailing-blank": b"a,b\n1,2\n\n\n",
}


@pytest.mark.parametrize("name", sorted(EDGES))
@pytest.mark.parametrize("kind", ["csv", "tsv"])
def test_planted_edges_read_the_same(name, kind, tmp_path, monkeypatch):
    data = EDGES[name]
    if kind == "tsv":
        data = data.replace(b",", b"\t")
    path = tmp_path / f"edge.{kind}"
    path.write_bytes(data)
    _same(path, monkeypatch)


@pytest.mark.parametrize("block", [1, 2, 3, 7])
def test_block_boundaries_anywhere(block, tmp_path, monkeypatch):
    """The scan carries its state over blocks of any size (a '\\r\\n' or a quote cut in
    two): forced tiny blocks give the whole-file result."""
    monkeypatch.setattr(byte_scan, "SCAN_BLOCK", block)
    for name in ("crlf", "lone-cr", "quoted-newlines", "doubled-quotes", "blank-lines",
                 "no-final-break", "cr-before-eof-quote", "bom"):
        path = tmp_path / f"{name}.csv"
        path.write_bytes(EDGES[name])
        _same(path, monkeypatch)


def _random_file(rng: np.random.Generator, kind: str) -> bytes:
    """A header and rows of two fields, mostly well formed (quoted fields holding
    separators, quotes and line ends, blank lines, every line end), some of it noise."""
    sep = b"," if kind == "csv" else b"\t"
    specials = [b"a", b"b", b" ", b",", b"\t", b'"', b"\n", b"\r\n", b"\r", b"\xc3\xa9",
                b"lorem ipsum dolor sit amet"]  # long runs: the scan's 8-byte steps
    ends = [b"\n", b"\r\n", b"\r"]
    out = [b"x" + sep + b"y" + ends[rng.integers(3)]]
    for _ in range(rng.integers(1, 8)):
        if rng.random() < 0.1:
            out.append(ends[rng.integers(3)])  # a blank line
            continue
        fields = []
        for _ in range(2 if rng.random() > 0.05 else rng.integers(1, 4)):
            text = b"".join(rng.choice(specials, size=rng.integers(0, 6)))
            if kind == "csv" and (rng.random() < 0.5 or any(ch in text for ch in b',"\r\n')):
                text = b'"' + text.replace(b'"', b'""') + b'"'  # RFC 4180 quoting
                if rng.random() < 0.03:
                    text += b"z"  # text after the closing quote
            elif kind == "tsv":
                text = text.replace(b"\t", b"").replace(b"\r", b"").replace(b"\n", b"")
            else:
                text = b"plain"
            fields.append(text)
        out.append(sep.join(fields) + (ends[rng.integers(3)] if rng.random() > 0.05 else b""))
    data = b"".join(out)
    if rng.random() < 0.15:  # noise anywhere
        at = rng.integers(len(data) + 1)
        data = data[:at] + b"".join(rng.choice(specials, size=3)) + data[at:]
    return data


def test_random_files_read_the_same(tmp_path, monkeypatch):
    """2,000 random files: each reads the same both ways (a table or the same message), and
    most of them are read by Arrow (not handed back to the csv module)."""
    rng = np.random.default_rng(0)
    taken = spy_on(monkeypatch, readers, "read_delimited_fast")
    accepted = {"csv": 0, "tsv": 0}
    for i in range(2000):
        kind = "csv" if i % 2 else "tsv"
        data = _random_file(rng, kind)
        path = tmp_path / f"r{i}.{kind}"
        path.write_bytes(data)
        taken.clear()
        if assert_same(read(path, True, monkeypatch), read(path, False, monkeypatch), data):
            accepted[kind] += taken[0]
    assert min(accepted.values()) >= 300, accepted  # both kinds read by Arrow, often


def test_arrow_reads_a_clean_file(tmp_path):
    """On an ordinary file the Arrow path is taken (not a silent fall-back to the csv
    module), and gives what the csv module gives."""
    frame = pd.concat([base_frame()] * 50, ignore_index=True)
    frame.loc[3, "premise"] = 'A "quoted" word,\nand a second line'
    path = tmp_path / "clean.csv"
    path.write_text(csv_text(frame), encoding="utf-8")
    head = path.read_bytes()[:1 << 20]
    fast = arrow_delimited.read_delimited_fast(path, "clean.csv", ",", "utf-8", head,
                                               min_bytes=0)
    assert fast is not None
    table, lines, warnings, digest = fast
    slow = read_table(path)
    pd.testing.assert_frame_equal(table, slow.frame)
    pd.testing.assert_frame_equal(table, frame.astype(table.dtypes.to_dict()))
    np.testing.assert_array_equal(lines, slow.lines)
    assert lines[4] == lines[3] + 2  # the row with a newline inside quotes took two lines
    assert warnings == [] and digest == slow.content_hash
    from_bytes = arrow_delimited.read_delimited_fast(path.read_bytes(), "clean.csv", ",",
                                                     "utf-8", head, min_bytes=0)
    assert from_bytes is not None  # an upload: its bytes read by Arrow without a file
    pd.testing.assert_frame_equal(from_bytes[0], table)
    assert from_bytes[3] == digest


def test_arrow_path_refuses_what_it_cannot_promise(tmp_path):
    """Not UTF-8, a line past the limit, a small file: None, so the csv module reads it."""
    path = tmp_path / "t.csv"
    path.write_bytes(b"a,b\n" + b"1,2\n" * 100)
    head = path.read_bytes()
    assert arrow_delimited.read_delimited_fast(path, "t", ",", "latin-1", head,
                                               min_bytes=0) is None
    assert arrow_delimited.read_delimited_fast(path, "t", ",", "utf-8", head,
                                               max_line_bytes=2, min_bytes=0) is None
    assert arrow_delimited.read_delimited_fast(path, "t", ",", "utf-8", head) is None
    assert arrow_delimited.read_delimited_fast(path, "t", ",", "utf-8", head,
                                               min_bytes=0) is not None


@pytest.mark.parametrize("kind", ["csv", "tsv"])
def test_a_row_longer_than_arrows_block_is_still_read_by_arrow(kind, tmp_path, monkeypatch):
    """Arrow refuses a row longer than its block; the scan knows the longest line, so Arrow
    reads the file once more with blocks that hold it (not the csv module's 10x slower path),
    and the table is the csv module's."""
    monkeypatch.setattr(arrow_delimited, "ARROW_BLOCK", 1 << 12)  # 4 KiB blocks
    sep = "," if kind == "csv" else "\t"
    long = "word " * 5_000  # 25 KB in one cell
    text = f"premise{sep}label\n" + "".join(
        f"{long if i == 7 else f'row {i}'}{sep}{i % 3}\n" for i in range(200))
    path = tmp_path / f"long.{kind}"
    path.write_text(text, encoding="utf-8")
    taken = spy_on(monkeypatch, readers, "read_delimited_fast")
    assert same_both_ways(path, monkeypatch)
    assert taken[0]  # read by Arrow
    assert read(path, True, monkeypatch).frame["premise"][7] == long


def test_a_small_file_is_scanned_without_threads_of_its_own(tmp_path, monkeypatch):
    """A file of at most ``INLINE_BYTES`` is scanned and hashed on the caller's thread
    (threads cost more than the work there, much more on a busy machine); above it the scan
    and the hash run on threads of their own beside Arrow's reader. The table is the same."""
    import threading

    started: list[str] = []
    real_start = threading.Thread.start

    def start(thread):
        started.append(thread.name)
        return real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    taken = spy_on(monkeypatch, readers, "read_delimited_fast")
    path = tmp_path / "small.csv"
    path.write_text(csv_text(pd.concat([base_frame()] * 50, ignore_index=True)),
                    encoding="utf-8")
    assert path.stat().st_size <= byte_scan.INLINE_BYTES
    small = read(path, True, monkeypatch)
    assert taken == [True] and "byte-scan" not in started and "byte-hash" not in started
    monkeypatch.setattr(byte_scan, "INLINE_BYTES", 1_000)  # the same file is now "large"
    large = read(path, True, monkeypatch)
    assert taken == [True, True] and {"byte-scan", "byte-hash"} <= set(started)
    assert_same(small, large)
    assert assert_same(small, read(path, False, monkeypatch))
