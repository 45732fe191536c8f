"""Speed and quality of aflite_core's AFLite against the straightforward reference.

The standard comparison of ../shared/bench/README.md, in one process: the planted-bias
workload (20,000 x 256, 40% biased rows; generated with the shared make_planted, seed 0, or
read from --workload PREFIX), both AFLites with n_target=10000, m=16, t=5000, k=1000, tau=0.75.
Quality = share of planted-bias rows among the retained rows (lower is better); speed = wall
time of the AFLite call, as a ratio reference / ours.

The reference is timed once per BLAS thread count in --ref-threads ("default" = numpy's own
setting, i.e. all cores); the ratio uses the *fastest* reference run, the conservative choice.
Ours is timed --repeats times for each n_jobs in --n-jobs (it limits BLAS to one thread and
runs n_jobs threads over row blocks) and the median is used. CPU seconds (process time) are
printed too: on a machine shared with other work they are steadier than wall time.

    python benchmarks/bench_aflite.py [--workload PREFIX] [--ref-threads 1,default]
                                      [--n-jobs 1,2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from aflite_reference import aflite as reference_aflite  # noqa: E402
from make_planted import make_planted  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from aflite_core.filter._aflite import AFLite  # noqa: E402


def load_workload(prefix: str | None, seed: int):
    if prefix:
        return (np.load(prefix + "_X.npy"), np.load(prefix + "_y.npy"),
                np.load(prefix + "_biased.npy"))
    return make_planted(seed=seed)


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", help="prefix of PREFIX_{X,y,biased}.npy (default: generate)")
    ap.add_argument("--n", type=int, default=10000, help="target size")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--t", type=int, default=5000)
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--tau", type=float, default=0.75)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ref-threads", default="1,default",
                    help="comma-separated BLAS thread counts for the reference ('default' = "
                         "leave BLAS alone); the fastest run is used for the ratio")
    ap.add_argument("--n-jobs", default="1,2", help="comma-separated n_jobs values for ours")
    a = ap.parse_args(argv)

    X, y, biased = load_workload(a.workload, a.seed)
    blas = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    print(f"workload: X {X.shape} {X.dtype}, biased share {biased.mean() * 100:.2f}%; "
          f"n_target={a.n} m={a.m} t={a.t} k={a.k} tau={a.tau} seed={a.seed}; "
          f"default BLAS threads {blas}")

    ref = []
    as_shipped = None  # the reference exactly as given: BLAS left alone
    for spec in [s.strip() for s in a.ref_threads.split(",") if s.strip()]:
        limit = (contextlib.nullcontext() if spec == "default"
                 else threadpool_limits(limits=int(spec), user_api="blas"))
        with limit:
            (keep, hist), wall, cpu = timed(
                lambda: reference_aflite(X, y, a.n, a.m, a.t, a.k, a.tau, a.seed))
        ref.append((wall, cpu))
        if spec == "default":
            as_shipped = wall
        print(f"reference (BLAS threads={spec}): {wall:.2f} s wall, {cpu:.2f} s CPU, "
              f"{len(hist)} rounds, kept {len(keep)}, biased share "
              f"{biased[keep].mean() * 100:.2f}%")
    ref_share = biased[keep].mean() if ref else float("nan")

    ours = {}
    for n_jobs in [int(s) for s in a.n_jobs.split(",") if s.strip()]:
        walls, cpus = [], []
        for _ in range(a.repeats):
            est = AFLite(target_size=a.n, n_partitions=a.m, train_size=a.t, slice_size=a.k,
                         tau=a.tau, random_state=a.seed, n_jobs=n_jobs)
            _, wall, cpu = timed(lambda est=est: est.fit(X, y))
            walls.append(wall)
            cpus.append(cpu)
        ours[n_jobs] = (statistics.median(walls), statistics.median(cpus))
        share = biased[est.keep_mask_].mean()
        print(f"aflite_core (n_jobs={n_jobs}): median {ours[n_jobs][0]:.3f} s wall, "
              f"{ours[n_jobs][1]:.3f} s CPU over {a.repeats} runs (first {walls[0]:.3f} s), "
              f"{est.n_rounds_} rounds ({est.stop_reason_}), kept {int(est.keep_mask_.sum())}, "
              f"biased share {share * 100:.2f}%")

    if ref and ours:
        best_ref = min(w for w, _ in ref)
        best_ref_cpu = min(c for _, c in ref)
        for n_jobs, (wall, cpu) in ours.items():
            print(f"speed ratio n_jobs={n_jobs}: {best_ref / wall:.1f}x wall (fastest reference "
                  f"{best_ref:.2f} s / ours {wall:.3f} s), {best_ref_cpu / cpu:.1f}x CPU")
            if as_shipped is not None:
                print(f"speed ratio n_jobs={n_jobs} vs the reference as shipped (BLAS threads "
                      f"left alone): {as_shipped / wall:.1f}x wall")
        diff = (share - ref_share) * 100
        verdict = "within 1 pp" if abs(diff) <= 1.0 else ("better" if diff < 0 else "WORSE")
        print(f"quality: retained biased share reference {ref_share * 100:.2f}% vs aflite_core "
              f"{share * 100:.2f}% (difference {diff:+.2f} pp, {verdict}; input "
              f"{biased.mean() * 100:.2f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
