"""Speed of multiple-choice AFLite on ARCT (the shared copy in ../shared/data/arct).

ARCT (Habernal et al., NAACL 2018) ships one row per warrant; it is put back into its original
shape (one row per question, ``warrant0``/``warrant1`` and the index of the right one), loaded
with the loader's multiple-choice expansion, represented by TF-IDF+SVD, and filtered by
:class:`aflite_core.filter.MultipleChoiceAFLite` with the defaults
(64 partitions, half the questions for training, tau 0.75, 2% of the questions per round).
Prints the time of each stage (the filter's is the median of --repeats runs), the rounds, and
the mean predictability of the first round against chance (0.5 for two warrants).

    python benchmarks/bench_multiple_choice.py [--data DIR] [--splits train,dev,test]
                                               [--n-jobs 1] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from aflite_core.filter._multiple_choice import MultipleChoiceAFLite  # noqa: E402
from aflite_core.io.datasets import load_dataset  # noqa: E402
from aflite_core.represent._builders import build_representation  # noqa: E402

DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "arct"


def wide_arct(folder: Path, splits: list[str], out: Path) -> Path:
    """The ARCT splits as one wide CSV: one row per question, both warrants side by side."""
    long = pd.concat(
        [pd.read_csv(folder / f"arct_{s}.csv", dtype=str, keep_default_na=False)
         for s in splits],
        ignore_index=True,
    )
    long["qid"] = long["split"] + "/" + long["id"]
    warrants = long.pivot(index="qid", columns="option", values="hypothesis")
    warrants.columns = [f"warrant{k}" for k in warrants.columns]
    first = long.drop_duplicates("qid").set_index("qid")
    wide = first[["split", "premise", "claim", "correctLabelW0orW1"]].join(warrants)
    wide.reset_index().to_csv(out, index=False)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--splits", default="train")
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = wide_arct(args.data, args.splits.split(","), Path(tmp) / "arct_wide.csv")
        ds = load_dataset(path, choices=["warrant0", "warrant1"], answer="correctLabelW0orW1",
                          premise="premise", id="qid")
        t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep = build_representation(ds, "tfidf_svd", random_state=0)
    t_rep = time.perf_counter() - t0
    y = ds.labels() == "right"
    groups = ds.frame.loc[ds.included_mask, "question_id"].to_numpy()

    times, est = [], None
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        est = MultipleChoiceAFLite(target_size=0.5, random_state=0, n_jobs=args.n_jobs).fit(
            rep.X, y, groups=groups
        )
        times.append(time.perf_counter() - t0)
    first = est.history_.iloc[0]
    print(f"ARCT {args.splits}: {len(y):,} rows, {est.n_questions_:,} questions, "
          f"Φ {rep.X.shape[1]} dims")
    print(f"load + expand      {t_load:7.3f} s")
    print(f"tfidf_svd Φ        {t_rep:7.3f} s")
    print(f"MC AFLite (fit)    {statistics.median(times):7.3f} s median of {args.repeats} "
          f"(min {min(times):.3f}, max {max(times):.3f}), n_jobs={args.n_jobs}")
    print(f"rounds {est.n_rounds_}, stop {est.stop_reason_}, kept "
          f"{int(est.question_keep_mask_.sum()):,} of {est.n_questions_:,} questions")
    print(f"round 1 mean predictability {first['score_mean']:.3f} "
          f"(chance {first['chance_mean']:.3f}); retained mean "
          f"{np.nanmean(est.question_predictability_[est.question_keep_mask_]):.3f}")


if __name__ == "__main__":
    main()
