"""Reading a large CSV/TSV file: the loader against Arrow's own reader, side by side.

Writes an SNLI-like file of ``--rows`` rows (``bench_cues.build``: the shared SNLI files,
perturbed copies) as CSV, TSV and JSON Lines, then times in a fresh process each, in turn:

* ``arrow``: ``pyarrow.csv.read_csv`` with ``newlines_in_values=True`` (quoting off for TSV),
  every column as text; ``pyarrow.json.read_json`` for JSON Lines -- the yardstick of issue
  63 item 6;
* ``read_table``: the loader's reader (``aflite_core.io.read_table``: Arrow's streaming
  reader beside the csv-module scan, :mod:`aflite_core.io._arrow_delimited`);
* ``read_table (csv/json module)``: the same with Arrow's path turned off (the reader
  before);
* ``load_dataset``: the whole load (reading, validation, the load report, grouping);
* ``load_dataset (the CLI's malloc)``: the same after the command line's allocator settings
  (``heap_trim.limit_arenas``, ``numpy_small_pages`` and ``map_large_allocations``: the load's
  large arrays in ordinary pages of their own, handed back when freed, as ``python -m
  aflite_core run`` loads).

Each line prints the seconds (best of ``--repeats``, and the first read of the process: for
the loader it includes loading the compiled scan, numba's import and cache, about 0.6 s
once a process), the ratio of each to ``arrow``'s, and the peak RSS of the process after its
first read (a load as a user makes it, once a process) and after all of them (the allocator
keeps some of what earlier reads freed); the bound of issue 31 (peak <= 2x the file +
300 MB) is printed beside.

Usage::

    python benchmarks/bench_read.py [--rows 1000000] [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, sys, time
mode, path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
tsv = path.endswith(".tsv")
times = []
for _ in range(repeats):
    if mode == "arrow" and path.endswith(".jsonl"):
        import pyarrow.json as pj
        start = time.perf_counter()
        rows = pj.read_json(path).num_rows
    elif mode == "arrow":
        import pyarrow as pa, pyarrow.csv as pc
        with open(path, encoding="utf-8") as handle:
            names = handle.readline().rstrip("\r\n").split("\t" if tsv else ",")
        start = time.perf_counter()
        table = pc.read_csv(path, parse_options=pc.ParseOptions(
            delimiter="\t" if tsv else ",", quote_char=False if tsv else '"',
            newlines_in_values=not tsv), convert_options=pc.ConvertOptions(
            column_types={n: pa.large_string() for n in names}, strings_can_be_null=False))
        rows = table.num_rows
    else:
        import aflite_core.io._arrow_delimited as fast
        from aflite_core.io import load_dataset, read_table
        if mode == "csv-module":  # (the json module for JSON Lines)
            fast.FAST_MIN_BYTES = 1 << 62
        if mode == "load_dataset-cli" and not times:  # as `python -m aflite_core run` loads
            from aflite_core.heap_trim import (
                limit_arenas,
                map_large_allocations,
                numpy_small_pages,
            )
            limit_arenas()
            numpy_small_pages()
            map_large_allocations()
        start = time.perf_counter()
        if mode.startswith("load_dataset"):
            rows = len(load_dataset(path).frame)
        else:
            rows = len(read_table(path).frame)
    times.append(time.perf_counter() - start)
    table = None
    # VmHWM: this process's own peak (ru_maxrss keeps the parent's across exec)
    peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
                if line.startswith("VmHWM:"))
    first_peak = peak if len(times) == 1 else first_peak
print(json.dumps({"first": times[0], "seconds": min(times), "peak": peak,
                  "first_peak": first_peak, "rows": rows}))
"""

MODES = [("arrow", "arrow (read_csv / read_json)"), ("read_table", "read_table"),
         ("csv-module", "read_table (csv/json module)"), ("load_dataset", "load_dataset"),
         ("load_dataset-cli", "load_dataset (the CLI's malloc)")]


def _measure(mode: str, path: Path, repeats: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path), str(repeats)],
                         capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", help="folder to write (and reuse) the files in")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    from bench_cues import build

    folder = Path(args.keep or tempfile.mkdtemp(prefix="bench-read-"))
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"rows{args.rows}.{kind}" for kind in ("csv", "tsv", "jsonl")]
    if not all(p.exists() for p in paths):
        frame = build(args.rows)
        frame.to_csv(paths[0], index=False)
        frame.to_csv(paths[1], index=False, sep="\t", quoting=3, escapechar=None)
        frame.to_json(paths[2], orient="records", lines=True, force_ascii=False)
    for path in paths:
        size = path.stat().st_size
        print(f"{path.name}: {size / 1e6:.1f} MB, {args.rows:,} rows; "
              f"issue 31's peak bound {(2 * size + 300e6) / 1e6:,.0f} MB")
        base = None
        for mode, label in MODES:
            got = _measure(mode, path, args.repeats)
            base = got if mode == "arrow" else base
            best, first = got["seconds"], got["first"]
            print(f"  {label:<31} best {best:6.2f} s {best / base['seconds']:5.2f}x"
                  f"   first {first:6.2f} s {first / base['first']:5.2f}x"
                  f"   peak {got['first_peak'] / 1e6:6,.0f} MB first read,"
                  f" {got['peak'] / 1e6:6,.0f} MB all  ({got['rows']:,} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
