"""A box or lasso resolved against every row of a large map (issue: every row at a million).

Writes a fake run of ``--rows`` rows (``bench_dashboard_scale.build_run``: SNLI rows repeated,
fake scores, a 2-D map) and times ``load_run(path).rows_in_polygon(xs, ys)``: the first call
(numba's kernel loaded from the disk cache, the map read from ``projection.parquet``) and warm
calls (median of 5) for a 100-vertex lasso over about a third of the map, a box over a tenth,
and a lasso around the whole map (every row a candidate), each with the rows it selects; then
the zoom (*Zoom to the selection*): the points of a window over about a tenth of the rows,
sampled to 100,000 at most, and its density image, both from every row (best of 3, uncached).

    .venv/bin/python benchmarks/bench_selection.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dashboard_scale import build_run  # noqa: E402

from aflite_core.runs.folder import load_run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = build_run(Path(tmp), args.rows)
        print(f"{args.rows:,}-row run written in {time.perf_counter() - t0:.1f} s")
        run = load_run(path)
        projection = run.projection
        x, y = projection["x"].to_numpy(), projection["y"].to_numpy()
        (x0, x1), (y0, y1) = np.quantile(x, [0.05, 0.95]), np.quantile(y, [0.05, 0.95])
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        angles = np.linspace(0, 2 * np.pi, 100, endpoint=False)
        wobble = 1 + 0.2 * np.sin(7 * angles)
        shapes = {
            "lasso, 100 vertices": (cx + 0.35 * (x1 - x0) * wobble * np.cos(angles),
                                    cy + 0.35 * (y1 - y0) * wobble * np.sin(angles)),
            "box": (np.array([x0, cx, cx, x0]), np.array([y0, y0, cy, cy])),
            "lasso around every row": (np.array([x.min() - 1, x.max() + 1, x.max() + 1,
                                                 x.min() - 1]),
                                       np.array([y.min() - 1, y.min() - 1, y.max() + 1,
                                                 y.max() + 1])),
        }
        fresh = load_run(path)
        t0 = time.perf_counter()
        fresh.rows_in_polygon(*shapes["box"])
        print(f"first call (kernel from the disk cache, map read): "
              f"{time.perf_counter() - t0:.2f} s")
        for name, (xs, ys) in shapes.items():
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                ids = run.rows_in_polygon(xs, ys)
                times.append(time.perf_counter() - t0)
            print(f"{name:24s} {len(ids):>9,} rows  warm median {statistics.median(times):.3f} s"
                  f"  max {max(times):.3f} s")
        from aflite_core.runs import views

        window = (*np.quantile(x, [0.3, 0.6]), *np.quantile(y, [0.3, 0.6]))
        for name, work in (("zoom: window points", lambda: views.map_points(
                                run, max_points=100_000, window=window)),
                           ("zoom: window density", lambda: views.map_density(
                               run, window=window))):
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                out = work()
                times.append(time.perf_counter() - t0)
            extra = f"{out[1]:>9,} rows in view" if name.endswith("points") else " " * 22
            print(f"{name:24s} {extra}  best {min(times):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
