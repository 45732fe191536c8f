"""The input's bytes as a stream: decompressed, bounded and checked as they pass.

:class:`Inflow` reads a path, a file-like object or bytes one chunk (1 MiB) at a time,
gunzips it when it starts with the gzip magic number, and applies every byte-level rule of
``load_dataset`` while the bytes go by, so nothing waits for the whole input to be in
memory:

* ``max_bytes``: a file over it is refused from ``stat()``; a stream (an upload, gzip data)
  is refused one chunk past it;
* the line limit (:class:`~aflite_core.io._line_limit.LineGuard`), once :meth:`Inflow.watch`
  says the input is a text table;
* NUL characters in UTF-8 text (UTF-16 or UTF-32 read without its byte-order mark);
* the SHA-256 of the decompressed bytes (``content_hash``, the same as reading it whole).

It is a binary file object (``read1``), so :class:`io.TextIOWrapper` decodes it as a
stream; the position it has handed out lets :meth:`Inflow.decode_error` name the line and
byte offset of undecodable bytes without reading the input again.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import zlib
from pathlib import Path
from typing import Any

from aflite_core._validation import fmt_bytes
from aflite_core.errors import DatasetError, DatasetFormatError, DatasetSizeError, NulSeen
from aflite_core.io._line_limit import LineGuard

GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
#: Bytes read (and checked) at a time.
CHUNK = 1 << 20


def special_file_kind(mode: int) -> str | None:
    """What a non-regular, non-directory file is (``"a FIFO (named pipe)"``), else None."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def nul_error(name: str, line: int) -> DatasetFormatError:
    """The message for NUL characters in text (a UTF-16/32 file read without its BOM)."""
    return DatasetFormatError(
        f"{name}: line {line}: the text contains NUL characters, so it is probably UTF-16 "
        "or UTF-32 without a byte-order mark; name its encoding, e.g. encoding='utf-16-le'"
    )


class _Prefixed:
    """``head`` then the rest of ``handle``: a stream whose first bytes were already read."""

    def __init__(self, head: bytes, handle: Any) -> None:
        self._head, self._handle = head, handle

    def read(self, n: int = -1) -> bytes:
        if self._head:
            if n is None or n < 0:
                out, self._head = self._head + self._handle.read(), b""
                return out
            out, self._head = self._head[:n], self._head[n:]
            return out
        return self._handle.read(n)


