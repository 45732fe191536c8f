"""AppTest: the Review page (issue 62, item 1): a queue of label issues lowest quality
first, one row at a time with its label, suggested label, scores and map neighbours;
keep / drop / relabel / skip / undo saved to the run at once; progress; other queues; the
curated CSV download."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from apptest_support import goto, new_app, open_run, plain, texts

from aflite_core.io.datasets import load_dataset
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.runs.folder import load_run
from aflite_core.runs.review import review_queue

SAMPLE = Path(__file__).resolve().parents[2] / "aflite_core" / "data" / "snli_sample.csv"


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("review")
    data = folder / "small.csv"
    pd.read_csv(SAMPLE).head(900).to_csv(data, index=False)
    config = AuditConfig(target_size=600, n_partitions=8, random_state=0, report=False,
                         measures=("projection", "label_issues", "slices"),
                         measure_params={"projection": {"method": "pca"}})
    return run_audit(load_dataset(data), config, runs_root=folder / "runs", name="r")


def _button(at, key_end: str):
    return next(b for b in at.button if str(b.key).endswith(key_end))


def _review_page(audited: Path, tmp_path: Path, monkeypatch) -> tuple[object, Path]:
    """A session on the Review page of a copy of the audited run (the copy's folder too)."""
    root = tmp_path / "runs"
    shutil.copytree(audited, root / "r")
    monkeypatch.setenv("AFLITE_RUNS_DIR", str(root))
    at = new_app(autoload=False)
    open_run(at, root / "r")
    goto(at, "review")
    return at, root / "r"


def test_review_a_queue_row_by_row(audited, tmp_path, monkeypatch):
    at, run_dir = _review_page(audited, tmp_path, monkeypatch)
    run = load_run(run_dir)
    queue = review_queue(run, "label_issues")
    assert not at.exception, [e.message for e in at.exception]
    shown = plain(texts(at))
    assert f"Reviewed 0 of {len(queue):,}" in plain(at.get("progress")[0].proto.text)
    first = load_run(run_dir).score_columns(["row_id", "label"]).set_index("row_id")
    assert first.loc[queue[0], "label"] in shown or any(
        first.loc[queue[0], "label"] == m.value for m in at.metric)
    at.text_input(key="review:reviewer").input("ana").run()
    _button(at, ":keep").click().run()  # row 1 kept
    _button(at, ":drop").click().run()  # row 2 dropped
    labels = sorted(run.score_columns(["label"])["label"].unique())
    third_label = first.loc[queue[2], "label"]
    other = next(i for i, lab in enumerate(labels) if lab != third_label)
    _button(at, f":relabel:{other}").click().run()  # row 3 relabelled
    _button(at, ":skip").click().run()  # row 4 skipped: no decision
    _button(at, ":drop").click().run()  # row 5 dropped ...
    _button(at, ":undo_button").click().run()  # ... and taken back
    assert not at.exception, [e.message for e in at.exception]
    force = load_run(run_dir).decisions().set_index("row_id")
    assert list(force.index) == list(queue[:3])
    assert force["decision"].tolist() == ["keep", "drop", "relabel"]
    assert force.loc[queue[2], "label"] == labels[other]
    assert set(force["reviewer"]) == {"ana"}
    assert "Reviewed 3 of" in plain(at.get("progress")[0].proto.text)
    _button(at, ":previous").click().run()
    assert "row 5 of" in plain(at.get("progress")[0].proto.text)
    # another queue: the removed rows, most predictable first
    at.selectbox(key="review:source").select("removed").run()
    assert not at.exception, [e.message for e in at.exception]
    at.selectbox(key="review:source").select("slice").run()
    assert not at.exception, [e.message for e in at.exception]
    # the curated dataset, downloaded from the page, applies the decisions
    _button(at, ":prepare").click().run()
    data = at.session_state["review:curated"]
    curated = pd.read_csv(pd.io.common.BytesIO(data))
    assert len(curated) == 900 - 1
    original = pd.read_csv(SAMPLE).head(900)
    assert list(curated.columns) == list(original.columns)
    position = int(load_run(run_dir).score_columns(["row_id"])["row_id"].tolist().index(
        queue[2]))
    assert curated.set_index("id").loc[original.loc[position, "id"], "label"] == labels[other]


def test_a_bulk_action_is_offered_only_with_measured_precision(audited, tmp_path, monkeypatch):
    at, run_dir = _review_page(audited, tmp_path, monkeypatch)
    run = load_run(run_dir)
    queue = review_queue(run, "label_issues")
    run.decide(list(queue[:20]), "drop")
    at.run()
    assert "After 30 reviews in this queue (20 so far)" in plain(texts(at))
    assert not [b for b in at.button if str(b.key).endswith(":bulk:drop")]
    run.decide(list(queue[20:30]), "keep")
    at.run()
    shown = plain(texts(at))
    rest = len(queue) - 30
    assert f"**Drop** all {rest:,}: you dropped 67% of the 30 rows reviewed here" in shown
    assert "95 % interval 49%-81%" in shown  # Wilson's, for 20 of 30
    _button(at, ":bulk:drop").click().run()
    assert not at.exception, [e.message for e in at.exception]
    force = load_run(run_dir).decisions()
    assert len(force) == len(queue) and (force["decision"] == "drop").sum() == len(queue) - 10


def test_the_rows_selected_on_the_map_are_a_queue(audited, tmp_path, monkeypatch):
    """A box, a lasso or a region's ◇ on Explore's map selects rows; Review offers them."""
    from ui import state

    at, run_dir = _review_page(audited, tmp_path, monkeypatch)
    ids = load_run(run_dir).score_columns(["row_id"])["row_id"].tolist()
    picked = [ids[40], ids[7], ids[300]]
    assert "selection" not in at.selectbox(key="review:source").options
    at.session_state[state.EXPLORE_SELECTION] = picked
    at.run()
    box = at.selectbox(key="review:source")
    assert box.options[0].startswith("The 3 rows selected on Explore")  # offered first
    box.select("selection").run()
    assert "Reviewed 0 of 3" in plain(at.get("progress")[0].proto.text)
    _button(at, ":drop").click().run()
    assert load_run(run_dir).decisions()["row_id"].tolist() == [ids[7]]  # input order
