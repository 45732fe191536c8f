"""Peak memory of refusing a decompression bomb and a Parquet dictionary bomb.

Builds two small files that expand far past the size ceiling (``--max-bytes``, default
64M; the CLI's default is 1G, scaled down here so the benchmark runs in seconds):

* ``bomb.csv.gz``: ``--expand`` bytes (default 200M) of CSV lines, gzip-compressed to a
  few hundred KB. The reader decompresses chunk by chunk and stops one chunk past the
  ceiling.
* ``dict.parquet``: a dictionary-encoded text column whose one 100 KB value repeats until
  the column decodes to ``--expand`` bytes; the footer's ``total_byte_size`` counts the
  dictionary page once, so the footer check alone lets it through. The reader reads text
  columns dictionary-encoded, batch by batch, adding each batch's decoded size to a budget
  before decoding it.

Each file is loaded with ``load_dataset(path, max_bytes=ceiling)`` in a fresh subprocess,
which must refuse it (``DatasetSizeError``). Printed per bomb: file size, the refusal
message, peak RSS of the subprocess (``ru_maxrss``), its RSS after the imports (baseline)
and the difference, which is what the goal (<= 2x the ceiling) is about. The row
``parquet, no budget`` shows, for reference, what ``pyarrow`` alone costs to materialise
the same Parquet file (what the loader did before the budget).

With ``--lines 300M,600M,1G`` it also loads single-line gzip bombs (one line of that many
bytes, compressed to a few hundred KB) and, with ``--well-formed 1G``, a well-formed CSV of
SNLI-like rows of about that size (``--formats csv,jsonl``: and the same rows as JSON
Lines), each with the CLI's defaults (``--max-bytes`` 1G, the 64 MiB line limit), in a fresh
subprocess: time, peak RSS and outcome. Goal (issue 31):
peak RSS while reading <= 2x the decompressed size + 300 MB, and a line past the limit
refused at that line.

With ``--cells`` it loads the two shapes of issue 60 the same way: a gzip CSV of 16 rows
whose premise is 60 MB each (each line under the 64 MiB line limit; about 1 MB on disk,
960 MB decoded; and the same rows as JSON Lines), which must be read within 2x its decoded
size + 300 MB, and a Parquet file
of 3 cells of 300 MB each (about 30 KB on disk), which the cell limit (``--max-line-bytes``,
64 MiB) must refuse before any cell is decoded.

Usage::

    python benchmarks/bench_bombs.py [--max-bytes 64M] [--expand 200M]
    python benchmarks/bench_bombs.py --lines 300M,600M,1G --well-formed 1G [--formats csv,jsonl]
    python benchmarks/bench_bombs.py --cells
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from aflite_core.commands._input import parse_bytes  # noqa: E402

CHILD = r"""
import json, resource, sys
def rss_kib():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
import pyarrow, pyarrow.parquet, pandas  # noqa: F401  (part of the baseline)
from aflite_core.io.datasets import DatasetSizeError, load_dataset
path, ceiling, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
base = rss_kib()
message = ""
if mode == "load":
    try:
        load_dataset(path, max_bytes=ceiling)
        message = "NOT REFUSED"
    except DatasetSizeError as exc:
        message = str(exc)
elif mode == "cli-defaults":  # as `run` loads: max_bytes 1G, the 64 MiB line limit
    import time
    start = time.perf_counter()
    try:
        ds = load_dataset(path, max_bytes=1 << 30)
        message = f"read {len(ds.frame):,} rows"
    except (DatasetSizeError, ValueError) as exc:
        message = "refused: " + str(exc)
    message = f"{time.perf_counter() - start:.1f} s, " + message
else:  # reference: materialise the Parquet table with pyarrow, no budget
    table = pyarrow.parquet.read_table(path)
    message = f"materialised {table.nbytes / 2**20:.0f} MiB of Arrow data"
