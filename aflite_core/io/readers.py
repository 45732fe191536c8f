"""Low-level readers behind :func:`aflite_core.io.datasets.load_dataset`.

Turns a path, a file-like object or raw bytes into a :class:`RawTable`: a
:class:`pandas.DataFrame` with every column of the file and its original values,
plus where each row came from (its line in the file), so that later errors can
point at it. Nothing here knows about premises, hypotheses or labels.

Rules (documented in ``load_dataset``):

* The input is read into memory once; ``max_bytes`` bounds the bytes read, the bytes a
  gzip stream expands to (reading stops as soon as the ceiling is passed) and the decoded
  size of a Parquet file (counted batch by batch, see :func:`read_parquet`). FIFOs,
  devices and sockets are refused from ``stat()``, never opened.
* Text is UTF-8 (leading BOMs are dropped, a warning when there is more than one); UTF-16
  and UTF-32 are recognised by their BOM. Anything else must be named with
  ``encoding=``; undecodable bytes are an error naming the line and byte offset -- there
  is no silent Latin-1 fallback.
* CSV follows RFC 4180 (quotes doubled inside quoted fields; fields may hold the
  separator, quotes and newlines). TSV follows the IANA ``text/tab-separated-values``
  convention used by the SNLI/MNLI distributions: no quoting, a ``"`` is an ordinary
  character, and fields cannot contain tabs or newlines.
* CSV/TSV values are kept as strings exactly as written (no ``NA`` detection, no
  number parsing, no stripping); JSON, JSONL and Parquet keep their types, except JSON
  integers beyond 64 bits (kept as their digits) and binary Parquet columns (decoded as
  UTF-8). JSON nested past Python's recursion limit and lone surrogate escapes are
  errors naming the line.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import re
import stat
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aflite_core._validation import check_int
from aflite_core.io.errors import (  # noqa: F401 - re-exported: the readers' errors
    ColumnError,
    DatasetError,
    DatasetFormatError,
    DatasetSizeError,
    DuplicateIdError,
)
from aflite_core.io.errors import fmt_bytes as _fmt_bytes
from aflite_core.io.line_limit import MAX_LINE_BYTES, LineGuard

#: Formats ``load_dataset`` reads (``format=`` accepts these names).
FORMATS = ("csv", "tsv", "jsonl", "json", "parquet")

_SUFFIX_FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_FORMAT_ALIASES = {"ndjson": "jsonl", "jsonlines": "jsonl", "pq": "parquet", "txt": None}

_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"
#: Most columns a dataset may have. Text datasets have tens of columns; a file with tens of
#: thousands is almost always a transposed or broken export, and every step that keeps every
#: original column (run folders, exports) scales with columns x rows (10,000 columns took
#: 85 s to audit, 100,000 ran past 400 s).
MAX_COLUMNS = 2_000


def check_column_count(n_columns: int, name: str) -> None:
    """Refuse a table with more than :data:`MAX_COLUMNS` columns, before it is built."""
    if n_columns > MAX_COLUMNS:
        raise DatasetSizeError(
            f"{name}: {n_columns:,} columns, more than the {MAX_COLUMNS:,} a dataset may have; "
            "is the file transposed, or is a text column split on a separator? Keep the "
            "columns the audit needs (premise, hypothesis, label, split, id) and a few more")
_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
_CHUNK = 1 << 20
_MISSING = object()
def _guards_lines(name: str, fmt: str | None, head: bytes) -> bool:
    """Whether the line guard applies: text tables, not Parquet or a JSON document (one
    JSON array may legitimately sit on one line)."""
    fmt = normalise_format(fmt) or format_from_name(name)
    return fmt not in ("parquet", "json") and not head.startswith(_PARQUET_MAGIC)


# ------------------------------------------------------------------------- errors
# Defined here (and re-exported by aflite_core.io.datasets, their public home) so that the
# readers can raise them without a circular import.


@dataclass
class RawTable:
    """A table as read from a file, before any column is interpreted.

    Attributes
    ----------
    frame : pandas.DataFrame
        Every column of the file, original values, RangeIndex in input order.
    name : str
        File name used in messages.
    format : str
        One of :data:`FORMATS`.
    content_hash : str
        SHA-256 hex digest of the (decompressed) input bytes.
    lines : numpy.ndarray or None
        1-based line of the file where each row starts (CSV, TSV, JSONL), else None.
    encoding : str or None
        Text encoding used (None for Parquet).
    warnings : list of str
        Things the reader noticed but tolerated (blank lines skipped, ...).
    """

    frame: pd.DataFrame
    name: str
    format: str
    content_hash: str
    lines: np.ndarray | None = None
    encoding: str | None = None
    warnings: list[str] = field(default_factory=list)
    column_types: dict[str, str] = field(default_factory=dict)

    def where(self, position: int) -> str:
        """Human-readable location of the row at 0-based ``position``."""
        if self.lines is not None:
            return f"line {int(self.lines[position])}"
        return f"record {position + 1}"


# --------------------------------------------------------------------------- bytes


def source_name(source: Any, name: str | None) -> str:
    """Name used in messages: ``name=``, the path's file name, or the object's ``.name``."""
    if name:
        return str(name)
    if isinstance(source, (str, os.PathLike)):
        return Path(source).name or str(source)
    attr = getattr(source, "name", None)
    if isinstance(attr, (str, os.PathLike)) and str(attr):
        return Path(attr).name or str(attr)
    return "<data>"


def read_source_bytes(source: Any, name: str, max_bytes: int | None,
                      guard: LineGuard | None = None) -> bytes:
    """Read all bytes of a path, a binary/text file-like object or a bytes object.

    ``guard`` (text tables) follows the line lengths as the bytes arrive: a file is
    refused at a line past the limit before the rest is read (a gzip file's lines are
    followed while it is decompressed instead, see :func:`maybe_decompress`)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        _feed(guard, data)
    elif isinstance(source, (str, os.PathLike)):
        data = _read_path(Path(source), name, max_bytes, guard)
    elif hasattr(source, "read"):
        data = _read_file_like(source, name, max_bytes)
        _feed(guard, data)
    else:
        raise TypeError(
            "source: expected a path (str or pathlib.Path), a file-like object or bytes, "
            f"got {type(source).__name__}"
        )
    if max_bytes is not None and len(data) > max_bytes:
        raise DatasetSizeError(
            f"{name}: the input is over the limit of {_fmt_bytes(max_bytes)} "
            f"(max_bytes={max_bytes}); stopped reading"
        )
    return data


