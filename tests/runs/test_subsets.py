"""Named subsets of a run (``subsets/NAME.parquet``): save, list, load, overwrite, bad
names, and the CLI export of a subset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from aflite_core.cli import main
from aflite_core.io.datasets import load_dataset
from aflite_core.runs._writer import write_run
from aflite_core.runs.folder import load_run
from aflite_core.runs.subsets import (
    METADATA_KEY,
    SUBSETS_DIR,
    delete_subset,
    list_subsets,
    load_subset,
    save_subset,
)
from ui import filters

SNLI = Path(__file__).parents[1] / "data" / "snli"


def _small_csv(tmp_path: Path) -> Path:
    rows = pd.DataFrame({
        "premise": [f"a man number {i} walks" for i in range(12)],
        "hypothesis": [f"=cmd {i}" if i == 3 else f"someone {i} moves" for i in range(12)],
        "label": ["entailment", "neutral", "contradiction"] * 4,
    })
    path = tmp_path / "small.csv"
    rows.to_csv(path, index=False)
    return path


@pytest.fixture
def run_path(tmp_path: Path) -> Path:
    dataset = load_dataset(_small_csv(tmp_path))
    frame = dataset.frame
    n = len(frame)
    status = np.array(["retained", "removed"] * (n // 2), dtype=object)
    scores = pd.DataFrame({
        "row_id": frame.index.to_numpy(), "status": status,
        "predictability": np.linspace(0, 1, n),
        "removal_round": np.where(status == "removed", 1, -1).astype(np.int64),
        "label": dataset.labels(False),
    })
    summary = {"input": {"name": dataset.name, "sha256": dataset.content_hash,
                         "columns": dataset.columns.to_dict()}}
    return write_run(tmp_path / "runs", "r", frame=frame, scores=scores, summary=summary)


def test_save_list_load_round_trip(run_path: Path) -> None:
    run = load_run(run_path)
    ids = run.scores["row_id"].to_numpy()
    picked = [ids[5], ids[1], ids[1], ids[9]]  # any order, a duplicate
    flt = filters.RowFilter(labels=["neutral"], label_column="label", search="moves",
                            predictability=(0.25, 1.0))
    saved = save_subset(run_path, "neutral-moves", picked,
                        filter={"row_filter": filters.to_dict(flt), "view": "all"})
    assert saved.path == run_path / SUBSETS_DIR / "neutral-moves.parquet"
    assert saved.n_rows == 3 and saved.run == "r" and saved.created.endswith("Z")
    # members in input order with their scores
    rows = saved.rows()
    assert rows["row_id"].tolist() == [ids[1], ids[5], ids[9]]
    expected = run.scores.set_index("row_id").loc[rows["row_id"]]
    assert rows["status"].tolist() == expected["status"].tolist()
    np.testing.assert_allclose(rows["predictability"], expected["predictability"])
    # the filter is stored as JSON metadata, and reads back as the same RowFilter
    loaded = load_subset(run_path, "neutral-moves")
    back = filters.from_dict(loaded.filter["row_filter"])
    assert filters.to_dict(back) == filters.to_dict(flt)
    assert back.labels == ["neutral"] and back.predictability == (0.25, 1.0)
    assert METADATA_KEY in pq.read_schema(saved.path).metadata
    assert [s.name for s in list_subsets(run_path)] == ["neutral-moves"]
    # the run itself is untouched: it still loads and lists no new artifact
    assert "subsets" not in " ".join(load_run(run_path).artifacts)


def test_empty_subset_and_listing_order(run_path: Path) -> None:
    save_subset(run_path, "b", [])
    ids = load_run(run_path).scores["row_id"].tolist()
    save_subset(run_path, "a", ids[:2])
    assert [(s.name, s.n_rows) for s in list_subsets(run_path)] == [("a", 2), ("b", 0)]
    delete_subset(run_path, "b")
    assert [s.name for s in list_subsets(run_path)] == ["a"]


def test_overwrite_is_refused_unless_asked(run_path: Path) -> None:
    ids = load_run(run_path).scores["row_id"].tolist()
    save_subset(run_path, "hard", ids[:3])
    with pytest.raises(FileExistsError, match="already exists"):
        save_subset(run_path, "hard", ids[:5])
    assert load_subset(run_path, "hard").n_rows == 3
    save_subset(run_path, "hard", ids[:5], overwrite=True)
    assert load_subset(run_path, "hard").n_rows == 5
    # no temporary files left behind
    assert [p.name for p in (run_path / SUBSETS_DIR).iterdir()] == ["hard.parquet"]


@pytest.mark.parametrize("name", ["../escape", "a/b", "", ".hidden", "-opt", "two words",
                                  "x" * 200, "a..b"])
def test_bad_names_are_refused_with_the_reason(run_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="subset name"):
        save_subset(run_path, name, [])
    assert not (run_path / SUBSETS_DIR).exists() or not any((run_path / SUBSETS_DIR).iterdir())
    assert not (run_path.parent / "escape.parquet").exists()


def test_unknown_rows_and_missing_subsets(run_path: Path) -> None:
    with pytest.raises(ValueError, match="not in this run"):
        save_subset(run_path, "x", [10_000])
    save_subset(run_path, "kept", [])
    with pytest.raises(FileNotFoundError, match="saved subsets: kept"):
        load_subset(run_path, "other")


def test_cli_exports_a_subset(run_path: Path, tmp_path: Path, capsys) -> None:
    run = load_run(run_path)
    ids = run.scores["row_id"].tolist()
    save_subset(run_path, "three", [ids[3], ids[4], ids[7]])
    out = tmp_path / "three.csv"
    assert main(["export", str(run_path), "--subset", "three", "--what", "all",
                 "--out", str(out)]) == 0
    assert "wrote 3 rows" in capsys.readouterr().err
    exported = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert exported["row_id"].tolist() == [str(i) for i in (ids[3], ids[4], ids[7])]
    assert exported["hypothesis"].iloc[0] == "'=cmd 3"  # spreadsheet-safe as any export
    # only the removed rows of the subset, as Parquet
    removed = tmp_path / "three.parquet"
    assert main(["export", str(run_path), "--subset", "three", "--what", "removed",
                 "--out", str(removed)]) == 0
    table = pd.read_parquet(removed)
    assert set(table["status"]) == {"removed"} and len(table) == 2
    # unknown subset, and --rows with --subset: usage errors naming the problem
    assert main(["export", str(run_path), "--subset", "nope", "--what", "all",
                 "--out", str(tmp_path / "n.csv")]) != 0
    assert "subset 'nope' not found" in capsys.readouterr().err
    rows_file = tmp_path / "ids.txt"
    rows_file.write_text(f"{ids[0]}\n")
    assert main(["export", str(run_path), "--subset", "three", "--rows", str(rows_file),
                 "--what", "all", "--out", str(tmp_path / "m.csv")]) != 0
    assert "not both" in capsys.readouterr().err


def test_row_filter_json_round_trip() -> None:
    flt = filters.RowFilter(statuses=["removed"], labels=["neutral"], label_column="label",
                            predictability=(0.5, 0.9), rounds=(2, 3), search="dog",
                            regex=True, case=True, whole_word=True,
                            search_columns=["premise", "hypothesis"], row_ids=["1", "2"],
                            ranges={"pvi": (0.5, 2.0)}, values={"split": ["dev"]})
    import json

    back = filters.from_dict(json.loads(json.dumps(filters.to_dict(flt))))
    assert filters.to_dict(back) == filters.to_dict(flt)
    assert (back.rounds, back.ranges, back.values) == ((2, 3), {"pvi": (0.5, 2.0)},
                                                       {"split": ["dev"]})
    assert filters.to_dict(filters.RowFilter()) == {}
    with pytest.raises(ValueError, match="unknown key"):
        filters.from_dict({"colour": "red"})


def test_a_name_too_long_once_saved_is_a_plain_refusal(run_path: Path) -> None:
    """120 x 'é' passes the name rule (240 bytes, 248 with .parquet, and the temporary name
    is cut to fit); 83 x '字' (249 bytes: a fine run name) would make a 257-byte file name
    with the suffix: refused, saying the limit, with no server path."""
    from aflite_core.runs import subsets

    run = run_path
    ids = load_run(run).scores["row_id"].tolist()[:2]
    saved = subsets.save_subset(run, "é" * 120, ids, filter={})
    assert saved.n_rows == 2 and subsets.load_subset(run, "é" * 120).n_rows == 2
    with pytest.raises(ValueError, match="at most 255") as err:
        subsets.save_subset(run, "字" * 83, ids, filter={})
    assert str(run) not in str(err.value) and "bytes in UTF-8" in str(err.value)
