"""A TSV or JSON Lines file cut into parts at line ends, each part parsed by a task.

In these two formats a line end is always a record's end (TSV fields cannot hold newlines,
JSON Lines holds one object per line), so a file can be cut at byte offsets and its parts
parsed apart -- on a cluster's workers, reading the file from storage they share
(:func:`read_line_part`). A CSV field may hold newlines inside quotes: a CSV file is parsed
in order by one process (:mod:`aflite_core.io._file_pieces`).

:func:`plan_line_parts` reads the file once here, as the whole read does (the same
:class:`~aflite_core.io._inflow.Inflow`: ``max_bytes``, the SHA-256), and notes where the
parts start and how many newlines lie before each, so that each part's messages name the
file's lines and byte offsets (an undecodable byte, a NUL, a line past ``max_line_bytes``,
a row with other fields, invalid JSON). A TSV file's header is read here from the first
chunk; every part then parses data rows with it. What only the whole file can tell is said
here once the parts are in: no data rows, the blank lines skipped, the warnings.

The parts are cut only where this reproduces the whole read: plain (not gzipped) UTF-8 text,
a TSV header within the first chunk that is not blank, and no carriage return standing alone
(Python's csv module ends a TSV line there too, so line numbers would drift). Otherwise
:func:`plan_line_parts` returns None and the file is parsed in order.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aflite_core.io._delimited import (
    DelimitedBatches,
    decoded_lines,
    is_utf8,
    space_row,
    table_warnings,
    text_frame,
)
from aflite_core.io._inflow import Inflow, open_range
from aflite_core.io._json_tables import jsonl_part
from aflite_core.io._line_limit import LineGuard
from aflite_core.io._readers import RawTable
from aflite_core.io._table_checks import check_column_count

__all__ = ["PART_BYTES", "LineParts", "plan_line_parts", "read_line_part"]

#: Bytes of a part (cut at the next line end): about 60,000 SNLI-like rows.
PART_BYTES = 8 << 20


@dataclass
class LineParts:
    """Where a file's parts start: ``items`` are ``(start, end, newlines before, at the
    file's start)`` byte ranges; for TSV the header, its line, the blank lines before it and
    the decoder's warnings (extra byte-order marks); the file's ``content_hash``."""

    format: str
    codec: str
    items: list[tuple[int, int, int, bool]]
    content_hash: str
    header: list[str] | None = None
    header_line: int = 0
    blank_before: int = 0
    decoding: list[str] = field(default_factory=list)


def plan_line_parts(inflow: Inflow, fmt: str, codec: str, *, max_line_bytes: int | None,
                    part_bytes: int | None = None) -> LineParts | None:
    """The parts of the TSV or JSON Lines file ``inflow`` reads (from its start; read to its
    end here), or None when they cannot give the whole read's table (see the module
    docstring; ``inflow`` is then used up: open the file again)."""
    if inflow.gzip or not is_utf8(codec) or fmt not in ("tsv", "jsonl"):
        return None
    part_bytes = part_bytes or PART_BYTES
    parts = LineParts(fmt, codec, [], "")
    start = 0
    if fmt == "tsv":
        header = _tsv_header(inflow.head, inflow.name, codec, max_line_bytes)
        if header is None:
            return None
        parts.header, parts.header_line, parts.blank_before, start, parts.decoding = header
    starts, before = [start], [parts.header_line]
    position = newlines = 0
    target = start + part_bytes
    lone_cr = False
    last = b""
    while chunk := inflow.read1(-1):
        if fmt == "tsv" and not lone_cr and (last == b"\r" or b"\r" in chunk):
            # every CR followed by a LF (a CR ending a chunk may meet the next one's LF)
            joined = last + chunk
            lone_cr = joined[:-1].count(b"\r") != joined.count(b"\r\n")
        last = chunk[-1:]
        while target < position + len(chunk):
            at = chunk.find(b"\n", max(target - position, 0))
            if at < 0:
                break
            starts.append(position + at + 1)
            before.append(newlines + chunk.count(b"\n", 0, at + 1))
            target = starts[-1] + part_bytes
        newlines += chunk.count(b"\n")
        position += len(chunk)
    if lone_cr or (fmt == "tsv" and last == b"\r"):
        return None
    if len(starts) > 1 and starts[-1] >= position:  # the file ends at a cut: no last part
        starts.pop()
        before.pop()
    ends = [*starts[1:], position]
    parts.items = [(s, e, b, s == 0) for s, e, b in zip(starts, ends, before, strict=True)]
    parts.content_hash = inflow.hexdigest()
    return parts


def _tsv_header(head: bytes, name: str, codec: str, max_line_bytes: int | None,
                ) -> tuple | None:
    """``(header, its line, blank lines before it, the byte after its line, the decoder's
    warnings)`` from the file's first chunk, read as the whole read reads it; None when the
    chunk does not hold a header line that is not blank, or the header's lines hold what the
    whole read refuses there (a NUL, a line past ``max_line_bytes``: it says so)."""
    end = head.rfind(b"\n")
    if end < 0:
        return None
    with Inflow(io.BytesIO(head[:end + 1]), name, None) as inflow, \
            decoded_lines(inflow, codec, newline="") as lines:
        reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
        blank = 0
        for row in reader:
            if not row:
                blank += 1
                continue
            if space_row(row, "\t"):
                return None  # maybe an all-blank file: "empty", said by the whole read
            check_column_count(len(row), name)
            line = reader.line_num
            after = _nth_newline(head, line) + 1
            longest = max(len(x) for x in head[:after].split(b"\n"))
            if b"\x00" in head[:after] or (max_line_bytes is not None
                                           and longest > max_line_bytes):
                return None
            return row, line, blank, after, list(lines.warnings)
    return None


def _nth_newline(data: bytes, n: int) -> int:
    at = -1
    for _ in range(n):
        at = data.find(b"\n", at + 1)
    return at


def read_line_part(path: str, name: str, fmt: str, codec: str, max_line_bytes: int | None,
                   header: list[str] | None, header_line: int,
                   item: tuple[int, int, int, bool]) -> tuple[RawTable | None, dict]:
    """One part of a TSV or JSON Lines file parsed as the whole read parses it (a task a
    cluster's worker may run). Returns the part's table (None without a row) and what the
    whole file's table takes from it: ``blank`` lines, the decoder's ``decoding``
    warnings (the first part), the records' typing ``warnings`` (JSON Lines).

    Raises
    ------
    FileNotFoundError
        The file is not on this process's storage (the caller then reads it itself).
    DatasetError
        The whole read's refusal of a line in the part, naming the file's line.
    """
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path!r} is not on the storage of the process reading it")
    start, end, newlines_before, at_start = item
    first_line = newlines_before + 1
    guard = LineGuard(name, max_line_bytes) if max_line_bytes is not None else None
    if guard is not None:
        guard.line = first_line
    with open_range(path, name, start, end, newlines_before) as inflow:
        inflow.watch(guard, nul=True)
        if fmt == "tsv":
            with decoded_lines(inflow, codec, newline="", at_start=False) as lines:
                batches = DelimitedBatches(
                    lines, name, "\t", max_cell=max_line_bytes, check_nul=False,
                    part=(header, header_line, first_line))
                chunks: list[list[Any]] = [[] for _ in header]
                starts = []
                for arrays, batch_starts in batches:
                    for parts, array in zip(chunks, arrays, strict=True):
                        parts.append(array)
                    starts.append(batch_starts)
            info = {"blank": batches.blank, "decoding": [], "warnings": []}
            if not starts:
                return None, info
            return RawTable(text_frame(header, chunks), name, fmt, "",
                            np.concatenate(starts), codec), info
        with decoded_lines(inflow, codec, newline="\n", at_start=at_start) as lines:
            got = jsonl_part(lines, name, check_nul=False, first_line=first_line)
            decoding = list(lines.warnings)
    info = {"blank": 0, "decoding": decoding, "warnings": [] if got is None else got[2]}
    if got is None:
        return None, info
    return RawTable(got[0], name, fmt, "", got[1], codec, got[2]), info


def whole_warnings(parts: LineParts, blank: int, decoding: list[str]) -> list[str]:
    """The whole read's warnings from the parts' (``blank`` lines, the first part's
    ``decoding`` warnings for JSON Lines)."""
    if parts.format == "tsv":
        return table_warnings(parts.decoding, parts.blank_before + blank, parts.header, "\t")
    return list(decoding)
