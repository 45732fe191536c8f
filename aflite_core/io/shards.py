"""Datasets stored as many files: folders or globs of shards, and Hugging Face ``datasets``
folders.

:func:`read_table` (``aflite_core.io._readers``) hands a folder or a glob here:

* **A Hugging Face ``datasets`` folder**, as ``Dataset.save_to_disk`` writes it
  (``state.json``, ``dataset_info.json``, ``data-0000i-of-0000n.arrow``): the Arrow files are
  read as streams of record batches with pyarrow (the ``datasets`` package is not needed;
  with it, a ``Dataset`` or ``DatasetDict`` object is read in memory: :func:`read_hf_object`).
  ``ClassLabel`` columns become their names (``-1``, "no label", becomes empty, so the row is
  excluded as unlabelled). A ``DatasetDict`` folder (``dataset_dict.json``) gives one table
  with its keys in a ``split`` column (``hf_split`` when the data has a ``split`` column).
* **A folder of shards** (Parquet, CSV, TSV or JSON Lines files, optionally gzipped, directly
  inside; hidden files and names starting with ``_``, such as Spark's ``_SUCCESS``, are
  skipped) or **a glob** (``data/train-*.parquet``): every shard is read with the single-file
  reader, in name order, and the rows concatenated.

Every shard must have the same columns (a shard that differs is refused, naming it and the
difference) and one format. Columns the audit cannot hold as values (nested lists or structs,
binary data that is not UTF-8 text: images, audio) are dropped with a notice, never a reason
to refuse the data. ``max_bytes`` bounds the shards' (or a ``datasets`` folder's Arrow
files') total size on disk and each shard's decoded size. Row locations in messages name
the shard (``train-00001.parquet, record 7``).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pandas.api import types

from aflite_core.errors import DamagedFileError
from aflite_core.io._file_walk import GLOB_CHARS, glob_files, inside, walk_files
from aflite_core.io._readers import (
    MAX_LINE_BYTES,
    DatasetFormatError,
    DatasetSizeError,
    RawTable,
    check_batch_cells,
    drop_unheld_columns,
    format_from_name,
    read_table,
    short_repr,
)
from aflite_core.json_files import read_json_file

__all__ = ["GLOB_CHARS", "ROOTS_VARIABLE", "allowed_roots", "check_same_columns",
           "reconcile_types", "check_total_size", "hf_folder_files", "is_hf_object",
           "looks_like_glob", "read_hf_object", "read_sharded", "read_source", "shard_reader",
           "sharded_name", "source_stamp"]

#: Name of the split column a DatasetDict's keys fill (``hf_split`` if the data has one).
SPLIT_COLUMN = "split"
#: Files of a Hugging Face ``datasets`` folder.
HF_STATE, HF_INFO, HF_DICT = "state.json", "dataset_info.json", "dataset_dict.json"


def read_source(source: Any, *, name: str | None = None, format: str | None = None,
                encoding: str | None = None, max_bytes: int | None = None,
                max_line_bytes: int | None = MAX_LINE_BYTES,
                map_shards: Callable | None = None) -> RawTable:
    """Any input ``load_dataset`` takes as a :class:`RawTable`: a folder or a glob of shards
    or a ``datasets`` folder (:func:`read_sharded`), a ``datasets`` object
    (:func:`read_hf_object`), else one file, bytes or a DataFrame
    (:func:`aflite_core.io.read_table`, same options). A :class:`RawTable` already
    read (the dashboard's column preview) is taken as it is. ``map_shards`` reads the shards
    of a folder or glob elsewhere (:func:`read_sharded`)."""
    if isinstance(source, RawTable):
        return source
    if is_hf_object(source):
        return read_hf_object(source, name or "datasets")
    folder = isinstance(source, (str, os.PathLike)) and Path(source).is_dir()
    if not (folder or looks_like_glob(source)):
        return read_table(source, name=name, format=format, encoding=encoding,
                          max_bytes=max_bytes, max_line_bytes=max_line_bytes)
    return read_sharded(source, name=name or sharded_name(source),
                        reader=shard_reader(format, encoding, max_line_bytes),
                        max_bytes=max_bytes, map_shards=map_shards, max_cell=max_line_bytes)


def sharded_name(source: str | os.PathLike) -> str:
    """How messages name a folder (by its name) or a glob (with its folder:
    ``"train/*.parquet"``)."""
    pattern = Path(source)
    return pattern.name if pattern.is_dir() else f"{pattern.parent.name}/{pattern.name}"


def shard_reader(format: str | None, encoding: str | None,
                 max_line_bytes: int | None) -> Callable[[Path, int | None], RawTable]:
    """``reader(path, max_bytes)``: one shard read with the caller's options
    (:func:`read_sharded`'s ``reader``)."""
    return functools.partial(_read_one, format=format, encoding=encoding,
                             max_line_bytes=max_line_bytes)


def _read_one(path: Path, limit: int | None, *, format: str | None, encoding: str | None,
              max_line_bytes: int | None) -> RawTable:
    return read_table(path, format=format, encoding=encoding, max_bytes=limit,
                      max_line_bytes=max_line_bytes)


def looks_like_glob(source: Any) -> bool:
    """Whether ``source`` is a path string with glob characters that names no file."""
    if not isinstance(source, str) or not GLOB_CHARS & set(source):
        return False
    return not Path(source).exists()


#: Environment variable that limits the dashboard's "path on this server" to folders
#: (``os.pathsep``-separated); unset, any path the server can read is allowed.
ROOTS_VARIABLE = "AFLITE_DATA_ROOTS"


def allowed_roots() -> list[Path] | None:
    """The folders :data:`ROOTS_VARIABLE` allows, resolved; None when it is unset."""
    value = os.environ.get(ROOTS_VARIABLE, "").strip()
    if not value:
        return None
    return [Path(p).expanduser().resolve() for p in value.split(os.pathsep) if p.strip()]


def source_stamp(source: str, *, roots: list[Path] | None = None) -> str:
    """A digest of what ``source`` (a file, a folder or a glob) holds: every data file's
    path, size and modification time, so a cache keyed by it sees a changed or added shard.

    Raises
    ------
    FileNotFoundError
        Nothing at ``source`` (a glob matching no file).
    PermissionError
        ``source`` lies outside ``roots`` (when given).
    """
    path = Path(source).expanduser()
    if roots is not None:
        _check_inside(path.parent if looks_like_glob(source) else path, source, roots)
    if path.is_file():
        files = [path]
    elif path.is_dir() and is_hf_folder(path):  # exactly the files the read will open
        files = hf_folder_files(path, source) + [
            p for p in walk_files(path, name=source) if p.suffix == ".json"]
    elif path.is_dir():
        files = walk_files(path, name=source)
    elif looks_like_glob(source):
        files = glob_files(str(path), name=source)
    else:
        files = []
    if not files:
        raise FileNotFoundError(f"{source}: no such file, folder or matching shard")
    if roots is not None:  # what a glob matched, or a symbolic link leads to, stays inside
        for file in files:
            _check_inside(file, source, roots)
    digest = hashlib.sha256()
    for file in files:
        info = file.stat()
        digest.update(f"{file}\x1f{info.st_size}\x1f{info.st_mtime_ns}\x1e".encode())
    return digest.hexdigest()


def _check_inside(path: Path, source: str, roots: list[Path]) -> None:
    resolved = path.resolve()
    if not any(resolved == root or root in resolved.parents for root in roots):
        allowed = ", ".join(str(r) for r in roots)
        raise PermissionError(f"{source}: outside the folders this server reads data from "
                              f"({ROOTS_VARIABLE}: {allowed})")


def read_sharded(source: str | Path, *, name: str, reader, max_bytes: int | None,
                 map_shards: Callable | None = None, max_cell: int | None = MAX_LINE_BYTES
                 ) -> RawTable:
    """Read a folder or a glob of shards, or a ``datasets`` folder, as one table.

    Parameters
    ----------
    source : str or Path
        A folder, or a glob pattern.
    name : str
        Name used in messages.
    reader : callable
        ``reader(path, max_bytes) -> RawTable`` for one shard file (the single-file reader
        with the caller's format and encoding options).
    max_bytes : int or None
        Bound on the shards' total size on disk and on each shard's decoded size.
    map_shards : callable, optional
        ``map_shards(read, paths) -> tables`` (in ``paths`` order): reads the shards
        elsewhere, e.g. one task per shard on a Dask cluster's workers (the CLI's
        ``--scheduler``); its ``engine`` attribute goes to ``RawTable.read_by``. Workers
        that cannot open a shard (the path is not on storage they share) leave the reading
        to this process, with a warning. Default: one shard after another, here. A
        ``datasets`` folder is always read here.
    max_cell : int or None
        Bound on each text cell of a ``datasets`` folder's Arrow files (shards: the
        ``reader``'s own ``max_line_bytes``).

    Raises
    ------
    DatasetFormatError
        A folder that holds neither shards nor a ``datasets`` folder, a glob that matches
        nothing, shards of several formats, or a shard whose columns differ (named).
    DatasetSizeError
        Shards larger than ``max_bytes`` together.
    """
    path = Path(source)
    if path.is_dir() and is_hf_folder(path):
        # Arrow files hold the values as they are in memory: their size is what is read
        check_total_size(hf_folder_files(path, name), name, max_bytes)
        if (path / HF_DICT).is_file():
            return _read_hf_dict(path, name, max_cell)
        return _read_hf_dataset(path, name, max_cell)
    files = _shard_files(source, name)
    check_total_size(files, name, max_bytes)
    read_by, notice = "local", None
    tables = None
    if map_shards is not None:
        try:
            tables = list(map_shards(functools.partial(read_shard, reader, max_bytes), files))
            read_by = str(getattr(map_shards, "engine", "mapped"))
        except FileNotFoundError as exc:  # the workers do not see the driver's files
            notice = (f"the shards were read here: the cluster's workers could not open them "
                      f"({exc}); put them on storage the workers share to read them there")
    if tables is None:
        tables = [reader(f, max_bytes) for f in files]
    table = _concatenate(tables, [_relative(f, source) for f in files], name)
    table.read_by = read_by
    if notice:
        table.warnings.append(notice)
    return table


def read_shard(reader: Callable, max_bytes: int | None, path: Path) -> RawTable:
    """One shard (a task of ``map_shards``). The driver listed it, so a shard that is not
    there is on storage this worker does not share: FileNotFoundError (the reader would say
    "file not found" as a DatasetError), and the driver reads the shards itself."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{str(path)!r} is not on the storage of the process reading it")
    return reader(path, max_bytes)


# ----------------------------------------------------------------------------- shards


def _shard_files(source: str | Path, name: str) -> list[Path]:
    """The shard files of a folder or glob, in name order, one format (refused otherwise)."""
    path = Path(source)
    if path.is_dir():
        found = [p for p in walk_files(path, name=name, recursive=False)
                 if _is_data_name(p.name)]
        if not found:
            subfolders = sorted(p.name for p in path.iterdir()
                                if p.is_dir() and not p.is_symlink())
            more = (f"; it has subfolders ({', '.join(map(short_repr, subfolders[:5]))}): "
                    f"pass a glob such as '{path}/*/*.parquet'" if subfolders else "")
            raise DatasetFormatError(
                f"{name}: the folder holds no dataset: expected shard files (.parquet, .csv, "
                ".tsv, .jsonl, optionally .gz) directly inside, or a Hugging Face datasets "
                f"folder (save_to_disk: {HF_STATE} or {HF_DICT}){more}")
    else:
        found = [p for p in glob_files(str(source), name=name) if _is_data_name(p.name)]
        if not found:
            raise DatasetFormatError(f"{name}: the pattern {str(source)!r} matches no data "
                                     "file (.parquet, .csv, .tsv, .jsonl, optionally .gz)")
    formats = {format_from_name(p.name) for p in found}
    if len(formats) > 1:
        by_format = {fmt: next(p.name for p in found if format_from_name(p.name) == fmt)
                     for fmt in sorted(formats, key=str)}
        listing = ", ".join(f"{fmt} ({short_repr(example)})"
                            for fmt, example in by_format.items())
        raise DatasetFormatError(f"{name}: the shards mix formats: {listing}; expected one "
                                 "format for every shard")
    return found


def _is_data_name(file_name: str) -> bool:
    return (not file_name.startswith((".", "_"))
            and format_from_name(file_name) in ("parquet", "csv", "tsv", "jsonl"))


def _relative(path: Path, source: str | Path) -> str:
    base = Path(source) if Path(source).is_dir() else Path(str(source)).parent
    try:
        return str(path.relative_to(base))
    except ValueError:
        return path.name


def check_total_size(files: list[Path], name: str, max_bytes: int | None) -> None:
    """Refuse data files that hold more than ``max_bytes`` on disk together (each file
    counted as often as it is read: the readers name every file once)."""
    if max_bytes is None:
        return
    total = sum(f.stat().st_size for f in files)
    if total > max_bytes:
        raise DatasetSizeError(
            f"{name}: the {len(files)} data files hold {total:,} bytes on disk, over the limit "
            f"of {max_bytes:,} (max_bytes={max_bytes}); not read")


def _listing(shards: list[str], total: int, unit: str) -> str:
    if len(shards) == total and total > 1:
        return f"all {total} {unit}"
    return ", ".join(shards[:3]) + (f" and {len(shards) - 3} more" if len(shards) > 3 else "")


def _concatenate(tables: list[RawTable], names: list[str], name: str,
                 unit: str = "shards") -> RawTable:
    """One table of the shards' rows, in order; every shard with the first one's columns."""
    first = list(tables[0].frame.columns)
    for table, shard in zip(tables[1:], names[1:], strict=True):
        check_same_columns(first, list(table.frame.columns), shard, names[0], name)
    retyped = reconcile_types([t.frame for t in tables], names, name, unit=unit[:-1])
    frame = pd.concat([t.frame[first] for t in tables], ignore_index=True)
    shard_of = np.repeat(np.arange(len(tables), dtype=np.int32),
                         [len(t.frame) for t in tables])
    within = np.concatenate([t.lines if t.lines is not None
                             else np.arange(1, len(t.frame) + 1) for t in tables])
    digest = hashlib.sha256()
    for table, shard in zip(tables, names, strict=True):
        digest.update(f"{shard}\x1f{table.content_hash}\x1e".encode())
    where: dict[str, list[str]] = {}
    for table, shard in zip(tables, names, strict=True):
        for warning in table.warnings:
            where.setdefault(warning, []).append(shard)
    warnings = [f"{_listing(shards, len(names), unit)}: {w}" for w, shards in where.items()]
    warnings.insert(0, f"read {len(tables)} {unit} ({len(frame):,} rows), in "
                       + ("name order" if unit == "shards" else "the DatasetDict's order"))
    dropped = {k: v for t in tables for k, v in t.dropped.items()}
    warnings += list(retyped.values())
    types = {**tables[0].column_types, **{c: "string" for c in retyped}}
    return RawTable(frame, name, tables[0].format, digest.hexdigest(), None,
                    tables[0].encoding, warnings, types, dropped, retyped=retyped,
                    shards=names, shard_of=shard_of, shard_rows=within,
                    shard_unit="line" if all(t.lines is not None for t in tables)
                    else "record")


def check_same_columns(first: list, columns: list, shard: str, first_shard: str,
                       name: str) -> None:
    """Refuse a shard whose columns are not the first shard's, naming it and the difference.

    Raises
    ------
    DatasetFormatError
        If the two sets of columns differ.
    """
    if set(columns) == set(first):
        return
    missing = [c for c in first if c not in columns]
    extra = [c for c in columns if c not in first]
    parts = ([f"missing {', '.join(map(short_repr, missing))}"] if missing else []) \
        + ([f"extra {', '.join(map(short_repr, extra))}"] if extra else [])
    raise DatasetFormatError(
        f"{name}: shard {short_repr(shard)} has other columns than "
        f"{short_repr(first_shard)} ({'; '.join(parts)}); every shard must have the "
        "same columns")


def _kind(values: pd.Series) -> str | None:
    """What a column holds, as far as joining shards goes: number, text, bool, time, other
    (None for a column of missing values only, which joins with any)."""
    if types.is_bool_dtype(values):
        return "true/false values"
    if types.is_numeric_dtype(values):
        return "numbers"
    if types.is_datetime64_any_dtype(values):
        return "times"
    if types.is_string_dtype(values) or isinstance(values.dtype, pd.CategoricalDtype):
        present = values.dropna()
        if not len(present):
            return None
        if values.dtype == object:
            sample = present.iloc[: 1000]
            kinds = {("numbers" if isinstance(v, (int, float, np.number))
                      and not isinstance(v, bool) else "text") for v in sample}
            return kinds.pop() if len(kinds) == 1 else "mixed values"
        return "text"
    return str(values.dtype)


def reconcile_types(frames: list[pd.DataFrame], names: list[str], name: str, *,
                    unit: str = "shard") -> dict[str, str]:
    """Columns that shards type differently (numbers in one, text in another), made text in
    every shard, each with the notice that says so.

    Joined as they are, ``0`` beside ``"0"`` or ``"entailment"`` become different values
    without a word (integer labels in one shard and text in another made six classes of
    three). Each such column becomes text in every shard (``1`` is ``"1"``) and its notice
    names the column, the shards and their types; :func:`aflite_core.io.datasets.load_dataset`
    refuses a column role (the label, the texts, the split, the ids) on such a column with that
    notice. Integers and floats join as numbers; a column that is empty in a shard joins with
    any type.

    Returns
    -------
    dict
        Column -> notice, for every column made text (``frames`` are changed in place).
    """
    retyped: dict[str, str] = {}
    if len(frames) < 2:
        return retyped
    for column in frames[0].columns:
        first: tuple[str, str] | None = None
        for frame, shard in zip(frames, names, strict=True):
            kind = _kind(frame[column]) if column in frame else None
            if kind is None:
                continue
            if first is None:
                first = (kind, shard)
            elif kind != first[0]:
                retyped[str(column)] = (
                    f"{name}: column {short_repr(column)} holds {first[0]} in {unit} "
                    f"{short_repr(first[1])} but {kind} in {unit} {short_repr(shard)}; it is "
                    "read as text in every one (a 0 and a '0' are one value, a 0 and an "
                    f"'entailment' two); write it with one type in every {unit} to use it "
                    "as a label, a text, a split or an id")
                break
        if str(column) in retyped:
            for frame in frames:
                if column in frame:
                    values = frame[column]
                    frame[column] = pd.array(
                        [None if v is None or (isinstance(v, float) and np.isnan(v))
                         or v is pd.NA else str(v) for v in values], dtype="string")
    return retyped


# -------------------------------------------------------------- Hugging Face datasets


def _read_hf_dict(path: Path, name: str, max_cell: int | None = None) -> RawTable:
    """A ``DatasetDict`` folder: each split's Dataset, its key in the split column."""
    splits = hf_dict_splits(path, name)
    tables = [_read_hf_dataset(hf_split_folder(path, split, name), f"{name}/{split}",
                               max_cell)
              for split in splits]
    return _join_splits(tables, splits, name)


def is_hf_folder(path: Path) -> bool:
    """Whether the folder ``path`` is a ``datasets`` folder (``state.json`` or
    ``dataset_dict.json`` directly inside)."""
    return (path / HF_DICT).is_file() or (path / HF_STATE).is_file()


def hf_folder_files(path: Path, name: str) -> list[Path]:
    """Every Arrow file a ``datasets`` folder's read opens, each once, in reading order
    (a DatasetDict's splits in its order): what its size guard counts.

    Raises
    ------
    DatasetFormatError
        An index or state file that names an entry outside the folder, or twice.
    """
    if (path / HF_DICT).is_file():
        return [file for split in hf_dict_splits(path, name)
                for file in hf_data_files(hf_split_folder(path, split, name),
                                          f"{name}/{split}")[0]]
    return hf_data_files(path, name)[0]


def _hf_json(path: Path, name: str) -> Any:
    try:
        return read_json_file(path)
    except DamagedFileError as exc:
        raise DatasetFormatError(f"{name}: {exc}") from None
    except OSError as exc:
        raise DatasetFormatError(f"{name}: {path.name} cannot be read "
                                 f"({exc.strerror or type(exc).__name__})") from None


def _entry_inside(folder: Path, entry: Any, what: str, index_file: str, name: str) -> Path:
    """``folder / entry`` for a plain relative name that stays inside ``folder`` (no absolute
    name, no ``..``, no symbolic link leading out); refused otherwise, naming the entry."""
    shown = short_repr(entry)
    if not isinstance(entry, str) or not entry or "\x00" in entry:
        raise DatasetFormatError(f"{name}: {index_file} names the {what} {shown}; expected "
                                 "the name of an entry of the folder")
    parts = Path(entry).parts
    if Path(entry).is_absolute():  # named by its last part: a page shows no server path
        raise DatasetFormatError(
            f"{name}: {index_file} names the {what} {short_repr('…/' + Path(entry).name)} by "
            "an absolute path, which is not inside the folder; every name must be relative "
            "to it, without '..'")
    if ".." in parts or "\\" in entry:
        raise DatasetFormatError(
            f"{name}: {index_file} names the {what} {shown}, which is not inside the folder; "
            "every name must be relative to it, without '..'")
    target = folder / entry
    if (target.exists() or target.is_symlink()) and not inside(target, folder):
        raise DatasetFormatError(
            f"{name}: {index_file} names the {what} {shown}, a symbolic link that leads out "
            "of the folder; it is not followed")
    return target


def _named_once(entries: list[Any], what: str, index_file: str, name: str) -> None:
    seen: set[str] = set()
    for entry in entries:
        key = os.path.normpath(str(entry))
        if key in seen:
            count = sum(os.path.normpath(str(e)) == key for e in entries)
            raise DatasetFormatError(
                f"{name}: {index_file} names the {what} {short_repr(entry)} {count} times; "
                "each must be named once (its rows would be read again)")
        seen.add(key)


def hf_dict_splits(path: Path, name: str) -> list[str]:
    """The splits a ``DatasetDict`` folder's index lists, in its order (each a folder name
    inside it, named once)."""
    index = _hf_json(path / HF_DICT, name)
    splits = index.get("splits") if isinstance(index, dict) else None
    if not isinstance(splits, list):
        raise DatasetFormatError(f"{name}: {HF_DICT} is not a datasets DatasetDict index; "
                                 "expected {\"splits\": [...]}")
    if not splits:
        raise DatasetFormatError(f"{name}: {HF_DICT} lists no split")
    for split in splits:
        _entry_inside(path, split, "split", HF_DICT, name)
    _named_once(splits, "split", HF_DICT, name)
    return [str(s) for s in splits]


def hf_split_folder(path: Path, split: str, name: str) -> Path:
    """The ``Dataset`` folder of a ``DatasetDict``'s split (refused when it is not one, or
    lies outside the folder)."""
    folder = _entry_inside(path, split, "split", HF_DICT, name)
    if not (folder / HF_STATE).is_file():
        raise DatasetFormatError(f"{name}: split {short_repr(split)} of {HF_DICT} has no "
                                 f"folder {short_repr(split)} with a {HF_STATE}")
    return folder


def _join_splits(tables: list[RawTable], splits: list[str], name: str) -> RawTable:
    """A DatasetDict's splits as one table, each split's key in the split column
    (``hf_split`` when the data has a ``split`` column of its own)."""
    column = split_column(list(tables[0].frame.columns))
    for table, split in zip(tables, splits, strict=True):
        add_split(table.frame, column, split)
    return joined_splits(tables, splits, name, column)


def split_column(columns: list) -> str:
    """The column a DatasetDict's keys fill, given its first split's columns."""
    return SPLIT_COLUMN if SPLIT_COLUMN not in columns else "hf_split"


def add_split(frame: pd.DataFrame, column: str, split: str) -> None:
    """A split's key as the column ``column`` of (some of) its rows."""
    frame[column] = pd.array([split] * len(frame), dtype="string")


def joined_splits(tables: list[RawTable], splits: list[str], name: str,
                  column: str) -> RawTable:
    """The splits' tables (their key in ``column``) as one, with the DatasetDict's notice."""
    out = _concatenate(tables, splits, name, unit="splits")
    out.warnings.insert(1, f"a datasets DatasetDict: its keys ({', '.join(splits)}) fill "
                           f"the column {column!r}")
    return out


def _read_hf_dataset(path: Path, name: str, max_cell: int | None = None) -> RawTable:
    """A ``Dataset`` folder: its Arrow stream files, in ``state.json``'s order."""
    files, fingerprint = hf_data_files(path, name)
    batches, schema = [], None
    for file in files:
        for batch, file_schema in hf_batches(file, name, max_cell=max_cell):
            schema = schema or file_schema
            if batch is not None:
                batches.append(batch)
    table = pa.Table.from_batches(batches, schema=schema)
    return arrow_raw(table, hf_features(path / HF_INFO), name, hf_digest(files, fingerprint))


def hf_data_files(path: Path, name: str) -> tuple[list[Path], Any]:
    """A ``Dataset`` folder's Arrow files in ``state.json``'s order, and its fingerprint.

    Each file must be named once, by a plain name inside the folder (no absolute name, no
    ``..``, no symbolic link leading out); refused otherwise, naming the entry.
    """
    state = _hf_json(path / HF_STATE, name)
    entries = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and "filename" in e for e in entries):
        raise DatasetFormatError(f"{name}: {HF_STATE} is not a datasets state file (expected "
                                 "'_data_files': [{\"filename\": ...}, ...]); expected the "
                                 "folder Dataset.save_to_disk writes")
    names = [e["filename"] for e in entries]
    files = [_entry_inside(path, n, "data file", HF_STATE, name) for n in names]
    _named_once(names, "data file", HF_STATE, name)
    return files, state.get("_fingerprint")


def hf_batches(file: Path, name: str, *, max_cell: int | None = None) -> Any:
    """The record batches of one Arrow file of a ``datasets`` folder (a stream, or an IPC
    file), each with the file's schema, read as they are taken (memory-mapped); first
    ``(None, schema)`` (a file may hold no batch). Each batch is validated (a damaged body
    is refused, naming the file) and its text cells held to ``max_cell`` bytes."""
    try:
        with pa.memory_map(str(file), "r") as source:
            try:
                stream = pa.ipc.open_stream(source)
            except pa.ArrowInvalid:  # an Arrow IPC file rather than a stream
                source.seek(0)
                reader = pa.ipc.open_file(source)
                yield None, reader.schema
                rows = 0
                for i in range(reader.num_record_batches):
                    batch = _checked(reader.get_batch(i), file, i, name, max_cell, rows)
                    rows += batch.num_rows
                    yield batch, reader.schema
            else:
                yield None, stream.schema
                rows = 0
                for i, batch in enumerate(stream):
                    batch = _checked(batch, file, i, name, max_cell, rows)
                    rows += batch.num_rows
                    yield batch, stream.schema
    except FileNotFoundError:
        raise DatasetFormatError(f"{name}: {HF_STATE} lists {short_repr(file.name)}, which is "
                                 "missing") from None
    except (pa.ArrowException, OSError) as exc:
        # the library's message may quote the file's bytes: its kind only
        raise DatasetFormatError(f"{name}: {short_repr(file.name)} is not a readable Arrow "
                                 f"file ({type(exc).__name__}); the datasets folder is damaged: "
                                 "save it again") from None


def _checked(batch: Any, file: Path, index: int, name: str, max_cell: int | None,
             rows_before: int) -> Any:
    """A record batch whose buffers are what its schema says (offsets in bounds, text valid
    UTF-8): a memory-mapped batch is not checked when read, and a damaged body once failed
    later, deep in the loader, with the file's bytes in the message."""
    try:
        batch.validate(full=True)
    except pa.ArrowException as exc:
        raise DatasetFormatError(
            f"{name}: {short_repr(file.name)} is damaged: its record batch {index + 1} does "
            f"not hold what its schema says ({type(exc).__name__}); save the datasets folder "
            "again") from None
    check_batch_cells(batch, max_cell, f"{name}/{file.name}", rows_before)
    return batch


def hf_digest(files: list[Path], fingerprint: Any) -> str:
    """A ``Dataset`` folder's content hash: its Arrow files' bytes (a file of 64 MiB or
    more by its name, size and the folder's fingerprint)."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.read_bytes() if file.stat().st_size < (64 << 20)
                      else f"{file.name}:{file.stat().st_size}:{fingerprint}".encode())
    return digest.hexdigest()


def arrow_raw(table: Any, class_labels: dict[str, list[str]], name: str,
              content_hash: str) -> RawTable:
    """A ``datasets`` table as a RawTable: unheld columns dropped, ClassLabels named."""
    warnings: list[str] = []
    dropped: dict[str, str] = {}
    table = drop_unheld_columns(table, name, warnings, dropped, nested=True)
    frame = table.to_pandas()
    for column, names in class_labels.items():
        if column in frame:
            frame[column] = _class_names(frame[column], names)
            warnings.append(f"column {short_repr(column)} is a ClassLabel: its values are "
                            f"read as their names ({', '.join(names[:6])})")
    frame.index = pd.RangeIndex(len(frame))
    types = {str(f.name): str(f.type) for f in table.schema}
    return RawTable(frame, name, "arrow", content_hash, None, None, warnings, types,
                    dropped)


def is_hf_object(source: Any) -> bool:
    """Whether ``source`` is a ``datasets.Dataset`` or ``DatasetDict`` (duck-typed: the
    package is imported only if the caller passes one)."""
    module = type(source).__module__ or ""
    return module.split(".")[0] == "datasets" and type(source).__name__ in (
        "Dataset", "DatasetDict")


def read_hf_object(source: Any, name: str) -> RawTable:
    """A ``datasets.Dataset`` in memory (or a ``DatasetDict``: its keys in the split
    column), read from its Arrow table without a copy to disk."""
    if type(source).__name__ == "DatasetDict":
        splits = [str(k) for k in source]
        if not splits:
            raise DatasetFormatError(f"{name}: the DatasetDict holds no split")
        tables = [read_hf_object(source[k], f"{name}/{k}") for k in source]
        return _join_splits(tables, splits, name)
    table = source.with_format("arrow")[:]
    labels = {str(k): [str(n) for n in v.names] for k, v in source.features.items()
              if type(v).__name__ == "ClassLabel"}
    fingerprint = getattr(source, "_fingerprint", None) or str(len(table))
    digest = hashlib.sha256(f"datasets:{fingerprint}:{table.num_rows}".encode()).hexdigest()
    return arrow_raw(table, labels, name, digest)


def hf_features(info_path: Path) -> dict[str, list[str]]:
    """ClassLabel columns of a ``dataset_info.json`` and their names ({} when the file is
    absent or names no ClassLabel).

    Raises
    ------
    DatasetFormatError
        The file is damaged (not JSON, over the limits, not an object).
    """
    if not info_path.is_file():
        return {}
    name = info_path.parent.name
    info = _hf_json(info_path, name)
    if not isinstance(info, dict):
        raise DatasetFormatError(f"{name}: {HF_INFO} is not a datasets info file (expected a "
                                 f"JSON object, found {type(info).__name__})")
    features = info.get("features") or {}
    if not isinstance(features, dict):
        return {}
    return {str(k): [str(n) for n in v["names"]] for k, v in features.items()
            if isinstance(v, dict) and v.get("_type") == "ClassLabel"
            and isinstance(v.get("names"), list) and v["names"]}


def _class_names(values: pd.Series, names: list[str]) -> pd.Series:
    """ClassLabel ints as their names; -1 (no label) and other out-of-range values empty."""
    codes = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    lookup = np.asarray(names, dtype=object)
    valid = np.isfinite(codes) & (codes >= 0) & (codes < len(names))
    out = np.full(len(codes), "", dtype=object)
    out[valid] = lookup[codes[valid].astype(np.int64)]
    return pd.Series(pd.array(out, dtype="string"), index=values.index)