# VmHWM: this process's own high-water mark (ru_maxrss keeps the parent's RSS at the fork
# across exec, so a parent that built a large file made every child look large)
with open("/proc/self/status") as fh:
    peak = next((int(line.split()[1]) for line in fh if line.startswith("VmHWM:")),
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
print(json.dumps({"base_kib": base, "peak_kib": peak, "message": message}))
"""


def make_gzip_bomb(path: Path, expand: int) -> None:
    line = b"a,b,c\n"
    block = line * ((1 << 20) // len(line))
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b"premise,hypothesis,label\n")
        written = 0
        while written < expand:
            fh.write(block)
            written += len(block)


def make_parquet_bomb(path: Path, expand: int, width: int = 100_000) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = max(2, expand // width)
    blob = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)),
                                          pa.array(["x" * width]))
    table = pa.table({
        "hypothesis": pa.array([f"text {i}" for i in range(rows)]),
        "label": pa.array(["a", "b"] * (rows // 2) + ["a"] * (rows % 2)),
        "blob": blob,
    })
    # store_schema=False: the file does not say "dictionary" in its Arrow schema, so
    # readers see a plain text column (as from any writer that dictionary-encodes strings)
    pq.write_table(table, path, compression="zstd", store_schema=False)
    footer = pq.ParquetFile(path).metadata.row_group(0).total_byte_size
    print(f"dict.parquet footer: total_byte_size {footer:,} bytes for {rows * width:,} "
          "decoded bytes")


def make_line_bomb(path: Path, size: int) -> None:
    """One CSV line of ``size`` bytes, gzip-compressed (a few hundred KB)."""
    block = b"a" * (1 << 20)
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b"premise,hypothesis,label\n")
        for _ in range(size // len(block)):
            fh.write(block)
        fh.write(b",b,c\n")


def make_well_formed(path: Path, size: int, fmt: str = "csv") -> None:
    """A CSV (or JSON Lines, ``fmt="jsonl"``) of SNLI-like rows (premise, hypothesis,
    label) of about ``size`` bytes."""
    import numpy as np

    rng = np.random.default_rng(0)
    words = np.array(["a", "man", "woman", "dog", "cat", "child", "street", "park", "ball",
                      "car", "red", "blue", "running", "sitting", "eating", "water", "beach",
                      "music", "table", "green", "old", "young", "is", "the", "on", "in",
                      "with", "near"])
    with path.open("w", encoding="utf-8") as fh:
        header = "premise,hypothesis,label\n" if fmt == "csv" else ""
        fh.write(header)
        written = len(header)
        while written < size:
            n = 20_000
            prem = [" ".join(w) for w in rng.choice(words, size=(n, 12))]
            hyp = [" ".join(w) for w in rng.choice(words, size=(n, 6))]
            lab = rng.choice(["entailment", "neutral", "contradiction"], size=n)
            row = ("{},{},{}\n" if fmt == "csv"
                   else '{{"premise": "{}", "hypothesis": "{}", "label": "{}"}}\n')
            text = "".join(row.format(p, h, la) for p, h, la in zip(prem, hyp, lab, strict=True))
            if written + len(text) > size:  # stay at or under the size (the CLI's ceiling)
                text = text[: text.rfind("\n", 0, size - written) + 1]
                if not text:
                    break
            fh.write(text)
            written += len(text)


def measure(path: Path, ceiling: int, mode: str = "load") -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(ceiling), mode],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-bytes", type=parse_bytes, default=64 << 20, metavar="SIZE")
    parser.add_argument("--expand", type=parse_bytes, default=200 << 20, metavar="SIZE")
    parser.add_argument("--lines", default="", metavar="SIZES",
                        help="single-line gzip bombs of these sizes, e.g. 300M,600M,1G")
    parser.add_argument("--well-formed", type=parse_bytes, default=None, metavar="SIZE",
                        help="also load a well-formed CSV of about this size")
    parser.add_argument("--formats", default="csv", metavar="LIST",
                        help="formats of the well-formed file: csv, jsonl or csv,jsonl")
    parser.add_argument("--cells", action="store_true",
                        help="the large-cell shapes: 16 x 60 MB cells (gzip CSV), 3 x 300 MB "
                             "cells (Parquet)")
    args = parser.parse_args(argv)
    if args.cells:
        return large_cells()
    if args.lines or args.well_formed:
        return lines_and_well_formed(args.lines, args.well_formed, args.formats.split(","))
    ceiling, expand = args.max_bytes, args.expand
    mib = 1 << 20
    print(f"ceiling {ceiling / mib:.0f} MiB, bombs expanding to {expand / mib:.0f} MiB")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        gz = Path(tmp) / "bomb.csv.gz"
        pq_path = Path(tmp) / "dict.parquet"
        make_gzip_bomb(gz, expand)
        make_parquet_bomb(pq_path, expand)
        print(f"{'bomb':<20} {'file':>9} {'peak RSS':>9} {'baseline':>9} {'increase':>9} "
              f"{'x ceiling':>9}  message")
        rows = [("gzip", gz, "load"), ("parquet dictionary", pq_path, "load"),
                ("parquet, no budget", pq_path, "reference")]
        for label, path, mode in rows:
            r = measure(path, ceiling, mode)
            increase = (r["peak_kib"] - r["base_kib"]) * 1024
            ratio = increase / ceiling
            if mode == "load":
                worst = max(worst, ratio)
            print(f"{label:<20} {path.stat().st_size / mib:>7.2f}Mi {r['peak_kib'] / 1024:>7.0f}Mi "
                  f"{r['base_kib'] / 1024:>7.0f}Mi {increase / mib:>7.0f}Mi {ratio:>9.2f}  "
                  f"{r['message'][:150]}")
    goal = "met" if worst <= 2 else "NOT met"
    print(f"worst increase over the baseline: {worst:.2f}x the ceiling (goal <= 2x: {goal})")
    return 0 if worst <= 2 else 1


def make_big_cells_csv(path: Path, rows: int = 16, cell: int = 60 << 20) -> int:
    """A gzip CSV of ``rows`` rows whose premise is ``cell`` bytes each; returns the decoded
    size."""
    block = b"word " * (1 << 18)  # 1.25 MiB
    size = 0
    with gzip.open(path, "wb", compresslevel=6) as fh:
        header = b"premise,hypothesis,label\n"
        fh.write(header)
        size += len(header)
        for i in range(rows):
            left = cell
            while left > 0:
                piece = block[:left]
                fh.write(piece)
                left -= len(piece)
            line = f",hypothesis {i},{'ab'[i % 2]}\n".encode()
            fh.write(line)
            size += cell + len(line)
    return size


def make_big_cells_jsonl(path: Path, rows: int = 16, cell: int = 60 << 20) -> int:
    """The same 16 x 60 MB cells as JSON Lines (gzip); returns the decoded size."""
    size = 0
    value = "word " * (cell // 5)
    with gzip.open(path, "wb", compresslevel=6) as fh:
        for i in range(rows):
            line = json.dumps({"premise": value, "hypothesis": f"hypothesis {i}",
                               "label": "ab"[i % 2]}).encode() + b"\n"
            fh.write(line)
            size += len(line)
    return size


def make_big_cells_parquet(path: Path, rows: int = 3, cell: int = 300 << 20) -> int:
    """A Parquet file of ``rows`` rows whose premise is ``cell`` bytes each (dictionary
    encoded and compressed: a few KB); returns the decoded size."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    value = "w" * cell
    table = pa.table({"premise": pa.array([value] * rows).dictionary_encode(),
                      "hypothesis": [f"hypothesis {i}" for i in range(rows)],
                      "label": ["a", "b", "a"][:rows]})
    del value
    pq.write_table(table, path, compression="zstd")
    return rows * cell


def large_cells() -> int:
    """Issue 60's shapes, each loaded as ``run`` loads it in a fresh process."""
    mib = 1 << 20
    failed = 0
    print(f"{'input':<34} {'file':>9} {'decoded':>9} {'peak RSS':>9} {'goal':>9}  outcome")
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [("16 x 60 MB cells (.csv.gz)", Path(tmp) / "cells.csv.gz", make_big_cells_csv),
                ("16 x 60 MB cells (.jsonl.gz)", Path(tmp) / "cells.jsonl.gz",
                 make_big_cells_jsonl),
                ("3 x 300 MB cells (.parquet)", Path(tmp) / "cells.parquet",
                 make_big_cells_parquet)]
        for label, path, make in jobs:
            size = make(path)
            r = measure(path, 0, "cli-defaults")
            peak = r["peak_kib"] * 1024
            goal = 2 * size + 300 * mib
            ok = peak <= goal
            failed += not ok
            print(f"{label:<34} {path.stat().st_size / mib:>7.2f}Mi {size / mib:>7.0f}Mi "
                  f"{peak / mib:>7.0f}Mi {goal / mib:>7.0f}Mi  {'ok ' if ok else 'OVER'} "
                  f"{r['message'][:140]}")
    return 1 if failed else 0


def lines_and_well_formed(lines: str, well_formed: int | None,
                          formats: list[str] = ("csv",)) -> int:
    """Issue 31's table: each file loaded as ``run`` loads it; time, peak RSS, outcome."""
    mib = 1 << 20
    print(f"{'input':<28} {'file':>9} {'decompr.':>9} {'peak RSS':>9} {'goal':>9}  outcome")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for text in filter(None, (t.strip() for t in lines.split(","))):
            size = parse_bytes(text)
            path = Path(tmp) / f"line_{text}.csv.gz"
            make_line_bomb(path, size)
            jobs.append((f"single line {text} (.csv.gz)", path, size))
        for fmt in formats if well_formed else ():
            path = Path(tmp) / f"well_formed.{fmt.strip()}"
            make_well_formed(path, well_formed, fmt.strip())
            jobs.append((f"well-formed {fmt.strip().upper()} {well_formed / mib:.0f} MiB", path,
                         path.stat().st_size))
        for label, path, size in jobs:
            r = measure(path, 0, "cli-defaults")
            peak = r["peak_kib"] * 1024
            goal = 2 * size + 300 * mib
            ok = peak <= goal
            failed += not ok
            print(f"{label:<28} {path.stat().st_size / mib:>7.1f}Mi {size / mib:>7.0f}Mi "
                  f"{peak / mib:>7.0f}Mi {goal / mib:>7.0f}Mi  {'ok ' if ok else 'OVER'} "
                  f"{r['message'][:110]}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
