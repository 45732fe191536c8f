"""The structure of a CSV/TSV or JSON Lines file in one pass over its bytes, compiled by
numba.

:func:`scan_block` runs Python's :mod:`csv` state machine (``strict=True``, RFC 4180 quoting
for CSV, ``QUOTE_NONE`` for TSV) over the bytes of a file as ``open(newline="")`` splits it
into lines, a block at a time, and notes what :class:`~aflite_core.io._delimited.
DelimitedBatches` would: the line each record starts on, the blank lines, the longest line
and cell, and whether the file holds anything the csv module would refuse or Arrow's reader
would read otherwise (text after a closing quote, a quote never closed, a record with other
fields than the header, a NUL byte). The values themselves are parsed by Arrow
(:mod:`aflite_core.io._arrow_delimited`); this pass is what lets its table stand for the csv
module's, line numbers included.

:func:`scan_jsonl_block` does the same for JSON Lines as
:func:`~aflite_core.io._json_tables.jsonl_records` splits it (at line feeds only): the line of
every non-blank line, the longest line, a NUL byte, and an escape of a surrogate
(``\\ud800`` to ``\\udfff``: the json module keeps a lone one and refuses it with its own
message; Arrow refuses any).

A module of its own so that importing the readers does not import numba (0.3 s) until a
large file needs it.
"""

from __future__ import annotations

import numpy as np

from aflite_core.numba_cache import jit

__all__ = [
    "BAD_REASONS", "JSONL_STATE", "SCAN_STATE", "finish_jsonl_scan", "finish_scan",
    "new_jsonl_state", "new_state", "scan_block", "scan_jsonl_block", "state_values",
]

# the csv module's parser states (Modules/_csv.c)
_START_RECORD, _START_FIELD, _IN_FIELD, _IN_QUOTED, _QUOTE_IN_QUOTED, _EAT_CRNL = range(6)

#: The slots of the scan's state (an int64 array carried from block to block).
SCAN_STATE = (
    "state", "lines", "fields", "cell", "line_bytes", "max_line", "max_cell", "blank",
    "records", "ncols", "bad", "pending_cr", "record_line", "header_end", "offset",
)
_STATE, _LINES, _FIELDS, _CELL, _LINE_BYTES, _MAX_LINE, _MAX_CELL, _BLANK = range(8)
_RECORDS, _NCOLS, _BAD, _PENDING_CR, _RECORD_LINE, _HEADER_END, _OFFSET = range(8, 15)

#: Why a scan gave up (the ``bad`` slot): the csv module's reading is needed for the message.
BAD_REASONS = {
    1: "text after a closing quote",
    2: "a quoted field never closed",
    3: "a record with other fields than the header",
    4: "a NUL byte",
    5: "a \\u escape of a surrogate (JSON Lines)",
}


def new_state(*, offset: int = 0) -> np.ndarray:
    """The state before the first byte; ``offset``: bytes before it (a byte-order mark),
    counted in the first line's length."""
    state = np.zeros(len(SCAN_STATE), dtype=np.int64)
    state[_NCOLS] = -1
    state[_HEADER_END] = -1
    state[_OFFSET] = state[_LINE_BYTES] = offset
    return state


def state_values(state: np.ndarray, names: tuple[str, ...] = SCAN_STATE) -> dict[str, int]:
    """A scan's state by the names of its slots (:data:`SCAN_STATE`, :data:`JSONL_STATE`)."""
    return {name: int(value) for name, value in zip(names, state, strict=True)}


@jit
def _end_line(state: int, fields: int, records: int, ncols: int, bad: int, blank: int,
              lines: int, record_line: int, header_end: int, out: np.ndarray, n_out: int,
              at: int) -> tuple:
    """The csv module's end-of-line event after a line's last character: a record ends
    (the header sets the field count, a data row's first line is noted) or a blank line."""
    ends = False
    if state in (_START_FIELD, _IN_FIELD, _QUOTE_IN_QUOTED):
        fields += 1  # the field the line ended
        state = _START_RECORD
        ends = True
    elif state == _EAT_CRNL:
        state = _START_RECORD
        if fields > 0:
            ends = True
        else:
            blank += 1
    if ends:
        records += 1
        if ncols < 0:
            ncols = fields
            header_end = at
        else:
            if fields != ncols:
                bad = 3
            out[n_out] = record_line
            n_out += 1
        fields = 0
    lines += 1
    return state, fields, records, ncols, bad, blank, lines, header_end, n_out


_ZERO = np.uint64(0)
_ONE = np.uint64(1)
_ONES = np.uint64(0x0101010101010101)


@jit
def _mark(data: np.ndarray, marks: np.ndarray, one: int, other: int) -> None:
    """``marks[k]`` 1 where ``data[k]`` is NUL, a line end, ``one`` or ``other``, else 0;
    then 1 at ``len(data)`` (the end) and 0 to the end of ``marks``. A loop the compiler
    turns into vector instructions: 7 ms for a 127 MB file."""
    a = np.uint8(one)
    b = np.uint8(other)
    n = len(data)
    for k in range(n):
        byte = data[k]
        marks[k] = (byte == a) | (byte == b) | (byte == 10) | (byte == 13) | (byte == 0)
    marks[n] = 1
    for k in range(n + 1, len(marks)):
        marks[k] = 0


