"""The map stage: cost at 10k to 1M rows, and quality against umap-learn's defaults and PCA.

Data: 10k = SNLI dev (its 9,842 labelled rows); larger sizes are built from the shared SNLI
files with light seeded perturbation (``bench_cues.build``, as bench_pipeline.py does). Φ is
the default representation (TF-IDF of hypothesis and premise as blocks, randomized SVD to 256
dimensions), built once per size.

Cost, per size: ``project(Φ)`` (the default: UMAP) warm, in this process after a first call;
for the smallest size also in a fresh process (``python -c``: import, load the cached numba
kernel, map; wall time from the process start), once with the disk cache warm and once with an
empty cache folder (the kernel compiled); and the regions (``find_regions`` +
``describe_regions``).

The default map is fitted on at most 20,000 rows, the others placed, then polished (every row
moved towards its own nearest rows among all rows; ``projection_info`` says ``polished``).

Quality, per ``--quality-sizes``: on 3,000 seeded rows, sklearn's ``trustworthiness`` (k = 10,
cosine in Φ) of the map, and neighbour recall@10 (of each of the 3,000 rows' 10 nearest rows in
Φ among all rows, by exact cosine, the share that are among its 10 nearest on the map), for the
default map, umap-learn's own defaults on all rows (``umap.UMAP(random_state=0)`` on the
L2-normalised Φ, whose euclidean neighbours are Φ's cosine neighbours) and PCA.

    .venv/bin/python benchmarks/bench_projection.py [--sizes 9842,100000,550000,1000000]
        [--quality-sizes 9842,100000] [--no-umap-learn]
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
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
SHARED = Path(os.environ.get("AFLITE_SHARED", ROOT.parent / "shared"))

from aflite_core.measures import map_regions  # noqa: E402
from aflite_core.measures._neighbors import exact_topk, l2_normalize  # noqa: E402
from aflite_core.measures.projection import project, projection_info  # noqa: E402
from aflite_core.represent._builders import _svd, tfidf_blocks  # noqa: E402

QUALITY_ROWS = 3_000
K = 10


def snli_like(n_rows: int) -> pd.DataFrame:
    """SNLI dev's labelled rows for n <= 9,842, else bench_cues.build(n)."""
    if n_rows <= 9_842:
        dev = pd.read_csv(SHARED / "data" / "snli" / "snli_dev.csv", keep_default_na=False)
        dev = dev[dev["label"].isin(["entailment", "neutral", "contradiction"])]
        return dev.iloc[:n_rows].reset_index(drop=True)
    from bench_cues import build

    return build(n_rows)


def phi(frame: pd.DataFrame) -> np.ndarray:
    X, _ = _svd(tfidf_blocks(frame["hypothesis"].tolist(), frame["premise"].tolist()), 256, 0,
                None)
    return np.ascontiguousarray(X, dtype=np.float32)


def quality(Xn: np.ndarray, coords: np.ndarray, rows: np.ndarray) -> tuple[float, float]:
    """Trustworthiness (k = 10, cosine) on ``rows`` and neighbour recall@10 of ``rows``
    against all rows."""
    from scipy.spatial import cKDTree
    from sklearn.manifold import trustworthiness

    trust = trustworthiness(Xn[rows], coords[rows], n_neighbors=K, metric="cosine")
    _, high = exact_topk(Xn[rows], Xn, K + 1, 256)
    low = cKDTree(coords).query(coords[rows], k=K + 1)[1]
    recall = np.mean([len((set(h) - {r}) & (set(lo) - {r})) / K
                      for r, h, lo in zip(rows, high, low, strict=True)])
    return float(trust), float(recall)


def fresh_process(X: np.ndarray, cache: str | None) -> float:
    """Wall seconds of a new Python process that imports the projection and maps ``X``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "phi.npy"
        np.save(path, X)
        env = {**os.environ}
        env.pop("NUMBA_CACHE_DIR", None)
        if cache is not None:
            env["AFLITE_CACHE_DIR"] = cache
        script = ("import numpy as np\n"
                  "from aflite_core.measures.projection import project\n"
                  f"project(np.load({str(path)!r}))\n")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", script], env=env, check=True, cwd=ROOT)
        return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="9842,100000,550000,1000000")
    parser.add_argument("--quality-sizes", default="9842,100000")
    parser.add_argument("--no-umap-learn", action="store_true",
                        help="skip umap-learn's defaults (about 40 s at 10k, 75 s at 100k)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    quality_sizes = {int(s) for s in args.quality_sizes.split(",") if s}
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start")
    rng = np.random.default_rng(0)
    for n in sorted(set(sizes) | quality_sizes):
        frame = snli_like(n)
        t0 = time.perf_counter()
        X = phi(frame)
        print(f"\n== {len(X):,} rows (Φ {X.shape[1]} dims built in "
              f"{time.perf_counter() - t0:.1f} s)")
        if n == min(sizes):
            with tempfile.TemporaryDirectory() as empty:
                print(f"fresh process, empty cache folder (kernel compiled): "
                      f"{fresh_process(X, empty):.2f} s")
            fresh_process(X, None)  # the user cache folder holds the kernel from here on
            print(f"fresh process, kernel cached on disk: {fresh_process(X, None):.2f} s "
                  "(import + map, from the process start)")
        project(X[:2_000])  # load the kernel and warm the libraries
        t0 = time.perf_counter()
        table = project(X)
        seconds = time.perf_counter() - t0
        info = projection_info(table)
        print(f"UMAP map (default), warm: {seconds:.2f} s; {info}")
        coords = table[["x", "y"]].to_numpy()
        t0 = time.perf_counter()
        region = map_regions.find_regions(coords)
        regions = map_regions.describe_regions(
            region, coords, texts=frame["hypothesis"].tolist(), labels=frame["label"].to_numpy(),
            status=np.full(len(frame), "retained"))
        print(f"regions: {len(regions)} named, {np.mean(region >= 0):.0%} of rows in one, "
              f"{time.perf_counter() - t0:.2f} s")
        print(f"peak RSS so far: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f}"
              " MB")
        if n not in quality_sizes:
            continue
        Xn = l2_normalize(X)
        rows = np.sort(rng.choice(len(X), size=min(QUALITY_ROWS, len(X)), replace=False))
        maps = {"default (this product)": (coords, seconds)}
        t0 = time.perf_counter()
        pca = project(X, method="pca")[["x", "y"]].to_numpy()
        maps["PCA"] = (pca, time.perf_counter() - t0)
        if not args.no_umap_learn:
            import umap

            t0 = time.perf_counter()
            ref = umap.UMAP(random_state=0).fit_transform(Xn)
            maps["umap-learn defaults, all rows"] = (ref, time.perf_counter() - t0)
        print(f"{'map':34s} {'seconds':>8s} {'trust@10':>9s} {'recall@10':>10s}")
        for name, (xy, secs) in maps.items():
            trust, recall = quality(Xn, np.asarray(xy, dtype=np.float64), rows)
            print(f"{name:34s} {secs:8.1f} {trust:9.3f} {recall:10.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
