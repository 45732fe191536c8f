"""AppTest: the Explore page (filters, search, views, map, broken runs)."""

from __future__ import annotations

import pandas as pd
from apptest_support import (
    assert_clean,
    errors,
    goto,
    new_app,
    open_run,
    texts,
)


def _explore(shared_run):
    at = new_app().run()
    open_run(at, shared_run)
    return goto(at, "explore")


def _rows(at) -> pd.DataFrame:
    return at.dataframe[-1].value


def test_empty_state_without_a_run(runs_root) -> None:
    at = goto(new_app().run(), "explore")
    assert_clean(at)
    assert "No audit run is open yet" in texts(at)


def test_charts_map_and_rows_of_an_open_run(runs_root, shared_run) -> None:
    at = _explore(shared_run)
    assert_clean(at)
    scores = pd.read_parquet(shared_run / "scores.parquet")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Retained"] == f"{(scores['status'] == 'retained').sum():,}"
    assert metrics["Removed"] == f"{(scores['status'] == 'removed').sum():,}"
    # histogram, removal per round and the map
    assert len(at.get("plotly_chart")) == 3
    assert "4,000 points" in texts(at)
    rows = _rows(at)
    assert len(rows) == 50 and set(rows["status"]) <= {"retained", "removed"}
    assert "Rows 1–50 of 4,000" in texts(at)


def test_status_view_search_and_predictability(runs_root, shared_run) -> None:
    at = _explore(shared_run)
    at.segmented_control(key="explore:view").set_value("removed").run()
    assert_clean(at)
    assert set(_rows(at)["status"]) == {"removed"}

    at.segmented_control(key="explore:view").set_value("all").run()
    at.text_input(key="explore:search").input("sleeping").run()
    assert_clean(at)
    rows = _rows(at)
    text = rows["premise"] + " " + rows["hypothesis"]
    assert len(rows) > 0 and text.str.lower().str.contains("sleeping").all()

    at.text_input(key="explore:search").input(r"\bnobody\b|\bsleeping\b")
    at.toggle(key="explore:regex").set_value(True).run()
    assert_clean(at)
    both = _rows(at)
    assert len(both) >= len(rows)

    at.text_input(key="explore:search").input("").run()
    at.slider(key="explore:pred").set_value((0.9, 1.0)).run()
    assert_clean(at)
    high = _rows(at)
    assert high["predictability"].between(0.9, 1.0).all()


def test_invalid_regex_is_a_message(runs_root, shared_run) -> None:
    at = _explore(shared_run)
    at.text_input(key="explore:search").input("(unclosed")
    at.toggle(key="explore:regex").set_value(True).run()
    assert not at.exception
    assert "not a valid regular expression" in errors(at)[0]


def test_label_filter_and_sort(runs_root, shared_run) -> None:
    at = _explore(shared_run)
    at.multiselect(key="explore:labels").set_value(["neutral"]).run()
    at.selectbox(key="explore:sort").set_value("predictability")
    at.toggle(key="explore:desc").set_value(False).run()
    assert_clean(at)
    rows = _rows(at)
    assert set(rows["label"]) == {"neutral"}
    assert rows["predictability"].is_monotonic_increasing


def test_cue_feature_filter(runs_root, shared_run) -> None:
    at = _explore(shared_run)
    options = at.selectbox(key="explore:cue").options
    word = next(o for o in options if o.startswith("word:"))
    at.selectbox(key="explore:cue").set_value(word).run()
    assert_clean(at)
    token = word.split(":", 1)[1]
    rows = _rows(at)
    assert len(rows) > 0
    assert rows["hypothesis"].str.lower().str.contains(token, regex=False).all()


def test_a_broken_run_folder_is_an_error_not_a_crash(runs_root, tmp_path) -> None:
    broken = tmp_path / "broken-run"
    broken.mkdir()
    (broken / "summary.json").write_text('{"format_version": 1}')
    at = new_app().run()
    open_run(at, broken)
    goto(at, "explore")
    assert not at.exception
    assert "cannot be opened" in errors(at)[0]


def test_every_formula_expander_cites_its_source() -> None:
    """Explore's formula expander had no source (the other pages cite theirs)."""
    from ui.audit import view as audit_view
    from ui.explore import view as explore_view
    from ui.report import view as report_view

    for module in (explore_view, audit_view, report_view):
        assert "Source" in module.FORMULA, module.__name__
    assert "Le Bras et al." in explore_view.FORMULA


def test_filter_by_any_column_of_the_dataset(runs_root, shared_run) -> None:
    """Issue 14: a filter on any low-cardinality column, its values labelled with their
    removal rate."""
    at = _explore(shared_run)
    column = at.selectbox(key="explore:breakdown_column")
    assert "label" in column.options and "hypothesis" not in column.options
    column.set_value("label").run()
    values = at.multiselect(key="explore:breakdown_values:label")
    # each value labelled with its rows and removal rate
    assert any(o.startswith("entailment (") and "% removed)" in o for o in values.options)
    values.set_value(["entailment"]).run()
    assert_clean(at)
    rows = _rows(at)
    assert len(rows) > 0 and set(rows["label"]) == {"entailment"}


