"""Streamed exports: a writer turned into byte chunks (aflite_core.io._byte_stream), the
dashboard's download route (ui.downloads) and the rows of a table view streamed by position
(aflite_core.runs.exports.stream_view_csv)."""

from __future__ import annotations

import asyncio
import csv
import io
import threading
import time

import numpy as np
import pandas as pd
import pytest

from aflite_core.io._byte_stream import StreamClosed, stream_bytes
from aflite_core.runs.exports import stream_view_csv, table_view_bytes
from ui import downloads


def test_the_stream_holds_the_written_bytes_in_order_in_bounded_chunks():
    blocks = [bytes([i % 251]) * 10_000 for i in range(300)]  # 3 MB in 10 kB writes
    chunks = list(stream_bytes(lambda out: [out.write(b) for b in blocks],
                               chunk_bytes=65_536, max_chunks=2))
    assert b"".join(chunks) == b"".join(blocks)
    assert max(len(c) for c in chunks) < 65_536 + 10_000
    assert len(chunks) > 40


def test_the_writer_waits_for_the_reader_and_stops_when_it_leaves():
    written: list[int] = []
    stopped = threading.Event()

    def write(out) -> None:
        try:
            for i in range(10_000):
                out.write(b"x" * 1000)
                written.append(i)
        except StreamClosed:
            stopped.set()
            raise

    stream = stream_bytes(write, chunk_bytes=1000, max_chunks=2)
    next(stream)
    time.sleep(0.2)
    assert len(written) < 10  # blocked on the full queue, not 10 MB ahead of the reader
    stream.close()  # the browser cancelled
    assert stopped.wait(5)
    assert len(written) < 10


def test_a_failing_writer_fails_the_reader_after_its_bytes():
    def write(out) -> None:
        out.write(b"header\r\n")
        raise OSError("disk gone")

    stream = stream_bytes(write, chunk_bytes=4)
    assert next(stream) == b"header\r\n"
    with pytest.raises(OSError, match="disk gone"):
        next(stream)


@pytest.fixture
def view() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    n = 2_000
    return pd.DataFrame({
        "premise": [f"p{i}" for i in range(n)],
        "hypothesis": ["=cmd()" if i % 97 == 0 else f"h, {i}" for i in range(n)],
        "status": rng.choice(["retained", "removed"], n),
        "predictability": rng.random(n),
    }, index=pd.Index(rng.permutation(n) * 3, name="row_id"))


def test_the_streamed_view_is_the_table_view_of_those_positions(view):
    positions = np.flatnonzero(view["status"].to_numpy() == "removed")
    positions = positions[np.argsort(-view["predictability"].to_numpy()[positions])]
    columns = ["hypothesis", "predictability"]
    streamed = b"".join(stream_view_csv(view, positions, columns, chunk_rows=64))
    assert streamed == table_view_bytes(view.iloc[positions], columns)
    rows = list(csv.reader(io.StringIO(streamed.decode("utf-8"), newline="")))
    assert rows[0] == ["row_id", "hypothesis", "predictability", "premise", "status"]
    assert [int(r[0]) for r in rows[1:]] == view.index[positions].tolist()
    assert any(r[1] == "'=cmd()" for r in rows[1:])  # spreadsheet-safe as the others
    with pytest.raises(ValueError, match="not in the rows"):
        stream_view_csv(view, positions, ["no such column"])


def _body(response) -> bytes:
    async def collect() -> bytes:
        parts = [chunk async for chunk in response.body_iterator]
        return b"".join(p if isinstance(p, bytes) else p.encode() for p in parts)

    return asyncio.run(collect())


class _Request:
    def __init__(self, token: str) -> None:
        self.path_params = {"token": token}


def test_the_route_streams_a_registered_download_and_refuses_others():
    calls = []

    def producer():
        calls.append(1)
        yield from (b"a,b\r\n", b"1,2\r\n")

    token = downloads.register(("session", "key"), producer, file_name="rés ults.csv",
                               mime="text/csv", signature="v1")
    assert not calls  # nothing is written before the link is followed
    response = asyncio.run(downloads._endpoint(_Request(token)))
    assert response.status_code == 200
    assert _body(response) == b"a,b\r\n1,2\r\n"
    disposition = response.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="r_s ults.csv"')
    assert "filename*=UTF-8''r%C3%A9s%20ults.csv" in disposition
    # a rerun with the same content keeps the link; new content replaces it
    assert downloads.register(("session", "key"), producer, file_name="x.csv",
                              mime="text/csv", signature="v1") == token
    newer = downloads.register(("session", "key"), producer, file_name="x.csv",
                               mime="text/csv", signature="v2")
    assert newer != token and downloads.lookup(token) is None
    missing = asyncio.run(downloads._endpoint(_Request(token)))
    assert missing.status_code == 404 and b"expired" in missing.body
    assert asyncio.run(downloads._endpoint(_Request("../../etc/passwd"))).status_code == 404