class Inflow(io.BufferedIOBase):
    """The decompressed bytes of one input, chunk by chunk, checked as they pass.

    Use :func:`open_input` to make one. ``head`` holds the first chunk (read at once, to
    tell the format); :meth:`watch` turns on the text checks, which cover ``head`` too.

    Attributes
    ----------
    name : str
        The input's name in messages.
    head : bytes
        The first decompressed chunk (at most 1 MiB).
    gzip : bool
        Whether the input is gzip data.
    size : int
        Decompressed bytes read so far.
    """

    def __init__(self, handle: Any, name: str, max_bytes: int | None, *,
                 owns_handle: bool = False, at: tuple[int, int] | None = None) -> None:
        """``at``: ``(byte offset, newlines before it)`` when ``handle`` gives a part of a
        file from that offset on (:func:`open_range`): never gunzipped, and the lines and
        offsets in messages are the file's."""
        super().__init__()
        self.name, self.max_bytes = name, max_bytes
        self._handle, self._owns = handle, owns_handle
        self._hash = hashlib.sha256()
        self.size = 0
        self._guard: LineGuard | None = None
        self._nul = False
        self._eof = False
        first = self._raw_read(CHUNK)
        self.gzip = at is None and first[:2] == GZIP_MAGIC
        self._source: Any = handle
        if self.gzip:
            self._source = gzip.GzipFile(fileobj=_Prefixed(first, handle))
            first = self._next_raw()
        else:
            self._account(first)
        self.head = first
        self._buf, self._pos = first, 0  # the current chunk, and how much of it is handed out
        self._checked = False  # whether the text checks have seen the current chunk
        # bytes and newlines of earlier chunks (and of the file before a part of it)
        self._base_bytes, self._base_newlines = at or (0, 0)

    # -------------------------------------------------------------- reading the source

    def _raw_read(self, n: int) -> bytes:
        try:
            data = self._handle.read(n)
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{self.name}: cannot read the input: {exc}") from exc
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif not isinstance(data, (bytes, bytearray)):
            raise DatasetError(
                f"{self.name}: read() returned {type(data).__name__}, expected bytes or str")
        return bytes(data)

    def _next_raw(self) -> bytes:
        """The next decompressed chunk (b"" at the end), counted against ``max_bytes``."""
        if self._eof:
            return b""
        if not self.gzip:
            chunk = self._raw_read(CHUNK)
        else:
            want = CHUNK if self.max_bytes is None else min(CHUNK, self.max_bytes + 1 - self.size)
            try:
                chunk = self._source.read(max(want, 1))
            except (OSError, EOFError, zlib.error) as exc:
                raise DatasetFormatError(
                    f"{self.name}: corrupt or truncated gzip data after {fmt_bytes(self.size)} "
                    f"decompressed: {exc}"
                ) from exc
        if not chunk:
            self._eof = True
            return b""
        self._account(chunk)
        return chunk

    def _account(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.max_bytes is not None and self.size > self.max_bytes:
            if self.gzip:
                raise DatasetSizeError(
                    f"{self.name}: the gzip data expands past the limit of "
                    f"{fmt_bytes(self.max_bytes)} (max_bytes={self.max_bytes}); stopped "
                    f"reading after {fmt_bytes(self.size)} of decompressed data")
            raise DatasetSizeError(
                f"{self.name}: the input is over the limit of {fmt_bytes(self.max_bytes)} "
                f"(max_bytes={self.max_bytes}); stopped reading")
        self._hash.update(chunk)

    def _check_text(self, chunk: bytes) -> None:
        """The text checks of the current chunk, before any of it is handed out."""
        if self._guard is not None:
            self._guard.feed(chunk)
        if self._nul:
            at = chunk.find(b"\x00")
            if at >= 0:
                self._nul = False  # reported once; the chunk is still handed out
                raise NulSeen(self._base_newlines + chunk.count(b"\n", 0, at) + 1)

    # ------------------------------------------------------------------- checks on

    def watch(self, guard: LineGuard | None = None, *, nul: bool = False) -> None:
        """Turn on the line limit and the NUL check (UTF-8 text), from the first byte on.

        Call it before reading; the checks run on each chunk as it is first handed out.
        """
        self._guard, self._nul = guard, nul

    # ------------------------------------------------------------ the file interface

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes from the current chunk (the next chunk when it is used up)."""
        if self._pos >= len(self._buf):
            self._base_bytes += len(self._buf)
            self._base_newlines += self._buf.count(b"\n")
            self._buf, self._pos, self._checked = self._next_raw(), 0, False
            if not self._buf:
                return b""
        if not self._checked:
            self._checked = True
            self._check_text(self._buf)
        if self._pos == 0 and (n is None or n < 0 or n >= len(self._buf)):
            out = self._buf  # the whole chunk: no copy
        else:
            end = len(self._buf) if n is None or n < 0 else self._pos + n
            out = self._buf[self._pos:end]
        self._pos += len(out)
        return out

    def read(self, n: int | None = -1) -> bytes:
        """``n`` bytes (all that is left for ``n < 0``)."""
        out = bytearray()
        while n is None or n < 0 or len(out) < n:
            part = self.read1(-1 if n is None or n < 0 else n - len(out))
            if not part:
                break
            out += part
        return bytes(out)

    def read_all(self) -> bytearray:
        """Every byte left, grown in place (no second copy); the in-memory formats' path."""
        out = bytearray()
        while part := self.read1(-1):
            out += part
        return out

    def hexdigest(self) -> str:
        """SHA-256 of all decompressed bytes; read the input to its end first."""
        while self._next_raw():
            pass  # bytes nobody asked for still count, as when the input was read whole
        return self._hash.hexdigest()

    def decode_error(self, exc: UnicodeDecodeError, codec: str) -> DatasetFormatError:
        """``exc`` from decoding what this stream handed out, with its line and offset."""
        handed = self._base_bytes + self._pos
        handed_newlines = self._base_newlines + self._buf.count(b"\n", 0, self._pos)
        blob = exc.object if isinstance(exc.object, (bytes, bytearray)) else b""
        # the decoder's input (earlier undecoded bytes + the last chunk) ends at `handed`
        start = max(handed - len(blob) + exc.start, 0)
        line = handed_newlines - blob.count(b"\n", exc.start) + 1
        bad = bytes(blob[exc.start: min(exc.end, exc.start + 4)])
        hint = (" The file is not valid UTF-8 (it may be Latin-1 or Windows-1252): re-save it "
                "as UTF-8, or name its encoding, e.g. encoding='latin-1'."
                if codec.replace("_", "-").lower().startswith("utf-8") else "")
        return DatasetFormatError(
            f"{self.name}: line {line}, byte offset {start}: cannot decode {bad!r} as {codec} "
            f"({exc.reason}).{hint}")

    def close(self) -> None:
        if not self.closed and self._owns:
            self._handle.close()
        super().close()


def open_input(source: Any, name: str, max_bytes: int | None) -> Inflow:
    """An :class:`Inflow` over a path, a binary or text file-like object, or bytes.

    A path is checked with ``stat()`` first: FIFOs, devices and sockets are refused
    unopened (they could block or never end), a file over ``max_bytes`` before it is read.
    A file-like object is read from its start.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Inflow(io.BytesIO(source), name, max_bytes)
    if isinstance(source, (str, os.PathLike)):
        return _open_path(Path(source), name, max_bytes)
    if hasattr(source, "read"):
        if getattr(source, "seekable", lambda: False)():
            source.seek(0)  # a Streamlit UploadedFile may have been read on an earlier rerun
        return Inflow(source, name, max_bytes)
    raise TypeError(
        "source: expected a path (str or pathlib.Path), a file-like object or bytes, "
        f"got {type(source).__name__}"
    )


class _Range:
    """The bytes ``[start, end)`` of a file, as a file object."""

    def __init__(self, path: Path, start: int, end: int) -> None:
        self._handle = path.open("rb")
        self._handle.seek(start)
        self._left = end - start

    def read(self, n: int = -1) -> bytes:
        n = self._left if n is None or n < 0 else min(n, self._left)
        data = self._handle.read(n)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._handle.close()


def open_range(path: str | os.PathLike, name: str, start: int, end: int,
               newlines_before: int) -> Inflow:
    """An :class:`Inflow` over the bytes ``[start, end)`` of a plain (not gzipped) file that
    has ``newlines_before`` newlines before ``start``: its messages name the file's lines
    and byte offsets (a line-delimited text file read in parts: :mod:`aflite_core.io.
    file_pieces`)."""
    handle = _Range(Path(path), start, end)
    try:
        return Inflow(handle, name, None, owns_handle=True, at=(start, newlines_before))
    except BaseException:
        handle.close()
        raise


def _open_path(path: Path, name: str, max_bytes: int | None) -> Inflow:
    try:
        info = path.stat()
        kind = special_file_kind(info.st_mode)
        if kind is not None:
            raise DatasetError(
                f"{name}: {str(path)!r} is {kind}, not a regular file; refused (it could "
                "block or never end): save the data to a file and pass that file"
            )
        if max_bytes is not None and info.st_size > max_bytes:
            raise DatasetSizeError(
                f"{name}: the file is {fmt_bytes(info.st_size)}, over the limit of "
                f"{fmt_bytes(max_bytes)} (max_bytes={max_bytes})"
            )
        handle = path.open("rb")
    except DatasetError:
        raise
    except FileNotFoundError:
        raise DatasetError(f"{name}: file not found: {str(path)!r}") from None
    except IsADirectoryError:
        raise DatasetError(f"{name}: expected a file, found a directory: {str(path)!r}") from None
    except PermissionError:
        raise DatasetError(f"{name}: permission denied reading {str(path)!r}") from None
    except OSError as exc:
        raise DatasetError(f"{name}: cannot read {str(path)!r}: {exc.strerror or exc}") from exc
    try:
        return Inflow(handle, name, max_bytes, owns_handle=True)
    except BaseException:
        handle.close()
        raise
