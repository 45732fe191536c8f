"""Writing tables safely: spreadsheet-safe CSV and Parquet that keeps every value.

CSV files are UTF-8 (no BOM), RFC 4180: comma-separated, ``"`` quoting where needed,
CRLF line ends (so that a lone ``\\r`` inside a value is always quoted and survives).

Spreadsheet safety (``sanitize=True``, the default): a text cell, or a header, that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is prefixed with a
single quote ``'`` so that Excel, LibreOffice and Google Sheets show it as text instead of
evaluating it as a formula (OWASP "CSV injection"). Numeric columns are never changed.

Both writers take an iterator of Arrow tables (chunks) and write through a temporary file
renamed at the end, so memory stays bounded and a failed write leaves nothing behind: the
temporary file ``.<name>.part-<token>`` is removed on any error (a full disk included) and
on ``SystemExit`` (the CLI turns SIGTERM into one); one a killed process left is swept by
the next export to the same target, and by :func:`aflite_core.runs.folder.cleanup_stale`
in the runs root, once a day old.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

#: First characters that make a spreadsheet evaluate a cell.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


#: What is prepended to a dangerous cell.
NEUTRALIZER = "'"


CSV_LINE_TERMINATOR = "\r\n"


DEFAULT_CHUNK_ROWS = 50_000


_PREFIX_SET = frozenset(FORMULA_PREFIXES)


def neutralize_cell(value: Any) -> Any:
    """Return ``value`` with a leading ``'`` if it is text starting with a formula character."""
    if isinstance(value, str) and value[:1] in _PREFIX_SET:
        return NEUTRALIZER + value
    return value


