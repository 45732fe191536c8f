"""Where the driver's memory goes, stage by stage, in an audit on a Dask cluster.

At each stage change of ``run_audit`` it prints the process's RSS, the live and peak memory
``tracemalloc`` traces (Python objects and NumPy arrays), the Arrow pool's bytes and glibc's
heap in use and held free (``mallinfo2``). With ``--snapshot STAGE`` it also prints the
largest live allocation sites when that stage starts (slower: 12 frames traced), and with
``--peak-snapshot STAGE`` those of the memory the stage allocated and still held when its
RSS peaked (traced from the stage's start). ``--measures`` runs only the measures named.

    .venv/bin/python benchmarks/profile_driver_stages.py DATA tcp://SCHEDULER [--snapshot slices]

Start the cluster in another process (so that its scheduler is not counted as the driver),
e.g. ``dask scheduler`` and two ``dask worker`` processes, or a LocalCluster in a Python
session. Linux only (``mallinfo2`` of glibc).
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import psutil
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]


def _print_sites(snapshot: tracemalloc.Snapshot, top: int) -> None:
    """The ``top`` largest allocation sites of ``snapshot``, with their last frames."""
    for stat in snapshot.statistics("traceback")[:top]:
        print(f"  {stat.size / 1e6:8.1f} MB")
        for frame in stat.traceback.format()[-6:]:
            print("     ", frame)


def _pymalloc_arenas() -> tuple[float, float]:
    """Python's small-object allocator: the GB its arenas hold, and the GB of blocks in use
    (``sys._debugmallocstats``, which prints to the C stderr: read back through a pipe)."""
    import os

    read, write = os.pipe()
    saved = os.dup(2)
    os.dup2(write, 2)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(write)
    text = b""
    while chunk := os.read(read, 1 << 16):
        text += chunk
    os.close(read)
    values = {}
    for row in text.decode(errors="replace").splitlines():
        key, _, value = row.rpartition("=")
        values.setdefault(key.strip().lstrip("# "), value.strip().replace(",", ""))
    total = float(values.get("Total", 0) or 0)
    used = float(values.get("bytes in allocated blocks", 0) or 0)
    return total / 1e9, used / 1e9


def main(argv: list[str] | None = None) -> int:
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data")
    parser.add_argument("scheduler")
    parser.add_argument("--snapshot", default="", help="a stage: its live allocation sites")
    parser.add_argument("--top", type=int, default=12, help="allocation sites printed")
    parser.add_argument("--mmap-threshold", type=int, default=0,
                        help="glibc's M_MMAP_THRESHOLD in bytes (0: glibc's dynamic one)")
    parser.add_argument("--peak-snapshot", default="",
                        help="a stage: its live allocation sites when its RSS peaked (traced "
                             "from the stage's start only)")
    parser.add_argument("--measures", default="",
                        help="comma-separated measures to run (default: the audit's)")
    parser.add_argument("--no-trace", action="store_true",
                        help="without tracemalloc (its own bookkeeping adds to the RSS)")
    args = parser.parse_args(argv)
    libc = ctypes.CDLL("libc.so.6")
    if args.mmap_threshold:
        libc.mallopt(-3, args.mmap_threshold)  # M_MMAP_THRESHOLD
    libc.mallinfo2.restype = _MallInfo2
    process = psutil.Process()

    peak_rss = {"rss": 0.0, "anon": 0.0, "file": 0.0, "arrow": 0.0, "heap": 0.0}

    def resident() -> dict:
        """RSS, and its anonymous and file-backed parts (a memory map's pages are file)."""
        fields = {}
        for row in Path("/proc/self/status").read_text().splitlines():
            key, _, value = row.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                fields[key] = int(value.split()[0]) * 1024 / 1e9
        return {"rss": fields.get("VmRSS", 0.0), "anon": fields.get("RssAnon", 0.0),
                "file": fields.get("RssFile", 0.0)}

    at_peak: dict = {"rss": 0.0, "snapshot": None}
    state = {"stage": "loading"}

    def sample() -> None:  # the stage's peak RSS, every 50 ms
        while True:
            now = resident()
            if now["rss"] > peak_rss["rss"]:
                peak_rss.update(now)
            # Arrow's pool and glibc's allocated bytes: what tracemalloc does not see (Arrow,
            # C libraries) beside what it does (numpy's and Python's objects)
            peak_rss["arrow"] = max(peak_rss["arrow"], pa.total_allocated_bytes() / 1e9)
            heap = libc.mallinfo2()  # in use: in the arenas and mapped alone
            peak_rss["heap"] = max(peak_rss["heap"], (heap.uordblks + heap.hblkhd) / 1e9)
            if (state["stage"] == args.peak_snapshot and tracemalloc.is_tracing()
                    and now["rss"] > at_peak["rss"] + 0.02):
                at_peak.update(rss=now["rss"], snapshot=tracemalloc.take_snapshot())
            time.sleep(0.05)

    threading.Thread(target=sample, daemon=True).start()

    def line(tag: str) -> None:
        heap = libc.mallinfo2()
        current, peak = tracemalloc.get_traced_memory()
        top = dict(peak_rss)
        peak_rss.update(rss=0.0, anon=0.0, file=0.0, arrow=0.0, heap=0.0)
        arenas = _pymalloc_arenas()
        print(f"{time.strftime('%H:%M:%S')} {tag:<26} RSS {process.memory_info().rss / 1e9:5.2f}"
              f" (peak {top['rss']:5.2f}: anon {top['anon']:5.2f} file {top['file']:5.2f};"
              f" stage peaks: arrow {top['arrow']:5.2f} malloc'd {top['heap']:5.2f})"
              f" traced {current / 1e9:5.2f} (peak {peak / 1e9:5.2f}) arrow "
              f"{pa.total_allocated_bytes() / 1e9:5.2f} glibc used {heap.uordblks / 1e9:5.2f}"
              f" free {heap.fordblks / 1e9:5.2f} pymalloc arenas {arenas[0]:5.2f} in use"
              f" {arenas[1]:5.2f} GB", flush=True)

    dataset = load_dataset(args.data)
    # as the CLI does with --scheduler: the texts move to a file, the frame keeps the rest
    dataset = dataset.with_texts_on_disk(Path(tempfile.mkdtemp()) / "dataset.parquet")
    if not args.no_trace:
        tracemalloc.start(12 if args.snapshot else 1)
    lock = threading.Lock()

    def callback(event: dict) -> None:
        stage = event.get("stage")
        with lock:
            if stage == state["stage"]:
                return
            line(f"end {state['stage']}")
            if state["stage"] == args.peak_snapshot and at_peak["snapshot"] is not None:
                print(f"  at the stage's peak ({at_peak['rss']:.2f} GB RSS), live since its "
                      "start:")
                _print_sites(at_peak["snapshot"], args.top)
                at_peak["snapshot"] = None
                tracemalloc.stop()
            tracemalloc.reset_peak()
            state["stage"] = stage
            if stage == args.peak_snapshot:
                tracemalloc.start(12)
            if stage == args.snapshot:
                import gc

                import numpy as np
                import pandas as pd

                for obj in gc.get_objects():  # the live tables and large arrays
                    if isinstance(obj, pd.DataFrame) and len(obj) > 10_000:
                        print(f"  DataFrame {obj.shape} {obj.memory_usage().sum() / 1e6:.1f} MB"
                              f" {list(obj.columns)[:8]}")
                    elif isinstance(obj, np.ndarray) and obj.nbytes > 1e6:
                        print(f"  ndarray {obj.shape} {obj.dtype} {obj.nbytes / 1e6:.1f} MB"
                              f" base {type(obj.base).__name__}")
                _print_sites(tracemalloc.take_snapshot(), args.top)

    line("loaded")
    options = {"measures": tuple(args.measures.split(","))} if args.measures else {}
    run_audit(dataset, AuditConfig(backend="dask", scheduler=args.scheduler, **options),
              runs_root=tempfile.mkdtemp(), callback=callback)
    line(f"end {state['stage']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
