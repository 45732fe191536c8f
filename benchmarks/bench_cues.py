"""Benchmark: cue statistics on SNLI-scale data (550k pairs).

The shared SNLI rows (train sample, dev, test: about 39.7k pairs) are replicated with a
light, seeded perturbation until there are ``--rows`` pairs (default 550,000, the size of
SNLI's training set): in every copy but the first, each hypothesis gets one edit (two
adjacent words swapped, a word dropped, a word replaced by another word of the data, or a
word doubled) and each distinct premise one edit (repeated premises stay repeated), so most
hypotheses are new text, as in SNLI.

Three profiles, each timed end to end (feature extraction + the cue table):

1. ``word``: word features only, no cache;
2. ``all7``: all seven families, cold cache, POS tagging on ``--jobs`` worker processes;
3. ``all7-cached``: the same again, every annotation read from the cache.

Goals (issue 3): word <= 15 s, all7 <= 120 s, cached <= 5 s on the 2-core machine.

``--dask-workers N`` then times the cue measure's two scopes (full, every other row retained)
as the audit computes them: from all rows at once (``statistics.cue_tables``; cold, then
cached) and by map-reduce over row chunks on a LocalCluster of N single-threaded workers
(``count_tables.cue_tables``, the audit's path with ``--scheduler``; the workers' caches cold,
then warm), and checks that the tables are equal (issue 27).

    NLTK_DATA=../shared/nltk_data .venv/bin/python benchmarks/bench_cues.py [--dask-workers 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("AFLITE_SHARED", ROOT.parent / "shared"))
if "NLTK_DATA" not in os.environ and (SHARED / "nltk_data").is_dir():
    os.environ["NLTK_DATA"] = str(SHARED / "nltk_data")

from aflite_core.cues.linguistic import FAMILIES, extract_features  # noqa: E402
from aflite_core.cues.statistics import cue_statistics, resolve_split  # noqa: E402


def _perturb(text: str, rng: np.random.Generator, vocab: np.ndarray) -> str:
    words = text.split()
    if len(words) < 3:
        return text + " " + str(rng.choice(vocab))
    i = int(rng.integers(1, len(words) - 1))
    op = int(rng.integers(4))
    if op == 0:
        words[i], words[i + 1] = words[i + 1], words[i]
    elif op == 1:
        del words[i]
    elif op == 2:
        words[i] = str(rng.choice(vocab))
    else:
        words.insert(i, words[i])
    return " ".join(words)


def build(n_rows: int, seed: int = 0) -> pd.DataFrame:
    """SNLI-scale pairs from the shared SNLI files (see the module docstring)."""
    snli = SHARED / "data" / "snli"
    base = pd.concat(
        [pd.read_csv(snli / name, keep_default_na=False)
         for name in ("snli_train_sample.csv", "snli_dev.csv", "snli_test.csv")],
        ignore_index=True,
    )[["split", "premise", "hypothesis", "label"]]
    rng = np.random.default_rng(seed)
    vocab = np.asarray(sorted({w for t in base["hypothesis"] for w in t.split() if w.isalpha()}))
    copies = []
    for copy in range(-(-n_rows // len(base))):
        frame = base.copy()
        if copy:
            frame["hypothesis"] = [_perturb(t, rng, vocab) for t in frame["hypothesis"]]
            codes, uniques = pd.factorize(frame["premise"])
            edited = np.asarray([_perturb(t, rng, vocab) for t in uniques], dtype=object)
            frame["premise"] = edited[codes]
        copies.append(frame)
    return pd.concat(copies, ignore_index=True).iloc[:n_rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=550_000)
    parser.add_argument("--jobs", type=int, default=None, help="tagging processes (all cores)")
    parser.add_argument("--cache-dir", help="cache folder (default: a fresh temporary one)")
    parser.add_argument("--dask-workers", type=int, default=0,
                        help="also time the cue measure's map-reduce on a LocalCluster")
    args = parser.parse_args()

    t0 = time.perf_counter()
    data = build(args.rows)
    hyps, prems = data["hypothesis"].tolist(), data["premise"].tolist()
    labels = data["label"].to_numpy()
    split = resolve_split(data["split"].to_numpy(), labels)
    print(f"data: {len(data):,} pairs, {data['hypothesis'].nunique():,} distinct hypotheses, "
          f"{data['premise'].nunique():,} distinct premises (built in "
          f"{time.perf_counter() - t0:.1f} s); {split.description}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start "
          "(other processes share the CPUs; timings are noisy)")

    def profile(name: str, **kwargs) -> float:
        start = time.perf_counter()
        fm = extract_features(hyps, prems, min_count=5, n_jobs=args.jobs, **kwargs)
        table = cue_statistics(fm, labels, split, min_count=5)
        seconds = time.perf_counter() - start
        print(f"{name:<12} {seconds:7.2f} s  ({fm.n_features:,} features, {len(table):,} "
              f"qualifying; unavailable: {sorted(fm.unavailable) or 'none'})", flush=True)
        return seconds

    with tempfile.TemporaryDirectory(prefix="aflite-bench-cache-") as tmp:
        cache_dir = args.cache_dir or tmp
        results = {
            "word": profile("word", features=["word"], cache=False),
            "all7": profile("all7", features=FAMILIES, cache_dir=cache_dir),
            "all7-cached": profile("all7-cached", features=FAMILIES, cache_dir=cache_dir),
        }
    goals = {"word": 15.0, "all7": 120.0, "all7-cached": 5.0}
    for name, seconds in results.items():
        verdict = "ok" if seconds <= goals[name] else "OVER"
        print(f"goal {name:<12} <= {goals[name]:5.0f} s: {seconds:7.2f} s {verdict}")
    if args.dask_workers:
        measure_on_dask(data, args.dask_workers)
    return 0


def measure_on_dask(data: pd.DataFrame, workers: int) -> None:
    """The cue measure's tables locally and by map-reduce on a LocalCluster, cold and warm."""
    from distributed import Client, LocalCluster

    from aflite_core.cues import count_tables, statistics
    from aflite_core.io.datasets import load_dataset
    from aflite_core.represent._fold_pool import on_dask

    dataset = load_dataset(data, name="bench")
    scopes = {"full": None, "retained": dataset.row_ids()[::2]}
    groups = dataset.groups()
    with tempfile.TemporaryDirectory(prefix="aflite-bench-cache-") as cache:
        for state in ("cold", "cached"):
            start = time.perf_counter()
            local = statistics.cue_tables(dataset, scopes, groups=groups, cache_dir=cache)
            print(f"measure, all rows at once, {state}: {time.perf_counter() - start:7.2f} s",
                  flush=True)
    os.environ["AFLITE_CACHE_DIR"] = tempfile.mkdtemp(prefix="aflite-bench-workers-")
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        chunk_rows = count_tables.chunk_rows_for(len(dataset), workers)
        for state in ("cold", "warm"):
            start = time.perf_counter()
            with on_dask(client) as sent:
                chunked = count_tables.cue_tables(dataset, scopes, groups=groups,
                                                  chunk_rows=chunk_rows)
            print(f"measure, map-reduce on {workers} workers, {state}: "
                  f"{time.perf_counter() - start:7.2f} s ({sent.tasks} chunks of at most "
                  f"{chunk_rows:,} rows)", flush=True)
    same = local.equals(chunked) and local.attrs == chunked.attrs
    print(f"tables equal: {same} ({len(local):,} rows)")


if __name__ == "__main__":
    sys.exit(main())
