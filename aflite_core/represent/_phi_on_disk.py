"""Φ kept in a file, read a block of rows at a time: the audit's largest array off the heap.

A 1M-row audit's Φ (256 float32 columns) is 1 GB, held from the representation to the end of
the audit, beside everything each stage builds. Every stage already reads Φ the way it reads
rows held by a Dask cluster (:class:`~aflite_core.represent._partitioned_rows.PartitionedRows`:
``X[i:j]``, ``X[positions]``, ``X.map_chunks``), so Φ can live in a file of the run's
temporary folder instead: the SVD of ``tfidf_svd`` appends its rows there as it makes them
(:class:`PhiWriter`), another representation's Φ is moved there once built
(:func:`phi_on_disk`), and either gives back a :class:`PartitionedRows` whose partitions are
row ranges of that file (:class:`FilePartitions`).
A read maps the pages of the partition it reads for the duration of the step and unmaps them
after: the rows read are copied out, the file's pages stay in the operating system's page
cache (memory the kernel may reclaim, not this process's resident set), and what a stage
holds is the rows it asked for.

The rows read are the bytes written, so every figure computed from them is the figure
computed from Φ in memory, bit for bit (``tests/represent/test_phi_on_disk.py``; the run
folder of an audit with Φ on disk equals the one with Φ in memory, timings aside).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aflite_core.represent._partitioned_rows import PartitionedRows
from aflite_core.represent._partitions import LocalPartitions, on_one_thread

__all__ = ["PHI_FILE", "PHI_ON_DISK_MIN_ROWS", "FilePartitions", "PhiWriter", "phi_folder_for",
           "phi_on_disk"]

#: Name of Φ's file in the folder given to :func:`phi_on_disk` (the run's temporary folder:
#: removed with it).
PHI_FILE = "phi.f32"
#: Rows of Φ from which the audit keeps it on disk (:func:`phi_on_disk`): below, Φ is at most
#: 256 MB and reading it from memory is the simpler path.
PHI_ON_DISK_MIN_ROWS = 250_000
#: Rows per partition of the file (a step maps at most one partition: 64 MB at 256 columns).
PARTITION_ROWS = 65_536
#: Free space :func:`phi_folder_for` asks of the folder: Φ's bytes times the first, plus the
#: second (the run's own files go there too).
SPACE_MARGIN = (1.25, 100 * 2**20)


def _room_for(folder: str | os.PathLike, n_bytes: int) -> bool:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return False
    return free >= n_bytes * SPACE_MARGIN[0] + SPACE_MARGIN[1]


def phi_folder_for(folder: str | os.PathLike, n_rows: int, n_columns: int = 256
                   ) -> Path | None:
    """``folder`` when an audit of ``n_rows`` rows keeps Φ there: at least
    :data:`PHI_ON_DISK_MIN_ROWS` rows and room for ``n_rows x n_columns`` float32 values
    (:data:`SPACE_MARGIN`); else None (Φ stays in memory, as below that size).

    Examples
    --------
    >>> import tempfile
    >>> phi_folder_for(tempfile.gettempdir(), 10) is None
    True
    """
    if n_rows < PHI_ON_DISK_MIN_ROWS or not _room_for(folder, n_rows * n_columns * 4):
        return None
    return Path(folder)


@dataclass(frozen=True)
class FilePart:
    """Rows ``start:stop`` of the float32 file a :class:`FilePartitions` reads."""

    start: int
    stop: int


class FilePartitions(LocalPartitions):
    """Partitions that are row ranges of one C-ordered float32 file of ``n_columns`` columns.

    Each step runs here, in order (as :class:`LocalPartitions`), on a read-only memory map of
    its partition's rows, unmapped when the step returns: a step's result must not be a view
    of the rows it was given (:class:`PartitionedRows`' steps copy what they keep).
    """

    def __init__(self, path: str | os.PathLike, n_columns: int) -> None:
        self.path = Path(path)
        self.n_columns = int(n_columns)

    def _rows(self, handle: Any) -> Any:
        """A partition's rows mapped read-only (any other handle, a step's result, as is)."""
        if not isinstance(handle, FilePart):
            return handle
        row_bytes = self.n_columns * 4
        return np.memmap(self.path, dtype=np.float32, mode="r", offset=handle.start * row_bytes,
                         shape=(handle.stop - handle.start, self.n_columns))

    def map(self, fn: Callable, handles: Sequence[Any], *shared: Any,
            each: Sequence[tuple] | None = None) -> list:
        """``fn(rows of handle, *each[i], *shared)`` for every partition, in order."""
        each = each or [()] * len(handles)
        out = []
        for handle, own in zip(handles, each, strict=True):
            rows = self._rows(handle)
            out.append(on_one_thread(fn, rows, *own, *shared))
            del rows  # the map goes with its last reference
        return out

    def release(self, handles: Sequence[Any]) -> None:
        """Forget ``handles``; the file goes with the partitions' own handles (the matrix's
        :meth:`PartitionedRows.release`)."""
        if any(isinstance(handle, FilePart) for handle in handles):
            self.path.unlink(missing_ok=True)

    def chain(self, fn: Callable, handles: Sequence[Any], *shared: Any) -> Any:
        """``acc = fn(rows of handle, acc, *shared)`` over the partitions in order."""
        acc = None
        for handle in handles:
            rows = self._rows(handle)
            acc = on_one_thread(fn, rows, acc, *shared)
            del rows
        return acc


class PhiWriter:
    """Φ's rows written to ``folder``/:data:`PHI_FILE` as they are made (:meth:`write`, in
    row order), then read back by blocks (:meth:`matrix`): Φ never whole in memory
    (``truncated_svd(..., out=writer.write)``).

    Parameters
    ----------
    folder : path
        An existing folder that outlives every reader of the result (the run's temporary
        folder).
    partition_rows : int, optional
        Rows per partition of the matrix read back (default :data:`PARTITION_ROWS`).
    """

    def __init__(self, folder: str | os.PathLike, *, partition_rows: int | None = None
                 ) -> None:
        partition_rows = PARTITION_ROWS if partition_rows is None else partition_rows
        if int(partition_rows) < 1:
            raise ValueError(f"partition_rows: expected a positive count, got "
                             f"{partition_rows!r}")
        self.path = Path(folder) / PHI_FILE
        self.partition_rows = int(partition_rows)
        self.n_rows = 0
        self.n_columns: int | None = None
        self._file = open(self.path, "wb")  # noqa: SIM115 - closed by matrix() or close()

    def write(self, rows: np.ndarray) -> None:
        """Append ``rows`` (float32, as wide as the rows before)."""
        rows = np.asarray(rows)
        if rows.ndim != 2 or rows.dtype != np.float32:
            raise ValueError(f"rows: expected a 2-D float32 array, got {rows.dtype} of shape "
                             f"{rows.shape}")
        if self.n_columns is None:
            self.n_columns = rows.shape[1]
        elif rows.shape[1] != self.n_columns:
            raise ValueError(f"rows: expected {self.n_columns} columns as before, got "
                             f"{rows.shape[1]}")
        self._file.write(np.ascontiguousarray(rows).data)
        self.n_rows += len(rows)

    def close(self) -> None:
        """Close the file (kept: :meth:`matrix` reads it)."""
        self._file.close()

    def matrix(self) -> PartitionedRows:
        """The rows written, read back from the file a block at a time."""
        self.close()
        n, step = self.n_rows, self.partition_rows
        bounds = [(lo, min(lo + step, n)) for lo in range(0, n, step)] or [(0, 0)]
        d = self.n_columns or 0
        return PartitionedRows(FilePartitions(self.path, d),
                               [FilePart(lo, hi) for lo, hi in bounds], bounds, d)


def phi_on_disk(X: np.ndarray, folder: str | os.PathLike, *,
                partition_rows: int | None = None) -> PartitionedRows:
    """Write ``X`` (Φ, float32) to ``folder``/:data:`PHI_FILE` and return it as a matrix
    read from there.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
        float32; the caller drops its own reference afterwards (that is the point).
    folder : path
        An existing folder that outlives every reader of the result (the run's temporary
        folder).
    partition_rows : int, optional
        Rows per partition (default :data:`PARTITION_ROWS`).

    Returns
    -------
    PartitionedRows
        The same rows, read by blocks from the file.

    Raises
    ------
    ValueError
        If ``X`` is not a 2-D float32 array or ``partition_rows`` is not positive.

    Examples
    --------
    >>> import tempfile
    >>> X = np.arange(12, dtype=np.float32).reshape(4, 3)
    >>> on_disk = phi_on_disk(X, tempfile.mkdtemp(), partition_rows=3)
    >>> on_disk.shape, bool((on_disk[[3, 0]] == X[[3, 0]]).all())
    ((4, 3), True)
    """
    X = np.asarray(X)
    if X.ndim != 2 or X.dtype != np.float32:
        raise ValueError(f"X: expected a 2-D float32 array, got {X.dtype} of shape {X.shape}")
    writer = PhiWriter(folder, partition_rows=partition_rows)
    try:
        for start in range(0, len(X), writer.partition_rows):  # no copy of all of X at once
            writer.write(X[start:start + writer.partition_rows])
    finally:
        writer.close()
    writer.n_columns = X.shape[1]
    return writer.matrix()
