"""Which cue ranking puts a curator's known artifacts first? (issue: cue rankings)

On the shared SNLI train sample (train) vs SNLI dev (test), word features, minimum support
5: the rank of the known SNLI artifacts (nobody, sleeping, no, cat -> contradiction;
outdoors, outside -> entailment) and how many of the, a, to and other stopwords are in the
top 15, for each statistic of the cue table. The default (cueness_shrunk) is chosen from
this table.

    .venv/bin/python benchmarks/bench_cue_ranking.py [SHARED_DATA_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aflite_core.cues import resources  # noqa: E402
from aflite_core.cues.statistics import SORT_KEYS, cue_table  # noqa: E402
from aflite_core.io.datasets import load_dataset  # noqa: E402

ARTIFACTS = ("nobody", "sleeping", "no", "cat", "outdoors", "outside")
NAMED_STOPWORDS = ("the", "a", "to")


def main() -> None:
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        Path(__file__).resolve().parents[2] / "shared" / "data"
    train = load_dataset(shared / "snli" / "snli_train_sample.csv")
    dev = load_dataset(shared / "snli" / "snli_dev.csv")
    table = cue_table(train, test=dev, features=("word",), min_count=5, cache=False)
    resources.use_bundled_data()
    from nltk.corpus import stopwords

    stop = set(stopwords.words("english"))
    print(f"{len(table):,} word cues (train {len(train.frame):,} rows, test {len(dev.frame):,})")
    print(f"{'ranking':20s} {'artifacts in top 15':>20s} {'the/a/to in top 15':>19s} "
          f"{'stopwords in top 15':>20s}  ranks of " + ", ".join(ARTIFACTS))
    for key in SORT_KEYS:
        order = table.sort_values([key, "n_train"], ascending=False, kind="mergesort")
        words = order["feature"].tolist()
        ranks = [words.index(w) + 1 if w in words else None for w in ARTIFACTS]
        top = words[:15]
        hits = sum(r is not None and r <= 15 for r in ranks)
        named = sum(w in top for w in NAMED_STOPWORDS)
        stops = sum(w in stop for w in top)
        print(f"{key:20s} {hits:>18d}/6 {named:>19d} {stops:>20d}  {ranks}")
        if key == SORT_KEYS[0]:
            print(f"{'':20s} top 15: {', '.join(top)}")


if __name__ == "__main__":
    main()
