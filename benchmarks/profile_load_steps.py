"""The driver's memory while a dataset loads: each step of ``load_dataset``, then the texts'
move to disk (as ``run --scheduler`` does) and the heap's trim.

For every step it prints the RSS before it, the peak during it (sampled every 10 ms) and the
RSS after, and the seconds:

    .venv/bin/python benchmarks/profile_load_steps.py DATA

``DATA`` is anything ``load_dataset`` reads, e.g. the shards that ``bench_distributed.py
--write-shards N FOLDER`` writes. The shards are read in this process (the CLI reads them on
the cluster's workers; the tables then come to the driver all the same).
"""

from __future__ import annotations

import functools
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: The steps of ``load_dataset`` timed (functions of ``aflite_core.io.datasets``).
STEPS = ("read_table", "_map_columns", "find_per_choice", "_exclusions", "_group_column",
         "_build_report", "_require_included_rows")


def main(argv: list[str] | None = None) -> int:
    import aflite_core.io.datasets as datasets
    from aflite_core.heap_trim import release_free_heap

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__)
        return 2
    process = psutil.Process()
    active: list[dict] = []  # the steps under way, outermost first: each its own peak

    def watch() -> None:
        while True:
            rss = process.memory_info().rss
            for step in list(active):
                step["peak"] = max(step["peak"], rss)
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()

    def measured(label: str, call, /, *args, **kwargs):
        before = process.memory_info().rss
        step = {"peak": before}
        active.append(step)
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            active[:] = [other for other in active if other is not step]
            after, seconds = process.memory_info().rss, time.perf_counter() - start
            top = max(step["peak"], after)
            print(f"{label:<24} before {before / 1e9:5.2f}  peak {top / 1e9:5.2f}  after "
                  f"{after / 1e9:5.2f} GB  {seconds:6.1f} s", flush=True)

    for name in STEPS:
        original = getattr(datasets, name)
        setattr(datasets, name, functools.partial(measured, name, original))
    dataset = measured("load_dataset", datasets.load_dataset, argv[0])
    with tempfile.TemporaryDirectory() as folder:
        dataset = measured("with_texts_on_disk", dataset.with_texts_on_disk,
                           Path(folder) / "dataset.parquet")
        measured("release_free_heap", release_free_heap)
        print(f"{len(dataset):,} rows; the frame keeps {list(dataset.frame.columns)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
