"""The whole default audit, stage by stage, against each stage's floor (issue: audit speed).

For each size (default 10k = SNLI dev, and 100k / 550k built from the shared SNLI train
sample with light, seeded perturbation as ``bench_cues.py`` does), runs the CLI's default
audit (``python -m aflite_core run DATA --out ...``, the same defaults as the dashboard) in a
fresh process and prints, per stage, its seconds from ``summary.json``, and the floor
measured in this run on the same data: the cheapest operation the stage cannot avoid, with
the ratio stage / floor. The whole-run wall time and peak RSS come from the child process.

Floors:
- representation: TF-IDF of premise + hypothesis (fit_transform), without the SVD;
- aflite: one prediction pass over the filtered rows (X @ W with m x labels columns);
- cues: a binary bag of words of the hypotheses;
- knn: one exact 50-nearest-neighbour pass of the held-out rows over the training rows;
- projection: one 2-component PCA of Φ;
- baselines: one fit of the hypothesis-only model on all rows;
- write: one Parquet write of the frame.

    .venv/bin/python benchmarks/bench_pipeline.py [--sizes 10000,100000,550000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_cues import build  # noqa: E402 - the 550k builder shared with bench_cues


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def floors(frame: pd.DataFrame, summary: dict) -> dict[str, float]:
    """Each stage's floor on this data (see the module docstring)."""
    from sklearn.decomposition import PCA
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

    from aflite_core.represent.text_models import pair_texts, single_blas_thread, text_model

    hyps = frame["hypothesis"].astype(str).tolist()
    prems = frame["premise"].astype(str).tolist()
    labels = frame["label"].astype(str).to_numpy()
    n, d = len(frame), int(summary["representation"]["n_features"])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)).astype(np.float32)
    m = int(summary["parameters"]["n_partitions"])
    W = rng.normal(size=(d, m * len(set(labels)))).astype(np.float32)
    held = max(1, n // 10)
    out = {
        "representation": _timed(lambda: TfidfVectorizer().fit_transform(
            [p + " " + h for p, h in zip(prems, hyps, strict=True)])),
        "aflite": _timed(lambda: X @ W),
        "cues": _timed(lambda: CountVectorizer(binary=True).fit_transform(hyps)),
        "projection": _timed(lambda: PCA(2, svd_solver="randomized",
                                         random_state=0).fit_transform(X)),
        "write": _timed(lambda: frame.to_parquet(Path(tempfile.mkdtemp()) / "f.parquet")),
    }

    def knn_pass() -> None:
        train, query = X[held:], X[:held]
        for start in range(0, held, 2048):
            sims = query[start:start + 2048] @ train.T
            np.argpartition(-sims, 50, axis=1)[:, :50]

    out["knn"] = _timed(knn_pass)
    model = text_model("hypothesis_only")
    with single_blas_thread():
        out["baselines"] = _timed(lambda: model.fit(pair_texts(None, hyps), labels))
    return out


def one_size(n: int, shared: Path, work: Path) -> None:
    if n <= 9_842:
        frame = pd.read_csv(shared / "snli" / "snli_dev.csv", keep_default_na=False).iloc[:n]
    else:
        frame = build(n)
    data = work / f"snli_{n}.csv"
    frame.to_csv(data, index=False)
    out = work / f"run_{n}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "aflite_core", "run", str(data), "--out",
                           str(out), "-q"], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode != 0:
        print(f"{n:,} rows: the audit failed: {proc.stderr.strip()[-400:]}")
        return
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    timings = summary["timings"]
    floor = floors(frame, summary)
    rss = f"{peak / 1024:.0f} MB" if peak > before else f"<= {peak / 1024:.0f} MB"
    print(f"\n{n:,} rows: wall {wall:.1f} s, peak RSS {rss}; stop "
          f"{summary['aflite']['stop_reason']} after {summary['aflite']['n_rounds']} rounds; "
          f"policy {summary['aflite'].get('split_policy')}")
    print(f"  {'stage':16s} {'seconds':>9s} {'floor s':>9s} {'ratio':>7s}")
    for stage, seconds in timings.items():
        if stage == "total":
            continue
        f = floor.get(stage)
        ratio = f"{seconds / f:7.1f}" if f else "      -"
        print(f"  {stage:16s} {seconds:9.2f} {f if f is not None else float('nan'):9.2f} "
              f"{ratio}")
    print(f"  {'total':16s} {timings['total']:9.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="9842,100000,550000")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            one_size(n, args.shared, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