def _feed(guard: LineGuard | None, data: bytes | bytearray) -> None:
    """Run ``guard`` over bytes already in memory, chunk by chunk (not gzip or Parquet)."""
    if guard is None or data[:2] == _GZIP_MAGIC or data[:4] == _PARQUET_MAGIC:
        return
    for start in range(0, len(data), _CHUNK):
        guard.feed(data[start:start + _CHUNK])


def _read_path(path: Path, name: str, max_bytes: int | None,
               guard: LineGuard | None = None) -> bytes:
    """A file's bytes; a file over ``max_bytes`` is refused before reading it, a line
    longer than ``guard``'s limit where it is met."""
    try:
        info = path.stat()
        kind = special_file_kind(info.st_mode)
        if kind is not None:
            raise DatasetError(
                f"{name}: {str(path)!r} is {kind}, not a regular file; refused (it could "
                "block or never end): save the data to a file and pass that file"
            )
        size = info.st_size
        if max_bytes is not None and size > max_bytes:
            raise DatasetSizeError(
                f"{name}: the file is {_fmt_bytes(size)}, over the limit of "
                f"{_fmt_bytes(max_bytes)} (max_bytes={max_bytes})"
            )
        if guard is None:
            return path.read_bytes()
        out = bytearray()
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                if not out and (chunk[:2] == _GZIP_MAGIC or chunk[:4] == _PARQUET_MAGIC):
                    guard = None  # compressed or binary: no lines to follow here
                if guard is not None:
                    guard.feed(chunk)
                out += chunk
        return out
    except DatasetError:
        raise
    except FileNotFoundError:
        raise DatasetError(f"{name}: file not found: {str(path)!r}") from None
    except IsADirectoryError:
        raise DatasetError(f"{name}: expected a file, found a directory: {str(path)!r}") from None
    except PermissionError:
        raise DatasetError(f"{name}: permission denied reading {str(path)!r}") from None
    except OSError as exc:
        raise DatasetError(f"{name}: cannot read {str(path)!r}: {exc.strerror or exc}") from exc


