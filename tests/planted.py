"""Planted data and run folders several test modules share (helpers, not tests).

Each helper lived in the test module that first needed it; with ``tests/`` mirroring the
package, a module in another folder imports it from here (``tests`` is on ``pythonpath``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from aflite_core.runs import STATUSES
from aflite_core.runs._writer import write_run

#: Words of :func:`planted_frame`'s texts.
WORDS = [f"w{i}" for i in range(80)]
#: Labels of :func:`planted_texts`.
LABELS = np.array(["contradiction", "entailment", "neutral"])


def planted_frame(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Two labels and two artifacts on disjoint rows: a word in "yes" hypotheses (20 % of
    the rows) and long hypotheses (16-20 words, not 5-8) among "no" rows (20 %)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = "yes" if i % 2 else "no"
        kind = i % 10
        size = rng.integers(16, 21) if kind in (0, 2) else rng.integers(5, 9)
        text = " ".join(rng.choice(WORDS, size=size))
        if kind in (1, 3):
            text += " cueyes"
        rows.append({"premise": " ".join(rng.choice(WORDS, size=8)), "hypothesis": text,
                     "label": label, "split": "train"})
    return pd.DataFrame(rows)


def filler_words(rng, n_words=6) -> str:
    vocab = [f"w{i}" for i in range(60)]
    return " ".join(rng.choice(vocab, size=n_words))


def planted_texts(n=900, cue_share=0.3, seed=0):
    """Random-word hypotheses; a ``cue_share`` of the contradictions contain "nobody"."""
    rng = np.random.default_rng(seed)
    labels = LABELS[rng.integers(0, 3, n)]
    cue = (labels == "contradiction") & (rng.random(n) < cue_share * 3)
    texts = [("nobody " if c else "") + filler_words(rng) for c in cue]
    return texts, labels, cue


def planted_snli_frame(rows: int, *, seed: int, premises: int,
                       single: bool = False) -> pd.DataFrame:
    """SNLI-like rows: shared premises, some repeated and some blank hypotheses (excluded),
    '-' labels (excluded), an id column, a numeric column and a split column."""
    rng = np.random.default_rng(seed)
    # every premise on about rows / premises rows; the hypotheses distinct but for one row in
    # a hundred repeating the row before it (a few links across premises)
    pool = [f"A person number {i} is {'walking' if i % 2 else 'sitting'}." for i in
            range(max(premises, 1))]
    hypotheses = [f"Someone {'  moves' if r % 3 else 'rests!'} {r}" for r in range(rows)]
    for i in range(1, rows, 100):
        hypotheses[i] = hypotheses[i - 1]
    for i in rng.choice(rows, rows // 50, replace=False):
        hypotheses[i] = "   " if i % 2 else ""
    frame = pd.DataFrame({
        "pairID": [f"{seed}-{i}" for i in range(rows)],
        "sentence1": rng.choice(pool, rows),
        "sentence2": hypotheses,
        "gold_label": rng.choice(["entailment", "neutral", "contradiction", "-"], rows,
                                 p=[0.32, 0.32, 0.32, 0.04]),
        "split": rng.choice(["train", "test"], rows, p=[0.8, 0.2]),
        "score": rng.random(rows),
    })
    return frame.drop(columns="sentence1") if single else frame


def assert_same_dataset(streamed, whole) -> None:
    """The two datasets (texts on disk) are the same in everything the audit reads."""
    assert streamed.columns == whole.columns
    pd.testing.assert_frame_equal(streamed.frame, whole.frame, check_exact=True)
    pd.testing.assert_series_equal(streamed.exclusion, whole.exclusion, check_exact=True)
    assert streamed.report.to_dict() == whole.report.to_dict()
    assert streamed.texts_file.columns == whole.texts_file.columns
    assert streamed.texts_file.info == whole.texts_file.info
    np.testing.assert_array_equal(streamed.texts_file.starts, whole.texts_file.starts)
    assert streamed.texts_file.path.read_bytes() == whole.texts_file.path.read_bytes()
    assert streamed.content_hash == whole.content_hash
    if whole.columns.group is not None:
        np.testing.assert_array_equal(streamed.group_codes(), whole.group_codes())
    assert streamed.hypotheses() == whole.hypotheses()
    if whole.columns.premise is not None:
        assert streamed.premises() == whole.premises()


def run_from_dataset(tmp_path: Path, dataset, status) -> Path:
    frame = dataset.frame
    status = np.asarray(status, dtype=object)
    status[~dataset.included_mask] = "excluded"
    n = len(frame)
    scored = np.isin(status, ["retained", "removed"])
    scores = pd.DataFrame(
        {
            "row_id": frame.index.to_numpy(),
            "status": status,
            "predictability": np.where(scored, np.linspace(0, 1, n), np.nan),
            "removal_round": np.where(status == "removed", 1, -1).astype(np.int64),
            "label": dataset.labels(False),
        }
    )
    summary = {"input": {"name": dataset.name, "sha256": dataset.content_hash,
                         "columns": dataset.columns.to_dict()}}
    return write_run(tmp_path / "runs", "r", frame=frame, scores=scores, summary=summary)


def statuses_for(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.choice(np.array(STATUSES, dtype=object), size=n)


def arct_multiple_choice(real_data, tmp_path, split="train"):
    """ARCT in its original wide shape (one row per question, warrant0/warrant1 and the index
    of the right one), loaded with the loader's multiple-choice expansion."""
    from aflite_core.io.datasets import load_dataset

    long = pd.read_csv(real_data / "arct" / f"arct_{split}.csv", dtype=str,
                       keep_default_na=False)
    warrants = long.pivot(index="id", columns="option", values="hypothesis")
    warrants.columns = [f"warrant{k}" for k in warrants.columns]
    first = long.drop_duplicates("id").set_index("id")
    wide = first[["split", "premise", "claim", "correctLabelW0orW1"]].join(warrants)
    path = tmp_path / f"arct_{split}_wide.csv"
    wide.reset_index().to_csv(path, index=False)
    return load_dataset(path, choices=["warrant0", "warrant1"], answer="correctLabelW0orW1",
                        premise="premise", id="id")
