"""The errors of loading a dataset, and how their messages show sizes.

Defined here, below the readers and the line limit that raise them; ``aflite_core.io.readers``
and ``aflite_core.io.datasets`` re-export them (their public home is
``aflite_core.io.datasets``).
"""

from __future__ import annotations


class DatasetError(ValueError):
    """Any problem with an input dataset; the message names the file, where, and what."""


class DatasetFormatError(DatasetError):
    """Unreadable file, bad line, wrong structure, undecodable bytes."""


class ColumnError(DatasetError):
    """Missing, ambiguous, duplicate or unusable columns."""


class DuplicateIdError(DatasetError):
    """The chosen id column holds the same value on several rows."""


class DatasetSizeError(DatasetError):
    """The input (or its decompressed form) is over the configured ``max_bytes``."""


for _cls in (DatasetError, DatasetFormatError, ColumnError, DuplicateIdError, DatasetSizeError):
    _cls.__module__ = "aflite_core.io.datasets"


def fmt_bytes(n: int) -> str:
    """``512 bytes``, ``1.5 MiB``: a size as a message shows it."""
    if n < 1024:
        return f"{n} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")
