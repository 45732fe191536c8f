"""Label issues on planted flips: the audit's label_issues measure vs the standard recipe.

For SNLI dev, SICK and FEVER-Symmetric (``../shared/data``), two plantings each, seeded:

- ``random``: 10 % of the rows get another label, chosen uniformly;
- ``pair``: 10 % of the rows labelled with one of two labels (the first two, sorted) swap them.

Each flipped file is audited with the default parameters (``run_audit``, every default
measure, as the CLI and the dashboard run it), and the flips are scored by

- ``label_issues``: the measure's ``label_quality`` (lower = more likely wrong: the full-input
  model's out-of-fold probability of the given label averaged with AFLite's held-out one),
  its time from ``summary.json``;
- ``standard``: the standard recipe computed here: 5-fold out-of-fold logistic regression on
  TF-IDF of the premise and of the hypothesis (two vectorisers, stacked), folds grouped by
  premise, self-confidence of the given label;
- ``data map``: AFLite's held-out confidence alone (``datamap.parquet``), for reference,
  and its calibrated regions (default shares, drawn on ``label_quality``): each region's share
  of the rows and the flips' share in it against the base rate;

with the AUROC of "flipped" against 1 - score (printed to 4 decimals) and the precision at k
(k = the number of flips: the share of flips among the k rows ranked least trustworthy).
The flagged rows
(``is_label_issue``) are counted too: how many, their precision and recall, and the share of
flips among the retained and among the removed rows (AFLite keeps unpredictable rows, so
mislabelled rows concentrate in the retained set) before and after dropping the flagged ones.

FEVER-Symmetric has two labels, so its random flips are a pair swap already and the two
plantings give the same rows. Run: ``.venv/bin/python benchmarks/bench_label_issues.py
[--datasets snli,sick,fever] [--kinds random,pair]``.
About 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared" / "data"
sys.path.insert(0, str(REPO_ROOT))

DATASETS = {"snli": SHARED / "snli" / "snli_dev.csv", "sick": SHARED / "sick" / "sick.csv",
            "fever": SHARED / "fever_symmetric" / "fever_symmetric_v0.2.csv"}
SHARE = 0.10


def plant(labels: np.ndarray, kind: str, rng: np.random.Generator
          ) -> tuple[np.ndarray, np.ndarray]:
    """Flip 10 % of ``labels`` (``random`` or ``pair``); return the labels and the mask."""
    y = labels.copy()
    classes = np.unique(y)
    n = len(y)
    if kind == "random":
        idx = rng.choice(n, int(SHARE * n), replace=False)
        for i in idx:
            y[i] = rng.choice([c for c in classes if c != y[i]])
    else:
        a, b = classes[0], classes[1]
        pool = np.flatnonzero((y == a) | (y == b))
        idx = rng.choice(pool, min(int(SHARE * n), len(pool)), replace=False)
        y[idx] = np.where(y[idx] == a, b, a)
    flipped = np.zeros(n, dtype=bool)
    flipped[idx] = True
    return y, flipped


def standard_recipe(frame: pd.DataFrame, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Self-confidence from 5-fold grouped out-of-fold LR on TF-IDF(premise) | TF-IDF(hyp)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    from aflite_core.splits import cv_folds, group_codes

    start = time.perf_counter()
    classes = np.unique(y)
    codes = np.searchsorted(classes, y)
    groups = group_codes(frame["premise"].to_numpy(), len(y))
    score = np.zeros(len(y))
    for train, test in cv_folds(y, n_splits=5, groups=groups, random_state=0):
        vp, vh = TfidfVectorizer(), TfidfVectorizer()
        X_train = sp.hstack([vp.fit_transform(frame["premise"].iloc[train]),
                             vh.fit_transform(frame["hypothesis"].iloc[train])]).tocsr()
        X_test = sp.hstack([vp.transform(frame["premise"].iloc[test]),
                            vh.transform(frame["hypothesis"].iloc[test])]).tocsr()
        model = LogisticRegression(max_iter=1000).fit(X_train, codes[train])
        proba = np.zeros((len(test), len(classes)))
        proba[:, model.classes_] = model.predict_proba(X_test)
        score[test] = proba[np.arange(len(test)), codes[test]]
    return score, time.perf_counter() - start


def ranking(flipped: np.ndarray, score: np.ndarray) -> tuple[float, float]:
    """AUROC of the flips against 1 - score, and the precision at k = number of flips."""
    from sklearn.metrics import roc_auc_score

    k = int(flipped.sum())
    lowest = np.argsort(score, kind="stable")[:k]
    return float(roc_auc_score(flipped, -score)), float(flipped[lowest].mean())



def region_line(name: str, kind: str, dm: pd.DataFrame, run) -> str:
    """Each data-map region's share of the rows and the flips' share in it (x the base
    rate), with the run's calibrated thresholds (the defaults)."""
    from aflite_core.measures.datamap import REGIONS

    base = dm["flipped"].mean()
    parts = []
    for region in REGIONS:
        inside = (dm["region"] == region).to_numpy()
        if inside.any():
            share = dm["flipped"].to_numpy()[inside].mean()
            parts.append(f"{region} {inside.mean():.0%} of rows, flips {share:.3f} "
                         f"({share / base:.1f}x)")
    both = dm["region"].isin(["hard", "ambiguous"]).to_numpy()
    share = dm["flipped"].to_numpy()[both].mean() if both.any() else float("nan")
    info = run.summary["measures"]["datamap"]
    t = info["thresholds"]
    return (f"{name:5s} {kind:6s} regions  " + "; ".join(parts)
            + f"; hard+ambiguous {both.mean():.0%}, flips {share:.3f} ({share / base:.1f}x)"
            + f"  [on {info.get('axis', 'confidence')}: band <= {t['hard_confidence']:.3f}, "
              f"in it ambiguous if variability >= {t['ambiguous_variability']:.3f}; easy >= "
              f"{t['easy_confidence']:.3f}; swing >= {t.get('swing_variability', 1):.2f}]")