def special_file_kind(mode: int) -> str | None:
    """What a non-regular, non-directory file is (``"a FIFO (named pipe)"``), else None."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def _read_file_like(source: Any, name: str, max_bytes: int | None) -> bytes:
    """Bytes of an object with ``read()`` (from its start), at most ``max_bytes + 1``."""
    if getattr(source, "seekable", lambda: False)():
        source.seek(0)  # a Streamlit UploadedFile may have been read on an earlier rerun
    limit = -1 if max_bytes is None else max_bytes + 1
    try:
        data = source.read(limit)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{name}: cannot read the file-like object: {exc}") from exc
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif not isinstance(data, (bytes, bytearray)):
        raise DatasetError(f"{name}: read() returned {type(data).__name__}, expected bytes or str")
    return bytes(data)


def maybe_decompress(data: bytes, name: str, max_bytes: int | None,
                     guard: LineGuard | None = None) -> tuple[bytes, bool]:
    """Gunzip ``data`` when it starts with the gzip magic number, within ``max_bytes``.

    Streams: at most one chunk (1 MiB) past the ceiling is ever decompressed, and the
    output grows in place (no second copy), so a gzip bomb costs about ``max_bytes``;
    ``guard`` follows the decompressed lines, so one line past its limit stops the
    decompression there (a 600 MB single-line bomb costs about the limit, not 600 MB).
    """
    if not data.startswith(_GZIP_MAGIC):
        return data, False
    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            while True:
                want = _CHUNK if max_bytes is None else min(_CHUNK, max_bytes + 1 - len(out))
                chunk = stream.read(max(want, 1))
                if not chunk:
                    break
                if not out and chunk[:4] == _PARQUET_MAGIC:
                    guard = None  # a gzipped Parquet file: no lines
                if guard is not None:
                    guard.feed(chunk)
                out += chunk
                if max_bytes is not None and len(out) > max_bytes:
                    raise DatasetSizeError(
                        f"{name}: the gzip data expands past the limit of "
                        f"{_fmt_bytes(max_bytes)} (max_bytes={max_bytes}); stopped reading "
                        f"after {_fmt_bytes(len(out))} of decompressed data"
                    )
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetFormatError(
            f"{name}: corrupt or truncated gzip data after {_fmt_bytes(len(out))} "
            f"decompressed: {exc}"
        ) from exc
    return out, True  # a bytearray: bytes-like everywhere it is used, without a copy


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to about ``limit`` characters for messages.

    Values quoted in error messages come from the data (column names, ids, labels) and
    may be a megabyte long; the cut keeps every message one readable line.
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, str):
        return f"{value[: max(limit - 20, 8)]!r}... ({len(value):,} characters)"
    return text[:limit] + "..."


# ------------------------------------------------------------------------- formats


def normalise_format(fmt: str | None) -> str | None:
    """Validate ``format=``; returns a name of :data:`FORMATS` or None (sniff)."""
    if fmt is None:
        return None
    if not isinstance(fmt, str):
        raise TypeError(f"format: expected a string such as 'csv', got {type(fmt).__name__}")
    key = fmt.strip().lower().lstrip(".")
    if key.endswith(".gz"):
        key = key[:-3]
    if key in FORMATS:
        return key
    if key in _FORMAT_ALIASES:
        return _FORMAT_ALIASES[key]
    raise ValueError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")


def format_from_name(name: str) -> str | None:
    """Format implied by a file name's suffix (``.csv``, ``.jsonl.gz``, ...), else None."""
    suffixes = [s.lower() for s in Path(name).suffixes]
    if suffixes and suffixes[-1] in (".gz", ".gzip"):
        suffixes = suffixes[:-1]
    return _SUFFIX_FORMATS.get(suffixes[-1]) if suffixes else None


def sniff_format(data: bytes, text: str | None) -> str:
    """Guess the format from the content when neither ``format=`` nor the suffix says."""
    if data.startswith(_PARQUET_MAGIC):
        return "parquet"
    assert text is not None
    stripped = text.lstrip()
    if stripped.startswith("["):
        return "json"
    if stripped.startswith("{"):
        first = stripped.split("\n", 1)[0].strip()
        try:
            return "jsonl" if isinstance(json.loads(first), dict) else "json"
        except (ValueError, RecursionError):
            return "json"
    header = stripped.split("\n", 1)[0]
    return "tsv" if header.count("\t") > header.count(",") else "csv"


# ------------------------------------------------------------------------ decoding


def decode_text(data: bytes, name: str, encoding: str | None) -> tuple[str, str]:
    """Decode bytes to text; returns ``(text, encoding used)``."""
    if encoding is not None:
        try:
            return data.decode(encoding), encoding
        except LookupError:
            raise ValueError(f"encoding: unknown text encoding {encoding!r}") from None
        except UnicodeDecodeError as exc:
            raise _decode_error(data, exc, name, encoding) from None
    used = "utf-8"
    for bom, codec in _BOMS:
        if data.startswith(bom):
            used = codec
            break
    try:
        text = data.decode(used)
    except UnicodeDecodeError as exc:
        raise _decode_error(data, exc, name, used) from None
    if used != "utf-8-sig" and text.startswith("\ufeff"):
        text = text[1:]
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise DatasetFormatError(
            f"{name}: line {line}: the text contains NUL characters, so it is probably UTF-16 "
            "or UTF-32 without a byte-order mark; name its encoding, e.g. encoding='utf-16-le'"
        )
    return text, used


def _decode_error(
    data: bytes, exc: UnicodeDecodeError, name: str, codec: str
) -> DatasetFormatError:
    start = exc.start
    line = data.count(b"\n", 0, start) + 1
    bad = bytes(data[start : min(exc.end, start + 4)])
    hint = (
        " The file is not valid UTF-8 (it may be Latin-1 or Windows-1252): re-save it as UTF-8, "
        "or name its encoding, e.g. encoding='latin-1'."
        if codec.startswith("utf-8")
        else ""
    )
    return DatasetFormatError(
        f"{name}: line {line}, byte offset {start}: cannot decode {bad!r} as {codec} "
        f"({exc.reason}).{hint}"
    )


# ------------------------------------------------------------------ delimited text


