# Copied from ../shared/bench/make_planted.py (the standard planted-bias workload). The
# function `make_planted` and the default command line are unchanged, so the standard workload
# is bit-identical to the shared one. Added: `--chunked`, which writes the arrays with
# aflite_core.filter.synthetic.make_planted straight into memory-mapped .npy files, in float32 row
# chunks with no float64 intermediate (same distribution, different random stream), for the
# SNLI-scale workload:  python benchmarks/make_planted.py OUT/big --n 550000 --d 768 --chunked
"""Planted-bias workload for AFLite benchmarks.

Writes features X (float32, n x d) and labels y (int64) as .npy, plus a boolean mask of the
rows that carry the planted bias. A fraction of rows get a class-specific shift in a few
dimensions, so a linear model can read their label off those dimensions; the rest are noise.
A good AFLite removes mostly the biased rows.

    python make_planted.py OUT_PREFIX [--n 20000] [--d 256] [--classes 3] [--biased 0.4] [--seed 0]
"""
import argparse
import sys
from pathlib import Path

import numpy as np


def make_planted(n=20000, d=256, classes=3, biased=0.4, bias_dims=8, strength=2.0, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    X = rng.normal(size=(n, d)).astype(np.float32)
    mask = rng.random(n) < biased
    shift = rng.normal(size=(classes, bias_dims)) * strength
    X[mask, :bias_dims] += shift[y[mask]].astype(np.float32)
    return X, y, mask


def write_chunked(out_prefix, n, d, classes, biased, seed):
    """Write the workload (aflite_core.filter.synthetic.make_planted) into a memory-mapped .npy."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from aflite_core.filter.synthetic import make_planted as make_planted_f32

    X = np.lib.format.open_memmap(out_prefix + "_X.npy", mode="w+", dtype=np.float32,
                                  shape=(n, d))
    _, y, mask = make_planted_f32(n, d, classes=classes, biased=biased, random_state=seed, out=X)
    X.flush()
    del X
    return y, mask


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out_prefix")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--biased", type=float, default=0.4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunked", action="store_true",
                    help="float32 chunks written to a memory-mapped .npy (for large n x d)")
    a = ap.parse_args()
    if a.chunked:
        y, mask = write_chunked(a.out_prefix, a.n, a.d, a.classes, a.biased, a.seed)
        shape = (a.n, a.d)
    else:
        X, y, mask = make_planted(a.n, a.d, a.classes, a.biased, seed=a.seed)
        np.save(a.out_prefix + "_X.npy", X)
        shape = X.shape
    np.save(a.out_prefix + "_y.npy", y)
    np.save(a.out_prefix + "_biased.npy", mask)
    print(f"wrote {a.out_prefix}_{{X,y,biased}}.npy: {shape}, biased share {mask.mean():.3f}")
