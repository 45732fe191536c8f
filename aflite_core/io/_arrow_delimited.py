"""Large CSV and TSV files parsed by Arrow's multi-threaded reader, the same table as the
csv module's.

:func:`read_delimited_fast` reads a plain UTF-8 file on a path in two passes that run side
by side, both in bounded blocks: Arrow's CSV reader (:func:`pyarrow.csv.read_csv`, C++ on
the process's cores, :data:`ARROW_BLOCK` bytes a block) parses the values, and a compiled
scan of the bytes (:class:`~aflite_core.io._byte_scan.ByteScan`, with the file's SHA-256)
runs the csv module's own
state machine to find what Arrow does not say: the line each row starts on, the blank lines
skipped, the longest line and cell, and anything the csv module would refuse (text after a
closing quote, a quote never closed, a row with other fields than the header, a NUL byte).

The result is used only when it is what :class:`~aflite_core.io._delimited.DelimitedBatches`
gives: the same header, every row, values as written, the same line numbers and warnings.
Whenever that cannot be promised -- a file the csv module refuses, not UTF-8, a header
with duplicate names, an extra byte-order mark, a line or cell past the limits, Arrow
reading another number of rows -- :func:`read_delimited_fast` returns None and the caller
parses the file with the csv module, whose messages name the line. A file the csv module
accepts is therefore read once by each pass and never a third time; a bad file is read once
more by the csv module, for its message.

Files under :data:`FAST_MIN_BYTES` are left to the csv module (faster to start: no numba).
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from aflite_core.io._byte_scan import (
    READER_POOL,
    ByteScan,
    FileOrBytes,
    arrow_input,
    arrow_setup,
    arrow_threads,
    longer_block,
    readable_source,
)
from aflite_core.io._delimited import BOM, space_row, table_warnings, text_frame
from aflite_core.io._table_checks import MAX_COLUMNS

__all__ = ["ARROW_BLOCK", "FAST_MIN_BYTES", "read_delimited_fast"]

#: Smallest file read by Arrow: below it the csv module is as fast and starts sooner.
FAST_MIN_BYTES = 4 << 20
#: Arrow's block size: what each of its threads holds of the file's text besides the table
#: (1 MiB: a 127 MB CSV peaked 90 MB higher with 4 MiB blocks, no faster). A row longer
#: than a block makes Arrow refuse the file; the csv module then reads it.
ARROW_BLOCK = 1 << 20
_UTF8_BOM = BOM.encode("utf-8")


def _delimited_scan(path: FileOrBytes, delimiter: str, skip: int, limit: int | None) -> ByteScan:
    """The csv module's state machine over the file's bytes (:mod:`aflite_core.io._text_scan`),
    given up at a record the csv module refuses or a line or cell past ``limit``."""
    # lazy: +234 ms to import
    from aflite_core.io._text_scan import finish_scan, new_state, scan_block, state_values

    quoting = delimiter != "\t"

    def give_up(now: dict[str, int]) -> bool:
        return bool(now["bad"]) or limit is not None and max(
            now["line_bytes"], now["max_line"], now["cell"], now["max_cell"]) > limit

    return ByteScan(
        path, lambda: new_state(offset=skip),  # a BOM's bytes belong to the first line
        lambda data, state: scan_block(data, state, delimiter=delimiter, quoting=quoting),
        lambda state: finish_scan(state, delimiter=delimiter, quoting=quoting),
        state_values, give_up, skip=skip)


def _header(head: bytes, skip: int, delimiter: str) -> list[str] | None:
    """The first non-blank record of ``head`` parsed by the csv module, or None when it is
    not whole within ``head`` or not UTF-8."""
    text = head[skip:].decode("utf-8", errors="ignore")
    lines = io.StringIO(text, newline="")
    if delimiter == "\t":
        reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    else:
        reader = csv.reader(lines, delimiter=delimiter, strict=True)
    try:
        for row in reader:
            if row:
                return row if lines.tell() < len(text) else None
    except csv.Error:
        return None
    return None


def read_delimited_fast(
    source: str | os.PathLike | bytes, name: str, delimiter: str, codec: str, head: bytes, *,
    max_cell: int | None = None, max_line_bytes: int | None = None,
    min_bytes: int | None = None,
) -> tuple[pd.DataFrame, np.ndarray, list[str], str] | None:
    """Read a plain CSV (``delimiter=","``) or TSV file with Arrow, or None (see the module
    docstring).

    Parameters
    ----------
    source : str, os.PathLike or bytes
        A regular, uncompressed file, or its bytes (an upload).
    name : str
        The file's name in messages.
    delimiter : str
        ``","`` (RFC 4180 quoting) or ``"\\t"`` (no quoting, as the csv path reads TSV).
    codec : str
        The text codec the caller chose; anything but UTF-8 gives None.
    head : bytes
        The file's first bytes as already read (the header is told from them).
    max_cell, max_line_bytes : int or None
        The csv path's limits; a file past either gives None (the csv path says where).
    min_bytes : int or None
        Smallest file to read here (default :data:`FAST_MIN_BYTES`).

    Returns
    -------
    tuple or None
        ``(frame, starts, warnings, sha256)`` as the csv path gives them, or None: read the
        file with the csv module.
    """
    path = readable_source(source, codec, FAST_MIN_BYTES if min_bytes is None else min_bytes)
    if path is None:
        return None
    skip = len(_UTF8_BOM) if head.startswith(_UTF8_BOM) else 0
    if head[skip:].startswith(_UTF8_BOM):  # a second BOM: the csv path warns about it
        return None
    header = _header(head, skip, delimiter)
    if (header is None or not 1 <= len(header) <= MAX_COLUMNS
            or len(set(header)) != len(header) or space_row(header, delimiter)
            or any("\x00" in h for h in header)):
        return None
    limits = [v for v in (max_cell, max_line_bytes) if v is not None]
    scan = _delimited_scan(path, delimiter, skip, min(limits) if limits else None).start()
    chunks, straddled = None, False
    try:
        chunks, straddled = _arrow_columns(path, header, delimiter, ARROW_BLOCK)
    finally:  # Arrow refused it: the csv module reads it (unless a block was too short)
        scan.join(cancel=chunks is None and not straddled)
    if straddled and scan.ok:  # a row longer than a block: once more with blocks that hold it
        longest = max(scan.state["max_line"], scan.state["max_cell"] * len(header))
        block = longer_block(ARROW_BLOCK, longest, max_line_bytes)
        if block is not None:
            chunks, _ = _arrow_columns(path, header, delimiter, block)
    if chunks is None or not scan.ok:
        return None
    state = scan.state
    starts = scan.all_lines()
    n_rows = sum(len(part) for part in chunks[0])
    header_end = state["header_end"]
    if (state["bad"] or state["ncols"] != len(header) or len(starts) != n_rows
            or not n_rows or not 0 <= header_end <= len(scan.head)
            or (max_line_bytes is not None and state["max_line"] > max_line_bytes)
            or (max_cell is not None and state["max_cell"] > max_cell)):
        return None
    try:  # the header's bytes are UTF-8 (it was parsed from them decoded leniently)
        scan.head[skip:header_end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    warnings = table_warnings([], state["blank"], header, delimiter)
    return text_frame(header, chunks), starts, warnings, scan.digest


def _arrow_columns(path: FileOrBytes, header: list[str], delimiter: str, block: int
                   ) -> tuple[list[list[Any]] | None, bool]:
    """Each column's ``large_string`` chunks as Arrow's reader parses them (None when Arrow
    refuses the file or names other columns), and whether it refused it for a row longer
    than ``block`` bytes."""
    quoting = delimiter != "\t"
    parse = pa_csv.ParseOptions(
        delimiter=delimiter, quote_char='"' if quoting else False, double_quote=True,
        escape_char=False, newlines_in_values=quoting, ignore_empty_lines=True)
    convert = pa_csv.ConvertOptions(
        column_types={h: pa.large_string() for h in header}, strings_can_be_null=False,
        quoted_strings_can_be_null=False, null_values=[], check_utf8=True)
    arrow_setup()
    read = pa_csv.ReadOptions(block_size=block, use_threads=arrow_threads(path))
    try:
        table = pa_csv.read_csv(arrow_input(path), read_options=read, parse_options=parse,
                                convert_options=convert, memory_pool=READER_POOL)
    except (pa.ArrowInvalid, pa.ArrowException, OSError, ValueError) as exc:
        return None, "straddl" in str(exc) or "block size" in str(exc)
    if table.column_names != header:
        return None, False
    chunks: list[list[Any]] = []
    for column in table.columns:
        if column.type != pa.large_string():
            return None, False
        chunks.append(column.chunks)
    return chunks, False
