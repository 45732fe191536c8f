"""Loading data with its texts to disk: whole vs streamed (issue 27, item 2).

The seeded SNLI-like input of ``bench_distributed`` (8 Parquet shards; with ``--layout csv``
or ``--layout parquet`` the same rows as one file, Parquet in row groups of 131,072 rows) is
loaded into a texts file twice, each in a fresh process with large allocations handed back
to the system when freed (as the CLI's driver does), its peak RSS read from
``/proc/self/status`` (``VmHWM``: ``ru_maxrss`` would keep the forking parent's, which built
the input):

- ``whole``: ``load_dataset(DIR).with_texts_on_disk(FILE)`` (every row's text in memory while
  the rows are checked: how the CLI loaded shards on a cluster before the streamed load);
- ``streamed``: ``streamed_load.load_to_disk(DIR, FILE)`` (one shard's text at a time; a
  single file a piece at a time: 65,536 CSV rows, or whole Parquet row groups).

Printed per mode: seconds, peak RSS, how the data was loaded, the report's duplicate counts
and groups (the same in both), and whether the two files are the same bytes.

    .venv/bin/python benchmarks/bench_streamed_load.py [--rows 2000000] [--layout shards]
        [--workers 0]

``--layout csv|tsv|jsonl|parquet``: the rows as one file (JSON Lines by pandas, TSV unquoted
as SNLI's, CSV and Parquet by pyarrow). ``--workers N``: the streamed load reads on a
LocalCluster of N workers (``ShardsOnCluster``: shards, a Parquet file's row groups and a
TSV/JSON Lines file's parts there; a CSV file is parsed here), the peak printed being this
process's only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
from aflite_core.heap_trim import map_large_allocations
map_large_allocations()
from aflite_core.io.datasets import load_dataset
from aflite_core.io._streamed_load import load_to_disk
def peak_gb():  # VmHWM: this program's own peak (ru_maxrss keeps the forking parent's)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1e6
workers = int(sys.argv[4])
if workers:  # a LocalCluster (its workers are other processes: not in this peak)
    from distributed import Client, LocalCluster
    from aflite_core.commands._input import ShardsOnCluster
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, host="127.0.0.1",
                           dashboard_address=None)
    client = Client(cluster)
start = time.perf_counter()
if sys.argv[1] == "streamed":
    ds = load_to_disk(sys.argv[2], sys.argv[3],
                      map_shards=ShardsOnCluster(client) if workers else None)
else:
    ds = load_dataset(sys.argv[2]).with_texts_on_disk(sys.argv[3])
print(json.dumps({{"seconds": time.perf_counter() - start,
                  "peak_gb": peak_gb(),
                  "loaded_by": ds.loaded_by, "read_by": ds.read_by, "rows": len(ds),
                  "duplicates": ds.report.duplicates, "groups": ds.report.n_groups}}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--layout", choices=("shards", "csv", "tsv", "jsonl", "parquet"),
                        default="shards",
                        help="8 Parquet shards, or the same rows as one file")
    parser.add_argument("--workers", type=int, default=0,
                        help="the streamed load reads on a LocalCluster of N workers")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_distributed import write_shards

    with tempfile.TemporaryDirectory(prefix="bench-streamed-load-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        write_shards(args.rows, data)
        if args.layout != "shards":
            data = _one_file(data, args.layout)
        held = "8 Parquet shards" if args.layout == "shards" else data.name
        print(f"{args.rows:,} rows in {held}", flush=True)
        child = _CHILD.format(root=str(ROOT))
        results = {}
        for mode in ("whole", "streamed"):
            out = Path(tmp) / f"{mode}.parquet"
            workers = args.workers if mode == "streamed" else 0
            done = subprocess.run([sys.executable, "-c", child, mode, str(data), str(out),
                                   str(workers)], capture_output=True, text=True, check=True)
            results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
            r = results[mode]
            print(f"  {mode:9s} {r['seconds']:6.1f} s  peak RSS {r['peak_gb']:.2f} GB  "
                  f"loaded {r['loaded_by']}, read {r['read_by']}  duplicates "
                  f"{r['duplicates']}  groups {r['groups']}", flush=True)
        same = (Path(tmp) / "whole.parquet").read_bytes() == \
            (Path(tmp) / "streamed.parquet").read_bytes()
        print(f"  the two texts files are {'the same bytes' if same else 'DIFFERENT'}")
    return 0


def _one_file(shards: Path, layout: str) -> Path:
    """The shards' rows as one file (the shards removed)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    files = sorted(shards.glob("*.parquet"))
    out = shards.parent / f"data.{layout}"
    if layout in ("jsonl", "tsv"):  # (TSV as published: no quoting)
        with open(out, "w", encoding="utf-8") as handle:
            for i, file in enumerate(files):
                frame = pq.read_table(file).to_pandas()
                if layout == "jsonl":
                    frame.to_json(handle, orient="records", lines=True, force_ascii=False)
                else:
                    if i == 0:
                        handle.write("\t".join(frame.columns) + "\n")
                    for row in zip(*(frame[c].astype(str) for c in frame.columns),
                                   strict=True):
                        handle.write("\t".join(row) + "\n")
                file.unlink()
        return out
    schema = pq.ParquetFile(files[0]).schema_arrow
    writer = (pq.ParquetWriter(out, schema) if layout == "parquet"
              else pacsv.CSVWriter(out, schema))
    with writer:
        for file in files:
            table = pq.read_table(file).cast(schema)
            if layout == "parquet":
                writer.write_table(table, row_group_size=131_072)
            else:
                writer.write_table(table)
            file.unlink()
    return out


if __name__ == "__main__":
    raise SystemExit(main())