def read_delimited(
    text: str, name: str, delimiter: str, *, max_cell: int | None = None
) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """Read CSV (RFC 4180) or TSV (no quoting) text into string columns (object dtype).

    ``max_cell``: most characters a cell may have (a quoted cell may span lines, so the
    line guard alone does not bound it); None: no limit beyond the csv module's 2**31 - 1.
    """
    limit = min(int(max_cell), 2**31 - 1) if max_cell is not None else 2**31 - 1
    if csv.field_size_limit() != limit:
        csv.field_size_limit(limit)  # cells of a million characters are legitimate
    parsed = _parse_fast(text, delimiter)
    if parsed is None:  # multi-line records, or an error to locate precisely
        parsed = _parse_tracked(text, name, delimiter)
    header, rows, starts, blank = parsed
    check_column_count(len(header), name)
    _check_duplicate_names(header, name, "header")
    if not rows:
        raise DatasetFormatError(
            f"{name}: the file has a header ({', '.join(map(short_repr, header[:8]))}) but no data "
            "rows"
        )
    warnings = []
    if blank:
        warnings.append(f"{blank} blank line(s) skipped")
    if len(header) == 1:
        for sep in (";", "|", "\t", ","):
            if sep != delimiter and sep in header[0]:
                warnings.append(
                    f"the header is one column containing {sep!r}: is {sep!r} the separator?"
                )
                break
    data = {}
    for h, col in zip(header, zip(*rows, strict=True), strict=True):
        values = np.empty(len(col), dtype=object)
        values[:] = col
        data[h] = values
    frame = pd.DataFrame(data, copy=False)
    return frame, starts, warnings


def _reader(text: str, delimiter: str) -> Any:
    if delimiter == "\t":
        return csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    return csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)


def _parse_fast(text: str, delimiter: str) -> tuple | None:
    """Parse in one C-level pass when every record is one line and rows are regular."""
    reader = _reader(text, delimiter)
    try:
        rows = list(reader)
    except csv.Error:
        return None
    if reader.line_num != len(rows):
        return None  # some record spans several lines: track lines precisely
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    filled = np.flatnonzero(lengths)
    if not len(filled):
        return None
    ncols = lengths[filled[0]]
    if (lengths[filled] != ncols).any():
        return None
    blank = len(rows) - len(filled)
    if blank:
        rows = [rows[i] for i in filled.tolist()]
    return rows[0], rows[1:], (filled[1:] + 1).astype(np.int64), blank


def _parse_tracked(text: str, name: str, delimiter: str) -> tuple:
    """Parse record by record, keeping each record's first line; precise errors."""
    kind = "TSV" if delimiter == "\t" else "CSV"
    reader = _reader(text, delimiter)
    header: list[str] | None = None
    header_line = 0
    rows: list[list[str]] = []
    starts: list[int] = []
    blank = 0
    start = 1
    try:
        for row in reader:
            if not row:
                blank += 1
                start = reader.line_num + 1
                continue
            if header is None:
                header, header_line = row, start
                ncols = len(row)
            elif len(row) != ncols:
                end = reader.line_num
                span = f"line {start}" if end == start else f"lines {start}-{end}"
                hint = _ragged_hint(kind, row, ncols, start != end)
                raise DatasetFormatError(
                    f"{name}: {span}: expected {ncols} fields (as in the header on line "
                    f"{header_line}), found {len(row)}.{hint}"
                )
            else:
                rows.append(row)
                starts.append(start)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise _csv_error(exc, name, kind, start, reader.line_num) from None
    if header is None:
        raise DatasetFormatError(f"{name}: the file is empty (no header, no rows)")
    return header, rows, np.asarray(starts, dtype=np.int64), blank


def _ragged_hint(kind: str, row: list[str], ncols: int, multiline: bool) -> str:
    if kind == "CSV" and (multiline or any("\n" in f for f in row)):
        return " A quoted field spans several lines here: check for an unbalanced '\"'."
    if kind == "TSV":
        return (
            " TSV is read without quoting (fields cannot contain tabs or newlines); "
            "if the file quotes fields, save it as CSV."
        )
    if len(row) > ncols:
        return " A field may contain an unquoted separator; quote it as in RFC 4180."
    return ""


def _csv_error(exc: csv.Error, name: str, kind: str, start: int, line: int) -> DatasetFormatError:
    msg = str(exc)
    if "unexpected end of data" in msg or "EOF" in msg:
        return DatasetFormatError(
            f"{name}: line {start}: a quoted field starts in this record and is never closed "
            f"(unbalanced '\"'; the file ended at line {line})"
        )
    if "expected after" in msg:
        return DatasetFormatError(
            f"{name}: line {line}: text after a closing quote; expected the separator or the end "
            f'of the line after \'"\' (inside quotes write "" for a quote)'
        )
    if "field larger than field limit" in msg:
        return DatasetSizeError(
            f"{name}: line {start}: a cell is longer than {csv.field_size_limit():,} characters "
            "(max_line_bytes); refused: a table's cell is not that long (a quoted field never "
            "closed, or not a table); if it is real data, raise the limit (--max-line-bytes)")
    if "NUL" in msg:
        return DatasetFormatError(
            f"{name}: line {line}: the text contains NUL characters; is the file UTF-16 without "
            "a byte-order mark? Name its encoding, e.g. encoding='utf-16-le'"
        )
    return DatasetFormatError(f"{name}: line {line}: malformed {kind}: {msg}")


