"""A fold fit's sparse products on one thread against split over the cores
(``represent/_split_products.py``): time, and the same bits.

On the hypothesis-only features of ``--rows`` SNLI-like rows (``bench_cues.build``, or the
``hypothesis`` and ``label`` columns of ``--data FILE``), a fold of four fifths of them:

* ``X @ W`` and ``X.T @ G`` (three columns, as Newton-CG's for three classes), scipy's on one
  thread against the split ones on 2 .. ``--parts`` threads (best of ``--repeats``);
* the fold's logistic fit as the audit makes it, alone (the last fit of a measure): on one
  thread, then inside the fold pool (``map_folds``), where it takes every core this process
  may use; twice each, alternated;

and whether every product and the fitted coefficients are equal bit for bit.

    .venv/bin/python benchmarks/bench_split_products.py [--rows 1000000] [--data FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def _best(fn, repeats: int) -> tuple[float, np.ndarray]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--data", type=Path, help="a CSV with hypothesis and label columns")
    parser.add_argument("--parts", type=int, default=None,
                        help="most threads a product (default: the cores, at most 8)")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()

    import pandas as pd

    import aflite_core.represent._split_products as products
    from aflite_core._validation import available_cores
    from aflite_core.represent._fold_fits import SharedTextFeatures, _FoldLogistic
    from aflite_core.represent._fold_pool import map_folds
    from aflite_core.represent._text_models import text_model

    if args.data is not None:
        frame = pd.read_csv(args.data, usecols=["hypothesis", "label"], keep_default_na=False)
    else:
        from bench_cues import build  # the SNLI-based builder (needs ../shared)

        frame = build(args.rows)
    texts = frame["hypothesis"].astype(str).tolist()
    codes = np.unique(frame["label"].astype(str).to_numpy(), return_inverse=True)[1]
    del frame
    n = len(texts)
    train = np.sort(np.random.default_rng(0).permutation(n)[: n * 4 // 5])
    X = SharedTextFeatures(texts).split(train, train[:1])[0]
    cores = available_cores()
    most = min(products.MAX_PARTS, args.parts or cores)
    print(f"{n:,} rows; a fold of {X.shape[0]:,} x {X.shape[1]:,}, {X.nnz:,} entries; "
          f"{cores} cores")

    rng = np.random.default_rng(1)
    W = rng.standard_normal((X.shape[1], 3))
    G = rng.standard_normal((X.shape[0], 3))
    one_rows, rows_ref = _best(lambda: X @ W, args.repeats)
    one_cols, cols_ref = _best(lambda: G.T @ X, args.repeats)
    print(f"  scipy, one thread        X @ W {one_rows * 1e3:7.2f} ms   X.T @ G "
          f"{one_cols * 1e3:7.2f} ms")
    real_share = products.fold_share
    same = True
    try:
        for parts in range(2, most + 1):
            products.fold_share = lambda parts=parts: parts
            with products.split_products(X) as S:
                S @ W, G.T @ S  # the column ranges' offsets, numba's code loaded
                t_rows, rows = _best(lambda S=S: S @ W, args.repeats)
                t_cols, cols = _best(lambda S=S: G.T @ S, args.repeats)
            same &= np.array_equal(rows, rows_ref) and np.array_equal(cols, cols_ref)
            print(f"  split, {parts} threads        X @ W {t_rows * 1e3:7.2f} ms "
                  f"({one_rows / t_rows:.2f}x)   X.T @ G {t_cols * 1e3:7.2f} ms "
                  f"({one_cols / t_cols:.2f}x)")
    finally:
        products.fold_share = real_share

    fold = _FoldLogistic(text_model("hypothesis_only").named_steps["model"])
    y = codes[train]
    fits: dict[str, list] = {"one thread": [], "fold pool": []}
    coefs = {}
    for _ in range(2):
        for name in fits:
            start = time.perf_counter()
            fitted = (fold.fit(X, y) if name == "one thread"
                      else map_folds(lambda task: fold.fit(X, y), [0], threads=1)[0])
            fits[name].append(time.perf_counter() - start)
            coefs.setdefault(name, fitted.coef_)
    for name, seconds in fits.items():
        print(f"  the fold's fit, {name:10s} {min(seconds):6.2f}-{max(seconds):.2f} s")
    same &= np.array_equal(coefs["one thread"], coefs["fold pool"])
    print("  the same bits:", "yes" if same else "NO")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
