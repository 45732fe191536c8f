"""JSON and JSON Lines tables: one object per record, each value keeping its JSON type.

JSON Lines is read a line at a time from a stream of text (:func:`read_jsonl`): records are
turned into columns :data:`BATCH_RECORDS` at a time, and a column whose values are all text
is stored in Arrow (pandas' ``str`` dtype) as it goes, so a large file costs about its text,
not a dict per record. Columns of mixed or non-text values stay Python objects. A JSON
document (an array of objects) is parsed whole (:func:`read_json`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from aflite_core.errors import ColumnError, DatasetFormatError, DatasetSizeError
from aflite_core.io._delimited import BATCH_CHARS, TEXT_DTYPE
from aflite_core.io._inflow import nul_error
from aflite_core.io._table_checks import check_column_count, short_repr

_MISSING = object()
#: Records turned into columns at a time.
BATCH_RECORDS = 65_536




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


def read_jsonl(lines: Iterable[str], name: str, *, check_nul: bool = False,
               ) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """Read JSON Lines: one object per non-blank line, from an iterator of lines.

    ``check_nul``: refuse NUL characters here (the UTF-8 stream checks its bytes itself).
    """
    columns = _RecordColumns(name)
    for value, number in jsonl_records(lines, name, check_nul=check_nul):
        columns.add(value, number)
    if not columns.n_records:
        raise no_records_error(name)
    warnings: list[str] = []
    frame, lines_of = columns.frame(warnings)
    return frame, lines_of, warnings


def jsonl_pieces(lines: Iterable[str], name: str, *, check_nul: bool = False,
                 ) -> Iterator[tuple[pd.DataFrame, np.ndarray, list[str]]]:
    """:func:`read_jsonl` a piece of :data:`BATCH_RECORDS` records at a time: each piece's
    columns typed over its own records (``(frame, lines, warnings)``); a caller joining
    them must check that they agree (:mod:`aflite_core.io._file_pieces`)."""
    columns = _RecordColumns(name)
    seen = 0
    for value, number in jsonl_records(lines, name, check_nul=check_nul):
        columns.add(value, number)
        if columns.n_records >= BATCH_RECORDS:
            seen += columns.n_records
            warnings: list[str] = []
            piece = columns.frame(warnings)
            columns = _RecordColumns(name)
            yield (*piece, warnings)
            del piece
    if not seen + columns.n_records:
        raise no_records_error(name)
    if columns.n_records:
        warnings = []
        yield (*columns.frame(warnings), warnings)


def no_records_error(name: str) -> DatasetFormatError:
    """A JSON Lines file without a record."""
    return DatasetFormatError(f"{name}: the file is empty (no JSON objects)")


def jsonl_part(lines: Iterable[str], name: str, *, check_nul: bool = False,
               first_line: int = 1) -> tuple[pd.DataFrame, np.ndarray, list[str]] | None:
    """The records of a part of a JSON Lines file that starts at line ``first_line`` (read
    in parts: :mod:`aflite_core.io._file_pieces`), typed over the part's records as
    :func:`jsonl_pieces` types a piece; None when it holds no record."""
    columns = _RecordColumns(name)
    for value, number in jsonl_records(lines, name, check_nul=check_nul,
                                       first_line=first_line):
        columns.add(value, number)
    if not columns.n_records:
        return None
    warnings: list[str] = []
    return (*columns.frame(warnings), warnings)


def jsonl_records(lines: Iterable[str], name: str, *, check_nul: bool = False,
                  first_line: int = 1) -> Iterator[tuple[dict, int]]:
    """Each non-blank line's JSON object and its line number (the first line is
    ``first_line``), checked (invalid JSON, not an object, duplicate keys, nesting past the
    parser, lone surrogates, NUL)."""
    current = [0]
    hook = _pairs_hook(name, lambda: f"line {current[0]}")
    decoder = json.JSONDecoder(object_pairs_hook=hook)
    for number, line in enumerate(lines, start=first_line):
        if not line.strip():
            continue
        current[0] = number
        if check_nul and "\x00" in line:
            raise nul_error(name, number)
        try:
            value = decoder.decode(line)
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(
                f"{name}: line {number}, column {exc.colno}: invalid JSON ({exc.msg}); "
                f"expected one JSON object per line, found {_preview(line)}"
            ) from None
        except RecursionError:
            raise _too_deep(name, line, number) from None
        if _SURROGATE_ESCAPE.search(line):
            _check_surrogates(value, name, f"line {number}", None)
        if not isinstance(value, dict):
            raise DatasetFormatError(
                f"{name}: line {number}: expected a JSON object ({{...}}), found "
                f"{_json_kind(value)}"
            )
        yield value, number


class _RecordColumns:
    """Records turned into columns a batch at a time: an all-text batch of a column becomes
    an Arrow array, any other batch stays a list of Python values."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.chunks: dict[str, list[Any]] = {}  # key -> chunks (int n: n missing values)
        self.batch: list[dict] = []
        self.numbers: list[int] = []
        self.lines: list[np.ndarray] = []
        self.n_records = 0
        self._flushed = 0
        self._held = 0  # characters of the batch's text values

    def add(self, record: dict, line: int) -> None:
        self.batch.append(record)
        self.numbers.append(line)
        self.n_records += 1
        self._held += sum(len(v) for v in record.values() if type(v) is str)
        if len(self.batch) >= BATCH_RECORDS or self._held >= BATCH_CHARS:
            self.flush()

    def flush(self) -> None:
        if not self.batch:
            return
        for record in self.batch:
            for key in record:
                if key not in self.chunks:
                    self.chunks[key] = [self._flushed] if self._flushed else []
        check_column_count(len(self.chunks), self.name)
        for key, chunks in self.chunks.items():
            values = [record.get(key, _MISSING) for record in self.batch]
            if all(type(v) is str for v in values):
                chunks.append(pa.array(values, type=pa.large_string()))
            else:
                chunks.append(values)
        self.lines.append(np.asarray(self.numbers, dtype=np.int64))
        self._flushed += len(self.batch)
        self.batch, self.numbers, self._held = [], [], 0

    def frame(self, warnings: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
        self.flush()
        lines = np.concatenate(self.lines)
        data = {}
        for key, chunks in self.chunks.items():
            if all(isinstance(c, pa.Array) for c in chunks):
                data[key] = pd.Series(pd.array(
                    pa.chunked_array(chunks, type=pa.large_string()), dtype=TEXT_DTYPE))
                continue
            values: list[Any] = []
            for chunk in chunks:
                if isinstance(chunk, int):
                    values.extend([_MISSING] * chunk)
                elif isinstance(chunk, pa.Array):
                    values.extend(chunk.to_pylist())
                else:
                    values.extend(chunk)
            data[key] = _column(key, values, self.name, warnings,
                                lambda i: f"line {lines[i]}")
        return pd.DataFrame(data, copy=False), lines


#: The largest JSON document (an array of records) read, in bytes: it is parsed whole, into
#: Python objects of several times its size; JSON Lines are read a record at a time.
MAX_JSON_DOCUMENT_BYTES = 64 << 20


def check_json_document_size(size: int, name: str) -> None:
    """Refuse a JSON document over :data:`MAX_JSON_DOCUMENT_BYTES` before it is parsed.

    Raises
    ------
    DatasetSizeError
        The document is larger.
    """
    if size > MAX_JSON_DOCUMENT_BYTES:
        raise DatasetSizeError(
            f"{name}: a JSON document of {size / 2**20:,.1f} MiB; documents (one array of "
            f"records) are parsed whole and may be at most {MAX_JSON_DOCUMENT_BYTES >> 20} MiB "
            "(its objects would take several times that in memory). Save it as JSON Lines, "
            "one record a line (e.g. jq -c '.[]' data.json > data.jsonl), which is read a "
            "record at a time whatever its size")


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
        data[key] = _column(key, values, name, warnings, where)
    return pd.DataFrame(data)


def _column(key: str, values: list[Any], name: str, warnings: list[str] | None,
            where: Callable[[int], str] | None) -> pd.Series:
    """One column from its values (``_MISSING``: the record has no such key)."""
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
        return pd.Series([None if v is _MISSING else v for v in values], dtype=object)
    return _typed_series(values)


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