def _check_duplicate_names(names: list[Any], name: str, where: str) -> None:
    seen: dict[Any, list[int]] = {}
    for i, col in enumerate(names):
        seen.setdefault(col, []).append(i + 1)
    dups = {k: v for k, v in seen.items() if len(v) > 1}
    if dups:
        parts = "; ".join(
            f"{short_repr(k)} at positions {', '.join(map(str, v[:10]))}"
            for k, v in list(dups.items())[:5]
        )
        raise ColumnError(
            f"{name}: duplicate column names in the {where}: {parts}; rename them so every "
            "column has a distinct name"
        )


# --------------------------------------------------------------------------- JSON


def _pairs_hook(name: str, where: Callable[[], str]) -> Callable[[list[tuple[str, Any]]], dict]:
    def hook(pairs: list[tuple[str, Any]]) -> dict:
        out = dict(pairs)
        if len(out) != len(pairs):
            keys = [k for k, _ in pairs]
            dups = sorted({k for k in keys if keys.count(k) > 1})
            raise ColumnError(
                f"{name}: {where()}: duplicate key(s) {', '.join(map(short_repr, dups[:5]))} in "
                "one object; every field needs a distinct name"
            )
        return out

    return hook


def read_jsonl(text: str, name: str) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """Read JSON Lines: one object per non-blank line."""
    records: list[dict] = []
    lines: list[int] = []
    current = [0]
    hook = _pairs_hook(name, lambda: f"line {current[0]}")
    decoder = json.JSONDecoder(object_pairs_hook=hook)
    check_surrogates = _SURROGATE_ESCAPE.search(text) is not None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        current[0] = number
        try:
            value = decoder.decode(line)
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(
                f"{name}: line {number}, column {exc.colno}: invalid JSON ({exc.msg}); "
                f"expected one JSON object per line, found {_preview(line)}"
            ) from None
        except RecursionError:
            raise _too_deep(name, line, number) from None
        if check_surrogates and _SURROGATE_ESCAPE.search(line):
            _check_surrogates(value, name, f"line {number}", None)
        if not isinstance(value, dict):
            raise DatasetFormatError(
                f"{name}: line {number}: expected a JSON object ({{...}}), found "
                f"{_json_kind(value)}"
            )
        records.append(value)
        lines.append(number)
    if not records:
        raise DatasetFormatError(f"{name}: the file is empty (no JSON objects)")
    warnings: list[str] = []
    frame = records_frame(records, name, warnings, lambda i: f"line {lines[i]}")
    return frame, np.asarray(lines, dtype=np.int64), warnings


def read_json(text: str, name: str) -> tuple[pd.DataFrame, None, list[str]]:
    """Read a JSON array of objects (records)."""
    if not text.strip():
        raise DatasetFormatError(f"{name}: the file is empty")
    hook = _pairs_hook(name, lambda: "an object")
    try:
        value = json.loads(text, object_pairs_hook=hook)
    except json.JSONDecodeError as exc:
        raise DatasetFormatError(
            f"{name}: line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg})"
        ) from None
    except RecursionError:
        raise _too_deep(name, text, 1) from None
    if isinstance(value, dict):
        keys = ", ".join(short_repr(k) for k in list(value)[:8])
        raise DatasetFormatError(
            f"{name}: expected a JSON array of records ([{{...}}, {{...}}]), found an object "
            f"with keys {keys or '(none)'}; convert it to records (one object per row) or to "
            "JSON Lines"
        )
    if not isinstance(value, list):
        raise DatasetFormatError(
            f"{name}: expected a JSON array of records ([{{...}}, {{...}}]), found "
            f"{_json_kind(value)}"
        )
    if not value:
        raise DatasetFormatError(f"{name}: the JSON array is empty (no records)")
    for i, rec in enumerate(value):
        if not isinstance(rec, dict):
            raise DatasetFormatError(
                f"{name}: record {i + 1}: expected a JSON object ({{...}}), found "
                f"{_json_kind(rec)}; the file must be an array of records"
            )
    if _SURROGATE_ESCAPE.search(text):
        for i, rec in enumerate(value):
            _check_surrogates(rec, name, f"record {i + 1}", text)
    warnings: list[str] = []
    return records_frame(value, name, warnings), None, warnings


