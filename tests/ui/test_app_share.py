"""AppTest, issue 14: a view in the URL, saved subsets, one sort over all rows, and the
sidebar naming a run of another file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from apptest_support import (
    APP,
    TIMEOUT,
    assert_clean,
    errors,
    goto,
    plain,
    texts,
)
from streamlit.testing.v1 import AppTest

from aflite_core.runs.subsets import list_subsets, load_subset
from ui import filters, url_state


@pytest.fixture
def served_run(runs_root: Path, shared_run: Path) -> Path:
    """The shared run, copied into this test's runs root (a link names runs of the root)."""
    runs_root.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copytree(shared_run, runs_root / shared_run.name))


def _link(params: dict) -> AppTest:
    """A new session opened on ``/explore?<params>`` (as a pasted link does)."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    for name, value in params.items():
        at.query_params[name] = value
    return at.switch_page("app_pages/explore.py").run()


def _rows(at) -> pd.DataFrame:
    return at.dataframe[-1].value


def _params(at) -> dict[str, list[str]]:
    """The session's query parameters, each as a list of strings."""
    return {k: [str(x) for x in v] if isinstance(v, (list, tuple)) else [str(v)]
            for k, v in at.query_params.items()}


def test_a_link_reopens_run_filters_sort_and_page(served_run: Path) -> None:
    at = _link({"run": served_run.name, "label": ["neutral", "entailment"],
                "pred": "0.5~1", "sort": "predictability", "desc": "0", "size": "25",
                "page": "2"})
    assert_clean(at)
    assert Path(at.session_state["app:run_path"]) == served_run
    assert at.multiselect(key="explore:labels").value == ["neutral", "entailment"]
    assert at.slider(key="explore:pred").value == (0.5, 1.0)
    assert at.toggle(key="explore:desc").value is False
    rows = _rows(at)
    assert len(rows) == 25 and set(rows["label"]) <= {"neutral", "entailment"}
    assert rows["predictability"].between(0.5, 1.0).all()
    assert rows["predictability"].is_monotonic_increasing
    # page 2 of the one global sort over every matching row
    table = pd.read_parquet(served_run / "scores.parquet")
    match = table[table["label"].isin(["neutral", "entailment"])
                  & table["predictability"].between(0.5, 1.0)]
    expected = match.sort_values("predictability", kind="stable")["row_id"].iloc[25:50]
    assert rows["row_id"].astype(str).tolist() == expected.astype(str).tolist()
    assert f"Rows 26–50 of {len(match):,}" in texts(at)


def test_the_url_follows_the_view_and_round_trips(served_run: Path) -> None:
    at = _link({"run": served_run.name})
    assert_clean(at)
    at.multiselect(key="explore:labels").set_value(["contradiction"]).run()
    at.text_input(key="explore:search").input("man").run()
    at.selectbox(key="explore:sort").set_value("removal_round").run()
    assert_clean(at)
    params = _params(at)
    assert params["run"] == [served_run.name]
    assert params["label"] == ["contradiction"] and params["q"] == ["man"]
    assert params["sort"] == ["removal_round"]
    assert "pred" not in params and "view" not in params  # defaults stay out of the URL
    shown = _rows(at)

    # the copied link, in a new session, shows the same rows in the same order
    again = _link(params)
    assert_clean(again)
    assert again.selectbox(key="explore:sort").value == "removal_round"
    pd.testing.assert_frame_equal(_rows(again), shown)


def test_a_bad_link_is_clamped_or_ignored_never_a_crash(served_run: Path) -> None:
    at = _link({"run": served_run.name, "rounds": "0~999", "pred": "high", "label": "nope",
                "page": "9999", "desc": "maybe", "size": "7"})
    assert_clean(at)
    rounds = at.slider(key="explore:rounds")
    assert rounds.value == (rounds.min, rounds.max)  # clamped to the run's rounds
    assert at.slider(key="explore:pred").value == (0.0, 1.0)
    assert at.multiselect(key="explore:labels").value == []
    assert "Rows 1–50 of 4,000" in texts(at)


@pytest.mark.parametrize("name", ["../etc", "no-such-run"])
def test_a_link_to_a_run_the_server_lacks_says_so(served_run: Path, name: str) -> None:
    at = _link({"run": name})
    assert not at.exception
    assert any("run" in str(t.value) and ("does not hold" in str(t.value)
                                          or "not a valid run name" in str(t.value))
               for t in at.toast)
    assert at.session_state["app:run_path"] != name


def test_a_hostile_link_shows_no_markup_and_no_server_path(served_run: Path) -> None:
    name = ("x [Session expired - click to log in](http://evil.example/login) "
            "![i](http://evil.example/pixel.png)")
    at = _link({"run": name})
    assert not at.exception
    notices = [str(t.value) for t in at.toast]
    assert notices
    for text in notices:
        # the name is quoted as inline code (never rendered as a link or an image) ...
        outside = "".join(text.split("`")[0::2])
        assert "](" not in outside and "http" not in outside, text
        assert "Session expired" in "".join(text.split("`")[1::2])
        # ... and the server's runs folder is not shown
        assert str(served_run.parent) not in text and str(served_run.parent.resolve()) not in text
    goto(at, "explore")
    assert str(served_run.parent) not in texts(at)


