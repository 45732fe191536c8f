"""Low-level readers behind :func:`aflite_core.io.datasets.load_dataset`.

Turns a path, a file-like object or raw bytes into a :class:`RawTable`: a
:class:`pandas.DataFrame` with every column of the file and its original values,
plus where each row came from (its line in the file), so that later errors can
point at it. Nothing here knows about premises, hypotheses or labels.

Rules (documented in ``load_dataset``):

* The input is read a chunk at a time (:class:`~aflite_core.io._inflow.Inflow`). CSV, TSV
  and JSON Lines are parsed as a stream into Arrow-backed text columns and never held whole
  (peak memory about twice the decompressed size); JSON documents and Parquet are read
  whole. A large plain UTF-8 CSV/TSV or JSON Lines file on a path is parsed by Arrow's
  multi-threaded readers instead, with the same result (:mod:`~aflite_core.io.
  arrow_delimited`, :mod:`~aflite_core.io._arrow_jsonl`). ``max_bytes`` bounds the bytes
  read, the bytes a gzip stream expands to (reading stops as soon as the ceiling is
  passed) and the decoded size of a Parquet file (counted
  batch by batch, see :func:`read_parquet`). FIFOs, devices and sockets are refused from
  ``stat()``, never opened.
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

import codecs
import contextlib
import hashlib
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from aflite_core._validation import check_int
from aflite_core._validation import fmt_bytes as _fmt_bytes
from aflite_core.errors import (  # noqa: F401 - re-exported: the readers' errors
    ColumnError,
    DatasetError,
    DatasetFormatError,
    DatasetSizeError,
    DuplicateIdError,
)
from aflite_core.io._arrow_delimited import read_delimited_fast
from aflite_core.io._arrow_jsonl import read_jsonl_fast
from aflite_core.io._delimited import (
    decoded_lines,
    is_utf8,
    read_delimited_stream,
    read_delimited_text,
)
from aflite_core.io._inflow import (  # noqa: F401 - special_file_kind: re-exported
    PARQUET_MAGIC,
    Inflow,
    nul_error,
    open_input,
    special_file_kind,
)
from aflite_core.io._json_tables import (
    check_json_document_size,
    looks_like_jsonl,
    read_json,
    read_jsonl,
)
from aflite_core.io._line_limit import MAX_LINE_BYTES, LineGuard
from aflite_core.io._table_checks import (  # noqa: F401 - re-exported
    MAX_COLUMNS,
    cell_error,
    check_column_count,
    check_duplicate_names,
    check_frame_cells,
    short_repr,
)

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

_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
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
    column_types : dict
        Arrow type of each column, for typed formats (Parquet, Arrow).
    dropped : dict
        Columns left out because the audit cannot hold their values (binary data that is
        not UTF-8, nested values), each with the message to give if a role names it.
    shards, shard_of, shard_rows, shard_unit
        For a table read from several files (:mod:`aflite_core.io.shards`): the shards'
        names, each row's shard, its line or record number there, and which of the two.
    retyped : dict
        Columns the shards typed differently, read as text in every shard, each with its
        notice (:func:`aflite_core.io.shards.reconcile_types`); a role on one is refused.
    """

    frame: pd.DataFrame
    name: str
    format: str
    content_hash: str
    lines: np.ndarray | None = None
    encoding: str | None = None
    warnings: list[str] = field(default_factory=list)
    column_types: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    shards: list[str] | None = None
    shard_of: np.ndarray | None = None
    shard_rows: np.ndarray | None = None
    #: Where the shards were read: ``"local"`` (this process) or the ``engine`` of the
    #: ``map_shards`` function that read them (``"dask"``: on a cluster's workers).
    read_by: str = "local"
    shard_unit: str = "record"
    retyped: dict[str, str] = field(default_factory=dict)

    def where(self, position: int) -> str:
        """Human-readable location of the row at 0-based ``position``."""
        if self.shards is not None and self.shard_of is not None:
            shard = self.shards[int(self.shard_of[position])]
            return f"{shard}, {self.shard_unit} {int(self.shard_rows[position])}"
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
    if data.startswith(PARQUET_MAGIC):
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