def neutralize_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Neutralise every text cell and header of ``frame`` (a new frame is returned).

    Numeric, boolean and datetime columns are left alone; text, object and categorical
    columns are checked cell by cell (vectorised for pandas string dtypes).
    """
    out = frame.copy()
    types = pd.api.types
    for position in range(frame.shape[1]):
        series = frame.iloc[:, position]
        dtype = series.dtype
        if types.is_numeric_dtype(dtype) or types.is_bool_dtype(dtype) or (
            types.is_datetime64_any_dtype(dtype) or types.is_timedelta64_dtype(dtype)
        ):
            continue
        if types.is_string_dtype(dtype) and not types.is_object_dtype(dtype):
            flag = series.str.slice(0, 1).isin(_PREFIX_SET).fillna(False).to_numpy(dtype=bool)
            if flag.any():
                values = series.astype(object).to_numpy(copy=True)
                values[flag] = [NEUTRALIZER + v for v in values[flag]]
                out.isetitem(position, pd.Series(values, index=frame.index, dtype=dtype))
        else:
            out.isetitem(position, series.astype(object).map(neutralize_cell))
    out.columns = [neutralize_cell(str(c)) for c in frame.columns]
    return out


def _stringify(value: Any) -> Any:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    if isinstance(value, str):
        return value.encode("utf-8", errors="surrogatepass").decode("utf-8", "backslashreplace")
    return str(value)


def parquet_safe_table(frame: pd.DataFrame) -> tuple[pa.Table, dict[str, str]]:
    """Convert ``frame`` (index dropped) to an Arrow table that Parquet can store.

    Columns Arrow cannot type (mixed Python objects, lone surrogates in text) are
    converted to text, cell by cell; column names become strings.

    Returns
    -------
    table : pyarrow.Table
    converted : dict
        ``{column: reason}`` for every column that had to be converted.
    """
    frame = frame.reset_index(drop=True)
    names = [str(c) for c in frame.columns]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"cannot store a table with duplicate column names {dup} as Parquet")
    frame.columns = names
    try:
        return pa.Table.from_pandas(frame, preserve_index=False), {}
    except (pa.ArrowException, ValueError, TypeError, UnicodeError):
        pass
    converted: dict[str, str] = {}
    fixed = frame.copy()
    for column in names:
        try:
            pa.Table.from_pandas(frame[[column]], preserve_index=False)
        except (pa.ArrowException, ValueError, TypeError, UnicodeError) as exc:
            fixed[column] = frame[column].map(_stringify).astype(object)
            converted[column] = f"stored as text ({type(exc).__name__}: {str(exc)[:120]})"
    return pa.Table.from_pandas(fixed, preserve_index=False), converted


#: Marker of the temporary file an export is written to: ``.<name>.part-<token>``.
PART_MARKER = ".part-"
#: A ``.part-`` file older than this (seconds) was left by a killed process.
STALE_PART_SECONDS = 24 * 3600
_MAX_NAME_BYTES = 255


def part_name(final_name: str, token: str | None = None) -> str:
    """``.<final_name>.part-<token>``, the final name cut (in UTF-8 bytes, never inside a
    character) so that the temporary name fits where the final one does."""
    token = token or secrets.token_hex(4)
    room = _MAX_NAME_BYTES - len(f"..part-{token}")
    cut = final_name.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "ignore")
    return f".{cut}{PART_MARKER}{token}"


def sweep_stale_parts(folder: str | os.PathLike, *, prefix: str = ".",
                      max_age: float = STALE_PART_SECONDS) -> list[Path]:
    """Remove ``.part-`` temporary files in ``folder`` (only those whose name starts with
    ``prefix``) left by a process killed mid-export: at once when no process holds one's lock
    (:func:`_hold`), else once older than ``max_age`` seconds."""
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not name.startswith(prefix) or not name.startswith(".") or PART_MARKER not in name:
            continue
        try:
            if entry.is_symlink() or not entry.is_file():
                continue
            if now - entry.stat().st_mtime >= max_age or _abandoned(entry):
                entry.unlink()
                removed.append(entry)
        except OSError:
            continue
    return removed


def _open_target(out: str | os.PathLike | IO[bytes], overwrite: bool,
                 guard: Callable[[Path], Path] | None = None):
    """Return (binary handle, temp path, final path); temp path None for file objects.

    ``guard`` may refuse a target path (the exports refuse one inside a finished run).
    Stale temporary files of the same target (a killed earlier export) are swept first.
    """
    if hasattr(out, "write"):
        return out, None, None
    final = guard(Path(out)) if guard is not None else Path(out)
    if final.is_dir():
        raise IsADirectoryError(f"export target {final} is a folder; give a file name")
    if final.exists() and not overwrite:
        raise FileExistsError(f"export target {final} already exists; pass overwrite to replace it")
    if not final.parent.is_dir():
        raise FileNotFoundError(f"folder {final.parent} of the export target does not exist")
    tmp = final.parent / part_name(final.name)
    sweep_stale_parts(final.parent)
    handle = open(tmp, "wb")  # noqa: SIM115 - closed by _finish
    _hold(handle)
    return handle, tmp, final


def _hold(handle: IO[bytes]) -> None:
    """Lock the open temporary file for as long as this process has it open: the lock goes
    with the process, so a later export's sweep can tell a killed export's file (unlocked)
    from one still being written (locked) at once, instead of waiting a day."""
    try:
        import fcntl  # POSIX only

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (ImportError, OSError):  # no flock here (Windows, some network file systems)
        pass


def _abandoned(path: Path) -> bool:
    """Whether no process holds the temporary file ``path`` open for writing (its lock,
    :func:`_hold`, can be taken); False where locks cannot be taken."""
    try:
        import fcntl  # POSIX only
    except ImportError:
        return False
    try:
        with open(path, "rb") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # locked: an export in progress
            return True
    except OSError:
        return False


def _finish(handle, tmp: Path | None, final: Path | None, ok: bool) -> None:
    """Close the temporary file and rename it over the target (``ok``) or remove it.

    The temporary file is removed whatever fails on the way (closing on a full disk
    raises, so does a rename), and the first error is the one raised.
    """
    if tmp is None:
        return
    renamed = False
    try:
        if ok:
            handle.flush()  # a full disk raises here, before the rename
            # renamed while still open (and locked): a sweep never sees it unlocked
            os.replace(tmp, final)
            renamed = True
        handle.close()
    except BaseException:
        with contextlib.suppress(OSError):
            handle.close()
        if renamed:
            final.unlink(missing_ok=True)
        raise
    finally:
        tmp.unlink(missing_ok=True)


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    # integer columns with empty cells stay integers (Int64), not floats: a removal round
    # is written 3, never 3.0
    def nullable_int(t: pa.DataType):
        return pd.Int64Dtype() if pa.types.is_integer(t) else None

    return table.to_pandas(types_mapper=nullable_int)


def csv_chunk(chunk: pa.Table | pd.DataFrame, *, header: bool, sanitize: bool
              ) -> tuple[int, bytes]:
    """One chunk of :func:`write_csv`'s file: its rows and its UTF-8 bytes (the header line
    first when ``header``). A function of the chunk alone, so chunks may be encoded anywhere
    (a cluster's workers, ``map_chunks``) and their bytes joined in order."""
    frame = _to_pandas(chunk) if isinstance(chunk, pa.Table) else chunk
    if sanitize:
        frame = neutralize_frame(frame)
    text = frame.to_csv(None, header=header, index=False, lineterminator=CSV_LINE_TERMINATOR)
    return len(frame), text.encode("utf-8")


def write_csv(
    chunks: Iterable[pa.Table | pd.DataFrame],
    out: str | os.PathLike | IO[bytes],
    *,
    sanitize: bool = True,
    overwrite: bool = False,
    guard: Callable[[Path], Path] | None = None,
    map_chunks: Callable[[Callable, Iterable], Iterable] | None = None,
) -> int:
    """Stream table chunks into one CSV file (header from the first chunk).

    Parameters
    ----------
    chunks : iterable of pyarrow.Table or DataFrame
        Chunks with identical columns; the index of DataFrames is not written.
    out : path or binary file object
        Target; a path is written through a temporary file and renamed at the end.
    sanitize : bool, default True
        Neutralise formula-like text cells (see the module docstring).
    overwrite : bool, default False
        Replace an existing file.
    guard : callable, optional
        Called with the target path; raises to refuse it (returns the path to use).
    map_chunks : callable, optional
        ``map_chunks(fn, items)``: ``fn`` of each item, in order, as an iterator (e.g. tasks
        on a Dask cluster's workers, a few ahead: :func:`aflite_core.represent._fold_pool.
        stream_ordered`); each item is ``(chunk, header)`` and ``fn`` encodes it
        (:func:`csv_chunk`). Default: here, one chunk after another. The same bytes either way.

    Returns
    -------
    int
        Number of data rows written.
    """
    handle, tmp, final = _open_target(out, overwrite, guard)
    ok = False
    n_rows = 0
    items = ((chunk if map_chunks is None else _sendable(chunk), i == 0)
             for i, chunk in enumerate(chunks))
    encode = functools.partial(_csv_item, sanitize=sanitize)
    try:
        for rows, data in (map(encode, items) if map_chunks is None
                           else map_chunks(encode, items)):
            handle.write(data)
            n_rows += rows
        if hasattr(handle, "flush"):
            handle.flush()  # raises on a full disk
        ok = True
    finally:
        _finish(handle, tmp, final, ok)
    return n_rows


def _csv_item(item: tuple[pa.Table | pd.DataFrame | bytes, bool], *, sanitize: bool
              ) -> tuple[int, bytes]:
    chunk = item[0]
    if isinstance(chunk, bytes):  # an Arrow IPC stream (_sendable)
        chunk = pa.ipc.open_stream(chunk).read_all()
    return csv_chunk(chunk, header=item[1], sanitize=sanitize)


def _sendable(chunk: pa.Table | pd.DataFrame) -> pa.Table | pd.DataFrame | bytes:
    """An Arrow chunk as the bytes of an IPC stream, to be sent elsewhere: a pickled slice of
    a table carries its parents' whole buffers (a 50,000-row slice of 200,000 rows sent all
    24 MB), the IPC stream only its own rows."""
    if not isinstance(chunk, pa.Table):
        return chunk
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, chunk.schema) as writer:
        writer.write_table(chunk)
    return sink.getvalue().to_pybytes()


