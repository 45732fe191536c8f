"""CSV and TSV, parsed as a stream into Arrow-backed text columns.

Rows are read with Python's :mod:`csv` (RFC 4180 for CSV; no quoting for TSV, as the
SNLI/MNLI files are published) from an iterator of lines, so a file is never held whole as
text. Every :data:`BATCH_ROWS` rows the batch becomes one Arrow array per column and its
Python strings are dropped: a table costs about its text plus 8 bytes per cell, not the
10x of a row of Python strings (a 1 GB CSV of SNLI-like rows took 10.9 GB when rows were
Python lists).

Each row's first line is kept (``starts``), for messages that point at a row.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from aflite_core.errors import DatasetFormatError, DatasetSizeError, NulSeen
from aflite_core.io._inflow import Inflow, nul_error
from aflite_core.io._table_checks import check_column_count, check_duplicate_names, short_repr

#: Rows parsed before they become Arrow arrays (their Python strings are then freed).
BATCH_ROWS = 65_536
#: A batch is also cut once its cells hold this many characters: 65,536 rows of 60 MB cells
#: were once held as Python strings whole before their Arrow copy was made (5x the file).
BATCH_CHARS = 32 << 20
#: The text dtype of a column read from CSV/TSV: pandas' ``str``, stored in Arrow.
TEXT_DTYPE = pd.StringDtype("pyarrow", na_value=np.nan)
#: Characters that decode to a byte-order mark at the start of the text.
BOM = "\ufeff"
#: Arrow's jemalloc pool where the build has it: batches built one after another leave
#: mimalloc's pages a third unused (a 1 GB CSV: 1.76 GB resident for 1.23 GB of arrays,
#: 1.46 GB with jemalloc).
try:
    ARROW_POOL = pa.jemalloc_memory_pool()
except NotImplementedError:  # pragma: no cover - a pyarrow built without jemalloc
    ARROW_POOL = pa.default_memory_pool()
#: Bytes decoded at a time (io.TextIOWrapper's default is 8 KiB).
_TEXT_CHUNK = 1 << 20


def read_delimited_stream(
    inflow: Inflow, name: str, delimiter: str, codec: str, *, max_cell: int | None = None,
) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """Decode ``inflow`` with ``codec`` and parse it as CSV (``delimiter=","``) or TSV.

    Returns ``(frame, starts, warnings)``: string columns, the first line of each row, and
    what was tolerated (blank lines, extra byte-order marks). Undecodable bytes are an
    error naming the line and byte offset.
    """
    with decoded_lines(inflow, codec, newline="") as lines:
        return parse_delimited(lines, name, delimiter, max_cell=max_cell,
                               check_nul=not is_utf8(codec))


@contextlib.contextmanager
def decoded_lines(inflow: Inflow, codec: str, *, newline: str,
                  at_start: bool = True) -> Iterator[_Lines]:
    """The lines of ``inflow`` decoded with ``codec`` (split as ``open(newline=...)`` does),
    byte-order marks at the start removed (:func:`_without_boms`).

    Inside the block, undecodable bytes become an error naming the line and byte offset,
    and NUL bytes found by the stream (:class:`~aflite_core.errors.NulSeen`) the NUL
    message -- after the rest is decoded, since undecodable bytes are the better message.

    ``at_start=False``: ``inflow`` is a part of a UTF-8 file after its start
    (:func:`~aflite_core.io._inflow.open_range`): decoded as UTF-8, a leading U+FEFF kept
    (it is text there), messages naming ``codec`` as for the whole file.
    """
    decoder = codec if at_start else "utf-8"
    text = io.TextIOWrapper(inflow, encoding=decoder, errors="strict", newline=newline)
    text._CHUNK_SIZE = _TEXT_CHUNK
    try:
        first = text.readline()
        if at_start:
            strip_one = not codec.replace("_", "-").lower().startswith("utf-8-sig")
            yield _without_boms(first, text, strip_one)
        else:
            yield _Lines(itertools.chain([first] if first else [], text), [])
    except UnicodeDecodeError as exc:
        raise inflow.decode_error(exc, codec) from None
    except NulSeen as seen:
        try:
            while text.read(_TEXT_CHUNK):
                pass
        except UnicodeDecodeError as exc:
            raise inflow.decode_error(exc, codec) from None
        raise nul_error(inflow.name, seen.line) from None


def read_delimited_text(
    text: str, name: str, delimiter: str, *, max_cell: int | None = None,
) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """:func:`parse_delimited` over text already decoded and checked (BOMs removed)."""
    return parse_delimited(_Lines(iter(io.StringIO(text, newline="")), []), name, delimiter,
                           max_cell=max_cell, check_nul=False)


class _Lines:
    """An iterator of lines that carries the warnings its reading produced."""

    def __init__(self, lines: Iterator[str], warnings: list[str]) -> None:
        self.lines, self.warnings = lines, warnings

    def __iter__(self) -> Iterator[str]:
        return self.lines


def is_utf8(codec: str) -> bool:
    """Whether ``codec`` is UTF-8 (with or without its BOM)."""
    return codec.replace("_", "-").lower() in ("utf-8", "utf8", "utf-8-sig", "u8")


def _without_boms(first: str, rest: Iterable[str], strip_one: bool) -> _Lines:
    """The lines with the byte-order marks at the start of the text removed.

    The codec has consumed the BOM that named it; ``strip_one``: one more is removed
    silently (UTF-8 named with ``encoding=``). Any further BOM (a BOM-writing editor on a
    BOM file) is removed with a warning: it would become part of the first column's name.
    """
    warnings: list[str] = []
    if strip_one and first.startswith(BOM):
        first = first[1:]
    extra = len(first) - len(first.lstrip(BOM))
    if extra:
        first = first[extra:]
        warnings.append(
            f"the text starts with {extra} more byte-order mark(s) (U+FEFF) after the "
            "first; removed them (they would have become part of the first column's name)")
    return _Lines(itertools.chain([first] if first else [], rest), warnings)


def _reader(lines: Iterable[str], delimiter: str) -> csv.Reader:
    if delimiter == "\t":
        return csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    return csv.reader(lines, delimiter=delimiter, strict=True)


def space_row(row: list[str], delimiter: str) -> bool:
    """Whether the line(s) of ``row`` held only whitespace (an empty file's content)."""
    if delimiter == "\t":
        return all(not f or f.isspace() for f in row)
    return len(row) == 1 and row[0].isspace()


class DelimitedBatches:
    """The rows of CSV or TSV lines as Arrow batches (see :func:`parse_delimited`).

    Iterating gives ``(arrays, starts)`` for every :data:`BATCH_ROWS` rows (the last batch
    may be shorter): one ``large_string`` array per column and each row's first line. The
    header is read and checked before the first batch; ``warnings`` and ``n_rows`` are
    complete once the iteration ends. An error is raised where it is met, so a caller that
    takes the batches as they come (:mod:`aflite_core.io._file_pieces`) may have taken some
    before it.

    ``part=(header, header_line, first_line)``: the lines are a part of a TSV file after its
    header (read in parts: :mod:`aflite_core.io._file_pieces`), starting at line
    ``first_line``; every row is data with the header's fields, lines in messages are the
    file's, and what only the whole file can tell (empty, no rows, the warnings) is left to
    the caller: ``blank`` counts the part's blank lines.
    """

    def __init__(self, lines: _Lines, name: str, delimiter: str, *,
                 max_cell: int | None = None, check_nul: bool = True,
                 part: tuple[list[str], int, int] | None = None) -> None:
        self.lines, self.name, self.delimiter = lines, name, delimiter
        self.max_cell, self.check_nul = max_cell, check_nul
        self.header: list[str] | None = None if part is None else list(part[0])
        self.warnings: list[str] = []
        self.n_rows = self.blank = 0
        self._part = part
        self._named = part is not None  # the header's names checked (a part: by the caller)

    def __iter__(self) -> Iterator[tuple[list[pa.Array], np.ndarray]]:
        limit = min(int(self.max_cell), 2**31 - 1) if self.max_cell is not None else 2**31 - 1
        if csv.field_size_limit() != limit:
            csv.field_size_limit(limit)  # cells of a million characters are legitimate
        name, delimiter = self.name, self.delimiter
        kind = "TSV" if delimiter == "\t" else "CSV"
        reader = _reader(self.lines, delimiter)
        header: list[str] | None = self.header
        rows: list[list[str]] = []
        row_starts: list[int] = []
        held = 0  # characters of the rows held
        header_line = ncols = blank = 0
        first = 1  # the line the reader's first line is
        all_space = True
        if self._part is not None:
            header_line, first = self._part[1], self._part[2]
            ncols, all_space = len(header), False
        start = first
        try:
            for row in reader:
                if not row:
                    blank += 1
                    start = reader.line_num + first
                    continue
                if all_space:
                    all_space = space_row(row, delimiter)
                if header is None:
                    header, header_line, ncols = row, start, len(row)
                    check_column_count(ncols, name)
                    if self.check_nul and any("\x00" in h for h in header):
                        raise nul_error(name, start)
                    self.header = header
                elif len(row) != ncols:
                    end = reader.line_num + first - 1
                    span = f"line {start}" if end == start else f"lines {start}-{end}"
                    hint = _ragged_hint(kind, row, ncols, start != end)
                    raise DatasetFormatError(
                        f"{name}: {span}: expected {ncols} fields (as in the header on line "
                        f"{header_line}), found {len(row)}.{hint}"
                    )
                else:
                    rows.append(row)
                    row_starts.append(start)
                    held += sum(map(len, row))
                    if len(rows) >= BATCH_ROWS or held >= BATCH_CHARS:
                        if not all_space:  # (an all-space file is "empty", said at the end)
                            self._check_names()
                        batch = self._batch(rows, row_starts, ncols)
                        rows, row_starts, held = [], [], 0  # freed before the next
                        yield batch
                        del batch
                start = reader.line_num + first
        except csv.Error as exc:
            raise _csv_error(exc, name, kind, start, reader.line_num + first - 1) from None
        if self._part is not None:
            self.blank = blank
            if rows:
                yield self._batch(rows, row_starts, ncols)
            return
        if header is None or all_space:
            raise DatasetFormatError(f"{name}: the file is empty")
        self._check_names()
        if rows:
            yield self._batch(rows, row_starts, ncols)
        if not self.n_rows:
            raise no_rows_error(name, header)
        self.warnings = table_warnings(self.lines.warnings, blank, header, delimiter)

    def _check_names(self) -> None:
        if not self._named:
            check_duplicate_names(self.header, self.name, "header")
            self._named = True

    def _batch(self, rows: list[list[str]], row_starts: list[int],
               ncols: int) -> tuple[list[pa.Array], np.ndarray]:
        """Rows parsed as Python lists turned into Arrow arrays (their strings then freed)."""
        starts = np.asarray(row_starts, dtype=np.int64)
        arrays = []
        for values in zip(*rows, strict=True):
            array = pa.array(values, type=pa.large_string(), memory_pool=ARROW_POOL)
            if self.check_nul:
                nul = pc.match_substring(array, "\x00").to_numpy(zero_copy_only=False)
                if nul.any():
                    raise nul_error(self.name, int(starts[np.flatnonzero(nul)[0]]))
            arrays.append(array)
        self.n_rows += len(rows)
        return arrays, starts


def no_rows_error(name: str, header: list[str]) -> DatasetFormatError:
    """A CSV/TSV file with a header and no data row."""
    return DatasetFormatError(
        f"{name}: the file has a header ({', '.join(map(short_repr, header[:8]))}) but "
        "no data rows"
    )


def table_warnings(decoding: list[str], blank: int, header: list[str],
                   delimiter: str) -> list[str]:
    """A CSV/TSV file's warnings: the decoder's (extra byte-order marks), the blank lines
    skipped, a one-column header that holds another separator."""
    warnings = list(decoding)
    if blank:
        warnings.append(f"{blank} blank line(s) skipped")
    if len(header) == 1:
        for sep in (";", "|", "\t", ","):
            if sep != delimiter and sep in header[0]:
                warnings.append(
                    f"the header is one column containing {sep!r}: is {sep!r} the separator?"
                )
                break
    return warnings


def text_frame(header: list[str], chunks: list[list[pa.Array]]) -> pd.DataFrame:
    """String columns (:data:`TEXT_DTYPE`) from each column's Arrow chunks."""
    data = {
        h: pd.array(pa.chunked_array(parts, type=pa.large_string()), dtype=TEXT_DTYPE)
        for h, parts in zip(header, chunks, strict=True)
    }
    return pd.DataFrame(data, copy=False)


def parse_delimited(
    lines: _Lines, name: str, delimiter: str, *, max_cell: int | None = None,
    check_nul: bool = True,
) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """Parse lines of CSV or TSV into string columns (see the module docstring).

    ``max_cell``: most characters a cell may have (a quoted cell may span lines, so the
    line limit alone does not bound it); None: no limit beyond the csv module's 2**31 - 1.
    ``check_nul``: refuse NUL characters here (the UTF-8 stream checks its bytes itself).
    """
    batches = DelimitedBatches(lines, name, delimiter, max_cell=max_cell, check_nul=check_nul)
    chunks: list[list[pa.Array]] = []
    starts: list[np.ndarray] = []
    for arrays, batch_starts in batches:
        if not chunks:
            chunks = [[] for _ in arrays]
        for parts, array in zip(chunks, arrays, strict=True):
            parts.append(array)
        starts.append(batch_starts)
    return text_frame(batches.header, chunks), np.concatenate(starts), batches.warnings


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
    return DatasetFormatError(f"{name}: line {line}: malformed {kind}: {msg}")