def text_codec(head: bytes, encoding: str | None) -> str:
    """The codec to decode text with: ``encoding`` when given (it must exist), else the
    one a byte-order mark announces, else UTF-8."""
    if encoding is not None:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ValueError(f"encoding: unknown text encoding {encoding!r}") from None
        return encoding
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec
    return "utf-8"


def decode_text(data: bytes, name: str, encoding: str | None) -> tuple[str, str]:
    """Decode bytes to text; returns ``(text, encoding used)``."""
    used = text_codec(bytes(data[:4]), encoding)
    try:
        text = data.decode(used)
    except UnicodeDecodeError as exc:
        raise _decode_error(data, exc, name, used) from None
    if used != "utf-8-sig" and text.startswith("\ufeff"):
        text = text[1:]
    nul = text.find("\x00")
    if nul >= 0:
        raise nul_error(name, text.count("\n", 0, nul) + 1)
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


# ------------------------------------------------------------------------ Parquet


def read_parquet(
    data: bytes, name: str, max_bytes: int | None, *, max_cell: int | None = None,
) -> tuple[pd.DataFrame, dict, list[str], dict[str, str]]:
    """Read a Parquet file, keeping column types; returns ``(frame, arrow types, warnings,
    dropped columns)``.

    ``max_bytes`` bounds the decoded data, not only the footer's ``total_byte_size`` (which
    counts a dictionary-encoded column at its encoded size: a 1 MB dictionary page can
    expand to gigabytes). Text and binary columns are read dictionary-encoded, batch by
    batch, and each batch's decoded size is added to a running budget *before* it is
    decoded; the file is refused as soon as the budget passes ``max_bytes``.

    Binary columns (``bytes`` cells) are decoded as UTF-8 text with a warning; one that is not
    UTF-8 (an image, audio) is dropped with a warning, and refused, naming the column and
    record, only if a role names it (:func:`drop_unheld_columns`).

    ``max_cell`` (the loader's ``max_line_bytes``) bounds each text or binary cell: its
    length is read before the value is decoded, and the first cell past it is refused, naming
    the column and the record.
    """
    import pyarrow.parquet as pq  # lazy: +16 ms to import

    with parquet_errors(name):
        pfile = pq.ParquetFile(io.BytesIO(data))
        check_parquet_footer(pfile, name, max_bytes, max_cell=max_cell)
        frame, types, warnings, dropped, _ = parquet_frame(
            io.BytesIO(data), pfile.schema_arrow, name, max_bytes, max_cell=max_cell)
    if not isinstance(frame.index, pd.RangeIndex) or frame.index.start != 0:
        frame = frame.reset_index()
    frame.index = pd.RangeIndex(len(frame))
    return frame, types, warnings, dropped


@contextlib.contextmanager
def parquet_errors(name: str) -> Iterator[None]:
    """Arrow's and the file system's errors reading a Parquet file as
    :class:`DatasetFormatError` ("not a readable Parquet file"); the loader's own pass."""
    try:
        yield
    except DatasetError:
        raise
    except (pa.ArrowException, OSError, ValueError, TypeError) as exc:
        raise DatasetFormatError(f"{name}: not a readable Parquet file: {exc}") from exc