def test_texts_and_label_lead_and_kept_rows_have_no_round(runs_root, shared_run) -> None:
    at = _explore(shared_run)
    assert_clean(at)
    rows = _rows(at)
    assert list(rows.columns[:4]) == ["row_id", "premise", "hypothesis", "label"]
    assert list(rows.columns[4:7]) == ["status", "predictability", "removal_round"]
    assert rows["removal_round"].notna().all()  # the most predictable rows were removed
    at.segmented_control(key="explore:view").set_value("retained").run()
    kept = _rows(at)
    assert len(kept) and kept["removal_round"].isna().all()  # no round, not -1
    # the columns are configurable: hide the audit's predictability
    chosen = [c for c in at.multiselect(key="explore:columns").value if c != "predictability"]
    at.multiselect(key="explore:columns").set_value(chosen).run()
    assert "predictability" not in _rows(at).columns


def test_a_saved_subset_opens_again_as_a_filter(runs_root, shared_run, tmp_path) -> None:
    import shutil

    from aflite_core.runs import subsets

    run = tmp_path / "runs" / shared_run.name
    shutil.copytree(shared_run, run)
    removed = pd.read_parquet(run / "scores.parquet").query("status == 'removed'")
    members = removed["row_id"].head(7).tolist()
    subsets.save_subset(run, "seven", members, filter={})
    at = new_app().run()
    open_run(at, run)
    goto(at, "explore")
    at.selectbox(key="explore:subset_open").set_value("seven").run()
    assert_clean(at)
    assert sorted(_rows(at)["row_id"].tolist()) == sorted(members)
    assert "**7 rows** match" in texts(at)


def test_download_writes_the_table_order_and_columns() -> None:
    import csv
    import io

    from aflite_core.runs.exports import table_view_bytes

    def read_csv_rows(data: bytes) -> list[list[str]]:
        return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))

    rows = pd.DataFrame({"status": ["removed", "retained", "removed"],
                         "hypothesis": ["=1+2", "b", "c"], "label": ["x", "y", "z"],
                         "extra": ["e1", "e2", "e3"]},
                        index=pd.Index([7, 3, 5], name="row_id"))
    out = read_csv_rows(table_view_bytes(rows, ["label", "hypothesis"]))
    # row_id first, then the shown columns in the shown order, then the hidden ones
    assert out[0] == ["row_id", "label", "hypothesis", "status", "extra"]
    assert [r[0] for r in out[1:]] == ["7", "3", "5"]  # the table's order, not row-id order
    assert out[1][2] == "'=1+2"  # spreadsheet-safe


def test_the_streamed_download_holds_exactly_the_rows_the_table_shows(
        runs_root, shared_run, monkeypatch) -> None:
    """With the streaming route mounted (``serve.py``), the download is a link whose file
    holds the filtered rows in the table's order: its first rows are the page shown, its
    length is the count shown, and its ids are those an independent filter of the run's
    files gives, in the chosen sort."""
    import csv
    import io

    from ui import downloads

    monkeypatch.setattr(downloads, "_mounted", True)
    at = _explore(shared_run)
    at.segmented_control(key="explore:view").set_value("removed").run()
    at.selectbox(key="explore:sort").set_value("predictability").run()
    assert_clean(at)
    links = [e for e in at.get("link_button") if "rows (CSV)" in e.proto.label]
    assert len(links) == 1 and not [b for b in at.download_button if "rows (CSV)" in b.label]
    url = links[0].proto.url
    assert url.startswith("/_aflite/download/")
    entry = downloads.lookup(url.rsplit("/", 1)[1])
    data = b"".join(entry.producer()).decode("utf-8")
    rows = list(csv.DictReader(io.StringIO(data, newline="")))
    scores = pd.read_parquet(shared_run / "scores.parquet")
    removed = scores[scores["status"] == "removed"].sort_values(
        "predictability", ascending=False, kind="stable")
    assert [r["row_id"] for r in rows] == removed["row_id"].astype(str).tolist()
    page = _rows(at)
    assert [r["row_id"] for r in rows[:len(page)]] == page["row_id"].astype(str).tolist()
    assert f"**{len(rows):,} rows** match" in texts(at)
    assert entry.file_name.endswith("-filtered.csv") and entry.mime == "text/csv"


def test_a_run_folder_replaced_while_open_is_read_again(runs_root, shared_run, tmp_path
                                                        ) -> None:
    """The caches are keyed by the run's path and the time stamp of its summary: a folder
    replaced under an open page (an audit written again to the same --out) is read again on
    the next rerun, its new rows in the counts, the filters and the table."""
    import json
    import os
    import shutil

    run = tmp_path / shared_run.name
    shutil.copytree(shared_run, run)
    at = new_app().run()
    open_run(at, run)
    goto(at, "explore")
    at.segmented_control(key="explore:view").set_value("removed").run()
    assert_clean(at)
    scores = pd.read_parquet(run / "scores.parquet")
    before = int((scores["status"] == "removed").sum())
    assert f"**{before:,} rows** match" in texts(at)

    flipped = scores.index[scores["status"] == "retained"][:10]
    scores.loc[flipped, "status"] = "removed"
    scores.to_parquet(run / "scores.parquet", index=False)
    summary = json.loads((run / "summary.json").read_text())
    summary["sizes"]["removed"] += 10
    summary["sizes"]["retained"] -= 10
    (run / "summary.json").write_text(json.dumps(summary))
    stamp = (run / "summary.json").stat().st_mtime + 5
    os.utime(run / "summary.json", (stamp, stamp))

    at.run()
    assert_clean(at)
    assert f"**{before + 10:,} rows** match" in texts(at)
    assert {m.label: m.value for m in at.metric}["Removed"] == f"{before + 10:,}"
