"""Turn a function that writes a file into a stream of byte chunks, with bounded memory.

The exports write to a binary file object (:func:`aflite_core.io.write_csv`,
``write_parquet``, :func:`aflite_core.runs.exports.export_run`). A web download wants the
opposite: an iterator of chunks it can send as they come. :func:`stream_bytes` runs the
writer in a thread that writes into a small queue of chunks and yields them to the caller,
so at most ``max_chunks`` chunks of about ``chunk_bytes`` are held at a time, whatever the
size of the file, and the writer waits while the reader (the network) is slower.

If the reader stops early (the browser cancelled the download), the writer's next write
raises :class:`StreamClosed` and its thread ends. If the writer fails, the error is raised
in the reader after the bytes already written.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any

from aflite_core.errors import StreamClosed  # noqa: F401 - re-exported: raised here

#: Default size of one chunk handed to the reader (bytes).
CHUNK_BYTES = 1 << 20
#: Default number of chunks waiting between the writer and the reader.
MAX_CHUNKS = 8
_DONE = object()




class _QueueWriter:
    """A write-only binary file object whose bytes go to a queue in chunks."""

    def __init__(self, chunks: queue.Queue, chunk_bytes: int, closed: threading.Event) -> None:
        self._chunks = chunks
        self._chunk_bytes = chunk_bytes
        self._closed = closed
        self._buffer = bytearray()
        self._position = 0

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._position

    @property
    def closed(self) -> bool:
        return False

    def write(self, data: Any) -> int:
        if self._closed.is_set():
            raise StreamClosed("the download was cancelled")
        data = bytes(data)
        self._buffer += data
        self._position += len(data)
        if len(self._buffer) >= self._chunk_bytes:
            self.flush()
        return len(data)

    def flush(self) -> None:
        if self._buffer:
            self._put(bytes(self._buffer))
            self._buffer.clear()

    def _put(self, item: object) -> None:
        while True:
            if self._closed.is_set():
                raise StreamClosed("the download was cancelled")
            try:
                self._chunks.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def close(self) -> None:
        self.flush()


def stream_bytes(write: Callable[[IO[bytes]], Any], *, chunk_bytes: int = CHUNK_BYTES,
                 max_chunks: int = MAX_CHUNKS) -> Iterator[bytes]:
    """The bytes ``write(handle)`` writes into ``handle``, as chunks, while it writes them.

    Parameters
    ----------
    write : callable
        Writes the whole file into the binary file object it is given (not seekable; its
        ``tell`` counts the bytes written).
    chunk_bytes : int, default 1 MiB
        Size of the chunks yielded (the last one may be smaller).
    max_chunks : int, default 8
        Chunks held at most between the writer and the reader.

    Yields
    ------
    bytes
        The file's bytes, in order.

    Raises
    ------
    Exception
        Whatever ``write`` raised, after the chunks written before it.
    """
    if chunk_bytes < 1 or max_chunks < 1:
        raise ValueError(f"chunk_bytes and max_chunks: expected >= 1; got {chunk_bytes}, "
                         f"{max_chunks}")
    chunks: queue.Queue = queue.Queue(maxsize=max_chunks)
    closed = threading.Event()
    failure: list[BaseException] = []
    handle = _QueueWriter(chunks, chunk_bytes, closed)

    def run() -> None:
        try:
            write(handle)
            handle.flush()
        except StreamClosed:
            return
        except BaseException as exc:  # noqa: BLE001 - handed to the reader
            failure.append(exc)
        with contextlib.suppress(StreamClosed):
            handle._put(_DONE)

    thread = threading.Thread(target=run, name="stream-bytes", daemon=True)
    thread.start()
    try:
        while True:
            item = chunks.get()
            if item is _DONE:
                break
            yield item
        if failure:
            raise failure[0]
    finally:
        closed.set()
        thread.join(timeout=5)
