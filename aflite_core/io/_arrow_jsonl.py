"""Large JSON Lines files of text fields parsed by Arrow's multi-threaded reader, the same
table as the json module's.

:func:`read_jsonl_fast` reads a plain UTF-8 file on a path with
:func:`pyarrow.json.open_json` while a compiled scan of its bytes
(:class:`~aflite_core.io._byte_scan.ByteScan`, :func:`~aflite_core.io._text_scan.
scan_jsonl_block`) notes, as :func:`~aflite_core.io._json_tables.jsonl_records` splits the
file, the line of every non-blank line, the longest line, a NUL byte and any ``\\u`` escape
of a surrogate, and hashes it.

Arrow's table is used only where it is what :func:`~aflite_core.io._json_tables.read_jsonl`
gives: every column text (Arrow's ``string``) with no missing value, so that every record
held every key with a text value and each column is the json module's all-text column; the
columns in the order of the first record's keys; one record per non-blank line (Arrow
reads two objects on one line as two records, the json module refuses the line); valid
UTF-8. A number, a boolean, a null, a nested value, a key missing from a record, a
duplicate key, a byte-order mark, a line past the limit: None, and the json module reads the
file (numbers, missing keys and nesting typed its way; errors named by line).

Files under :data:`~aflite_core.io._arrow_delimited.FAST_MIN_BYTES` are left to the json
module.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.json as pa_json

from aflite_core.io import _arrow_delimited as arrow_delimited
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
from aflite_core.io._delimited import BOM, text_frame
from aflite_core.io._table_checks import MAX_COLUMNS

__all__ = ["read_jsonl_fast"]

_BOM = BOM.encode("utf-8")


def _jsonl_scan(path: FileOrBytes, limit: int | None) -> ByteScan:
    # lazy: +270 ms to import
    from aflite_core.io._text_scan import (
        JSONL_STATE,
        finish_jsonl_scan,
        new_jsonl_state,
        scan_jsonl_block,
        state_values,
    )

    def values(state: np.ndarray) -> dict[str, int]:
        return state_values(state, JSONL_STATE)

    def give_up(now: dict[str, int]) -> bool:
        return bool(now["bad"]) or limit is not None and max(
            now["line_bytes"], now["max_line"]) > limit

    return ByteScan(path, new_jsonl_state, scan_jsonl_block, finish_jsonl_scan, values,
                    give_up)


def _first_keys(head: bytes) -> list[str] | None:
    """The keys of the first non-blank line's object, or None (not whole in ``head``, not
    an object, duplicate keys)."""
    for line in head.split(b"\n")[:-1]:  # the last piece may be cut
        if line.strip(b" \t\r"):
            try:
                pairs = json.loads(line.decode("utf-8"), object_pairs_hook=lambda p: p)
            except (ValueError, RecursionError):
                return None
            if not isinstance(pairs, list) or not all(isinstance(p, tuple) for p in pairs):
                return None
            keys = [k for k, _ in pairs]
            return keys if len(set(keys)) == len(keys) else None
    return None


def read_jsonl_fast(
    source: str | os.PathLike | bytes, name: str, codec: str, head: bytes, *,
    max_line_bytes: int | None = None, min_bytes: int | None = None,
) -> tuple[pd.DataFrame, np.ndarray, str] | None:
    """Read a plain JSON Lines file of text fields with Arrow, or None (see the module
    docstring).

    Parameters
    ----------
    source : str, os.PathLike or bytes
        A regular, uncompressed file, or its bytes (an upload).
    name : str
        The file's name in messages.
    codec : str
        The text codec the caller chose; anything but UTF-8 gives None.
    head : bytes
        The file's first bytes as already read.
    max_line_bytes : int or None
        The json path's line limit; a longer line gives None (the json path says where).
    min_bytes : int or None
        Smallest file to read here (default
        :data:`~aflite_core.io._arrow_delimited.FAST_MIN_BYTES`).

    Returns
    -------
    tuple or None
        ``(frame, lines, sha256)`` as :func:`~aflite_core.io._json_tables.read_jsonl` gives
        the frame and lines (it gives no warning for such a file), or None: read the file
        with the json module.
    """
    floor = arrow_delimited.FAST_MIN_BYTES if min_bytes is None else min_bytes
    path = None if head.startswith(_BOM) else readable_source(source, codec, floor)
    keys = _first_keys(head) if path is not None else None
    if keys is None or not 1 <= len(keys) <= MAX_COLUMNS:
        return None
    scan = _jsonl_scan(path, max_line_bytes).start()
    table, straddled = None, False
    try:
        table, straddled = _arrow_table(path, arrow_delimited.ARROW_BLOCK)
    finally:  # Arrow refused it: the json module reads it (unless a block was too short)
        scan.join(cancel=table is None and not straddled)
    if straddled and scan.ok:  # a line longer than a block: once more with blocks that hold it
        block = longer_block(arrow_delimited.ARROW_BLOCK, scan.state["max_line"],
                             max_line_bytes)
        if block is not None:
            table, _ = _arrow_table(path, block)
    if table is None or not scan.ok:
        return None
    lines = scan.all_lines()
    try:
        names = table.column_names
    except UnicodeDecodeError:  # a key that is not UTF-8: the json module names its line
        return None
    if (table.num_rows != len(lines) or not len(lines) or names != keys
            or (max_line_bytes is not None and scan.state["max_line"] > max_line_bytes)):
        return None
    chunks = []
    for column in table.columns:
        if column.type != pa.string() or column.null_count:
            return None
        try:
            column.validate(full=True)  # UTF-8 (the json module decodes it strictly)
        except pa.ArrowInvalid:
            return None
        chunks.append([part.cast(pa.large_string()) for part in column.chunks])
    return text_frame(keys, chunks), lines, scan.digest


def _arrow_table(path: FileOrBytes, block: int) -> tuple[pa.Table | None, bool]:
    """The file as Arrow's streaming JSON reader reads it in ``block``-byte blocks (None when
    it refuses it, a block whose types differ from the first block's included), and whether
    it refused it for a line longer than a block. Streamed: the whole-file reader peaked
    420 MB over its 132 MB table on a 176 MB file, the streaming one 210 MB."""
    arrow_setup()
    read = pa_json.ReadOptions(use_threads=arrow_threads(path), block_size=block)
    try:
        reader = pa_json.open_json(
            arrow_input(path), read_options=read,
            parse_options=pa_json.ParseOptions(newlines_in_values=False),
            memory_pool=READER_POOL)
        return pa.Table.from_batches(list(reader), schema=reader.schema), False
    except (pa.ArrowException, OSError, ValueError) as exc:
        return None, "straddl" in str(exc) or "block size" in str(exc)
