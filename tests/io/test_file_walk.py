"""Folder walks and globs stay inside their folder, visit nothing twice and stop
(``aflite_core.io._file_walk``; issue 60 item 2), and the readers of a folder use them."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pandas as pd
import pytest

from aflite_core.errors import DatasetFormatError
from aflite_core.io import _file_walk as file_walk
from aflite_core.io._file_walk import MAX_WALK_ENTRIES, glob_files, walk_files
from aflite_core.io.datasets import load_dataset
from aflite_core.io.shards import source_stamp


def _tree(root: Path) -> Path:
    for name in ("x.csv", "a/y.csv", "a/b/z.csv", "c/w.tsv", ".h/q.csv", ".hid.csv"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("premise,hypothesis,label\n")
    return root


@pytest.mark.parametrize("pattern", ["**/*.csv", "*.csv", "*/*.csv", "**", "a/*", "**/b/*.csv",
                                     "[ax]*", "a/**/*.csv", "?.csv"])
def test_globs_match_what_glob_matches_on_a_tree_without_links(pattern, tmp_path):
    root = _tree(tmp_path / "t")
    expected = sorted(Path(p) for p in glob.glob(str(root / pattern), recursive=True)
                      if os.path.isfile(p))
    assert glob_files(str(root / pattern), name="t") == expected


def test_links_to_folders_are_not_followed_and_nothing_is_met_twice(tmp_path):
    root = _tree(tmp_path / "t")
    (root / "a" / "loop").symlink_to(root)  # two links back to the top
    (root / "c" / "loop2").symlink_to(root / "a")
    found = glob_files(str(root / "**" / "*.csv"), name="t")
    assert found == sorted([root / "x.csv", root / "a" / "y.csv", root / "a" / "b" / "z.csv"])
    assert len(walk_files(root, name="t")) == 6  # hidden files too: a folder's whole content


def test_a_link_to_a_file_inside_is_read_but_a_second_name_for_it_is_refused(tmp_path):
    root = _tree(tmp_path / "t")
    (root / "alias.csv").symlink_to(root / "a" / "y.csv")
    with pytest.raises(DatasetFormatError, match="'a/y.csv' is the same file as 'alias.csv'"):
        walk_files(root, name="t")
    (root / "alias.csv").unlink()
    (root / "out.csv").symlink_to(tmp_path / "elsewhere.csv")
    (tmp_path / "elsewhere.csv").write_text("x\n")
    with pytest.raises(DatasetFormatError, match="'out.csv' is a symbolic link to a file "
                                                 "outside 't'"):
        glob_files(str(root / "*.csv"), name="t")


def test_a_walk_stops_with_a_message_past_its_entries(tmp_path, monkeypatch):
    root = _tree(tmp_path / "t")
    with pytest.raises(DatasetFormatError, match="more than 5 entries looked at under 't'"):
        walk_files(root, name="t", max_entries=5)
    monkeypatch.setattr(file_walk, "MAX_WALK_ENTRIES", 3)
    with pytest.raises(DatasetFormatError, match="more than 3 entries"):
        glob_files(str(root / "**" / "*.csv"), name="t", max_entries=file_walk.MAX_WALK_ENTRIES)
    assert MAX_WALK_ENTRIES == 200_000  # the documented number (docs/hostile-inputs.md)


def test_a_folder_met_twice_is_a_cycle(tmp_path, monkeypatch):
    """A bind mount of a folder into itself cannot be made here: the same folder under two
    names (as a mount shows it) is planted by giving two paths one identity."""
    root = _tree(tmp_path / "t")
    real_stat = Path.stat

    def stat(self, *args, **kwargs):
        info = real_stat(self, *args, **kwargs)
        if self.name == "b":  # a/b is the top folder again
            return real_stat(root)
        return info

    monkeypatch.setattr(Path, "stat", stat)
    with pytest.raises(DatasetFormatError, match="met the folder 'a/b' twice"):
        walk_files(root, name="t")


def test_the_stamp_and_the_loader_walk_the_same_way(tmp_path):
    data = tmp_path / "shards"
    data.mkdir()
    frame = pd.DataFrame({"premise": ["p a", "p b"] * 10, "hypothesis": ["h a", "h b"] * 10,
                          "label": ["x", "y"] * 10})
    frame.to_csv(data / "a.csv", index=False)
    (data / "self").symlink_to(data)
    assert source_stamp(str(data / "**" / "*.csv"))
    assert len(load_dataset(str(data / "**" / "*.csv")).frame) == 20


def test_shards_that_type_an_unused_column_differently_are_joined_as_text(tmp_path):
    data = tmp_path / "shards"
    data.mkdir()
    frame = pd.DataFrame({"premise": ["p a", "p b"] * 10, "hypothesis": ["h a", "h b"] * 10,
                          "label": ["x", "y"] * 10, "score": range(20)})
    frame.iloc[:10].to_parquet(data / "a.parquet", index=False)
    frame.iloc[10:].assign(score=[f"s{i}" for i in range(10)]).to_parquet(
        data / "b.parquet", index=False)
    dataset = load_dataset(data)
    scores = dataset.frame["score"].tolist()
    assert scores[:3] == ["0", "1", "2"] and scores[-1] == "s9"
    assert any("column 'score' holds numbers in shard 'a.parquet' but text in shard "
               "'b.parquet'" in w for w in dataset.report.warnings)
    with pytest.raises(DatasetFormatError, match="column 'score' holds numbers"):
        load_dataset(data, label="score")
