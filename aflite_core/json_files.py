"""The one reader of the JSON files the product did not just write itself.

Every JSON file read from a run folder (``summary.json``, a measure's ``.json``), a cache (an
embedding record, a job file, a worker's progress line) or a ``datasets`` folder
(``state.json``, ``dataset_dict.json``, ``dataset_info.json``) goes through
:func:`read_json_file` or :func:`loads_json`: a file over :data:`MAX_JSON_BYTES`, one that is
not UTF-8 or not JSON, or a value nested deeper than :data:`MAX_JSON_DEPTH` levels raises
:class:`~aflite_core.errors.DamagedFileError` saying which limit it passed. Callers turn that
into their own family's error (a run is "damaged", a dataset folder is refused).

Without the depth limit, a 15 KB ``summary.json`` nesting one key 1,000 levels deep raised
``RecursionError`` in ``json.loads`` and took every page of the dashboard down; nested less
deeply it parsed, and then broke whatever walked it recursively later (a copy, a printout).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from aflite_core.errors import DamagedFileError

__all__ = ["MAX_JSON_BYTES", "MAX_JSON_DEPTH", "json_depth", "loads_json", "read_json_file"]

#: The deepest nesting accepted (a JSON object or array is one level). The product writes
#: nothing deeper than 8 levels; a file past this was not written by it.
MAX_JSON_DEPTH = 64
#: The largest JSON file read (bytes). The largest the product writes (a measure's record
#: at millions of rows) is a few MB.
MAX_JSON_BYTES = 64 << 20


def json_depth(value: Any, *, limit: int | None = None) -> int:
    """The nesting depth of a parsed JSON value (a scalar is 0, ``[]`` and ``{}`` are 1).

    Walked with an explicit stack, so a deep value cannot exhaust Python's recursion; with
    ``limit`` the walk stops as soon as it passes it (and returns ``limit + 1``).
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if limit is not None and deepest > limit:
                return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def loads_json(text: str | bytes, *, name: str, max_depth: int = MAX_JSON_DEPTH,
               **kwargs: Any) -> Any:
    """Parse JSON ``text`` within the depth limit.

    Parameters
    ----------
    text : str or bytes
        The JSON text (bytes are decoded as UTF-8).
    name : str
        What the text is, for the message (a file's name, never a server path).
    max_depth : int
        The deepest nesting accepted.
    **kwargs
        Passed to :func:`json.loads` (``object_pairs_hook``, ...).

    Raises
    ------
    DamagedFileError
        Not UTF-8, not JSON, or nested deeper than ``max_depth``.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DamagedFileError(
                f"{name} is damaged: not UTF-8 text (byte {exc.start})") from None
    try:
        value = json.loads(text, **kwargs)
    except RecursionError:
        raise DamagedFileError(
            f"{name} is damaged: nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise DamagedFileError(
            f"{name} is damaged: not valid JSON ({exc.msg} at line {exc.lineno}, "
            f"column {exc.colno})") from None
    except ValueError as exc:  # e.g. an integer of over 4,300 digits
        raise DamagedFileError(f"{name} is damaged: {str(exc)[:120]}") from None
    if json_depth(value, limit=max_depth) > max_depth:
        raise DamagedFileError(
            f"{name} is damaged: nested deeper than {max_depth} levels")
    return value


def read_json_file(path: str | os.PathLike, *, name: str | None = None,
                   max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH,
                   **kwargs: Any) -> Any:
    """Read one JSON file within the size and depth limits.

    Parameters
    ----------
    path : path
        The file.
    name : str, optional
        How the message names it (default: the file's name; never the server's path).
    max_bytes, max_depth : int
        The largest file and the deepest nesting accepted.
    **kwargs
        Passed to :func:`json.loads`.

    Raises
    ------
    DamagedFileError
        Over ``max_bytes``, not a regular file, not UTF-8, not JSON, or too deep.
    FileNotFoundError
        The file does not exist (the caller decides whether that is damage).
    """
    path = Path(path)
    label = name or path.name
    if not path.exists():
        raise FileNotFoundError(label)
    if not path.is_file():  # a FIFO would block the open, /dev/zero never ends
        raise DamagedFileError(f"{label} is damaged: not a regular file")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise DamagedFileError(
            f"{label} is damaged: it cannot be read ({exc.strerror or type(exc).__name__})"
        ) from None
    if len(raw) > max_bytes:
        raise DamagedFileError(
            f"{label} is damaged: larger than {max_bytes:,} bytes, the most a JSON file of a "
            "run, a cache or a datasets folder may hold")
    return loads_json(raw, name=label, max_depth=max_depth, **kwargs)
