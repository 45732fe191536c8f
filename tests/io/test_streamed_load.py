"""The streamed load (``aflite_core.io.load_to_disk``): a folder of shards with
its texts written to disk a shard at a time is the dataset ``load_dataset(...).
with_texts_on_disk(path)`` gives (frame, exclusions, report, groups, texts, the file byte for
byte), with at most one shard's text in memory; data it cannot stream is loaded whole."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from planted import assert_same_dataset, planted_snli_frame

from aflite_core.io._streamed_load import load_to_disk
from aflite_core.io._text_facts import TextFacts
from aflite_core.io.datasets import LINKED_TEXT, DatasetError, DatasetFormatError, load_dataset


def _write_shards(frame: pd.DataFrame, folder: Path, sizes: list[int], fmt: str) -> Path:
    folder.mkdir(parents=True)
    start = 0
    for i, size in enumerate(sizes):
        part = frame.iloc[start:start + size]
        if fmt == "csv":
            part.to_csv(folder / f"part-{i:02d}.csv", index=False)
        else:
            part.to_parquet(folder / f"part-{i:02d}.parquet", index=False)
        start += size
    return folder


@pytest.mark.parametrize("case", [
    # (shard format, options, premises in the pool, single text)
    ("parquet", {}, 2_500, False),           # linked-text groups
    ("csv", {}, 2_500, False),
    ("parquet", {}, 3, False),               # one giant linked group: grouped by the premise
    ("parquet", {"group": ""}, 400, False),  # no groups
    ("parquet", {"id": "pairID"}, 400, False),
    ("parquet", {"group": "pairID", "split": ""}, 400, False),
    ("csv", {}, 0, True),                    # single-text data
])
def test_the_streamed_load_is_the_whole_load_with_its_texts_on_disk(tmp_path, monkeypatch,
                                                                    case):
    import aflite_core.io._streamed_load as streamed_load
    import aflite_core.io._texts_on_disk as texts_on_disk

    # the texts file's row groups a tenth of the product's 65,536 rows, the shards a tenth
    # of the sizes that show the same cuts at the product's size
    monkeypatch.setattr(texts_on_disk, "ROW_GROUP", 6_554)
    monkeypatch.setattr(streamed_load, "ROW_GROUP", 6_554)
    fmt, options, premises, single = case
    frame = planted_snli_frame(7_000, seed=len(str(case)), premises=premises, single=single)
    # shards of uneven sizes: row groups of 6,554 rows span the first shards' ends
    data = _write_shards(frame, tmp_path / "data", [3_000, 2_500, 1, 1_499], fmt)
    streamed = load_to_disk(data, tmp_path / "a.parquet", **options)
    whole = load_dataset(data, **options).with_texts_on_disk(tmp_path / "b.parquet")
    assert (streamed.loaded_by, whole.loaded_by) == ("streamed", "whole")
    assert_same_dataset(streamed, whole)
    # what stays in memory: no text column the audit reads from the file
    on_disk = set(streamed.texts_file.columns)
    assert "sentence2" in on_disk and not on_disk & set(streamed.frame.columns)
    assert ("pairID" in on_disk) == (options.get("group") != "pairID")
    if premises == 3:  # the premise is the group column: kept in memory, as the whole load
        assert streamed.columns.group == "sentence1" and "sentence1" in streamed.frame
    elif premises > 3:
        assert streamed.columns.group == options.get("group", LINKED_TEXT) or \
            (options.get("group") == "" and streamed.columns.group is None)


def test_one_shard_at_a_time(tmp_path):
    """Each shard's table is let go before the next is taken: never two shards' texts."""
    frame = planted_snli_frame(20_000, seed=1, premises=500)
    data = _write_shards(frame, tmp_path / "data", [5_000] * 4, "parquet")
    alive: list[weakref.ref] = []
    held: list[int] = []

    class Reader:
        engine = "test"

        def stream(self, read, paths):
            for path in paths:
                gc.collect()
                held.append(sum(ref() is not None for ref in alive))
                table = read(path)
                alive.append(weakref.ref(table))
                yield table
                del table

    streamed = load_to_disk(data, tmp_path / "a.parquet", map_shards=Reader())
    assert held == [0, 0, 0, 0] and streamed.read_by == "test"
    assert_same_dataset(streamed, load_dataset(data).with_texts_on_disk(tmp_path / "b.parquet"))


def test_data_it_cannot_stream_is_loaded_whole(tmp_path):
    """Multiple-choice data, a per-choice layout and shards whose column types differ:
    loaded whole, the same dataset as ever (one file: tests/io/test_file_pieces.py)."""
    frame = planted_snli_frame(2_000, seed=2, premises=300)
    mixed = _write_shards(frame, tmp_path / "mixed", [1_000, 1_000], "parquet")
    part = frame.iloc[1_000:].assign(score=frame["score"].iloc[1_000:].astype(str))
    part.to_parquet(mixed / "part-01.parquet", index=False)  # numbers, then texts
    streamed = load_to_disk(mixed, tmp_path / "2.parquet")
    assert streamed.loaded_by == "whole" and not (tmp_path / "2.parquet.tmp").exists()
    assert_same_dataset(streamed, load_dataset(mixed).with_texts_on_disk(tmp_path / "2b.parquet"))

    rng = np.random.default_rng(3)
    per_choice = pd.DataFrame({
        "question_id": np.repeat(np.arange(500), 4).astype(str),
        "context": np.repeat([f"context {i}" for i in range(500)], 4),
        "hypothesis": [f"choice {i}" for i in range(2000)],
        "label": np.where(np.arange(2000) % 4 == rng.integers(0, 4, 2000), 1, 0)})
    per_choice.loc[::4, "label"] = 1
    per_choice.loc[per_choice.index % 4 != 0, "label"] = 0
    folder = _write_shards(per_choice, tmp_path / "pc", [1000, 1000], "parquet")
    streamed = load_to_disk(folder, tmp_path / "3.parquet")
    assert streamed.loaded_by == "whole" and streamed.report.n_questions == 500
    assert_same_dataset(streamed, load_dataset(folder).with_texts_on_disk(tmp_path / "3b.parquet"))

    mc = pd.DataFrame({"ctx": [f"c{i}" for i in range(100)], "A": ["a"] * 100,
                       "B": [f"b{i}" for i in range(100)], "answer": ["A", "B"] * 50})
    folder = _write_shards(mc, tmp_path / "mc", [50, 50], "csv")
    streamed = load_to_disk(folder, tmp_path / "4.parquet", choices=["A", "B"],
                            answer="answer", premise="ctx")
    assert streamed.loaded_by == "whole" and len(streamed) == 200


def test_errors_leave_no_file(tmp_path):
    """A shard with other columns is refused, naming it; rows all excluded are refused as by
    the whole load; neither leaves the texts file behind."""
    frame = planted_snli_frame(3_000, seed=4, premises=300)
    data = _write_shards(frame, tmp_path / "data", [1_000, 1_000, 1_000], "parquet")
    frame.iloc[:10].rename(columns={"gold_label": "gold"}).to_parquet(
        data / "part-02.parquet", index=False)
    with pytest.raises(DatasetFormatError, match="shard 'part-02.parquet' has other columns"):
        load_to_disk(data, tmp_path / "a.parquet")
    assert not (tmp_path / "a.parquet").exists()

    empty = _write_shards(frame.assign(gold_label="-"), tmp_path / "dash", [1_500, 1_500],
                          "parquet")
    with pytest.raises(DatasetError, match="no rows left to audit") as streamed:
        load_to_disk(empty, tmp_path / "b.parquet")
    with pytest.raises(DatasetError) as whole:
        load_dataset(empty)
    assert str(streamed.value) == str(whole.value)
    assert not (tmp_path / "b.parquet").exists()


def test_text_facts_of_shards_joined_are_the_facts_of_the_column():
    """Each fact is a per-row value: the shards' facts joined equal the whole column's."""
    column = pd.Series(["A b", None, "  ", "x", "A   B", "é!"] * 50, dtype="str")
    whole = TextFacts.of(column, trim="left")
    parts = [TextFacts.of(column.iloc[i:i + 70].reset_index(drop=True), trim="left").computed()
             for i in range(0, len(column), 70)]
    joined = TextFacts.concat(parts)
    for name in ("missing", "blank", "lengths", "hashes", "normalised"):
        np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name))
    np.testing.assert_array_equal(joined.hashes_apart(), whole.hashes_apart())
    assert joined.blank[:4].tolist() == [False, True, True, False]
    assert whole.hashes[0] != whole.hashes[4] and whole.normalised[0] == whole.normalised[4]
    with pytest.raises(ValueError, match="the same facts and trim"):
        TextFacts.concat([parts[0], TextFacts.of(column, trim="right").computed()])
    with pytest.raises(KeyError, match="neither given"):
        TextFacts(arrays={"missing": whole.missing}).hashes  # noqa: B018
