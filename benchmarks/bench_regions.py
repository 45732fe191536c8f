"""The map's regions on data nobody tuned them for (issue 64, item 1).

For SNLI dev, SICK, FEVER-Symmetric, ARCT (dev, long form: one row per warrant) and a
genre-mixed set (all four together, 21k rows of four sources), builds the default map (Φ =
TF-IDF + SVD of premise and hypothesis, UMAP, as the projection measure does), finds its
regions (:func:`aflite_core.measures.map_regions.find_regions`) and describes them
(:func:`~aflite_core.measures.map_regions.describe_regions`). Prints per set: the number of
regions, the largest region's share of the rows (the rule: at most 40 %, or "no distinct
regions"), and per region its share, its name, for each of its name's words the share of the
region's texts that hold it and of the other rows' texts (the rule: at least 50 % inside, at
most 15 % outside), its label shares and whether its label mix differs from the set's (a
chi-square test with the Bonferroni correction over the regions).

Usage::

    python benchmarks/bench_regions.py [--shared ../shared/data] [--cache DIR]

``--cache`` keeps each set's map (``<name>.npz``) so a second run only finds the regions.
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

from aflite_core.io import load_dataset  # noqa: E402
from aflite_core.measures import map_regions  # noqa: E402
from aflite_core.measures.projection import project  # noqa: E402
from aflite_core.represent import build_representation  # noqa: E402
from aflite_core.text import TOKEN_PATTERN  # noqa: E402


def sets(shared: Path) -> dict[str, pd.DataFrame]:
    """The evaluation sets as premise / hypothesis / label frames."""
    cols = ["premise", "hypothesis", "label"]
    out = {
        "snli_dev": pd.read_csv(shared / "snli" / "snli_dev.csv", keep_default_na=False),
        "sick": pd.read_csv(shared / "sick" / "sick.csv", keep_default_na=False),
        "fever_symmetric": pd.read_csv(shared / "fever_symmetric" / "fever_symmetric_v0.2.csv",
                                       keep_default_na=False),
        "arct_dev": pd.read_csv(shared / "arct" / "arct_dev.csv", keep_default_na=False),
    }
    out = {name: frame[cols].astype(str) for name, frame in out.items()}
    out["snli_dev"] = out["snli_dev"][out["snli_dev"]["label"] != "-"]
    out["genre_mixed"] = pd.concat([f.assign(label=name + ":" + f["label"])
                                    for name, f in out.items()], ignore_index=True)
    return out


def the_map(name: str, frame: pd.DataFrame, cache: Path) -> tuple[np.ndarray, list[str]]:
    """The default map of ``frame`` (cached) and its hypotheses."""
    path = cache / f"{name}.npz"
    hyps = frame["hypothesis"].tolist()
    if path.exists():
        return np.load(path)["coords"], hyps
    csv = cache / f"{name}.csv"
    frame.to_csv(csv, index=False)
    dataset = load_dataset(csv, premise="premise", hypothesis="hypothesis", label="label",
                           group="")
    rep = build_representation(dataset, "tfidf_svd", n_components=256, random_state=0)
    coords = project(rep.X, random_state=0)[["x", "y"]].to_numpy()
    np.savez(path, coords=coords)
    return coords, dataset.hypotheses()


def word_shares(texts: list[str], region: np.ndarray, r: int, words: list[str]
                ) -> list[tuple[str, float, float]]:
    """For each word: share of region ``r``'s texts holding it, and of the other rows'."""
    import re

    pattern = re.compile(TOKEN_PATTERN)
    tokens = [set(t.lower() for t in pattern.findall(text)) for text in texts]
    inside = region == r
    out = []
    for w in words:
        has = np.fromiter((w in t for t in tokens), dtype=bool, count=len(tokens))
        out.append((w, has[inside].mean(), has[~inside].mean() if (~inside).any() else 0.0))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-regions-") as tmp:
        cache = args.cache or Path(tmp)
        cache.mkdir(parents=True, exist_ok=True)
        for name, frame in sets(args.shared).items():
            coords, hyps = the_map(name, frame, cache)
            start = time.perf_counter()
            region = map_regions.find_regions(coords, random_state=0)
            table = map_regions.describe_regions(
                region, coords, texts=hyps, labels=frame["label"].to_numpy(),
                status=np.full(len(frame), "retained", dtype=object), random_state=0)
            seconds = time.perf_counter() - start
            largest = table["share_of_rows"].max() if len(table) else 0.0
            named = int((~table["name"].str.startswith("region ")).sum()) if len(table) else 0
            skewed = int(table["label_skewed"].sum()) if len(table) else 0
            print(f"\n{name}: {len(frame):,} rows, {len(table)} regions "
                  f"({'no distinct regions' if table.empty else f'largest {largest:.1%}'}; "
                  f"{named} named by words, {skewed} label-skewed), "
                  f"{(region >= 0).mean():.1%} of rows in a region, {seconds:.2f} s")
            shown = [c for c in table.columns if c.startswith(map_regions.SHARE_PREFIX)]
            for row in table.itertuples(index=False):
                words = [w for w in str(row.name).split(" · ") if not w.startswith("region ")]
                covered = word_shares(hyps, region, row.region, words)
                cover = "; ".join(f"{w} {a:.0%} in / {b:.0%} out" for w, a, b in covered)
                labels = " ".join(f"{c[len(map_regions.SHARE_PREFIX):]}="
                                  f"{table.loc[table['region'] == row.region, c].iloc[0]:.2f}"
                                  for c in shown)
                skew = getattr(row, "label_skewed", None)
                print(f"  {row.region:2d} {row.share_of_rows:6.1%} {row.name!s:32.32s} "
                      f"[{cover or 'no word in half its texts'}] {labels}"
                      + ("" if skew is None else f" skewed={bool(skew)}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