def parquet_frame(source: Any, schema: Any, name: str, max_bytes: int | None, *,
                  row_groups: list[int] | None = None, rows_before: int = 0,
                  max_cell: int | None = None,
                  ) -> tuple[pd.DataFrame, dict, list[str], dict[str, str], int]:
    """A Parquet file's rows (or its ``row_groups``') as a frame, read under ``max_bytes``
    (:func:`read_parquet_rows`), the columns the audit cannot hold dropped
    (:func:`drop_unheld_columns`): ``(frame, arrow types, warnings, dropped, decoded
    bytes)``."""
    warnings: list[str] = []
    dropped: dict[str, str] = {}
    table, decoded = read_parquet_rows(source, schema, name, max_bytes, row_groups=row_groups,
                                       rows_before=rows_before, max_cell=max_cell)
    table = drop_unheld_columns(table, name, warnings, dropped)
    types = {str(f.name): str(f.type) for f in table.schema}
    return table.to_pandas(), types, warnings, dropped, decoded


def check_parquet_footer(pfile: Any, name: str, max_bytes: int | None, *,
                         max_cell: int | None = None) -> None:
    """What a Parquet file's footer alone refuses: too many or duplicate columns, pages that
    expand past ``max_bytes`` once decompressed, a text column whose cells average more than
    ``max_cell`` bytes in a row group (a 30 KB file of three 300 MB cells: reading its
    dictionary page alone took 1.2 GB), no rows (:func:`read_parquet`)."""
    meta = pfile.metadata
    schema = pfile.schema_arrow
    check_column_count(len(schema.names), name)
    if max_cell is not None:
        _check_mean_cells(meta, schema, name, max_cell)
    if max_bytes is not None:
        # the pages as stored once decompressed (a dictionary page of one huge value
        # counts here), before anything is read; the values' decoded size is counted
        # batch by batch (read_parquet_rows)
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
    check_duplicate_names(list(schema.names), name, "Parquet schema")
    if meta.num_rows == 0:
        cols = ", ".join(map(short_repr, schema.names[:8]))
        raise DatasetFormatError(f"{name}: the Parquet file has columns ({cols}) but no rows")


_PARQUET_BATCH = 65_536


def _check_mean_cells(meta: Any, schema: Any, name: str, max_cell: int) -> None:
    """Refuse a row group whose text column, decompressed, holds more than ``max_cell``
    bytes a row on average: one of its cells is over the limit, said before any is read."""
    text = {f.name for f in schema if _is_text_type(f.type)}
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        if not group.num_rows:
            continue
        for j in range(group.num_columns):
            column = group.column(j)
            if column.path_in_schema not in text:
                continue
            mean = column.total_uncompressed_size / group.num_rows
            if mean > max_cell:
                raise DatasetFormatError(
                    f"{name}: column {short_repr(column.path_in_schema)} holds "
                    f"{_fmt_bytes(column.total_uncompressed_size)} in row group {i + 1} of "
                    f"{group.num_rows:,} rows: its cells average {_fmt_bytes(int(mean))}, over "
                    f"the limit of {_fmt_bytes(max_cell)} a cell (max_line_bytes={max_cell}); "
                    "not read")


def _is_text_type(typ: Any) -> bool:
    """Text or binary values, plain or dictionary-encoded in the file's Arrow schema (a
    column written from a pandas Categorical is typed ``dictionary<string>``)."""
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return (pa.types.is_string(typ) or pa.types.is_large_string(typ)
            or pa.types.is_binary(typ) or pa.types.is_large_binary(typ))


