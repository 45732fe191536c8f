"""Arrow's JSON Lines reading stands for the json module's: the same table, line numbers and
SHA-256, or the json module reads the file (typing what is not text, saying what is wrong).

As for CSV (``test_arrow_delimited.py``): every file read both ways, Arrow's path forced on
and off, must give the same table or the same message -- every JSON Lines case of
``hostile_cases.py``, planted edge cases, and random files.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from fast_read_support import assert_same, read, same_both_ways, single_file_cases, spy_on
from hostile_cases import base_frame

import aflite_core.io._arrow_jsonl as arrow_jsonl
import aflite_core.io._byte_scan as byte_scan
import aflite_core.io._readers as readers
from aflite_core.io import read_table

JSONL = single_file_cases((".jsonl", ".ndjson"))


@pytest.mark.parametrize("case", JSONL, ids=[c.id for c in JSONL])
def test_hostile_cases_read_the_same(case, tmp_path, monkeypatch):
    same_both_ways(case.write(tmp_path), monkeypatch,
                   **{k: v for k, v in case.options.items()
                      if k in ("encoding", "format", "max_line_bytes")})


def test_hostile_cases_are_found():
    assert len(JSONL) >= 5


EDGES = {
    "plain": b'{"a": "1", "b": "x"}\n{"a": "2", "b": "y"}\n',
    "crlf": b'{"a": "1"}\r\n{"a": "2"}\r\n',
    "no-final-break": b'{"a": "1"}\n{"a": "2"}',
    "blank-lines": b'\n{"a": "1"}\n  \n\t\r\n{"a": "2"}\n\n',
    "two-objects-one-line": b'{"a": "1"}{"a": "2"}\n',
    "duplicate-key": b'{"a": "1", "a": "2"}\n',
    "missing-key": b'{"a": "1", "b": "x"}\n{"a": "2"}\n',
    "extra-key-later": b'{"a": "1"}\n{"a": "2", "b": "x"}\n',
    "key-order-differs": b'{"b": "1", "a": "x"}\n{"a": "2", "b": "y"}\n',
    "null": b'{"a": null}\n{"a": "2"}\n',
    "numbers": b'{"a": 1, "b": 2.5}\n{"a": 3, "b": 4}\n',
    "bool": b'{"a": true}\n',
    "nested": b'{"a": {"b": "c"}}\n',
    "list": b'{"a": ["b"]}\n',
    "not-object": b'["a", "b"]\n',
    "escapes": b'{"a": "tab\\there \\"quoted\\" \\\\ back \\u00e9 \\/"}\n',
    "surrogate-pair": b'{"a": "smile \\ud83d\\ude00"}\n',
    "lone-surrogate": b'{"a": "bad \\ud800 x"}\n',
    "escaped-backslash-u": b'{"a": "path \\\\ud800"}\n',
    "nul-byte": b'{"a": "x\x00y"}\n',
    "nul-escape": b'{"a": "x\\u0000y"}\n',
    "latin1": b'{"a": "caf\xe9"}\n',
    "bom": b'\xef\xbb\xbf{"a": "1"}\n',
    "unicode-key": '{"caf\u00e9": "1"}\n'.encode(),
    "invalid": b'{"a": "1",}\n',
    "nan": b'{"a": NaN}\n',
    "empty-object": b'{}\n{"a": "1"}\n',
    "vertical-tab-line": b'{"a": "1"}\n\x0b\n{"a": "2"}\n',
    "nbsp-line": b'{"a": "1"}\n\xc2\xa0\n{"a": "2"}\n',
    "split-object": b'{"a":\n"1"}\n',
    "empty-string": b'{"a": ""}\n',
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_planted_edges_read_the_same(name, tmp_path, monkeypatch):
    path = tmp_path / "edge.jsonl"
    path.write_bytes(EDGES[name])
    same_both_ways(path, monkeypatch)


@pytest.mark.parametrize("block", [1, 3, 8, 13])
def test_block_boundaries_anywhere(block, tmp_path, monkeypatch):
    monkeypatch.setattr(byte_scan, "SCAN_BLOCK", block)
    for name in ("plain", "crlf", "no-final-break", "blank-lines", "escapes",
                 "lone-surrogate", "escaped-backslash-u"):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(EDGES[name])
        same_both_ways(path, monkeypatch)


def _random_file(rng: np.random.Generator) -> bytes:
    """Records of text fields (escapes, unicode, long runs), now and then a number, a null,
    a missing key, a blank line, two objects on a line, or noise."""
    pieces = ["a", " ", "\\\\", '\\"', "\\n", "\\u00e9", "\\ud800", "\u00e9", "\u4e2d",
              "lorem ipsum dolor sit amet", "\\t", "/"]
    out = []
    for _ in range(rng.integers(1, 8)):
        roll = rng.random()
        if roll < 0.08:
            out.append(rng.choice([b"\n", b"  \n", b"\r\n"]))
            continue
        record = {}
        for key in ("premise", "hypothesis", "label"):
            if rng.random() < 0.03:
                continue  # a missing key
            text = "".join(rng.choice(pieces, size=rng.integers(0, 6)))
            record[key] = text
        line = json.dumps(record, ensure_ascii=False)
        for key in list(record):  # the escapes as written, not json.dumps' doubling
            line = line.replace(json.dumps(record[key], ensure_ascii=False)[1:-1],
                                record[key], 1)
        if rng.random() < 0.03:
            line = line.replace('"label": "', '"label": 1, "x": "', 1)
        if rng.random() < 0.03:
            line += line
        out.append(line.encode() + (b"\n" if rng.random() > 0.05 else b"\r\n"))
    data = b"".join(out)
    if rng.random() < 0.1:
        at = rng.integers(len(data) + 1)
        data = data[:at] + rng.choice([b"\x00", b"\xe9", b",", b"}", b"\n"]) + data[at:]
    return data


def test_random_files_read_the_same(tmp_path, monkeypatch):
    """2,000 random files read the same both ways, and many are read by Arrow."""
    rng = np.random.default_rng(0)
    taken = spy_on(monkeypatch, readers, "read_jsonl_fast")
    by_arrow = accepted = 0
    for i in range(2000):
        data = _random_file(rng)
        path = tmp_path / f"r{i}.jsonl"
        path.write_bytes(data)
        taken.clear()
        if assert_same(read(path, True, monkeypatch), read(path, False, monkeypatch), data):
            accepted += 1
            by_arrow += taken[0]
    assert accepted >= 250 and by_arrow >= 200, (accepted, by_arrow)


def test_arrow_reads_a_clean_file(tmp_path):
    """On an ordinary file of text fields the Arrow path is taken and gives the json
    module's table."""
    frame = pd.concat([base_frame()] * 50, ignore_index=True)
    frame.loc[3, "premise"] = 'A "quoted" word,\nand a second line \u00e9'
    path = tmp_path / "clean.jsonl"
    frame.to_json(path, orient="records", lines=True, force_ascii=False)
    head = path.read_bytes()[:1 << 20]
    fast = arrow_jsonl.read_jsonl_fast(path, "clean.jsonl", "utf-8", head, min_bytes=0)
    assert fast is not None
    table, lines, digest = fast
    slow = read_table(path)
    pd.testing.assert_frame_equal(table, slow.frame)
    pd.testing.assert_frame_equal(table, frame.astype(table.dtypes.to_dict()))
    np.testing.assert_array_equal(lines, np.arange(1, len(frame) + 1))
    assert digest == slow.content_hash
    from_bytes = arrow_jsonl.read_jsonl_fast(path.read_bytes(), "clean.jsonl", "utf-8", head,
                                             min_bytes=0)
    assert from_bytes is not None  # an upload: its bytes read by Arrow without a file
    pd.testing.assert_frame_equal(from_bytes[0], table)


def test_a_line_longer_than_arrows_block_is_still_read_by_arrow(tmp_path, monkeypatch):
    """Arrow refuses a line longer than its block; the scan knows the longest line, so Arrow
    reads the file again with blocks that hold it, and the table is the json module's."""
    import aflite_core.io._arrow_delimited as arrow_delimited

    monkeypatch.setattr(arrow_delimited, "ARROW_BLOCK", 1 << 12)  # 4 KiB blocks
    long = "word " * 5_000
    records = [{"premise": long if i == 7 else f"row {i}", "label": str(i % 3)}
               for i in range(200)]
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    taken = spy_on(monkeypatch, readers, "read_jsonl_fast")
    assert same_both_ways(path, monkeypatch)
    assert taken[0]
    assert read(path, True, monkeypatch).frame["premise"][7] == long
