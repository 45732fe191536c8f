"""A CSV export's chunks encoded here vs as tasks on a Dask LocalCluster (issue 27, item 2).

A seeded table of SNLI-like rows (row id, premise, hypothesis, label, status,
predictability, removal round; some cells start with formula characters) is written as a
spreadsheet-safe CSV by ``io.tables.write_csv`` in chunks of 50,000 rows: here, one chunk
after another, and with ``map_chunks=stream_ordered(client)`` on a LocalCluster of
``--workers`` single-threaded worker processes (each chunk sent to a worker, its bytes sent
back and written here in order). Printed: seconds of each, the file's size, whether the two
files are the same bytes.

    .venv/bin/python benchmarks/bench_csv_export.py [--rows 1000000] [--workers 2]
"""

from __future__ import annotations

import argparse
import functools
import io
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def table(rows: int) -> pa.Table:
    rng = np.random.default_rng(0)
    words = np.array(["a", "man", "is", "playing", "the", "guitar", "on", "stage", "while",
                      "people", "watch", "=cheer", "and", "dance", "-x"])
    starts = rng.integers(0, len(words), (rows, 2))
    sentences = [" ".join(words[(s + np.arange(k)) % len(words)]) for s, k in
                 zip(starts[:, 0], rng.integers(5, 15, rows), strict=True)]
    return pa.table({"row_id": np.arange(rows), "premise": sentences,
                     "hypothesis": [s[: len(s) // 2] for s in sentences],
                     "label": rng.choice(["entailment", "neutral", "contradiction"], rows),
                     "status": rng.choice(["retained", "removed"], rows),
                     "predictability": rng.random(rows),
                     "removal_round": rng.integers(0, 5, rows)})


def main(argv: list[str] | None = None) -> int:
    from distributed import Client, LocalCluster

    from aflite_core.io._tables import write_csv
    from aflite_core.represent._fold_pool import stream_ordered

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    data = table(args.rows)
    chunks = [data.slice(i, 50_000) for i in range(0, args.rows, 50_000)]
    here = io.BytesIO()
    start = time.perf_counter()
    write_csv(chunks, here)
    local = time.perf_counter() - start
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        there = io.BytesIO()
        start = time.perf_counter()
        write_csv(chunks, there, map_chunks=functools.partial(stream_ordered, client))
        remote = time.perf_counter() - start
    print(f"{args.rows:,} rows, {len(here.getvalue()) / 1e6:.1f} MB of CSV: here {local:.1f} s, "
          f"on {args.workers} workers {remote:.1f} s; the same bytes: "
          f"{here.getvalue() == there.getvalue()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