_MAX_NESTING = 500
_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[\[\]{}\n]')
#: A ``\\uD800``-``\\uDFFF`` escape: the only way JSON text can hold a surrogate code point.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _too_deep(name: str, text: str, first_line: int) -> DatasetFormatError:
    """The error for JSON nested deeper than Python's parser can follow (a RecursionError),
    naming the line where the nesting passes :data:`_MAX_NESTING` levels."""
    depth, deepest, line, at = 0, 0, first_line, first_line
    # strings are skipped (brackets inside them do not nest); newlines counted as we go
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token == "\n":
            line += 1
        elif token in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, line
            if depth > _MAX_NESTING:
                break
        elif token in "]}":
            depth -= 1
    depth_text = (f"more than {_MAX_NESTING} levels" if deepest > _MAX_NESTING
                  else f"{deepest} levels")
    return DatasetFormatError(
        f"{name}: line {at}: JSON nested too deeply ({depth_text} of arrays/objects inside "
        "each other); expected flat records (one text or number per field) -- flatten or "
        "drop the nested field"
    )


def _check_surrogates(value: Any, name: str, where: str, text: str | None) -> None:
    """Refuse lone surrogates (``"\\ud800"``): valid JSON escapes, but not text that can be
    written as UTF-8 (every export would fail)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                code = f"\\u{ord(item[exc.start]):04x}"
                if text is not None:  # a JSON array: name the line of the escape too
                    pos = text.lower().find(code)
                    if pos >= 0:
                        where = f"line {text.count(chr(10), 0, pos) + 1} ({where})"
                raise DatasetFormatError(
                    f"{name}: {where}: the JSON text holds a lone surrogate escape ({code}), "
                    "which is not a character and cannot be written as UTF-8; fix or remove "
                    f"that escape (in {short_repr(item, 60)})"
                ) from None


def looks_like_jsonl(text: str) -> bool:
    """True when the text is several lines that each parse as a JSON object."""
    lines = [ln for ln in text.split("\n")[:5] if ln.strip()]
    if len(lines) < 2:
        return False
    try:
        return all(isinstance(json.loads(ln), dict) for ln in lines[:2])
    except (ValueError, RecursionError):
        return False


_INT64 = (-(2**63), 2**63 - 1)


def records_frame(
    records: list[dict], name: str, warnings: list[str] | None = None,
    where: Callable[[int], str] | None = None,
) -> pd.DataFrame:
    """Columns from records, keeping each value's JSON type (missing keys -> None).

    Integers outside the 64-bit range (``10**30``) are kept as their exact text: no table
    format stores them as numbers (a note goes to ``warnings``).
    """
    keys = list(dict.fromkeys(k for rec in records for k in rec))
    check_column_count(len(keys), name)
    data = {}
    for key in keys:
        values = [rec.get(key, _MISSING) for rec in records]
        big = [i for i, v in enumerate(values) if type(v) is int
               and not _INT64[0] <= v <= _INT64[1]]
        if big:
            for i in big:
                values[i] = str(values[i])
            if warnings is not None:
                at = where(big[0]) if where is not None else f"record {big[0] + 1}"
                warnings.append(
                    f"column {short_repr(key)}: {len(big)} integer(s) beyond the 64-bit range "
                    f"(first at {at}) kept as text, digit for digit"
                )
        if any(v is None or v is _MISSING for v in values):
            values = [None if v is _MISSING else v for v in values]
            data[key] = pd.Series(values, dtype=object)
        else:
            data[key] = _typed_series(values)
    return pd.DataFrame(data)


def _typed_series(values: list[Any]) -> pd.Series:
    """A Series with the values' common type, or object dtype when types are mixed."""
    kinds = {type(v) for v in values}
    if kinds <= {str} or kinds == {bool} or kinds == {float}:
        return pd.Series(values)
    if kinds == {int}:
        try:
            return pd.Series(np.asarray(values, dtype=np.int64))
        except OverflowError:
            return pd.Series(values, dtype=object)
    return pd.Series(values, dtype=object)


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", dict: "an object", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    for typ, word in kinds.items():
        if isinstance(value, typ):
            return word
    return f"a number ({value!r})" if isinstance(value, (int, float)) else type(value).__name__


def _preview(line: str, n: int = 60) -> str:
    line = line.strip()
    return repr(line if len(line) <= n else line[:n] + "...")


# ------------------------------------------------------------------------ Parquet


