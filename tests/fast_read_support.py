"""Reading a file both ways -- Arrow's path forced on and turned off -- and comparing
(``tests/io/test_arrow_delimited.py``, ``tests/io/test_arrow_jsonl.py``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hostile_cases import CASES, written_file_name

import aflite_core.io._arrow_delimited as arrow_delimited
from aflite_core.errors import DatasetError
from aflite_core.io import read_table


def read(path: Path, fast: bool, monkeypatch, *, as_bytes: bool = False, **options):
    """``read_table(path)`` with Arrow's path forced on (every size) or off; an error is
    returned, not raised. ``as_bytes``: the file's bytes are read (an upload)."""
    with monkeypatch.context() as patch:
        patch.setattr(arrow_delimited, "FAST_MIN_BYTES", 0 if fast else 1 << 62)
        try:
            if as_bytes:
                return read_table(path.read_bytes(), name=path.name, **options)
            return read_table(path, **options)
        except DatasetError as exc:
            return exc


def assert_same(fast, slow, data: bytes = b"") -> bool:
    """Both reads gave the same error, or the same table (values, dtypes, lines, warnings,
    hash, format, encoding). Returns whether the file was accepted."""
    if isinstance(slow, Exception):
        assert type(fast) is type(slow) and str(fast) == str(slow), (fast, slow, data[:200])
        return False
    assert not isinstance(fast, Exception), (fast, data[:200])
    pd.testing.assert_frame_equal(fast.frame, slow.frame)
    np.testing.assert_array_equal(fast.lines, slow.lines)
    assert fast.warnings == slow.warnings, data[:200]
    assert fast.content_hash == slow.content_hash
    assert (fast.format, fast.encoding) == (slow.format, slow.encoding)
    return True


def same_both_ways(path: Path, monkeypatch, **options) -> bool:
    """Read ``path`` both ways, as a file and as bytes, and :func:`assert_same`."""
    accepted = assert_same(read(path, True, monkeypatch, **options),
                           read(path, False, monkeypatch, **options), path.read_bytes())
    assert_same(read(path, True, monkeypatch, as_bytes=True, **options),
                read(path, False, monkeypatch, as_bytes=True, **options), path.read_bytes())
    return accepted


def single_file_cases(suffixes: tuple[str, ...]) -> list:
    """The cases of ``hostile_cases.py`` whose input is one file with one of ``suffixes``
    (told by the file's name where the case says it, else by writing the case into a scratch
    folder: this runs when the tests are collected, in every worker)."""
    chosen = []
    with tempfile.TemporaryDirectory() as folder:
        for number, case in enumerate(CASES):
            name = written_file_name(case)
            if name is not None:
                if Path(name).suffix in suffixes:
                    chosen.append(case)
                continue
            place = Path(folder) / str(number)
            place.mkdir()
            try:
                path = case.write(place)
            except Exception:  # noqa: BLE001 - a case that needs more than a folder
                continue
            if path.is_file() and path.suffix in suffixes:
                chosen.append(case)
    return chosen


def spy_on(monkeypatch, module, name: str) -> list[bool]:
    """Replace ``module.name`` (a fast reader as the readers call it) by a wrapper that notes,
    for each call, whether it gave a table (True) or handed the file back (False)."""
    taken: list[bool] = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        result = real(*args, **kwargs)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(module, name, spy)
    return taken
