"""The compact Φ a run keeps (``phi_compact.parquet``): its size, how close its neighbours are
to Φ's own, and what a query costs.

On SNLI dev (the default Φ: TF-IDF + SVD, 256 dimensions) it prints the bytes a row takes in
memory and on disk (zstd Parquet, as the audit writes it), and the share of each row's 10
nearest rows by exact cosine on Φ that the codes find (recall@10, over 400 rows); then, on
``--rows`` rows of codes (random bytes: the cost does not depend on the values), the seconds
of the norms (once per file) and of one query (median of 5).

Usage::

    python benchmarks/bench_compact.py [--rows 1000000] [--shared ../shared/data]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from aflite_core.represent import code_norms, compact_phi, nearest_codes  # noqa: E402
from aflite_core.represent.builders import tfidf_svd_features  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    frame = pd.read_csv(args.shared / "snli" / "snli_dev.csv", keep_default_na=False)
    X = tfidf_svd_features(frame["hypothesis"].tolist(), frame["premise"].tolist(),
                           n_components=256, random_state=0)
    codes, _ = compact_phi(X)
    with tempfile.TemporaryDirectory() as tmp:
        import pyarrow as pa
        import pyarrow.parquet as pq

        width = codes.shape[1]
        phi = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(codes),
                                                   [None, pa.py_buffer(codes.tobytes())])
        path = Path(tmp) / "phi_compact.parquet"
        pq.write_table(pa.table({"row_id": np.arange(len(codes)), "phi": phi}), path,
                       compression="zstd")
        on_disk = path.stat().st_size / len(codes)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    norms = code_norms(codes)
    recall = []
    for i in np.linspace(0, len(X) - 1, 400).astype(int):
        exact = unit @ unit[i]
        exact[i] = -np.inf
        got, _ = nearest_codes(codes, codes[i], 10, exclude=int(i), norms=norms)
        recall.append(len(set(np.argsort(-exact)[:10]) & set(got)) / 10)
    print(f"SNLI dev, {len(X):,} rows x {X.shape[1]}: {codes.shape[1]} bytes a row in memory, "
          f"{on_disk:.0f} on disk; recall@10 against exact cosine on Φ {np.mean(recall):.3f}")
    big = np.random.default_rng(0).integers(0, 256, size=(args.rows, codes.shape[1]),
                                            dtype=np.uint8)
    t0 = time.perf_counter()
    norms = code_norms(big)
    first = time.perf_counter() - t0
    nearest_codes(big, big[0], 10, norms=norms)  # compiled (or loaded from the disk cache)
    times = []
    for i in range(1, 6):
        t0 = time.perf_counter()
        nearest_codes(big, big[i], 10, exclude=i, norms=norms)
        times.append(time.perf_counter() - t0)
    print(f"{args.rows:,} rows: norms {first:.2f} s (once per file; the first call compiles "
          f"or loads the kernel), one query {np.median(times):.3f} s (median of 5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