def one(name: str, kind: str, work: Path) -> list[str]:
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit
    from aflite_core.runs.folder import load_run

    frame = pd.read_csv(DATASETS[name], keep_default_na=False)
    frame = frame[["split", "id", "premise", "hypothesis", "label"]]
    rng = np.random.default_rng(0)
    y, flipped = plant(frame["label"].astype(str).to_numpy(), kind, rng)
    data = work / f"{name}_{kind}.csv"
    frame.assign(label=y).to_csv(data, index=False)
    dataset = load_dataset(str(data), premise="premise", hypothesis="hypothesis",
                           label="label", split="split", id="id")
    start = time.perf_counter()
    run = load_run(run_audit(dataset, AuditConfig(), runs_root=work / "runs"))
    audit_s = time.perf_counter() - start
    flips = pd.Series(flipped, index=frame["id"].astype(str).to_numpy())
    issues = run.read_parquet("label_issues.parquet")
    issues = issues.assign(flipped=flips.reindex(issues["row_id"].astype(str)).to_numpy())
    measure_s = run.summary["measures"]["label_issues"]["seconds"]
    lines = []
    auroc, prec = ranking(issues["flipped"].to_numpy(), issues["label_quality"].to_numpy())
    lines.append(f"{name:5s} {kind:6s} label_issues  AUROC {auroc:.4f}  precision@k {prec:.3f}"
                 f"  {measure_s:6.2f} s  (rows scored {len(issues):,}, audit {audit_s:.1f} s)")
    scored_frame = frame.set_index(frame["id"].astype(str)).loc[issues["row_id"].astype(str)]
    std_score, std_s = standard_recipe(scored_frame.reset_index(drop=True),
                                       issues["given_label"].astype(str).to_numpy())
    auroc, prec = ranking(issues["flipped"].to_numpy(), std_score)
    lines.append(f"{name:5s} {kind:6s} standard      AUROC {auroc:.4f}  precision@k {prec:.3f}"
                 f"  {std_s:6.2f} s")
    datamap = run.read_parquet("datamap.parquet")
    if datamap is not None and not datamap.empty and "confidence" in datamap:
        dm = datamap.assign(flipped=flips.reindex(datamap["row_id"].astype(str)).to_numpy())
        auroc, prec = ranking(dm["flipped"].to_numpy(), dm["confidence"].to_numpy())
        lines.append(f"{name:5s} {kind:6s} data map      AUROC {auroc:.3f}  precision@k "
                     f"{prec:.3f}  (AFLite's held-out confidence alone, {len(dm):,} rows)")
        lines.append(region_line(name, kind, dm, run))
    flagged = issues["is_label_issue"].to_numpy()
    hit = issues["flipped"].to_numpy()
    lines.append(f"{name:5s} {kind:6s} flagged {flagged.mean():.1%} of rows: precision "
                 f"{hit[flagged].mean():.3f}, recall {flagged[hit].mean():.3f}; model agrees "
                 f"with the given label on "
                 f"{run.summary['measures']['label_issues']['model_accuracy']:.1%}")
    for status in ("retained", "removed"):
        part = issues[issues["status"] == status]
        if len(part):
            clean = part[~part["is_label_issue"]]
            lines.append(f"{name:5s} {kind:6s}   {status:8s} flips {part['flipped'].mean():.1%}"
                         f" of {len(part):,} rows; without the flagged rows "
                         f"{clean['flipped'].mean():.1%} of {len(clean):,}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--kinds", default="random,pair")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-label-issues-") as tmp:
        for name in args.datasets.split(","):
            for kind in args.kinds.split(","):
                for line in one(name, kind, Path(tmp)):
                    print(line, flush=True)
                print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
