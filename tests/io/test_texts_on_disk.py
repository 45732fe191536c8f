"""A dataset's texts moved to its dataset.parquet (the CLI with a scheduler): every text read
back is the text in memory, the linked groups stand, the run folder is the same."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core.io import _texts_on_disk as texts_on_disk
from aflite_core.io._text_columns import text_hashes
from aflite_core.io._texts_on_disk import column_hashes
from aflite_core.io.datasets import load_dataset


@pytest.fixture
def frame() -> pd.DataFrame:
    """Texts with missing, empty and non-ASCII values, shared premises (linked groups), a
    split, a label and a numeric column, as a CSV gives them (Arrow strings)."""
    rng = np.random.default_rng(0)
    n = 230
    premises = [f"premise {i % 40} café" for i in range(n)]
    hypotheses = [f"hypothesis {i} {'not ' * (i % 3)}here" for i in range(n)]
    hypotheses[5], hypotheses[17] = "", "   "  # excluded rows (blank)
    frame = pd.DataFrame({"premise": premises, "hypothesis": hypotheses,
                          "label": rng.choice(["entailment", "neutral", "contradiction"], n),
                          "split": np.where(np.arange(n) < 180, "train", "dev"),
                          "note": [None if i % 7 == 0 else f"n{i}" for i in range(n)],
                          "score": rng.uniform(size=n)})
    for column in ("premise", "hypothesis", "label", "split", "note"):
        frame[column] = frame[column].astype("str")
    return frame


def test_the_texts_read_back_are_the_texts_in_memory(frame, tmp_path, monkeypatch):
    """Over row groups of 16 rows: every listing, chunk, sample and single text equals the
    in-memory dataset's; the frame keeps label, split and the numbers; groups stand."""
    monkeypatch.setattr(texts_on_disk, "ROW_GROUP", 16)
    memory = load_dataset(frame, name="toy", split="split")
    disk = memory.with_texts_on_disk(tmp_path / "dataset.parquet")
    assert list(disk.frame.columns) == ["label", "split", "score"]
    assert disk.texts_file.columns == ("premise", "hypothesis", "note")
    assert len(disk.texts_file.starts) == -(-len(frame) // 16) + 1  # 15 groups
    for included in (True, False):
        assert disk.hypotheses(included) == memory.hypotheses(included)
        assert disk.premises(included) == memory.premises(included)
        for a, b in ((disk.hypothesis_texts(included), memory.hypothesis_texts(included)),
                     (disk.premise_texts(included), memory.premise_texts(included))):
            assert list(a.chunks(37)) == list(b.chunks(37)) and len(a) == len(b)
            rows = np.random.default_rng(1).integers(0, len(b), 60)  # repeats, any order
            assert a.take(rows) == b.take(rows)
            assert a[0] == b[0] and a[-1] == b[-1] and a[10:50] == b[10:50]
    # the label, split and exclusions stay as categorical codes, read as in memory
    assert all(isinstance(disk.frame[c].dtype, pd.CategoricalDtype) for c in ("label", "split"))
    assert isinstance(disk.exclusion.dtype, pd.CategoricalDtype)
    np.testing.assert_array_equal(disk.included_mask, memory.included_mask)
    assert not memory.included_mask[[5, 17]].any() and memory.included_mask.sum() == 228
    for included in (True, False):
        np.testing.assert_array_equal(disk.labels(included), memory.labels(included))
        np.testing.assert_array_equal(disk.splits(included), memory.splits(included))
        np.testing.assert_array_equal(disk.label_objects(included),
                                      memory.label_objects(included))
    note = disk.text_column("note").texts_at(np.arange(len(frame)))
    assert note[0] == "" and note[1] == "n1"  # a missing value reads "" as in memory
    assert memory.columns.group is not None  # shared premises: linked groups
    np.testing.assert_array_equal(disk.group_codes(), memory.group_codes())
    np.testing.assert_array_equal(column_hashes(disk.text_column("premise")),
                                  text_hashes(frame["premise"]))
    with pytest.raises(ValueError, match="moved to .* already"):
        disk.with_texts_on_disk(tmp_path / "again.parquet")
    with pytest.raises(ValueError, match="subset it before moving"):
        disk.subset([0, 1])
    with pytest.raises(IndexError, match="position"):
        disk.text_column("premise").texts_at(np.array([len(frame)]))


def test_only_arrow_strings_leave_memory(frame, tmp_path):
    """A text column of Python objects (a JSON or DataFrame input of mixed values) stays in
    the frame: Parquet would give its values back as other texts."""
    frame["note"] = frame["note"].astype(object)
    frame.loc[3, "note"] = 12.5
    disk = load_dataset(frame, name="toy").with_texts_on_disk(tmp_path / "d.parquet")
    assert "note" in disk.frame.columns and "note" not in disk.texts_file.columns
    assert disk.frame["note"].iloc[3] == 12.5


def test_the_run_folder_links_the_file_its_texts_moved_to(frame, tmp_path):
    """A run of the dataset with its texts on disk: dataset.parquet is the moved file (the
    bytes write_dataset writes from the frame in memory), every table the in-memory run's."""
    from aflite_core.pipeline import AuditConfig, run_audit

    memory = load_dataset(frame, name="toy", split="split")
    disk = memory.with_texts_on_disk(tmp_path / "texts.parquet")
    config = AuditConfig(n_partitions=8, measures=("cues", "label_shift"), report=False,
                         representation_params={"n_components": 16})
    a = run_audit(memory, config, runs_root=tmp_path / "runs", name="memory")
    b = run_audit(disk, config, runs_root=tmp_path / "runs", name="disk")
    assert (a / "dataset.parquet").read_bytes() == (b / "dataset.parquet").read_bytes()
    for table in ("scores.parquet", "cues.parquet", "label_shift.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(a / table), pd.read_parquet(b / table),
                                      check_exact=True)
    assert (a / "retained.csv").read_bytes() == (b / "retained.csv").read_bytes()