def _marks(data: np.ndarray, one: int, other: int) -> np.ndarray:
    """The special bytes of ``data`` (see :func:`_mark`) as 8-byte words."""
    marks = np.empty(len(data) // 8 + 2, dtype=np.uint64)
    _mark(data, marks.view(np.uint8), one, other)
    return marks


@jit
def _next_mark(marks: np.ndarray, i: int) -> int:
    """The first position from ``i`` on whose byte is marked: a word of 8 marks at a time
    (little-endian: the word's low byte is the first), the first set one found by counting
    the zero bytes below its lowest bit (each byte below it is 0xFF in ``low - 1``; their low
    bits summed into the top byte by the multiplication)."""
    while True:
        word = marks[i >> 3] >> np.uint64((i & 7) << 3)
        if word != _ZERO:
            low = word & (~word + _ONE)
            return i + int((((low - _ONE) & _ONES) * _ONES) >> np.uint64(56))
        i = (i | 7) + 1


@jit
def _scan(data: np.ndarray, marks: np.ndarray, st: np.ndarray, out: np.ndarray,
          delimiter: int, quote: int, final: bool) -> int:
    """Scan ``data`` from the state in ``st`` (updated); the data rows' first lines go to
    ``out``, their count is returned. ``marks``: ``data``'s special bytes (:func:`_marks`),
    to pass over the ordinary bytes between them at once. ``final``: ``data`` is empty and
    the file ends."""
    state, lines, fields, cell = st[_STATE], st[_LINES], st[_FIELDS], st[_CELL]
    line_bytes, max_line, max_cell = st[_LINE_BYTES], st[_MAX_LINE], st[_MAX_CELL]
    blank, records, ncols, bad = st[_BLANK], st[_RECORDS], st[_NCOLS], st[_BAD]
    record_line, header_end, base = st[_RECORD_LINE], st[_HEADER_END], st[_OFFSET]
    n_out = 0
    n = len(data)
    if st[_PENDING_CR] == 1 and (final or data[0] != 10):  # a '\r' ended the last block
        st[_PENDING_CR] = 0
        state, fields, records, ncols, bad, blank, lines, header_end, n_out = _end_line(
            state, fields, records, ncols, bad, blank, lines, record_line, header_end,
            out, n_out, base)
    elif st[_PENDING_CR] == 1:
        st[_PENDING_CR] = 0  # '\r\n' across the blocks: the '\n' ends the line
    if final:
        if state != _START_RECORD and state != _IN_QUOTED:  # a last line without its break
            if cell > max_cell:
                max_cell = cell
            cell = 0
            state, fields, records, ncols, bad, blank, lines, header_end, n_out = _end_line(
                state, fields, records, ncols, bad, blank, lines, record_line, header_end,
                out, n_out, base)
        if state == _IN_QUOTED:  # the csv module: "unexpected end of data"
            bad = 2
    i = 0
    while i < n and bad == 0:
        if state in (_IN_FIELD, _IN_QUOTED):  # the bulk: to the next special byte
            j = _next_mark(marks, i)
            cell += j - i
            line_bytes += j - i
            i = j
            if i == n:
                break
        c = data[i]
        i += 1
        if c == 0:
            bad = 4
        if c == 10:
            if line_bytes > max_line:
                max_line = line_bytes
            line_bytes = 0
        else:
            line_bytes += 1
        newline = c == 10 or c == 13
        if state == _START_RECORD:
            if newline:
                state = _EAT_CRNL
            else:
                record_line = lines + 1
                fields = 0
                state = _START_FIELD
        if state == _START_FIELD:
            if newline:
                fields += 1
                cell = 0
                state = _EAT_CRNL
            elif c == quote:
                cell = 0
                state = _IN_QUOTED
            elif c == delimiter:
                fields += 1
                cell = 0
            else:
                cell = 1
                state = _IN_FIELD
        elif state == _IN_FIELD:
            if c == delimiter or newline:
                fields += 1
                if cell > max_cell:
                    max_cell = cell
                cell = 0
                state = _EAT_CRNL if newline else _START_FIELD
            else:
                cell += 1
        elif state == _IN_QUOTED:
            if c == quote:
                state = _QUOTE_IN_QUOTED
            else:
                cell += 1
        elif state == _QUOTE_IN_QUOTED:
            if c == quote:
                cell += 1
                state = _IN_QUOTED
            elif c == delimiter or newline:
                fields += 1
                if cell > max_cell:
                    max_cell = cell
                cell = 0
                state = _EAT_CRNL if newline else _START_FIELD
            else:
                bad = 1
        # _EAT_CRNL: only line ends reach it (each is followed by its end-of-line event)
        if newline:
            if c == 13:
                if i == n:  # whether a '\n' follows is in the next block
                    st[_PENDING_CR] = 1
                    continue
                if data[i] == 10:
                    continue  # '\r\n': the '\n' ends the line
            state, fields, records, ncols, bad, blank, lines, header_end, n_out = _end_line(
                state, fields, records, ncols, bad, blank, lines, record_line, header_end,
                out, n_out, base + i)
    if final and line_bytes > max_line:
        max_line = line_bytes
    st[_STATE], st[_LINES], st[_FIELDS], st[_CELL] = state, lines, fields, cell
    st[_LINE_BYTES], st[_MAX_LINE], st[_MAX_CELL] = line_bytes, max_line, max_cell
    st[_BLANK], st[_RECORDS], st[_NCOLS], st[_BAD] = blank, records, ncols, bad
    st[_RECORD_LINE], st[_HEADER_END], st[_OFFSET] = record_line, header_end, base + n
    return n_out


_END_MARK = np.ones(1, dtype=np.uint64)


def scan_block(data: np.ndarray, state: np.ndarray, *, delimiter: str,
               quoting: bool) -> np.ndarray:
    """Scan the next block of the file's bytes (``uint8``); return the first line of every
    data row that ends in it. ``state`` is updated in place (:func:`new_state` first)."""
    out = np.empty(len(data) // 2 + 2, dtype=np.int64)
    d = ord(delimiter)
    n = _scan(data, _marks(data, d, ord('"') if quoting else d), state, out, d,
              ord('"') if quoting else -1, False)
    return out[:n].copy()


def finish_scan(state: np.ndarray, *, delimiter: str, quoting: bool) -> np.ndarray:
    """The end of the file: the last line's end when it has no line break, a quote left
    open. Returns the first line of a data row that ends there (none or one)."""
    out = np.empty(2, dtype=np.int64)
    n = _scan(np.zeros(0, dtype=np.uint8), _END_MARK, state, out, ord(delimiter),
              ord('"') if quoting else -1, True)
    return out[:n].copy()


#: The slots of the JSON Lines scan's state.
JSONL_STATE = ("lines", "line_bytes", "max_line", "content", "escape", "bad", "offset")
_J_LINES, _J_LINE_BYTES, _J_MAX_LINE, _J_CONTENT, _J_ESCAPE, _J_BAD, _J_OFFSET = range(7)


def new_jsonl_state() -> np.ndarray:
    """The JSON Lines scan's state before the first byte."""
    return np.zeros(len(JSONL_STATE), dtype=np.int64)


@jit
def _scan_jsonl(data: np.ndarray, marks: np.ndarray, st: np.ndarray, out: np.ndarray,
                final: bool) -> int:
    lines, line_bytes, max_line = st[_J_LINES], st[_J_LINE_BYTES], st[_J_MAX_LINE]
    content, escape, bad = st[_J_CONTENT], st[_J_ESCAPE], st[_J_BAD]
    n_out = 0
    n = len(data)
    i = 0
    while i < n:
        if content == 1 and escape == 0:  # the bulk: to the next special byte
            j = _next_mark(marks, i)
            line_bytes += j - i
            i = j
            if i == n:
                break
        c = data[i]
        i += 1
        if c == 10:
            lines += 1
            if content:
                out[n_out] = lines
                n_out += 1
            if line_bytes > max_line:
                max_line = line_bytes
            line_bytes = content = escape = 0
            continue
        line_bytes += 1
        if c == 0:
            bad = 4
            break
        if c != 32 and c != 9 and c != 13:
            content = 1
        # a backslash, then u, then d/D, then 8-f: the escape of a surrogate
        if escape == 0:
            if c == 92:
                escape = 1
        elif escape == 1:
            escape = 2 if c == 117 else (1 if c == 92 else 0)
        elif escape == 2:
            escape = 3 if c == 100 or c == 68 else (1 if c == 92 else 0)
        else:
            if (56 <= c <= 57) or (97 <= c <= 102) or (65 <= c <= 70):
                bad = 5
                break
            escape = 1 if c == 92 else 0
    if final:
        if line_bytes > max_line:
            max_line = line_bytes
        if content:  # a last line without its line break
            out[n_out] = lines + 1
            n_out += 1
    st[_J_LINES], st[_J_LINE_BYTES], st[_J_MAX_LINE] = lines, line_bytes, max_line
    st[_J_CONTENT], st[_J_ESCAPE], st[_J_BAD] = content, escape, bad
    st[_J_OFFSET] += len(data)
    return n_out


def scan_jsonl_block(data: np.ndarray, state: np.ndarray) -> np.ndarray:
    """Scan the next block of a JSON Lines file (``uint8``); return the line number of every
    non-blank line that ends in it. ``state`` is updated in place
    (:func:`new_jsonl_state` first)."""
    out = np.empty(len(data) // 2 + 2, dtype=np.int64)
    n = _scan_jsonl(data, _marks(data, 92, 92), state, out, False)
    return out[:n].copy()


def finish_jsonl_scan(state: np.ndarray) -> np.ndarray:
    """The end of a JSON Lines file: its last line when it has no line break."""
    out = np.empty(2, dtype=np.int64)
    n = _scan_jsonl(np.zeros(0, dtype=np.uint8), _END_MARK, state, out, True)
    return out[:n].copy()
