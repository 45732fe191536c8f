"""Every kind of run the product writes, small, for the tests that render every page on each
(``test_app_every_run.py``) and the browser test's held-out-style input.

``heldout``   an NLI file as a new curator uploads one: premises shared by three hypotheses,
              labels that no model can predict from the text (the baselines fall below the
              majority rate and chance, so they carry warnings), every measure on (the
              out-of-distribution measure with a challenge file)
``failed``    KNN fails inside the pipeline (its compute raises) and most measures are not run
``mc``        ARCT as multiple choice (wide: two warrants, the index of the right one)
``zfilter``   the Z-filter on the first 2,000 SNLI dev rows, the default measures
``no_map``    AFLite with a split column (train filtered, dev kept) and no projection

Built once per test session (``functools.cache`` on the folder); a run is never modified by a
test (tests that change one copy it first).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pandas as pd

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = REPO_ROOT / "tests" / "data"
FAST = {"representation_params": {"n_components": 32}, "n_partitions": 8}
SMALL_MEASURES = {"baselines": {"n_random_draws": 1, "n_splits": 2},
                  "inoculation": {"n_repeats": 1}, "projection": {"method": "pca"}}
KINDS = ("heldout", "failed", "mc", "zfilter", "no_map")


def heldout_frame(n_premises: int = 400, *, seed: int = 0) -> pd.DataFrame:
    """An MNLI-style table (``pairID, genre, sentence1, sentence2, gold_label``): each premise
    has three hypotheses, and the labels are drawn at random (36 / 33 / 31 %), so a model
    trained on the text scores about chance, below the majority rate."""
    rng = np.random.default_rng(seed)
    words = ["man", "woman", "dog", "cat", "child", "street", "park", "ball", "car", "red",
             "blue", "running", "sitting", "eating", "water", "beach", "music", "table",
             "green", "old", "young"]
    rows = []
    for p in range(n_premises):
        premise = "A " + " ".join(rng.choice(words, 6)) + f" scene {p}."
        for j in range(3):
            rows.append({
                "pairID": f"{p}-{j}", "genre": str(rng.choice(["fiction", "travel"])),
                "sentence1": premise, "sentence2": "The " + " ".join(rng.choice(words, 4)) + ".",
                "gold_label": str(rng.choice(["entailment", "neutral", "contradiction"],
                                             p=[0.36, 0.33, 0.31])),
            })
    return pd.DataFrame(rows)


def write_heldout(path: Path, n_premises: int = 400, *, seed: int = 0) -> Path:
    """:func:`heldout_frame` as a CSV at ``path``."""
    heldout_frame(n_premises, seed=seed).to_csv(path, index=False)
    return path


def _arct_wide(folder: Path) -> Path:
    long = pd.read_csv(DATA / "arct" / "arct_dev.csv", dtype=str, keep_default_na=False)
    warrants = long.pivot(index="id", columns="option", values="hypothesis")
    warrants.columns = [f"warrant{k}" for k in warrants.columns]
    first = long.drop_duplicates("id").set_index("id")
    wide = first[["premise", "claim", "correctLabelW0orW1"]].join(warrants)
    path = folder / "arct_dev_wide.csv"
    wide.reset_index().to_csv(path, index=False)
    return path


def _snli_with_split(folder: Path) -> Path:
    read = functools.partial(pd.read_csv, dtype=str, keep_default_na=False)
    train = read(DATA / "snli" / "snli_dev.csv").iloc[:1500].assign(split="train")
    dev = read(DATA / "snli" / "snli_test.csv").iloc[:500].assign(split="dev")
    dev = dev.assign(id="test-" + dev["id"])
    path = folder / "snli_train_dev.csv"
    pd.concat([train, dev], ignore_index=True).to_csv(path, index=False)
    return path


def _snli_dev_rows(folder: Path, n: int) -> Path:
    path = folder / "snli_dev.csv"  # the name the pages show
    pd.read_csv(DATA / "snli" / "snli_dev.csv", dtype=str, keep_default_na=False,
                nrows=n).to_csv(path, index=False)
    return path


def _failing(ctx):
    raise RuntimeError("planted failure of the KNN measure")


@functools.cache
def build(folder: str) -> dict[str, Path]:
    """Every kind of :data:`KINDS` under ``folder/runs``; kind -> run folder."""
    from aflite_core.io.datasets import load_dataset
    from aflite_core.measures import registry
    from aflite_core.pipeline import AuditConfig, run_audit

    base = Path(folder)
    base.mkdir(parents=True, exist_ok=True)
    root = base / "runs"
    heldout = load_dataset(write_heldout(base / "heldout.csv"))
    challenge = write_heldout(base / "challenge.csv", 60, seed=1)
    every = tuple(registry.names())
    runs = {
        "heldout": run_audit(heldout, AuditConfig(
            **FAST, measures=every,
            measure_params={**SMALL_MEASURES, "ood": {"challenges": [str(challenge)]}}),
            runs_root=root, name="heldout"),
        "mc": run_audit(
            load_dataset(_arct_wide(base), choices=["warrant0", "warrant1"],
                         answer="correctLabelW0orW1", premise="premise", id="id"),
            AuditConfig(**FAST, measure_params=SMALL_MEASURES), runs_root=root, name="mc"),
        "zfilter": run_audit(
            load_dataset(_snli_dev_rows(base, 2_000)),
            AuditConfig(**FAST, filter="z", measure_params=SMALL_MEASURES),
            runs_root=root, name="zfilter"),
        "no_map": run_audit(
            load_dataset(_snli_with_split(base)),
            AuditConfig(**FAST, measures=tuple(m for m in registry.default_names()
                                                if m != "projection"),
                        measure_params=SMALL_MEASURES),
            runs_root=root, name="no_map"),
    }
    knn = registry.get("knn")
    registry.register(dataclasses.replace(knn, compute=_failing))
    try:
        runs["failed"] = run_audit(
            heldout, AuditConfig(**FAST, measures=("label_shift", "knn")),
            runs_root=root, name="failed")
    finally:
        registry._EXTRA.pop("knn", None)
    return runs