def write_parquet(
    chunks: Iterable[pa.Table | pd.DataFrame],
    out: str | os.PathLike | IO[bytes],
    *,
    schema: pa.Schema | None = None,
    overwrite: bool = False,
    guard: Callable[[Path], Path] | None = None,
) -> int:
    """Stream table chunks into one Parquet file.

    ``schema`` is used when there are no chunks (an empty export still has columns);
    otherwise the first chunk's schema is used and later chunks are cast to it. ``guard``
    as in :func:`write_csv`.

    Returns
    -------
    int
        Number of rows written.
    """
    handle, tmp, final = _open_target(out, overwrite, guard)
    ok = False
    writer = None
    n_rows = 0
    try:
        for chunk in chunks:
            table = chunk if isinstance(chunk, pa.Table) else parquet_safe_table(chunk)[0]
            if writer is None:
                writer = pq.ParquetWriter(handle, table.schema)
            elif not table.schema.equals(writer.schema):
                table = table.cast(writer.schema)
            writer.write_table(table)
            n_rows += table.num_rows
        if writer is None:
            writer = pq.ParquetWriter(handle, schema if schema is not None else pa.schema([]))
        writer.close()
        ok = True
    finally:
        try:
            if writer is not None and not ok:
                with contextlib.suppress(Exception):  # already failing: keep that error
                    writer.close()
        finally:
            _finish(handle, tmp, final, ok)
    return n_rows


def unique_column_name(name: str, taken: Iterable[str]) -> str:
    """``name``, or ``aflite_<name>``, ``aflite_<name>_2``, ... if it is already taken."""
    taken = set(taken)
    if name not in taken:
        return name
    candidate, k = f"aflite_{name}", 1
    while candidate in taken:
        k += 1
        candidate = f"aflite_{name}_{k}"
    return candidate


def index_values(index: pd.Index) -> np.ndarray:
    """``index.to_numpy()``, but a RangeIndex's values made anew: its ``to_numpy()`` keeps
    them on the index (8 bytes a row for as long as the frame lives: 40 MB at 5M rows)."""
    if isinstance(index, pd.RangeIndex):
        return np.arange(index.start, index.stop, index.step, dtype=np.int64)
    return index.to_numpy()


def same_ids(a: Any, b: Any) -> bool:
    """Whether two arrays of row ids hold equal values in the same order.

    Integer ids are compared as integers; others (str ids, floats, mixed) as Python
    objects, which makes an object per value (0.4 GB for two arrays of 5M ints).
    """
    a, b = np.asarray(a), np.asarray(b)
    if len(a) != len(b):
        return False
    if a.dtype.kind in "iub" and b.dtype.kind in "iub":
        return bool(np.array_equal(a, b))
    return bool(np.array_equal(a.astype(object), b.astype(object)))
