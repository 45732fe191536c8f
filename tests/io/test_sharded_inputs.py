"""Inputs the ecosystem uses: folders and globs of shards, Hugging Face ``datasets`` folders
(``save_to_disk``) and objects, and columns the audit cannot hold (issue 27, item 1).

The ``datasets`` fixtures are written by the ``datasets`` package itself
(``requirements-datasets.txt``, part of the test requirements), from real SNLI rows.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aflite_core.cli import main
from aflite_core.io.datasets import DatasetError, load_dataset, read_table
from aflite_core.io.shards import ROOTS_VARIABLE, allowed_roots, source_stamp

datasets = pytest.importorskip("datasets", reason="requirements-datasets.txt")
NAMES = ["entailment", "neutral", "contradiction"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def snli(snli_dir) -> pd.DataFrame:
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).head(1200)
    return frame[["premise", "hypothesis", "label"]].reset_index(drop=True)


def _hf(frame: pd.DataFrame, **extra) -> object:
    """A datasets.Dataset with a ClassLabel label (-1 for the first row: "no gold label")."""
    codes = frame["label"].map({n: i for i, n in enumerate(NAMES)}).to_numpy().copy()
    codes[0] = -1
    data = {"premise": frame["premise"].tolist(), "hypothesis": frame["hypothesis"].tolist(),
            "label": codes.tolist(), **extra}
    features = datasets.Features({
        "premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
        "label": datasets.ClassLabel(names=NAMES),
        **{k: (datasets.Value("binary") if isinstance(v[0], bytes)
               else datasets.Sequence(datasets.Value("float32"))) for k, v in extra.items()}})
    return datasets.Dataset.from_dict(data, features=features)


def test_a_datasets_folder_reads_labels_by_name_and_drops_image_bytes(snli, tmp_path):
    n = len(snli)
    image = [bytes([0xFF, 0xD8, i % 256]) for i in range(n)]  # JPEG-like: not UTF-8
    vector = [[0.1, float(i)] for i in range(n)]
    _hf(snli, image=image, vector=vector).save_to_disk(str(tmp_path / "snli_hf"))
    ds = load_dataset(str(tmp_path / "snli_hf"))
    assert ds.columns.premise == "premise" and ds.columns.label == "label"
    assert list(ds.frame.columns) == ["premise", "hypothesis", "label"]
    # ClassLabel ints read as names; -1 ("no gold label") is excluded, not a fourth label
    assert ds.report.n_read == n and ds.report.n_included == n - 1
    assert list(ds.labels()) == list(snli["label"].iloc[1:])
    warnings = " | ".join(ds.report.warnings)
    assert "column 'image' holds binary data that is not UTF-8 text" in warnings
    assert "column 'vector' holds nested values" in warnings
    assert "'label' is a ClassLabel" in warnings
    # a role naming a dropped column gets the reason, not "no such column"
    with pytest.raises(DatasetError, match="'image' holds binary data that is not UTF-8"):
        load_dataset(str(tmp_path / "snli_hf"), hypothesis="image")
    # max_bytes bounds the Arrow files as for any input
    with pytest.raises(DatasetError, match=r"the 1 data files hold [\d,]+ bytes on disk, "
                                           r"over the limit of 1,000"):
        load_dataset(str(tmp_path / "snli_hf"), max_bytes=1000)


def test_a_dataset_dict_folder_becomes_one_table_with_its_keys_as_the_split(snli, tmp_path):
    whole = _hf(snli)
    datasets.DatasetDict({"train": whole.select(range(1000)),
                          "test": whole.select(range(1000, len(snli)))}).save_to_disk(
        str(tmp_path / "dd"))
    ds = load_dataset(str(tmp_path / "dd"))
    assert ds.columns.split == "split"
    assert ds.splits(included_only=False).tolist() == ["train"] * 1000 + ["test"] * 200
    assert ds.hypotheses(included_only=False) == snli["hypothesis"].tolist()
    # the same DatasetDict in memory reads the same rows
    again = load_dataset(datasets.load_from_disk(str(tmp_path / "dd")), name="dd")
    pd.testing.assert_frame_equal(again.frame.reset_index(drop=True),
                                  ds.frame.reset_index(drop=True), check_dtype=False)


def test_parquet_shards_by_folder_or_glob_keep_every_row_in_name_order(snli, tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    for i in range(3):  # row i goes to shard i % 3: order across shards is by name
        snli.iloc[i::3].to_parquet(folder / f"part-{i:05d}.parquet", index=False)
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-00000.parquet.crc").write_bytes(b"\x00")
    expected = pd.concat([snli.iloc[i::3] for i in range(3)], ignore_index=True)
    for source in (folder, str(folder / "part-*.parquet")):
        raw = read_table(source)
        assert raw.shards == [f"part-{i:05d}.parquet" for i in range(3)]
        pd.testing.assert_frame_equal(raw.frame, expected, check_dtype=False)
        # a row's location names its shard
        assert raw.where(400) == "part-00001.parquet, record 1"
    ds = load_dataset(folder)
    assert ds.name == "shards" and ds.report.n_included == len(snli)


def test_csv_and_jsonl_shards_locate_rows_by_shard_and_line(snli, tmp_path):
    for i, part in enumerate(np.array_split(np.arange(len(snli)), 2)):
        text = snli.iloc[part].to_csv(index=False).encode()
        (tmp_path / f"train-{i}.csv.gz").write_bytes(gzip.compress(text))
    raw = read_table(str(tmp_path / "train-*.csv.gz"))
    assert len(raw.frame) == len(snli)
    assert raw.where(600) == "train-1.csv.gz, line 2"  # the header is line 1


def test_the_cli_audits_a_folder_of_shards(snli, tmp_path, capsys):
    folder = tmp_path / "snli_parts"
    folder.mkdir()
    for i in range(2):
        snli.iloc[i::2].to_parquet(folder / f"part-{i}.parquet", index=False)
    out = tmp_path / "runs" / "sharded"
    assert main(["run", str(folder), "--out", str(out), "--quiet",
                 "--measures", "cues"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input"]["name"] == "snli_parts"
    assert summary["input"]["n_rows"] == len(snli)


# ------------------------------------------------------------------------ bad input


def test_a_shard_with_other_columns_is_refused_naming_it(snli, tmp_path):
    snli.iloc[:600].to_parquet(tmp_path / "a.parquet", index=False)
    snli.iloc[600:].rename(columns={"label": "gold"}).to_parquet(tmp_path / "b.parquet",
                                                                  index=False)
    with pytest.raises(DatasetError, match=r"shard 'b.parquet' has other columns than "
                                           r"'a.parquet' \(missing 'label'; extra 'gold'\)"):
        load_dataset(tmp_path)


def test_mixed_formats_empty_folders_and_empty_globs_are_refused_saying_what_was_expected(
        snli, tmp_path):
    snli.to_parquet(tmp_path / "a.parquet", index=False)
    snli.to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(DatasetError, match=r"the shards mix formats: csv \('b.csv'\), "
                                           r"parquet \('a.parquet'\)"):
        load_dataset(tmp_path)
    empty = tmp_path / "empty"
    (empty / "year=2024").mkdir(parents=True)
    (empty / "notes.txt").write_text("hello")
    with pytest.raises(DatasetError, match="expected shard files .* or a Hugging Face "
                                           "datasets folder .*subfolders \\('year=2024'\\)"):
        load_dataset(empty)
    with pytest.raises(DatasetError, match="matches no data file"):
        load_dataset(str(tmp_path / "nothing-*.parquet"))
    assert main(["run", str(empty), "--out", str(tmp_path / "r"), "--quiet"]) != 0
    assert not (tmp_path / "r").exists()


def test_an_unused_binary_column_that_is_not_text_no_longer_refuses_a_parquet_file(
        snli, tmp_path):
    table = pa.Table.from_pandas(snli, preserve_index=False).append_column(
        "thumbnail", pa.array([b"\x89PNG\xff" + bytes([i % 256]) for i in range(len(snli))],
                              pa.binary()))
    pq.write_table(table, tmp_path / "with_images.parquet")
    ds = load_dataset(tmp_path / "with_images.parquet")
    assert "thumbnail" not in ds.frame.columns and ds.report.n_included == len(snli)
    assert any("'thumbnail' holds binary data that is not UTF-8 text" in w
               for w in ds.report.warnings)


def test_server_paths_can_be_limited_to_folders(snli, tmp_path, monkeypatch):
    inside = tmp_path / "data"
    inside.mkdir()
    snli.to_parquet(inside / "a.parquet", index=False)
    stamp = source_stamp(str(inside))
    (inside / "b.parquet").write_bytes((inside / "a.parquet").read_bytes())
    assert source_stamp(str(inside)) != stamp  # an added shard changes the cache key
    monkeypatch.setenv(ROOTS_VARIABLE, str(inside))
    assert allowed_roots() == [inside.resolve()]
    assert source_stamp(str(inside / "*.parquet"), roots=allowed_roots())
    with pytest.raises(PermissionError, match="outside the folders this server reads"):
        source_stamp(str(tmp_path), roots=allowed_roots())
    outside = tmp_path / "secret.parquet"
    outside.write_bytes((inside / "a.parquet").read_bytes())
    (inside / "link.parquet").symlink_to(outside)  # a link leading out is refused too
    with pytest.raises(ValueError, match="'link.parquet' is a symbolic link to a file outside"):
        source_stamp(str(inside / "*.parquet"), roots=allowed_roots())
    with pytest.raises(FileNotFoundError, match="no such file, folder or matching shard"):
        source_stamp(str(inside / "missing-*.csv"))


def test_a_datasets_folder_is_streamed_a_piece_at_a_time(snli, tmp_path, monkeypatch):
    """The streamed load takes a Dataset or DatasetDict folder a piece at a time: the same
    dataset (labels by name, dropped columns and their notices, the split column, row
    locations) and texts file as the whole load; never loaded whole."""
    from planted import assert_same_dataset

    import aflite_core.io._hf_pieces as hf_pieces
    from aflite_core.io._streamed_load import load_to_disk

    monkeypatch.setattr(hf_pieces, "PIECE_ROWS", 300)  # several pieces of 1,200 rows
    n = len(snli)
    image = [bytes([0xFF, 0xD8, i % 256]) for i in range(n)]
    whole = _hf(snli, image=image, vector=[[0.1, float(i)] for i in range(n)])
    whole.save_to_disk(str(tmp_path / "one"), max_shard_size="100KB")  # several Arrow files
    datasets.DatasetDict({"train": whole.select(range(1000)),
                          "test": whole.select(range(1000, n))}).save_to_disk(
        str(tmp_path / "dd"))
    for folder in ("one", "dd"):
        streamed = load_to_disk(tmp_path / folder, tmp_path / f"{folder}.parquet")
        loaded = load_dataset(tmp_path / folder).with_texts_on_disk(tmp_path / f"{folder}.b")
        assert streamed.loaded_by == "streamed", streamed.loaded_whole_because
        assert_same_dataset(streamed, loaded)
    assert streamed.columns.split == "split" and "'image'" in " ".join(
        load_to_disk(tmp_path / "one", tmp_path / "again.parquet").report.warnings)


def test_the_curated_export_of_a_datasets_folder_is_a_datasets_folder(snli, tmp_path):
    """Issue 62, item 4: a run of a DatasetDict folder writes its curated rows as a datasets
    folder by default (the audit records the format it read), with the same splits and
    features, a dropped row left out; a CSV input's default stays CSV."""
    from aflite_core.cli import main
    from aflite_core.pipeline import AuditConfig, run_audit
    from aflite_core.runs import load_run

    whole = _hf(snli)
    datasets.DatasetDict({"train": whole.select(range(1000)),
                          "test": whole.select(range(1000, len(snli)))}).save_to_disk(
        str(tmp_path / "dd"))
    run_dir = run_audit(load_dataset(str(tmp_path / "dd")), AuditConfig(
        n_partitions=4, measures=(), report=False), runs_root=tmp_path / "runs")
    run = load_run(run_dir)
    assert run.input["format"] == "arrow"
    first = run.score_columns(["row_id"])["row_id"].iloc[0]
    run.decide([first], "drop")
    assert main(["export", str(run_dir), "--what", "curated", "--out",
                 str(tmp_path / "curated")]) == 0
    back = datasets.load_from_disk(str(tmp_path / "curated"))
    assert sorted(back) == ["test", "train"]
    assert back["train"].num_rows == 999 and back["test"].num_rows == 200
    assert set(back["train"].column_names) == set(whole.column_names) - {"split"}
