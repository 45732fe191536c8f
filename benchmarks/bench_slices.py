"""Speed of the "why removed" slices measure (aflite_core.measures.slices).

    python benchmarks/bench_slices.py [--rows 100000 550000] [--dims 256]

For each size: seeded synthetic NLI-like rows (premise and hypothesis drawn from a Zipfian
vocabulary of 5,000 words, three labels, two planted artifacts: a word in one label's
hypotheses and long hypotheses in another), a random float32 Φ, and a removal mask that
removes most artifact rows and a third of the others. The measure's ``compute`` runs twice
on the same texts: cold (empty annotation cache: the POS tagging of the tense, NER and typo
families is paid here) and warm (annotations from the disk cache, as in an audit where the
cue measure ran first). Printed: wall time of each, the warm run's stages, and the top 3
slices (the two artifacts must be among them).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))


def make_rows(n: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Synthetic rows and a planted removal mask."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"word{i}" for i in range(5000)])
    p = 1.0 / np.arange(1, 5001)
    p /= p.sum()
    labels = np.array(["entailment", "neutral", "contradiction"])[rng.integers(0, 3, n)]
    hyp_len = rng.integers(4, 12, n)
    kind = rng.random(n)
    cue = (kind < 0.05) & (labels == "contradiction")
    long = (kind > 0.95) & (labels == "neutral")
    hyp_len[long] = rng.integers(18, 25, int(long.sum()))
    tokens = rng.choice(vocab, size=(n, 25), p=p)
    hyps = [" ".join(t[:k]) for t, k in zip(tokens, hyp_len, strict=True)]
    hyps = [h + " nobody" if c else h for h, c in zip(hyps, cue, strict=True)]
    prem_tokens = rng.choice(vocab, size=(n, 12), p=p)
    prems = [" ".join(t) for t in prem_tokens]
    removed = np.where(cue | long, rng.random(n) < 0.9, rng.random(n) < 0.33)
    frame = pd.DataFrame({"premise": prems, "hypothesis": hyps, "label": labels})
    return frame, removed


def context(frame: pd.DataFrame, removed: np.ndarray, dims: int):
    from aflite_core.io.datasets import load_dataset
    from aflite_core.measures.registry import MeasureContext

    dataset = load_dataset(frame, name="bench", group="")
    n = len(frame)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((n, dims), dtype=np.float32)
    rep = SimpleNamespace(X=X, row_ids=dataset.row_ids(),
                          warmup_mask=np.zeros(n, dtype=bool))
    stages: list[tuple[float, str]] = []
    return MeasureContext(
        dataset=dataset, representation=rep, filterable=np.ones(n, dtype=bool),
        labels=np.asarray(dataset.labels(), dtype=object), keep=~removed,
        scores=pd.DataFrame(), retained_ids=np.empty(0), random_state=0,
        progress=lambda f, m: stages.append((time.perf_counter(), m))), stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 550_000])
    parser.add_argument("--dims", type=int, default=256)
    args = parser.parse_args()
    from aflite_core.measures import slices

    for n in args.rows:
        with tempfile.TemporaryDirectory() as cache:
            os.environ["AFLITE_CACHE_DIR"] = cache
            frame, removed = make_rows(n)
            ctx, stages = context(frame, removed, args.dims)
            t0 = time.perf_counter()
            slices.compute(ctx)
            cold = time.perf_counter() - t0
            stages.clear()
            t0 = time.perf_counter()
            result = slices.compute(ctx)
            warm = time.perf_counter() - t0
            marks = [(t - t0, m) for t, m in stages]
            steps = ", ".join(f"{m.split(' (')[0]} at {t:.1f} s" for t, m in marks)
            table = result.tables[slices.FILE]
            print(f"{n:,} rows x {args.dims}: cold cache {cold:.1f} s, warm cache {warm:.1f} s "
                  f"({len(table):,} slices; {steps})")
            print("  top 3:", ", ".join(
                f"{r.slice_id} (n={r.size:,}, rate {r.removal_rate:.2f}, z {r.z:.1f})"
                for r in table.head(3).itertuples()))


if __name__ == "__main__":
    main()