def read_parquet_rows(source: Any, schema: Any, name: str, max_bytes: int | None, *,
                      row_groups: list[int] | None = None, rows_before: int = 0,
                      max_cell: int | None = None) -> tuple[Any, int]:
    """The table (or its ``row_groups``), read batch by batch under a running budget of
    decoded bytes, each text cell within ``max_cell``; returns ``(table, decoded bytes)``
    (0 without ``max_bytes``). ``rows_before``: rows of the file before these (for the
    message)."""
    import pyarrow.parquet as pq  # lazy: +16 ms to import

    if max_bytes is None and max_cell is None:
        pfile = pq.ParquetFile(source)
        return (pfile.read() if row_groups is None else pfile.read_row_groups(row_groups)), 0
    text_columns = [f.name for f in schema if _is_text_type(f.type)]
    pfile = pq.ParquetFile(source, read_dictionary=text_columns)
    budget = 0
    batches = []
    rows = rows_before
    for batch in pfile.iter_batches(batch_size=_PARQUET_BATCH, row_groups=row_groups):
        columns = []
        for field_, column in zip(batch.schema, batch.columns, strict=True):
            if pa.types.is_dictionary(field_.type) and field_.name in text_columns:
                # the decoded size: each row's value length, plus offsets and validity
                lengths = pc.binary_length(column.dictionary).take(column.indices)
                if max_cell is not None:
                    check_cell_lengths(lengths, max_cell, name, field_.name, rows)
                budget += int(pc.sum(lengths).as_py() or 0) + 9 * len(column)
                if max_bytes is not None and budget > max_bytes:
                    break
                # decoded to the file's own type (within budget), or kept a dictionary with
                # the file's index width when the file stores one (a pandas Categorical)
                column = column.cast(schema.field(field_.name).type)
            else:  # (a column typed as dictionary stays one: pandas keeps a Categorical)
                budget += column.nbytes
            columns.append(column)
        if max_bytes is not None and budget > max_bytes:
            raise parquet_budget_error(name, max_bytes, rows + len(batch))
        rows += len(batch)
        batches.append(pa.RecordBatch.from_arrays(columns, names=batch.schema.names))
    return pa.Table.from_batches(batches, schema=schema), budget


def check_cell_lengths(lengths: Any, max_cell: int, name: str, column: Any,
                       rows_before: int) -> None:
    """Refuse the first cell whose length (an Arrow array of byte lengths, one per row) is
    over ``max_cell``, naming the column and its record (1-based, ``rows_before`` rows of the
    source before these).

    Raises
    ------
    DatasetFormatError
        A cell over ``max_cell`` bytes.
    """
    longest = pc.max(lengths).as_py()
    if longest is None or longest <= max_cell:
        return
    first = int(pc.index(pc.greater(lengths, max_cell), True).as_py())
    raise cell_error(name, rows_before + first + 1, column, int(lengths[first].as_py()),
                     max_cell)


def check_batch_cells(batch: Any, max_cell: int | None, name: str, rows_before: int) -> None:
    """:func:`check_cell_lengths` over every text or binary column of an Arrow record
    batch (a ``datasets`` folder's, read memory-mapped: lengths come from the offsets)."""
    if max_cell is None:
        return

    for field_, column in zip(batch.schema, batch.columns, strict=True):
        if _is_text_type(field_.type):
            values = column.dictionary if hasattr(column, "dictionary") else column
            lengths = pc.binary_length(values)
            if hasattr(column, "indices"):
                lengths = lengths.take(column.indices)
            check_cell_lengths(lengths, max_cell, name, field_.name, rows_before)


def parquet_budget_error(name: str, max_bytes: int, rows: int) -> DatasetSizeError:
    """A Parquet file whose values, decoded, pass ``max_bytes`` within its first ``rows``."""
    return DatasetSizeError(
        f"{name}: the Parquet data expands past the limit of {_fmt_bytes(max_bytes)} "
        f"(max_bytes={max_bytes}) within its first {rows:,} rows (its "
        "footer understates the size: dictionary-encoded values repeat); not read"
    )


