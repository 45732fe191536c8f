"""Numbers a curator can act on: the before/after figure of each protocol fix, on real data.

For each case of the trust issue, the figure the old protocol gave and the one the current
defaults give, computed side by side in this run (the "before" column re-creates the old
protocol: no groups, per-choice rows, joint filtering, uniform random control, ICQ count form).

    .venv/bin/python benchmarks/bench_trust.py [SHARED_DATA_DIR]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aflite_core.config import suggest_config  # noqa: E402
from aflite_core.filter._policy import filter_units  # noqa: E402
from aflite_core.io.datasets import load_dataset  # noqa: E402
from aflite_core.measures.baselines import (  # noqa: E402
    cross_validated_accuracy,
    hypothesis_only_baseline,
)
from aflite_core.measures.knn import heldout_mask, knn_distance_measures, random_control  # noqa: E402
from aflite_core.pipeline import run_audit  # noqa: E402
from aflite_core.represent._text_models import pair_texts, text_model  # noqa: E402
from aflite_core.runs.folder import load_run  # noqa: E402

ROWS: list[tuple[str, str, str]] = []


def row(case: str, before: str, after: str) -> None:
    ROWS.append((case, before, after))
    print(f"  {case}: {before}  ->  {after}", flush=True)


def arct_wide(shared: Path, out: Path) -> Path:
    long = pd.read_csv(shared / "arct" / "arct_train.csv", dtype=str, keep_default_na=False)
    warrants = long.pivot(index="id", columns="option", values="hypothesis")
    warrants.columns = [f"warrant{k}" for k in warrants.columns]
    first = long.drop_duplicates("id").set_index("id")
    wide = first[["split", "premise", "claim", "correctLabelW0orW1"]].join(warrants)
    path = out / "arct_train_wide.csv"
    wide.reset_index().to_csv(path, index=False)
    return path


def audit(dataset, root: Path, **changes):
    config = suggest_config(filter_units(dataset, split_policy=changes.get("split_policy",
                                                                          "auto"),
                                         instance=changes.get("instance", "auto")),
                            **changes)
    return load_run(run_audit(dataset, config, runs_root=root))


def main() -> None:
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        Path(__file__).resolve().parents[2] / "shared" / "data"
    tmp = Path(tempfile.mkdtemp(prefix="bench-trust-"))
    start = time.perf_counter()
    hyp_only = text_model("hypothesis_only")

    print("ARCT, multiple-choice form (1,210 questions, 2,420 choice rows)")
    arct = load_dataset(arct_wide(shared, tmp), choices=["warrant0", "warrant1"],
                        answer="correctLabelW0orW1", premise="premise", id="id")
    hyps, labels = arct.hypotheses(), arct.labels()
    old = cross_validated_accuracy(hyp_only, hyps, labels, n_splits=5)
    new = cross_validated_accuracy(hyp_only, hyps, labels, n_splits=5, groups=arct.groups())
    row("hypothesis-only accuracy (majority 0.50)", f"{old['accuracy']:.3f} (choices split)",
        f"{new['accuracy']:.3f} (grouped by question)")
    per_row = audit(arct, tmp / "arct-row", instance="row", measures=(), report=False)
    per_q = audit(arct, tmp / "arct-q", measures=(), report=False)
    for run in (per_row, per_q):
        status = pd.Series(run.scores["status"].to_numpy(), index=run.frame.index)
        kept = status.eq("retained").groupby(run.frame["question_id"].to_numpy()).sum()
        run.single = int((kept == 1).sum())
    row("questions left with a single choice", f"{per_row.single} (per-choice AFLite)",
        f"{per_q.single} (a question kept or removed whole)")

    print("FEVER-Symmetric (1,420 rows, balanced 2 labels)")
    fever = load_dataset(shared / "fever_symmetric" / "fever_symmetric_v0.2.csv")
    hyps, labels = fever.hypotheses(), fever.labels()
    old = cross_validated_accuracy(hyp_only, hyps, labels, n_splits=5)
    new = cross_validated_accuracy(hyp_only, hyps, labels, n_splits=5, groups=fever.groups())
    row("hypothesis-only accuracy (chance 0.50)", f"{old['accuracy']:.3f} (no groups)",
        f"{new['accuracy']:.3f} (claims and evidence linked)")

    print("SNLI dev (9,842 rows, ~3 hypotheses per premise)")
    snli = load_dataset(shared / "snli" / "snli_dev.csv")
    texts = pair_texts(snli.premises(), snli.hypotheses())
    half = np.arange(len(texts)) % 2 == 0
    full_model = text_model("full_input")
    sub = [t for t, h in zip(texts, half, strict=True) if h]
    old = cross_validated_accuracy(full_model, sub, snli.labels()[half], n_splits=2)
    new = cross_validated_accuracy(full_model, sub, snli.labels()[half], n_splits=2,
                                   groups=snli.groups()[half])
    row("full-input accuracy on a half, 2 folds (chance 0.33)", f"{old['accuracy']:.3f}",
        f"{new['accuracy']:.3f} (grouped)")
    train = load_dataset(shared / "snli" / "snli_train_sample.csv")
    t_run = audit(train, tmp / "snli-train", measures=(), report=False)
    keep = t_run.scores["status"].eq("retained").to_numpy()
    t_hyps, t_labels = train.hypotheses(), train.labels()
    uniform = hypothesis_only_baseline(t_hyps, t_labels, keep, n_splits=3, n_random_draws=3,
                                       control="uniform")
    matched = hypothesis_only_baseline(t_hyps, t_labels, keep, n_splits=3, n_random_draws=3,
                                       groups=train.groups())
    row("SNLI train sample: full-set hypothesis-only accuracy",
        f"{uniform['full']['accuracy']:.3f}", f"{matched['full']['accuracy']:.3f} (grouped)")
    row("retained vs random (bias removed beyond size)",
        f"{100 * uniform['bias_removed_beyond_size']:.1f} (a fraction shown as %)",
        f"{matched['bias_removed_beyond_size_pp']:+.1f} pp ± {matched['bias_removed_std_pp']:.1f}"
        f" (label-matched control)")

    print("SICK (9,840 rows; TRAIN 4,439 / TEST 4,906 / TRIAL 495)")
    sick = load_dataset(shared / "sick" / "sick.csv")
    joint = audit(sick, tmp / "sick-joint", split_policy="joint", measures=(), report=False)
    default = audit(sick, tmp / "sick-default", measures=(), report=False)
    row("TEST rows removed", f"{joint.summary['splits']['TEST']['removed']:,} of 4,906 (joint)",
        f"{default.summary['splits']['TEST']['removed']:,} of 4,906 "
        f"(policy {default.summary['aflite']['split_policy']}; TEST scored)")
    keep = joint.scores["status"].eq("retained").to_numpy()
    s_h, s_y = sick.hypotheses(), sick.labels()
    uni = hypothesis_only_baseline(s_h, s_y, keep, n_splits=3, n_random_draws=3,
                                   control="uniform")
    lab = hypothesis_only_baseline(s_h, s_y, keep, n_splits=3, n_random_draws=3,
                                   groups=sick.groups())
    row("bias removed beyond size, jointly filtered SICK",
        f"{100 * uni['bias_removed_beyond_size']:+.1f} pp (uniform control)",
        f"{lab['bias_removed_beyond_size_pp']:+.1f} pp ± {lab['bias_removed_std_pp']:.1f} "
        "(label-matched, grouped)")

    print("KNN distances on SNLI dev held-out rows (AFLite on the rest)")
    d_run = audit(snli, tmp / "snli-dev", measures=(), report=False, split_policy="joint")
    from aflite_core.represent._builders import build_representation

    rep = build_representation(snli, "tfidf_svd", n_components=256, random_state=0)
    y = snli.labels()
    keep = d_run.scores["status"].eq("retained").to_numpy()
    held = heldout_mask(y, groups=snli.groups(), random_state=0)
    X = rep.X
    before_after = knn_distance_measures(X[~held], y[~held], X[held], y[held],
                                         retained_mask=keep[~held], n_bootstrap=0).table
    control = random_control(X[~held], y[~held], X[held], y[held], keep[~held], n_draws=3)
    table = pd.concat([before_after, control])
    table = table[(table["k"] == 1)].pivot_table(index=["class", "relation"], columns="scope",
                                                 values="mean_distance")
    for (cls, rel), vals in table.iterrows():
        if cls in ("entailment", "all"):
            row(f"k=1 {rel} distance growth, {cls}",
                f"AFLite {vals['after'] - vals['before']:+.3f} (no control)",
                f"AFLite {vals['after'] - vals['before']:+.3f} vs random "
                f"{vals['random'] - vals['before']:+.3f}")

    print(f"\n{'case':60s} | before | after")
    for case, before, after in ROWS:
        print(f"{case:60s} | {before} | {after}")
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