def read_parquet(
    data: bytes, name: str, max_bytes: int | None
) -> tuple[pd.DataFrame, dict, list[str]]:
    """Read a Parquet file, keeping column types; returns ``(frame, arrow types, warnings)``.

    ``max_bytes`` bounds the decoded data, not only the footer's ``total_byte_size`` (which
    counts a dictionary-encoded column at its encoded size: a 1 MB dictionary page can
    expand to gigabytes). Text and binary columns are read dictionary-encoded, batch by
    batch, and each batch's decoded size is added to a running budget *before* it is
    decoded; the file is refused as soon as the budget passes ``max_bytes``.

    Binary columns (``bytes`` cells) are decoded as UTF-8 text with a warning, or refused
    naming the column and record when they are not UTF-8.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    warnings: list[str] = []
    try:
        pfile = pq.ParquetFile(io.BytesIO(data))
        meta = pfile.metadata
        schema = pfile.schema_arrow
        check_column_count(len(schema.names), name)
        if max_bytes is not None:
            # the pages as stored once decompressed (a dictionary page of one huge value
            # counts here), before anything is read; the values' decoded size is counted
            # batch by batch below
            expanded = max(
                sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)),
                sum(meta.row_group(i).column(j).total_uncompressed_size
                    for i in range(meta.num_row_groups)
                    for j in range(meta.row_group(i).num_columns)))
            if expanded > max_bytes:
                raise DatasetSizeError(
                    f"{name}: the Parquet data expands to {_fmt_bytes(expanded)}, past the "
                    f"limit of {_fmt_bytes(max_bytes)} (max_bytes={max_bytes}); not read"
                )
        _check_duplicate_names(list(schema.names), name, "Parquet schema")
        if meta.num_rows == 0:
            cols = ", ".join(map(short_repr, schema.names[:8]))
            raise DatasetFormatError(f"{name}: the Parquet file has columns ({cols}) but no rows")
        table = _read_parquet_budgeted(data, schema, name, max_bytes)
        table = _decode_binary_columns(table, name, warnings)
        frame = table.to_pandas()
    except DatasetError:
        raise
    except (pa.ArrowException, OSError, ValueError, TypeError) as exc:
        raise DatasetFormatError(f"{name}: not a readable Parquet file: {exc}") from exc
    if not isinstance(frame.index, pd.RangeIndex) or frame.index.start != 0:
        frame = frame.reset_index()
    frame.index = pd.RangeIndex(len(frame))
    types = {str(f.name): str(f.type) for f in table.schema}
    return frame, types, warnings


_PARQUET_BATCH = 65_536


def _is_text_type(typ: Any) -> bool:
    """Text or binary values, plain or dictionary-encoded in the file's Arrow schema (a
    column written from a pandas Categorical is typed ``dictionary<string>``)."""
    import pyarrow as pa

    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return (pa.types.is_string(typ) or pa.types.is_large_string(typ)
            or pa.types.is_binary(typ) or pa.types.is_large_binary(typ))


def _read_parquet_budgeted(data: bytes, schema: Any, name: str, max_bytes: int | None) -> Any:
    """The whole table, read batch by batch under a running budget of decoded bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if max_bytes is None:
        return pq.ParquetFile(io.BytesIO(data)).read()
    text_columns = [f.name for f in schema if _is_text_type(f.type)]
    pfile = pq.ParquetFile(io.BytesIO(data), read_dictionary=text_columns)
    budget = 0
    batches = []
    rows = 0
    for batch in pfile.iter_batches(batch_size=_PARQUET_BATCH):
        columns = []
        for field_, column in zip(batch.schema, batch.columns, strict=True):
            if pa.types.is_dictionary(field_.type) and field_.name in text_columns:
                # the decoded size: each row's value length, plus offsets and validity
                lengths = pc.binary_length(column.dictionary).take(column.indices)
                budget += int(pc.sum(lengths).as_py() or 0) + 9 * len(column)
                if budget > max_bytes:
                    break
                # decoded to the file's own type (within budget), or kept a dictionary with
                # the file's index width when the file stores one (a pandas Categorical)
                column = column.cast(schema.field(field_.name).type)
            else:  # (a column typed as dictionary stays one: pandas keeps a Categorical)
                budget += column.nbytes
            columns.append(column)
        if budget > max_bytes:
            raise DatasetSizeError(
                f"{name}: the Parquet data expands past the limit of {_fmt_bytes(max_bytes)} "
                f"(max_bytes={max_bytes}) within its first {rows + len(batch):,} rows (its "
                "footer understates the size: dictionary-encoded values repeat); not read"
            )
        rows += len(batch)
        batches.append(pa.RecordBatch.from_arrays(columns, names=batch.schema.names))
    return pa.Table.from_batches(batches, schema=schema)


def _decode_binary_columns(table: Any, name: str, warnings: list[str]) -> Any:
    """Binary columns as UTF-8 text (a warning), or an error naming the column and record."""
    import pyarrow as pa

    for i, field_ in enumerate(table.schema):
        if not (pa.types.is_binary(field_.type) or pa.types.is_large_binary(field_.type)):
            continue
        target = pa.string() if pa.types.is_binary(field_.type) else pa.large_string()
        try:
            column = table.column(i).cast(target)
        except pa.ArrowInvalid:
            position = 0
            for value in table.column(i).to_pylist():
                position += 1
                if value is not None:
                    try:
                        value.decode("utf-8")
                    except UnicodeDecodeError:
                        break
            raise DatasetFormatError(
                f"{name}: column {short_repr(field_.name)} holds binary data that is not UTF-8 "
                f"text (record {position}); store text columns as UTF-8 strings, or drop the "
                "column"
            ) from None
        table = table.set_column(i, field_.with_type(target), column)
        warnings.append(
            f"column {short_repr(field_.name)} is stored as binary; decoded as UTF-8 text"
        )
    return table


