"""The line limit of text tables: a line (or CSV cell) past it is refused where it is met.

:class:`LineGuard` follows the length of the current line over the chunks of a text file as
it is read from disk or decompressed (``aflite_core.io._readers``), at C speed (``find`` and
``count`` per 1 MiB chunk), so a file made of one huge line is refused before it is held
whole.
"""

from __future__ import annotations

from aflite_core._validation import fmt_bytes
from aflite_core.errors import DatasetSizeError

#: Longest line (and CSV cell) a text table may have by default: 64 MiB. A line past it is
#: refused where it is met, while the file is read or decompressed, before it is held whole
#: (a 1 MB .csv.gz that expands to one 600 MB line made the reader grow to 6.4 GB).
MAX_LINE_BYTES = 64 << 20


class LineGuard:
    """Follows the length of the current line over chunks of a text file as it is read."""

    def __init__(self, name: str, limit: int | None) -> None:
        self.name, self.limit = name, limit
        self.line, self.since = 1, 0  # 1-based line number, bytes since its start

    def feed(self, chunk: bytes | bytearray) -> None:
        """Account for the next chunk; raise as soon as the current line passes the limit."""
        if self.limit is None or not chunk:
            return
        first = chunk.find(b"\n")
        if first < 0:
            self.since += len(chunk)
            self._check()
            return
        self.since += first  # the current line ends in this chunk
        self._check()
        if self.limit >= len(chunk):  # no line inside the chunk can pass: count at C speed
            self.line += chunk.count(b"\n")
            self.since = len(chunk) - chunk.rfind(b"\n") - 1
            return
        start = first + 1  # a limit below the chunk size (tests): walk the lines
        self.line += 1
        while True:
            newline = chunk.find(b"\n", start)
            self.since = (len(chunk) if newline < 0 else newline) - start
            self._check()
            if newline < 0:
                return
            self.line += 1
            start = newline + 1

    def _check(self) -> None:
        if self.since > self.limit:
            raise DatasetSizeError(
                f"{self.name}: line {self.line:,} is longer than {fmt_bytes(self.limit)} "
                f"(max_line_bytes={self.limit}); refused there, before reading it whole: a "
                "table's line is not that long (a decompression bomb, or not a table); if it "
                "is real data, raise the limit (--max-line-bytes)")
