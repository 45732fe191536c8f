"""AFLite vs the Z-filter vs random subsets at equal size, on the shared SNLI train sample.

    .venv/bin/python benchmarks/bench_filters.py [SHARED_DATA_DIR] [--seeds 3] [--tile 27]

Both filters run through the pipeline (``run_audit``, no measures, no report), so each writes
the run folder the dashboard opens and :func:`aflite_core.report.compare.compare_runs` reads.
Two comparisons, each at one size:

* **AFLite's size**: AFLite with the default configuration (``suggest_config``), and the
  Z-filter told to reach the same size (``until="target_size"``: past convergence it goes on
  removing the rows that contribute most to the largest |z|).
* **the Z-filter's size**: the Z-filter with its defaults (stops when no hypothesis word's
  |z| passes the Bonferroni threshold), and AFLite with that size as its target.

Beside them, label-matched random subsets of the same size (the baselines measure's control:
each draw has the filtered set's label counts), and the full set. Per set: hypothesis-only
accuracy (5-fold CV of ``text_model("hypothesis_only")``; mean and standard deviation over
``--seeds`` fold seeds for a filter, over as many random draws for a random subset), the
largest |z| of a hypothesis word and the words above the Z-filter's threshold (the Z-filter's
statistic: empirical label prior of the set, words in >= 5 rows of the full set), the label
shares and their total-variation distance from the full set's, the Jaccard overlap of the
removed sets, and each filter's wall time. Timings are wall-clock on a shared 2-core machine.
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
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from aflite_core.config import suggest_config  # noqa: E402
from aflite_core.filter._zfilter import binary_features, subset_z  # noqa: E402
from aflite_core.io.datasets import load_dataset  # noqa: E402
from aflite_core.measures.baselines import cross_validated_accuracy  # noqa: E402
from aflite_core.pipeline import run_audit  # noqa: E402
from aflite_core.report.compare import compare_runs  # noqa: E402
from aflite_core.represent._builders import build_representation  # noqa: E402
from aflite_core.represent._text_models import text_model  # noqa: E402
from aflite_core.runs.folder import load_run  # noqa: E402
from aflite_core.splits import label_matched_subsets  # noqa: E402


def run_filter(dataset, root: Path, name: str, phi: Path, **changes
               ) -> tuple[np.ndarray, dict, Path]:
    """One audit without measures; ``(keep mask over rows, summary, run path)``.

    Φ is the default TF-IDF + SVD built once and passed as ``precomputed`` (the same float32
    matrix, so AFLite's masks are those of the default configuration).
    """
    config = suggest_config(dataset, representation="precomputed", measures=(),
                            report=False, representation_params={"path": str(phi)},
                            **changes)
    path = run_audit(dataset, config, runs_root=root, name=name)
    run = load_run(path)
    scores = pd.read_parquet(path / "scores.parquet")
    return (scores["status"] == "retained").to_numpy(), run.summary, path


def hyp_only(hyps: list[str], labels: np.ndarray, mask: np.ndarray, seed: int) -> float:
    idx = np.flatnonzero(mask)
    result = cross_validated_accuracy(text_model("hypothesis_only"), [hyps[i] for i in idx],
                                      labels[idx], n_splits=5, random_state=seed)
    return result["accuracy"]


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    union = (a | b).sum()
    return float((a & b).sum() / union) if union else float("nan")


def expected_jaccard(n: int, a: int, b: int) -> float:
    """Jaccard of two random removals of ``a`` and ``b`` of ``n`` rows (expected overlap)."""
    both = a * b / n
    return both / (a + b - both)


class Table:
    """The printed rows of one comparison."""

    def __init__(self, labels: np.ndarray, words, threshold: float, hyps: list[str],
                 seeds: int) -> None:
        self.labels, self.words, self.threshold = labels, words, threshold
        self.hyps, self.seeds = hyps, seeds
        self.classes = sorted(set(labels.tolist()))
        self.full = self.shares(np.ones(len(labels), dtype=bool))
        self.rows: list[dict] = []

    def shares(self, mask: np.ndarray) -> np.ndarray:
        counts = pd.Series(self.labels[mask]).value_counts()
        return np.array([counts.get(c, 0) for c in self.classes]) / mask.sum()

    def z(self, mask: np.ndarray) -> tuple[float, int]:
        z = np.abs(np.nan_to_num(subset_z(self.words, self.labels, mask)))
        return float(z.max()), int((z.max(axis=1) > self.threshold).sum())

    def add(self, name: str, masks: list[np.ndarray], seconds: float | None = None) -> None:
        """One set (one mask, spread over fold seeds) or random draws (one seed each)."""
        if len(masks) == 1:
            accs = [hyp_only(self.hyps, self.labels, masks[0], s) for s in range(self.seeds)]
        else:
            accs = [hyp_only(self.hyps, self.labels, m, 0) for m in masks]
        zs = [self.z(m) for m in masks]
        shares = np.mean([self.shares(m) for m in masks], axis=0)
        self.rows.append({
            "set": name, "rows": int(masks[0].sum()),
            "hyp-only acc": f"{100 * np.mean(accs):.1f} ± {100 * np.std(accs):.1f}",
            "max |z|": f"{np.mean([z[0] for z in zs]):.2f}",
            "words > z*": f"{np.mean([z[1] for z in zs]):.0f}",
            "labels " + "/".join(c[:3] for c in self.classes):
                "/".join(f"{100 * s:.1f}" for s in shares),
            "label TV": f"{0.5 * np.abs(shares - self.full).sum():.3f}",
            "wall s": "" if seconds is None else f"{seconds:.1f}",
        })

    def print(self, title: str) -> None:
        print(f"\n{title}")
        print(pd.DataFrame(self.rows).to_string(index=False))


def overlaps(n: int, sets: dict[str, np.ndarray]) -> None:
    """Jaccard overlap of the removed sets, against the overlap random removals would have."""
    names = list(sets)
    print("removed-set Jaccard (expected for random removals of the same sizes):")
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ra, rb = sets[a], sets[b]
            print(f"  {a} vs {b}: {jaccard(ra, rb):.3f} "
                  f"({expected_jaccard(n, int(ra.sum()), int(rb.sum())):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shared", nargs="?",
                        default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--seeds", type=int, default=3,
                        help="fold seeds per filtered set, random draws per size (default 3)")
    parser.add_argument("--tile", type=int, default=0, metavar="K",
                        help="also time the Z-filter alone on the sample tiled K times (27: "
                             "540,000 rows, SNLI's size); a stress test, its z grow with "
                             "sqrt(K)")
    args = parser.parse_args()
    dataset = load_dataset(Path(args.shared) / "snli" / "snli_train_sample.csv")
    hyps = dataset.hypotheses()
    labels = np.asarray(dataset.labels())
    n = len(labels)
    words = binary_features(hyps, min_count=5)[0]
    print(f"SNLI train sample: {n:,} rows, {words.shape[1]:,} hypothesis words in >= 5 rows")
    root = Path(tempfile.mkdtemp(prefix="bench-filters-"))
    t0 = time.perf_counter()
    default = suggest_config(dataset)
    rep = build_representation(dataset, default.representation, random_state=0,
                               **default.representation_params)
    rep_seconds = time.perf_counter() - t0
    phi = root / "phi.npy"
    np.save(phi, rep.X)

    keep_a, summary_a, path_a = run_filter(dataset, root, "aflite-default", phi)
    size_a = int(keep_a.sum())
    keep_za, summary_za, path_za = run_filter(
        dataset, root, "z-at-aflite-size", phi, filter="z", target_size=size_a,
        filter_params={"until": "target_size"})
    keep_z, summary_z, path_z = run_filter(dataset, root, "z-default", phi, filter="z")
    size_z = int(keep_z.sum())
    keep_az, summary_az, path_az = run_filter(dataset, root, "aflite-at-z-size", phi,
                                              target_size=size_z)
    z = summary_z["aflite"]["zfilter"]
    threshold = z["threshold"]
    print(f"AFLite default: m={default.n_partitions}, t={default.train_size}, "
          f"k={default.slice_size}, tau={default.tau}, target {default.target_size:,}; "
          f"Z-filter: alpha={z['alpha']}, min_count={z['min_count']}, batch "
          f"{z['batch_size']}, threshold |z| > {threshold:.2f} over {z['n_tests']:,} tests")

    def seconds(summary: dict) -> float:
        return float(summary["timings"]["aflite"])

    print(f"AFLite's Φ ({default.representation}, {rep.X.shape[1]} dims): {rep_seconds:.1f} s "
          "(not in its wall time below; the Z-filter's wall time includes tokenising)")
    for title, size, (name_a, keep_1, sum_1), (name_z, keep_2, sum_2) in (
        ("At AFLite's default size", size_a, ("AFLite (default)", keep_a, summary_a),
         ("Z-filter to this size", keep_za, summary_za)),
        ("At the Z-filter's convergence size", size_z, ("AFLite to this size", keep_az,
                                                        summary_az),
         ("Z-filter (default)", keep_z, summary_z)),
    ):
        table = Table(labels, words, threshold, hyps, args.seeds)
        if size == size_a:
            table.add("full set", [np.ones(n, dtype=bool)])
        table.add(name_a, [keep_1], seconds(sum_1))
        table.add(name_z, [keep_2], seconds(sum_2))
        rand_1 = label_matched_subsets(labels, keep_1, n_draws=args.seeds, random_state=0)
        rand_2 = label_matched_subsets(labels, keep_2, n_draws=args.seeds, random_state=1)
        table.add(f"random, labels of {name_a.split(' ')[0]}", rand_1)
        table.add(f"random, labels of {name_z.split(' ')[0]}", rand_2)
        table.print(f"{title}: {size:,} of {n:,} rows "
                    f"(stop: {sum_1['aflite']['stop_reason']} / {sum_2['aflite']['stop_reason']})")
        overlaps(n, {name_a: ~keep_1, name_z: ~keep_2, "random": ~rand_1[0]})
    comparison = compare_runs(path_a, path_za)
    print(f"\ncompare_runs(AFLite default, Z-filter at its size): removed Jaccard "
          f"{comparison.removed_jaccard:.3f} (random {comparison.expected_jaccard_random:.3f}), "
          f"Spearman of the score columns {comparison.spearman:.3f}; parameters differing: "
          f"{sorted(comparison.parameter_changes)}")
    print(f"run folders in {root}")
    if args.tile > 1:
        from aflite_core.filter._zfilter import ZFilter

        t0 = time.perf_counter()
        tiled = ZFilter(random_state=0).fit(hyps * args.tile, np.tile(labels, args.tile))
        print(f"\nZ-filter on the sample tiled {args.tile}x ({n * args.tile:,} rows): "
              f"{time.perf_counter() - t0:.1f} s wall (tokenising included), "
              f"{tiled.n_rounds_} steps, kept {int(tiled.keep_mask_.sum()):,}, "
              f"{tiled.stop_reason_}, max |z| {tiled.max_abs_z_before_:.1f} -> "
              f"{tiled.max_abs_z_after_:.2f} (threshold {tiled.threshold_:.2f})")


if __name__ == "__main__":
    main()
