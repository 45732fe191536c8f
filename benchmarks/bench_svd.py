"""Φ's SVD (``represent/_svd.py``) against scikit-learn's TruncatedSVD: time, quality, effect.

Prints, for the TF-IDF of 100k SNLI pairs (built from the shared train sample as
``bench_cues.py`` does) and 256 components:

* seconds of scikit-learn's randomized ``TruncatedSVD`` (5 power iterations) and of
  :func:`aflite_core.represent._svd.truncated_svd` (the same 5, through the term side);
* the share of the TF-IDF's squared norm each captures, and the subspace similarity of the two
  (mean squared cosine of the principal angles; 1 = the same subspace), beside that of
  scikit-learn's with two seeds;

then, on SNLI dev (default audit without measures, seeds 0-3), how well AFLite's removed sets
agree between seeds (mean pairwise Jaccard) with either SVD: a reduction that is noisier would
make AFLite's outcome depend more on the seed.

    .venv/bin/python benchmarks/bench_svd.py [--rows 100000] [--seeds 4]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_cues import build  # noqa: E402 - the SNLI-based builder shared with bench_cues


def _similarity(A: np.ndarray, B: np.ndarray) -> float:
    qa, _ = np.linalg.qr(A.astype(np.float64))
    qb, _ = np.linalg.qr(B.astype(np.float64))
    return float(np.mean(np.linalg.svd(qa.T @ qb, compute_uv=False) ** 2))


def compare_on_tfidf(n_rows: int) -> None:
    from sklearn.decomposition import TruncatedSVD

    from aflite_core.represent._builders import tfidf_blocks
    from aflite_core.represent._svd import truncated_svd

    frame = build(n_rows)
    M = tfidf_blocks(frame["hypothesis"].astype(str).tolist(),
                     frame["premise"].astype(str).tolist())
    total = float(M.multiply(M).sum())
    start = time.perf_counter()
    theirs = TruncatedSVD(256, algorithm="randomized", n_iter=5,
                          random_state=0).fit_transform(M)
    t_theirs = time.perf_counter() - start
    start = time.perf_counter()
    ours, _ = truncated_svd(M, 256, n_iter=5, random_state=0)
    t_ours = time.perf_counter() - start
    print(f"TF-IDF of {n_rows:,} pairs: {M.shape[1]:,} terms, {M.nnz:,} non-zeros, 256 comps")
    for name, X, seconds in (("scikit-learn TruncatedSVD", theirs, t_theirs),
                             ("represent/_svd.py", ours, t_ours)):
        captured = float((X.astype(np.float64) ** 2).sum()) / total
        print(f"  {name:26s} {seconds:6.2f} s   captured {captured:.4f} of the squared norm")
    other = TruncatedSVD(256, algorithm="randomized", n_iter=5,
                         random_state=1).fit_transform(M)
    print(f"  subspace similarity of the two: {_similarity(ours, theirs):.4f} (scikit-learn "
          f"with seeds 0 and 1: {_similarity(other, theirs):.4f}; the trailing directions of "
          "any randomized SVD depend on its random matrix)")


def seed_agreement(data: Path, n_seeds: int) -> None:
    from aflite_core import AuditConfig, load_dataset, load_run, run_audit
    from aflite_core.represent import _svd as svd

    dataset = load_dataset(data)

    def sklearn_svd(M, k, *, n_iter, random_state):
        from sklearn.decomposition import TruncatedSVD

        model = TruncatedSVD(k, algorithm="randomized", n_iter=n_iter,
                             random_state=random_state)
        return model.fit_transform(M), float(model.explained_variance_ratio_.sum())

    for name, fn in (("scikit-learn TruncatedSVD", sklearn_svd),
                     ("represent/_svd.py", svd.truncated_svd)):
        saved = svd.truncated_svd
        svd.truncated_svd = fn  # builders imports it at call time
        try:
            removed = []
            for seed in range(n_seeds):
                path = run_audit(dataset, AuditConfig(random_state=seed, measures=(),
                                                      report=False),
                                 runs_root=tempfile.mkdtemp(prefix="bench-svd-"), name="s")
                removed.append(set(load_run(path).row_ids("removed").tolist()))
        finally:
            svd.truncated_svd = saved
        pairs = [len(a & b) / len(a | b) for a, b in itertools.combinations(removed, 2)]
        print(f"  {name:26s} removed-set Jaccard between seeds: mean {np.mean(pairs):.3f}, "
              f"min {min(pairs):.3f} ({n_seeds} seeds)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    compare_on_tfidf(args.rows)
    print("AFLite on SNLI dev, default audit without measures:")
    seed_agreement(args.shared / "snli" / "snli_dev.csv", args.seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
