"""Worst-case Explore search: catastrophic-backtracking patterns on a 10k-row run.

Prints the search time per pattern and how long a concurrent thread (another session) waited
for the interpreter while the search ran, the figure that froze the server when search used
Python's ``re``.

    .venv/bin/python benchmarks/bench_search.py
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ui import filters  # noqa: E402

PATTERNS = (r"^(\w+\s?)+$", r"^(a+)+$", r"(x+x+)+y", r"^(([a-z])+.)+[A-Z]([a-z])+$")


def main() -> None:
    sentence = "a man is walking his dog in the park on a sunny day with friends"
    table = pd.DataFrame({
        "premise": [sentence + f" {i}!" for i in range(10_000)],
        "hypothesis": ["a" * 60 + "!" if i % 2 else "x" * 60 for i in range(10_000)],
        "status": ["retained"] * 10_000,
    })
    print(f"{'pattern':34s} {'hits':>6s} {'search s':>9s} {'other thread max gap ms':>24s}")
    for pattern in PATTERNS:
        gaps: list[float] = []
        stop = threading.Event()

        def ticker(stop: threading.Event = stop, gaps: list[float] = gaps) -> None:
            last = time.perf_counter()
            while not stop.is_set():
                time.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        thread = threading.Thread(target=ticker)
        thread.start()
        start = time.perf_counter()
        flt = filters.RowFilter(search=pattern, regex=True)
        hits = int(filters.mask_of(table, flt).sum())
        seconds = time.perf_counter() - start
        stop.set()
        thread.join()
        print(f"{pattern:34s} {hits:6d} {seconds:9.3f} {1000 * max(gaps or [0]):24.1f}")


if __name__ == "__main__":
    main()