def drop_unheld_columns(table: Any, name: str, warnings: list[str], dropped: dict[str, str],
                        *, nested: bool = False) -> Any:
    """Binary columns decoded as UTF-8 text (a warning); the columns the audit cannot hold
    left out, each named in a warning and in ``dropped`` with the refusal a role naming it
    gets: binary data that is not UTF-8 (an image, audio) and, with ``nested``, lists,
    structs and maps (a ``datasets`` Image or Audio feature)."""
    keep = []
    for i, field_ in enumerate(table.schema):
        typ = field_.type
        label = short_repr(field_.name)
        if nested and pa.types.is_nested(typ):
            warnings.append(f"column {label} holds nested values ({typ}); dropped (the "
                            "audit reads text and label columns)")
            dropped[field_.name] = (f"{name}: column {label} holds nested values ({typ}), "
                                    "not text; map a text column to this role")
            continue
        if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
            target = pa.string() if pa.types.is_binary(typ) else pa.large_string()
            try:
                column = table.column(i).cast(target)
            except pa.ArrowInvalid:
                warnings.append(f"column {label} holds binary data that is not UTF-8 text "
                                "(an image or audio?); dropped (the audit reads text and "
                                "label columns)")
                dropped[field_.name] = (
                    f"{name}: column {label} holds binary data that is not UTF-8 text "
                    f"(record {_first_not_utf8(table.column(i))}); store text columns as "
                    "UTF-8 strings, or drop the column")
                continue
            table = table.set_column(i, field_.with_type(target), column)
            warnings.append(f"column {label} is stored as binary; decoded as UTF-8 text")
        keep.append(field_.name)
    return table.select(keep)


