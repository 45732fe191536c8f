"""AFLite at SNLI scale: 550,000 x 768 float32 planted-bias features on one machine.

Workload (issue 7): 550,000 rows x 768 float32 features, 3 classes, 40% planted-bias rows;
AFLite with m=64 partitions, t=10% of the input, k=5000, tau=0.75, target 182,000. With
--n the sizes scale with n (t = 10%, target = 182/550 of n, k = 5000 n / 550,000).

The features are generated once, in float32 row chunks, straight into a memory-mapped .npy
file (a child process, so its memory does not count here) and AFLite reads them with
``np.load(mmap_mode="r")``; --data PREFIX uses existing PREFIX_{X,y,biased}.npy files instead.

Prints wall time, per-round time, peak resident memory (``resource.getrusage``; the whole
process, interpreter and libraries included) against the size of the feature matrix, and
the ratio of each round's time to one prediction pass over the round's set: the product of
the set with the stacked margins of all m partitions, ``|S| x d x m (C - 1)`` multiply-adds,
the work no AFLite round can avoid (so the ratio says how close a round is to that floor).

    python benchmarks/bench_scale.py [--n 550000] [--d 768] [--n-jobs 2] [--data PREFIX]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from aflite_core.filter.aflite import AFLite  # noqa: E402

GB = 1e9


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def generate(prefix: str, n: int, d: int, seed: int) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, str(HERE / "make_planted.py"), prefix, "--n", str(n), "--d", str(d),
         "--seed", str(seed), "--chunked"],
        check=True,
    )
    return time.perf_counter() - t0


def prediction_pass_seconds(X: np.ndarray, n_rows: int, width: int, repeats: int = 3) -> float:
    """Best time of one product of ``n_rows`` rows with a (d x width) float32 matrix.

    Run in blocks of 1024 rows from an in-memory copy of the first rows (the product is
    what is timed, not reading the memory map) with BLAS on one thread, like AFLite.
    """
    from threadpoolctl import threadpool_limits

    block = np.ascontiguousarray(X[: min(len(X), 16384)], dtype=np.float32)
    W = np.random.default_rng(0).standard_normal((X.shape[1], width), dtype=np.float32)
    best = float("inf")
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(repeats):
            t0 = time.perf_counter()
            done = 0
            while done < n_rows:
                take = min(1024, n_rows - done)
                start = done % len(block)
                take = min(take, len(block) - start)
                block[start : start + take] @ W
                done += take
            best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=550_000)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--tau", type=float, default=0.75)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--backend", default="local", choices=("local", "dask"))
    ap.add_argument("--scheduler", default=None, help="dask scheduler (tcp://HOST:PORT, local:N)")
    ap.add_argument("--data", help="prefix of existing PREFIX_{X,y,biased}.npy files")
    ap.add_argument("--workdir", help="where to write the generated workload (default: temp)")
    a = ap.parse_args(argv)

    t_gen = 0.0
    tmp = None
    if a.data:
        prefix = a.data
    else:
        tmp = None if a.workdir else tempfile.TemporaryDirectory(prefix="aflite-scale-")
        folder = a.workdir or tmp.name
        os.makedirs(folder, exist_ok=True)
        prefix = os.path.join(folder, f"planted_{a.n}x{a.d}")
        if not os.path.exists(prefix + "_X.npy"):
            t_gen = generate(prefix, a.n, a.d, a.seed)
    try:
        X = np.load(prefix + "_X.npy", mmap_mode="r")
        y = np.load(prefix + "_y.npy")
        biased = np.load(prefix + "_biased.npy")
        n, d = X.shape
        t = round(0.1 * n)
        target = round(n * 182_000 / 550_000)
        k = max(1, round(5000 * n / 550_000))
        matrix_bytes = X.nbytes
        print(f"workload: {n} x {d} {X.dtype} (memory-mapped, {matrix_bytes / GB:.2f} GB), "
              f"biased share {biased.mean() * 100:.1f}%"
              + (f", generated in {t_gen:.1f} s" if t_gen else ""))
        print(f"AFLite: m={a.m} t={t} k={k} tau={a.tau} target={target} n_jobs={a.n_jobs} "
              f"backend={a.backend}; cpu_count={os.cpu_count()}; "
              f"rss before fit {peak_rss_bytes() / GB:.2f} GB")

        est = AFLite(target_size=target, n_partitions=a.m, train_size=t, slice_size=k,
                     tau=a.tau, random_state=a.seed, n_jobs=a.n_jobs, backend=a.backend,
                     scheduler=a.scheduler)
        t0, c0 = time.perf_counter(), time.process_time()
        est.fit(X, y)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = peak_rss_bytes()

        hist = est.history_
        keep = est.keep_mask_
        rounds = hist["seconds"].to_numpy()
        n_classes = len(est.classes_)
        print(f"wall time {wall:.1f} s (CPU {cpu:.1f} s), {est.n_rounds_} rounds, stop: "
              f"{est.stop_reason_}, kept {int(keep.sum())} of {n}; setup (validation, "
              f"centring, working copies, Gram matrix) {wall - rounds.sum():.1f} s")
        print(f"per-round time: mean {rounds.mean():.2f} s, first {rounds[0]:.2f} s, "
              f"last {rounds[-1]:.2f} s, max {rounds.max():.2f} s")
        print(f"peak RSS {peak / GB:.2f} GB = {peak / matrix_bytes:.2f} x the feature matrix "
              f"({matrix_bytes / GB:.2f} GB; goal <= 2.5 x)")
        full_pass = prediction_pass_seconds(X, n, a.m * (n_classes - 1))
        per_row = full_pass / n
        ratios = rounds / (hist["size"].to_numpy() * per_row)
        print(f"one prediction pass over {n} rows (x{a.m * (n_classes - 1)} margins, 1 thread): "
              f"{full_pass:.2f} s; round time / prediction pass over the round's set: first "
              f"{ratios[0]:.2f}, mean {ratios.mean():.2f}, median {np.median(ratios):.2f}")
        print(f"retained biased share {biased[keep].mean() * 100:.1f}% (input "
              f"{biased.mean() * 100:.1f}%); removed {int((~keep & biased).sum())} of "
              f"{int(biased.sum())} biased rows")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