def test_sidebar_says_when_a_linked_run_is_of_another_file(served_run: Path) -> None:
    summary = served_run / "summary.json"
    data = json.loads(summary.read_text())
    data["input"] = {**data["input"], "name": "other.csv", "sha256": "0" * 64}
    summary.write_text(json.dumps(data))
    at = _link({"run": served_run.name})
    assert_clean(at)
    assert "snli_sample.csv" in texts(at)  # the session's dataset
    assert "(a run of other.csv, not of the loaded dataset)" in texts(at)


def test_header_click_sorts_all_rows_not_the_page(served_run: Path) -> None:
    at = _link({"run": served_run.name, "page": "3"})
    assert "Rows 101–150 of 4,000" in texts(at)
    table = at.dataframe[-1]
    # header clicks select a column: Streamlit then switches its in-browser sort off
    modes = list(table.proto.selection_mode)
    assert len(modes) == 2, modes
    at.session_state["explore:rows_table:0"] = {
        "selection": {"rows": [], "columns": ["hypothesis"], "cells": []}}
    at.run()
    assert_clean(at)
    assert at.selectbox(key="explore:sort").value == "hypothesis"
    assert at.toggle(key="explore:desc").value is False
    rows = _rows(at)
    scores = pd.read_parquet(served_run / "dataset.parquet")
    first = scores["hypothesis"].sort_values(kind="stable").head(50)
    assert rows["hypothesis"].tolist() == first.tolist()  # the first 50 of ALL rows
    assert "Sorted by hypothesis (ascending) over all 4,000 matching rows" in texts(at)
    assert "Rows 1–50 of 4,000" in texts(at)  # a new sort starts on its first page
    # the same header again reverses the one sort
    at.session_state["explore:rows_table:1"] = {
        "selection": {"rows": [], "columns": ["hypothesis"], "cells": []}}
    at.run()
    assert at.toggle(key="explore:desc").value is True
    last = scores["hypothesis"].sort_values(ascending=False, kind="stable").head(50)
    assert _rows(at)["hypothesis"].tolist() == last.tolist()
    assert _params(at)["sort"] == ["hypothesis"]


def test_save_a_filtered_subset_and_its_filter(served_run: Path) -> None:
    at = _link({"run": served_run.name, "label": "neutral", "pred": "0.8~1"})
    shown = int(texts(at).split(" rows** match")[0].rsplit("**", 1)[-1].replace(",", ""))
    at.text_input(key="explore:subset_name").input("hard-neutral")
    save = next(b for b in at.button if b.label == "Save subset")
    save.click().run()
    assert_clean(at)
    assert "as subset hard-neutral" in plain(texts(at))
    subset = load_subset(served_run, "hard-neutral")
    assert subset.n_rows == shown
    flt = filters.from_dict(subset.filter["row_filter"])
    assert list(flt.labels) == ["neutral"] and flt.predictability == (0.8, 1.0)
    assert subset.filter["link"]["label"] == ["neutral"]
    scores = pd.read_parquet(served_run / "scores.parquet").set_index("row_id")
    members = scores.loc[subset.row_ids]
    assert (members["label"] == "neutral").all()
    assert members["predictability"].between(0.8, 1.0).all()

    # the same name again: refused, until "Replace" is ticked
    at.text_input(key="explore:subset_name").input("hard-neutral")
    next(b for b in at.button if b.label == "Save subset").click().run()
    assert any("already exists" in e for e in errors(at))
    at.text_input(key="explore:subset_name").input("hard-neutral")
    at.checkbox(key="explore:subset_overwrite").check()
    next(b for b in at.button if b.label == "Save subset").click().run()
    assert_clean(at)
    assert [s.name for s in list_subsets(served_run)] == ["hard-neutral"]

    # an unsafe name is an error on the page, nothing written
    at.text_input(key="explore:subset_name").input("../x")
    next(b for b in at.button if b.label == "Save subset").click().run()
    assert any("not a safe" in e for e in errors(at))
    assert [s.name for s in list_subsets(served_run)] == ["hard-neutral"]


def test_codec_round_trip_and_defaults() -> None:
    values = {"explore:labels": ["a", "b"], "explore:pred": (0.25, 1.0),
              "explore:desc": True, "explore:sort": "predictability",
              "explore:breakdown_column": "genre", "explore:breakdown_values:genre": ["x"],
              "explore:rows_page": 3, "explore:rounds": (1, 9)}
    params = url_state.encode(values, defaults={"rounds": (1, 9)})
    assert params == {"label": ["a", "b"], "pred": ["0.25~1"], "col": ["genre"],
                      "colv": ["x"], "page": ["3"]}
    back = url_state.decode(params, bounds={"rounds": (1, 9)})
    assert back == {"explore:labels": ["a", "b"], "explore:pred": (0.25, 1.0),
                    "explore:breakdown_column": "genre",
                    "explore:breakdown_values:genre": ["x"], "explore:rows_page": 3}
