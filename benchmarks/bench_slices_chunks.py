"""One chunk's cluster word counts of the slices on the workers (``slices_on_workers``):
the sparse product against the dense word matrix it replaced (the same counts).

    .venv/bin/python benchmarks/bench_slices_chunks.py [--rows 50000] [--words 8000]

A chunk of the cue measure's size (50,000 rows) and the words kept at 5M rows (those in at
least 200 rows: thousands); about 12 words a row.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aflite_core.measures import _slices_on_workers as slices_on_workers  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--words", type=int, default=8_000)
    parser.add_argument("--clusters", type=int, default=50)
    args = parser.parse_args(argv)
    n, V, k = args.rows, args.words, args.clusters
    X = sp.random(n, V, density=12 / V, format="csc", random_state=0, dtype=np.float64)
    X.data[:] = 1
    chunk = slices_on_workers._ChunkFeatures(X.astype(np.int8), None, None, None, {}, {},
                                             "hypothesis", {})
    local, none = np.arange(V), np.full(V, -1)
    codes = np.random.default_rng(0).integers(0, k, n)
    start = time.perf_counter()
    sparse = slices_on_workers._cluster_words(chunk, local, None, none, codes, k)
    t_sparse = time.perf_counter() - start
    start = time.perf_counter()
    words = slices_on_workers._columns(chunk, local, None, none)  # what the task did before
    one_hot = sp.csr_matrix((np.ones(n), (codes, np.arange(n))), shape=(k, n))
    dense = np.asarray(one_hot @ words)
    t_dense = time.perf_counter() - start
    print(f"{n:,} rows x {V:,} words, {k} clusters: sparse {t_sparse:.3f} s, dense "
          f"{t_dense:.3f} s (a {words.nbytes / 2**30:.1f} GiB matrix), same counts: "
          f"{np.array_equal(sparse, dense)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
