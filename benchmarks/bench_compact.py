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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from aflite_core.io import load_dataset  # noqa: E402
from aflite_core.represent import (  # noqa: E402
    build_representation,
    code_norms,
    compact_phi,
    load_text_model,
    nearest_codes,
    place,
    place_text,
    save_text_model,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    rep = build_representation(load_dataset(args.shared / "snli" / "snli_dev.csv", group=""),
                               "tfidf_svd", n_components=256, random_state=0)
    X = rep.X
    codes, _ = compact_phi(X)
    with tempfile.TemporaryDirectory() as tmp:
        import pyarrow as pa
        import pyarrow.parquet as pq

        width = codes.shape[1]
        phi = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(codes),
                                                   [None, pa.py_buffer(codes.tobytes())])
        path = Path(tmp) / "phi_compact.parquet"
        pq.write_table(pa.table({"row_id": np.arange(len(codes)), "phi": phi}), path,
                       compression="zstd", use_dictionary=False)  # as RunWriter writes it
        on_disk = path.stat().st_size / len(codes)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    norms = code_norms(codes)
    recall = []
    for i in np.linspace(0, len(X) - 1, 400).astype(int):
        exact = unit @ unit[i]
        exact[i] = -np.inf
        got, _ = nearest_codes(codes, codes[i], 10, exclude=int(i), norms=norms)
        recall.append(len(set(np.argsort(-exact)[:10]) & set(got)) / 10)
    with tempfile.TemporaryDirectory() as tmp:
        save_text_model(rep.text_model, Path(tmp) / "model.npz")
        model = load_text_model(Path(tmp) / "model.npz")
        model_bytes = (Path(tmp) / "model.npz").stat().st_size
    print(f"SNLI dev, {len(X):,} rows x {X.shape[1]}: {codes.shape[1]} bytes a row in memory, "
          f"{on_disk:.0f} on disk; recall@10 against exact cosine on Φ {np.mean(recall):.3f}; "
          f"the text model {model_bytes / 1e6:.1f} MB ({model_bytes / len(X):.0f} B a row here); "
          f"what a search keeps: {on_disk + model_bytes / len(X):.0f} B a row (goal 150)")
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
    searches = []
    for text in ("a dog runs in the snow", "two men play music on a street corner",
                 "a woman is cooking dinner for her family", "children swim", "nobody"):
        t0 = time.perf_counter()
        vector, _known = place_text(text, model)
        nearest_codes(big, place(vector[None, :])[0], 20, norms=norms)
        searches.append(time.perf_counter() - t0)
    print(f"search by meaning (a sentence placed with SNLI dev's text model, then the 20 "
          f"nearest of {args.rows:,} rows): {np.median(searches):.3f} s (median of 5), "
          f"slowest {max(searches):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