# ---------------------------------------------------------------------------- all


def frame_table(frame: pd.DataFrame, *, name: str | None = None) -> RawTable:
    """A pandas DataFrame as a :class:`RawTable` (notebook use: ``load_dataset(df)``).

    Every column and value is kept (the index is dropped; row ids are positions unless
    ``id=`` names a column). Column names become text; two names equal as text are refused.
    ``content_hash`` is the SHA-256 of the column names and pandas' row hashes, so the same
    frame gives the same run name and cache keys.
    """
    label = name or "dataframe"
    check_column_count(frame.shape[1], label)
    names = [str(c) for c in frame.columns]
    _check_duplicate_names(names, label, "columns")
    copy = frame.copy()
    copy.columns = names
    copy = copy.reset_index(drop=True)
    digest = hashlib.sha256("\x1f".join(names).encode("utf-8"))
    hashed = pd.util.hash_pandas_object(copy.astype(str), index=False).to_numpy()
    digest.update(hashed.tobytes())
    return RawTable(copy, label, "dataframe", digest.hexdigest())


def read_table(
    source: Any,
    *,
    name: str | None = None,
    format: str | None = None,
    encoding: str | None = None,
    max_bytes: int | None = None,
    max_line_bytes: int | None = MAX_LINE_BYTES,
) -> RawTable:
    """Read any supported source into a :class:`RawTable` (see the module docstring).

    ``max_line_bytes`` (default :data:`MAX_LINE_BYTES`, None for no limit): a text table
    with a longer line, or a CSV cell of more characters, is refused where it is met, while
    the file is read or decompressed.
    """
    if max_bytes is not None:
        check_int("max_bytes", max_bytes, minimum=1)
    if max_line_bytes is not None:
        check_int("max_line_bytes", max_line_bytes, minimum=1)
    if isinstance(source, pd.DataFrame):
        return frame_table(source, name=name)
    label = source_name(source, name)
    fmt = normalise_format(format)
    guard = (LineGuard(label, max_line_bytes) if max_line_bytes is not None
             and _guards_lines(label, fmt, b"") else None)
    raw = read_source_bytes(source, label, max_bytes, guard)
    data, _ = maybe_decompress(raw, label, max_bytes,
                               LineGuard(label, max_line_bytes) if guard else None)
    content_hash = hashlib.sha256(data).hexdigest()
    if not data or data.isspace():
        raise DatasetFormatError(f"{label}: the file is empty")
    explicit = fmt is not None
    if fmt is None:
        fmt = format_from_name(label)
    if not explicit and data.startswith(_PARQUET_MAGIC):  # the content wins over a suffix
        fmt = "parquet"
    if fmt == "parquet":
        frame, types, warnings = read_parquet(data, label, max_bytes)
        return RawTable(frame, label, fmt, content_hash, warnings=warnings, column_types=types)
    return _read_text_table(data, label, fmt, explicit=explicit, encoding=encoding,
                            content_hash=content_hash,
                            max_cell=max_line_bytes if guard is not None else None)


def _read_text_table(
    data: bytes,
    name: str,
    fmt: str | None,
    *,
    explicit: bool,
    encoding: str | None,
    content_hash: str,
    max_cell: int | None = None,
) -> RawTable:
    """Decode and parse CSV, TSV, JSON Lines or JSON; ``fmt=None``: sniffed from the text.

    ``explicit``: the format was named with ``format=`` (a ``.json`` suffix alone does not
    stop JSON Lines content from being read as such).
    """
    text, used = decode_text(data, name, encoding)
    warnings: list[str] = []
    extra_boms = len(text) - len(text.lstrip("\ufeff"))
    if extra_boms:  # a BOM written twice (e.g. a BOM-writing editor on a BOM file)
        text = text[extra_boms:]
        warnings.append(
            f"the text starts with {extra_boms} more byte-order mark(s) (U+FEFF) after the "
            "first; removed them (they would have become part of the first column's name)"
        )
    if not text or text.isspace():
        raise DatasetFormatError(f"{name}: the file is empty")
    if fmt is None:
        fmt = sniff_format(data, text)
    as_array = text.lstrip().startswith("[")
    if fmt == "json" and not explicit and not as_array and looks_like_jsonl(text):
        fmt = "jsonl"
        warnings.append("the .json file holds one object per line; read it as JSON Lines")
    lines: np.ndarray | None
    if fmt == "csv":
        frame, lines, extra = read_delimited(text, name, ",", max_cell=max_cell)
    elif fmt == "tsv":
        frame, lines, extra = read_delimited(text, name, "\t", max_cell=max_cell)
    elif fmt == "jsonl":
        frame, lines, extra = read_jsonl(text, name)
    else:
        frame, lines, extra = read_json(text, name)
    return RawTable(frame, name, fmt, content_hash, lines, used, warnings + extra)