def _first_not_utf8(column: Any) -> int:
    """1-based record of the first value of ``column`` that is not UTF-8."""
    position = 0
    for value in column.to_pylist():
        position += 1
        if value is not None:
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                return position
    return position


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
    check_duplicate_names(names, label, "columns")
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
    the file is read or decompressed. One file; folders, globs and ``datasets`` objects:
    :func:`aflite_core.io.shards.read_source` (``load_dataset``'s reader).
    """
    if max_bytes is not None:
        check_int("max_bytes", max_bytes, minimum=1)
    if max_line_bytes is not None:
        check_int("max_line_bytes", max_line_bytes, minimum=1)
    if isinstance(source, pd.DataFrame):
        return frame_table(source, name=name)
    label = source_name(source, name)
    fmt = normalise_format(format)
    with open_input(source, label, max_bytes) as inflow:
        return _read_inflow(inflow, label, fmt, encoding=encoding, max_bytes=max_bytes,
                            max_line_bytes=max_line_bytes,
                            whole=_whole_source(source, max_bytes))


@dataclass
class ReadPlan:
    """How :func:`read_table` reads an input, from its first chunk: ``format`` (what it
    is read as: Parquet, or the text format named, implied by the suffix or sniffed),
    ``named`` (``format=`` or the suffix; None: told from the content), ``explicit``
    (``format=`` was given), and for text its ``codec`` and line ``guard``."""

    format: str
    named: str | None
    explicit: bool
    codec: str | None = None
    guard: LineGuard | None = None


def read_plan(inflow: Inflow, label: str, fmt: str | None, *, encoding: str | None,
              max_line_bytes: int | None) -> ReadPlan:
    """The :class:`ReadPlan` of ``inflow`` (``fmt``: ``format=``, normalised).

    Raises
    ------
    DatasetFormatError
        The input is empty.
    """
    head = inflow.head
    if not head:
        raise DatasetFormatError(f"{label}: the file is empty")
    explicit = fmt is not None
    if fmt is None:
        fmt = format_from_name(label)
    if not explicit and head.startswith(PARQUET_MAGIC):  # the content wins over a suffix
        fmt = "parquet"
    if fmt == "parquet":
        return ReadPlan("parquet", fmt, explicit)
    codec = text_codec(head, encoding)
    sniffed = fmt or sniff_format(head, head.decode(codec, errors="ignore"))
    guard = (LineGuard(label, max_line_bytes)
             if max_line_bytes is not None and sniffed != "json" else None)
    return ReadPlan(sniffed, fmt, explicit, codec, guard)


def _whole_source(source: Any, max_bytes: int | None) -> Path | bytes | None:
    """``source`` as Arrow's readers may read it by themselves: a path (its size was checked
    when it was opened), or bytes within ``max_bytes``; else None."""
    if isinstance(source, (str, os.PathLike)):
        return Path(source)
    if isinstance(source, bytes):  # (a bytearray or view would need a copy: not taken)
        return source if max_bytes is None or len(source) <= max_bytes else None
    return None


def _read_inflow(inflow: Inflow, label: str, fmt: str | None, *, encoding: str | None,
                 max_bytes: int | None, max_line_bytes: int | None,
                 whole: Path | bytes | None = None) -> RawTable:
    """Tell the format from the first chunk, then stream CSV/TSV; read the rest whole.

    ``whole``: the file ``inflow`` reads, or its bytes, when Arrow may read it by itself: a
    large plain UTF-8 CSV/TSV or JSON Lines file is then parsed by Arrow
    (:func:`~aflite_core.io._arrow_delimited.read_delimited_fast`,
    :func:`~aflite_core.io._arrow_jsonl.read_jsonl_fast`), with the csv or json module's
    table, line numbers and warnings.
    """
    plan = read_plan(inflow, label, fmt, encoding=encoding, max_line_bytes=max_line_bytes)
    sniffed, codec, guard = plan.format, plan.codec, plan.guard
    if sniffed == "parquet":
        data = inflow.read_all()
        frame, types, warnings, dropped = read_parquet(data, label, max_bytes,
                                                       max_cell=max_line_bytes)
        return RawTable(frame, label, sniffed, inflow.hexdigest(), warnings=warnings,
                        column_types=types, dropped=dropped)
    if sniffed == "jsonl":  # streamed a line at a time
        if whole is not None and not inflow.gzip:
            fast = read_jsonl_fast(whole, label, codec, inflow.head,
                                   max_line_bytes=max_line_bytes)
            if fast is not None:
                frame, lines_of, digest = fast
                return RawTable(frame, label, sniffed, digest, lines_of, codec, [])
        inflow.watch(guard, nul=is_utf8(codec))
        with decoded_lines(inflow, codec, newline="\n") as lines:
            frame, starts, warnings = read_jsonl(lines, label, check_nul=not is_utf8(codec))
            warnings = lines.warnings + warnings
        return RawTable(frame, label, sniffed, inflow.hexdigest(), starts, codec, warnings)
    if sniffed in ("csv", "tsv"):  # streamed: never held whole
        delimiter = "\t" if sniffed == "tsv" else ","
        if whole is not None and not inflow.gzip:
            fast = read_delimited_fast(whole, label, delimiter, codec, inflow.head,
                                       max_cell=max_line_bytes, max_line_bytes=max_line_bytes)
            if fast is not None:
                frame, lines, warnings, digest = fast
                return RawTable(frame, label, sniffed, digest, lines, codec, warnings)
        inflow.watch(guard, nul=is_utf8(codec))
        frame, lines, warnings = read_delimited_stream(
            inflow, label, delimiter, codec,
            max_cell=max_line_bytes if guard is not None else None)
        return RawTable(frame, label, sniffed, inflow.hexdigest(), lines, codec, warnings)
    inflow.watch(guard)
    data = inflow.read_all()
    return _read_text_table(data, label, plan.named, explicit=plan.explicit,
                            encoding=encoding, content_hash=inflow.hexdigest(),
                            max_cell=max_line_bytes)


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
    if fmt in ("json", None) and data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"[":
        check_json_document_size(len(data), name)  # a document, parsed whole
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
    if fmt in ("csv", "tsv"):
        frame, lines, extra = read_delimited_text(text, name, "\t" if fmt == "tsv" else ",",
                                                  max_cell=max_cell)
    elif fmt == "jsonl":
        frame, lines, extra = read_jsonl(text.split("\n"), name)
    else:
        frame, lines, extra = read_json(text, name)
        check_frame_cells(frame, max_cell, name)  # one line, but each cell within the limit
    return RawTable(frame, name, fmt, content_hash, lines, used, warnings + extra)
