"""Run folders are checked before they are believed (``aflite_core/runs/_checks.py``): a
damaged summary or scores table is refused with a message that names the run and the
value, in the API, every command (exit 2) and the dashboard; ``list_runs`` lists such a
folder as damaged and never raises."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from aflite_core.cli import main
from aflite_core.config import AuditConfig
from aflite_core.io.datasets import load_dataset
from aflite_core.pipeline import run_audit
from aflite_core.runs.folder import RunError, list_runs, load_run

SNLI = Path(__file__).parents[1] / "data" / "snli" / "snli_dev.csv"


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    frame = pd.read_csv(SNLI, dtype=str, keep_default_na=False).head(400)
    config = AuditConfig(representation_params={"n_components": 16}, n_partitions=4,
                         measures=("label_shift",), report=False)
    return run_audit(load_dataset(frame, name="snli400.csv"), config,
                     runs_root=tmp_path_factory.mktemp("good"), name="good")


def _damaged(good_run: Path, tmp_path: Path, change) -> Path:
    run = tmp_path / "runs" / "r"
    shutil.copytree(good_run, run)
    summary = json.loads((run / "summary.json").read_text())
    change(summary, run)
    (run / "summary.json").write_text(json.dumps(summary))
    return run


def _set(path: str, value):
    def change(summary, run):
        *parents, last = path.split(".")
        node = summary
        for key in parents:
            node = node[key]
        node[last] = value
    return change


def _empty_scores(summary, run):
    scores = pd.read_parquet(run / "scores.parquet")
    scores.head(0).to_parquet(run / "scores.parquet")


CASES = [
    (_set("parameters", [1, 2]), "summary.json: parameters is a list (expected an object)"),
    (_set("sizes.retained", -5), "summary.json: sizes.retained is -5 (expected a whole "
                                 "number >= 0)"),
    (_set("sizes.input", "many"), "summary.json: sizes.input is a string"),
    (_set("sizes.removed", 1e400), "summary.json: sizes.removed is a number"),
    (_set("sizes.removed", 3), "sizes do not add up"),
    (_set("labels.before", [["a", 1]]), "summary.json: labels.before is a list"),
    (_set("measures.label_shift", "ok"), "summary.json: measures.label_shift is a string"),
    (_empty_scores, "scores.parquet has 0 rows, but summary.json says input is 400"),
]


@pytest.mark.parametrize("change, message", CASES)
def test_a_damaged_run_is_refused_by_name_and_listed_as_damaged(good_run, tmp_path, change,
                                                                message, capsys):
    run = _damaged(good_run, tmp_path, change)
    with pytest.raises(RunError, match="^run r is damaged: ") as err:
        load_run(run)
    assert message in str(err.value)
    listed = list_runs(run.parent)  # never raises
    assert [r.name for r in listed] == ["r"] and message.split(":")[-1].strip()[:20] in \
        listed[0].damaged
    for command in (["report", str(run), "--out", str(tmp_path / "x.html")],
                    ["export", str(run), "--what", "all", "--out", str(tmp_path / "x.csv")]):
        assert main(command) == 2
        err_text = capsys.readouterr().err
        assert "run r is damaged" in err_text and "Traceback" not in err_text
    assert not (tmp_path / "x.html").exists() and not (tmp_path / "x.csv").exists()


def test_the_dashboard_lists_a_damaged_run_and_stays_up(good_run, tmp_path, monkeypatch):
    from apptest_support import goto, new_app, open_run, texts

    bad = _damaged(good_run, tmp_path, _set("parameters", [1, 2]))
    shutil.copytree(good_run, bad.parent / "good")
    monkeypatch.setenv("AFLITE_RUNS_DIR", str(bad.parent))
    at = goto(new_app(autoload=False).run(), "audit")
    assert not at.exception, [e.message for e in at.exception]
    table = next(df.value for df in at.dataframe if "state" in df.value.columns)
    states = dict(zip(table["run"], table["state"], strict=True))
    assert states["good"] == "ok" and states["r"].startswith("damaged: summary.json")
    for page in ("compare", "explore", "report"):
        goto(at, page)
        assert not at.exception, (page, [e.message for e in at.exception])
    open_run(at, bad)
    goto(at, "report")
    assert not at.exception
    shown = texts(at)
    assert "is damaged" in shown and str(tmp_path) not in shown  # no server path
