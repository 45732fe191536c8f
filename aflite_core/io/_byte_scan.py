"""A file's bytes scanned on a thread of their own, beside Arrow's reader.

:class:`ByteScan` reads a file a block at a time (:data:`SCAN_BLOCK` bytes), hashes it on
a second thread (SHA-256: the table's ``content_hash``) and hands each block to a compiled
scan
(:mod:`aflite_core.io._text_scan`) that carries its state from block to block. It runs while
Arrow parses the same file (:mod:`aflite_core.io._arrow_delimited`,
:mod:`aflite_core.io._arrow_jsonl`), and stops early when the scan finds what makes Arrow's
table unusable or a line past the limit, or when the caller says Arrow refused the file.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from aflite_core._validation import available_cores
from aflite_core.io._delimited import is_utf8

__all__ = ["INLINE_BYTES", "READER_POOL", "SCAN_BLOCK", "ByteScan", "FileOrBytes",
           "arrow_input", "arrow_setup", "arrow_threads", "longer_block", "readable_source",
           "source_size"]

#: What the Arrow readers read: a file on a path, or bytes in memory (an upload).
FileOrBytes = Path | bytes

#: Bytes the scan reads at a time: what it holds of the file.
SCAN_BLOCK = 4 << 20
#: Inputs of at most this many bytes are scanned and hashed on the caller's thread and read
#: by Arrow on one thread (:func:`arrow_threads`): for them threads cost more than the work,
#: and much more on a busy machine, where each hand-over waits for a core (2,000 small CSV
#: files read both ways in the test suite, beside another busy worker: 20.6 s on threads,
#: 4.0 s without).
INLINE_BYTES = 1 << 20
#: The memory pool Arrow's readers allocate from: the C library's allocator, which hands a
#: reader's freed block buffers back at once. jemalloc told to do the same (decay 0) cost
#: 0.06-0.1 CPU-s more on a 127 MB CSV, TSV or a 176 MB JSON Lines file, at the same peak
#: (a ``/tmp`` script alternating both, three reads each, 2026-11-29).
READER_POOL = pa.system_memory_pool()


@dataclass
class ByteScan:
    """One file's scan (see the module docstring).

    ``step(data, state)`` scans a block and returns the line numbers it found; ``finish``
    (state) does the end of the file; ``values(state)`` names the state's slots, and
    ``give_up(values)`` says whether to stop (the file will be read otherwise). ``skip``:
    bytes at the start not scanned (a byte-order mark).
    """

    path: FileOrBytes
    new_state: Callable[[], np.ndarray]
    step: Callable[[np.ndarray, np.ndarray], np.ndarray]
    finish: Callable[[np.ndarray], np.ndarray]
    values: Callable[[np.ndarray], dict[str, int]]
    give_up: Callable[[dict[str, int]], bool]
    skip: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lines: list[np.ndarray] = field(default_factory=list)
    state: dict[str, int] = field(default_factory=dict)
    cut: bool = False
    digest: str = ""
    head: bytes = b""
    error: BaseException | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _sha: str = ""

    def start(self) -> ByteScan:
        """Run the scan on a thread of its own, and the SHA-256 on another (side by side
        where there are cores for both: a 127 MB TSV's scan 0.13 s, its hash 0.07 s); an
        input of at most :data:`INLINE_BYTES` is scanned and hashed here and now."""
        if not arrow_threads(self.path):
            self._run()
            self._hash()  # returns at once when the scan gave up
            return self
        for target, name in ((self._run, "byte-scan"), (self._hash, "byte-hash")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def join(self, *, cancel: bool = False) -> None:
        """Wait for the scan (``cancel``: tell it to stop first). An error it met that is
        not the file's (out of memory, an interrupt) is raised here."""
        if cancel:
            self.stop.set()
        for thread in self._threads:
            thread.join()
        if isinstance(self.error, (KeyboardInterrupt, MemoryError)):
            raise self.error
        if self.error is None and not self.cut and self.state:
            self.digest = self._sha

    @property
    def ok(self) -> bool:
        """Whether the scan went through the whole file."""
        return self.error is None and not self.cut and bool(self.digest)

    def all_lines(self) -> np.ndarray:
        """The line numbers the scan found, in order."""
        return np.concatenate(self.lines) if self.lines else np.zeros(0, dtype=np.int64)

    def _run(self) -> None:
        try:
            state = self.new_state()
            buffer = bytearray(SCAN_BLOCK)
            view = memoryview(buffer)
            first = True
            with _open(self.path) as handle:
                while n := handle.readinto(buffer):
                    data = np.frombuffer(buffer, dtype=np.uint8, count=n)
                    if first:
                        self.head = bytes(view[:n])
                        data = data[self.skip:]
                        first = False
                    self.lines.append(self.step(data, state))
                    if self.stop.is_set() or self.give_up(self.values(state)):
                        self.cut = True  # the file is read otherwise
                        self.stop.set()  # (the hash too)
                        return
            self.lines.append(self.finish(state))
            self.state = self.values(state)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            self.error = exc

    def _hash(self) -> None:
        try:
            if isinstance(self.path, bytes):
                self._sha = hashlib.sha256(self.path).hexdigest()
                return
            sha = hashlib.sha256()
            buffer = bytearray(SCAN_BLOCK)
            view = memoryview(buffer)
            with _open(self.path) as handle:
                while n := handle.readinto(buffer):
                    sha.update(view[:n])  # off the GIL
                    if self.stop.is_set():
                        return
            self._sha = sha.hexdigest()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            self.error = exc


def arrow_setup() -> None:
    """Arrow's thread pool sized to the cores this process may use (its affinity and CPU quota)."""
    cores = available_cores()
    if pa.cpu_count() != cores:
        pa.set_cpu_count(cores)


def _open(source: FileOrBytes) -> io.RawIOBase | io.BytesIO:
    if isinstance(source, bytes):
        return io.BytesIO(source)
    return source.open("rb", buffering=0)


def readable_source(source: str | os.PathLike | bytes, codec: str, floor: int
                    ) -> FileOrBytes | None:
    """``source`` as the Arrow readers take it (a path or bytes) when it is UTF-8 text of at
    least ``floor`` bytes; None otherwise (the csv/json module reads it)."""
    if not is_utf8(codec):
        return None
    path: FileOrBytes = source if isinstance(source, bytes) else Path(source)
    size = source_size(path)
    return path if size is not None and size >= floor else None


def source_size(source: FileOrBytes) -> int | None:
    """The bytes of ``source``; None when a path cannot be looked at."""
    if isinstance(source, bytes):
        return len(source)
    try:
        return os.stat(source).st_size
    except OSError:
        return None


def arrow_threads(source: FileOrBytes) -> bool:
    """Whether ``source`` is worth threads: larger than :data:`INLINE_BYTES` (or of unknown
    size)."""
    size = source_size(source)
    return size is None or size > INLINE_BYTES


def arrow_input(source: FileOrBytes) -> str | pa.BufferReader:
    """``source`` as Arrow's readers take it (bytes without a copy)."""
    return pa.BufferReader(source) if isinstance(source, bytes) else str(source)


def longer_block(block: int, longest: int, max_line_bytes: int | None) -> int | None:
    """Arrow's block size for a second read of a file whose longest row (``longest`` bytes,
    as the scan found it) did not fit a ``block``-byte block: a power of two of at least four
    times the row; None past eight times ``max_line_bytes`` (the csv/json path then reads
    it)."""
    size = max(4 * block, 1 << (4 * max(longest, 1)).bit_length())
    return size if max_line_bytes is None or size <= 8 * max_line_bytes else None
