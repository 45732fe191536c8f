"""AppTest: the Report page (before vs after, measures, downloads)."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
from apptest_support import (
    SAMPLE,
    assert_clean,
    errors,
    goto,
    new_app,
    open_run,
    texts,
)

from ui import cache


def test_empty_state_without_a_run(runs_root) -> None:
    at = goto(new_app().run(), "report")
    assert_clean(at)
    assert "No audit run is open yet" in texts(at)


def test_before_vs_after_and_downloads(runs_root, shared_run) -> None:
    at = new_app().run()
    open_run(at, shared_run)
    goto(at, "report")
    assert_clean(at)
    summary = json.loads((shared_run / "summary.json").read_text())
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Retained (after)"] == f"{summary['sizes']['retained']:,}"
    assert metrics["Removed"] == f"{summary['sizes']['removed']:,}"
    # the sample is filtered train-only: its dev split is kept, not filtered
    splits = summary["splits"]
    assert splits["dev"]["before"] == 0 and splits["dev"]["unfiltered"] > 0
    table = next(df.value for df in at.dataframe if "kept, not filtered" in df.value)
    kept = dict(zip(table["split"], table["kept"], strict=True))
    for name, block in splits.items():
        if block["before"] == 0:  # a split the filter did not touch: no share kept
            assert kept[name] == "— (not filtered)"
        else:
            assert kept[name] == f"{block['retained'] / block['before']:.2%}"
    baselines = json.loads((shared_run / "baselines.json").read_text())
    block = baselines["hypothesis_only"]
    assert block["control"] == "label_matched"
    # percentage points, with the spread over the random draws
    from aflite_core.measures.baselines import figure_verdict

    figure = figure_verdict("hypothesis_only", block)
    verdict = figure["verdict"]
    # the ± combines the draws' spread with the retained accuracy's sampling error
    retained = block["retained"]
    sampling = 100 * (retained["accuracy"] * (1 - retained["accuracy"])
                      / retained["n_rows"]) ** 0.5
    combined = (block["bias_removed_std_pp"] ** 2 + sampling ** 2) ** 0.5
    assert abs(figure["uncertainty_pp"] - combined) < 1e-9 and combined >= sampling > 0
    expected = f"{block['bias_removed_beyond_size_pp']:+.1f} pp ± {combined:.1f}"
    assert metrics["Bias removed beyond size: hypothesis-only n-grams"] == (
        expected if verdict == "ok" else f"{expected} ({verdict})")
    from aflite_core.measures import registry

    shown = [s.value for s in at.subheader] + [e.label.split(" · ")[0].strip("*")
                                               for e in at.expander]
    # the fixed sections, then one per registered measure that has before/after tables
    for section in ("Sizes", "Labels", *(m.label for m in registry.measures() if m.tables)):
        assert section in shown, section
    stored = json.loads((shared_run / "duplicates.json").read_text())["summary"]
    duplicates = next(df.value for df in at.dataframe
                      if "n_duplicate_rows before" in df.value.columns).set_index("kind")
    for record in stored:
        shown = duplicates.loc[record["kind"], f"n_duplicate_rows {record['scope']}"]
        assert shown == record["n_duplicate_rows"]
    inoculation = json.loads((shared_run / "inoculation.json").read_text())
    assert metrics["Outcome"] == inoculation["outcome_label"]
    labels = [b.label for b in at.download_button]
    assert labels == ["Retained CSV", "Removed CSV", "Scores CSV", "Cue table CSV",
                      "HTML report", "Retained without label issues", "Flagged label issues"]


def test_download_payloads(runs_root, shared_run) -> None:
    """What the download buttons hand out: the exports of the run."""
    summary = json.loads((shared_run / "summary.json").read_text())
    for what in ("retained", "removed"):
        rows = list(csv.DictReader(io.StringIO(
            b"".join(cache.stream_export(shared_run, what)).decode("utf-8"))))
        assert len(rows) == summary["sizes"][what]
        assert {r["status"] for r in rows} == {what}
    html = cache.report_html(shared_run)
    assert html.startswith("<!DOCTYPE html>") and "<script src=" not in html


def test_duplicates_without_the_measure_use_the_loader_rules(runs_root, shared_run,
                                                             tmp_path) -> None:
    import shutil

    from aflite_core.io.datasets import load_dataset

    # a copy of the run as an older writer (or a run without these measures) leaves it
    run = tmp_path / shared_run.name
    shutil.copytree(shared_run, run)
    for name in ("duplicates.json", "duplicates_exact.parquet", "duplicates_near.parquet",
                 "inoculation.json"):
        (run / name).unlink()
    at = new_app().run()
    open_run(at, run)
    goto(at, "report")
    assert_clean(at)
    counts = next(df.value for df in at.dataframe if "before (audited rows)" in df.value)
    expected = load_dataset(SAMPLE).report.duplicates  # every sample row was audited
    assert counts["before (audited rows)"].to_dict() == expected
    assert (counts["after (retained rows)"] <= counts["before (audited rows)"]).all()
    assert "No inoculation curves in this run" in texts(at)


def test_a_missing_run_folder_is_an_error(runs_root, tmp_path) -> None:
    at = new_app().run()
    open_run(at, tmp_path / "deleted-run")
    goto(at, "report")
    assert not at.exception
    assert "cannot be opened" in errors(at)[0]


def test_removal_rate_by_any_column(runs_root, shared_run) -> None:
    """Issue 14: the Report breaks the removals down by a column of the dataset, with
    intervals, and the counts add up to the filtered rows."""
    from aflite_core.runs.folder import load_run

    at = new_app().run()
    open_run(at, shared_run)
    goto(at, "report")
    assert_clean(at)
    assert "**Removal rate by column**" in [e.label for e in at.expander]
    at.selectbox(key="report:breakdown_column").set_value("label").run()
    table = next(df.value for df in at.dataframe if "ci_low" in df.value.columns
                 and "value" in df.value.columns)
    sizes = load_run(shared_run).sizes
    assert table["rows"].sum() == sizes["retained"] + sizes["removed"]
    assert table["removed"].sum() == sizes["removed"]
    assert ((table["ci_low"] <= table["removal_rate"])
            & (table["removal_rate"] <= table["ci_high"])).all()


def test_sections_are_drawn_when_opened_and_stay_open(runs_root, shared_run) -> None:
    """A first visit draws the headline section only; opening one draws it, and it is still
    open after a visit to another page (the Report's page switch cost is its sections)."""
    from ui.report.view import OPEN_SECTIONS

    at = new_app().run()
    open_run(at, shared_run)
    goto(at, "report", open_sections=False)
    assert_clean(at)
    titles = [e.label for e in at.expander]
    assert "**Removal rate by column**" in titles and "**Lexical cues (before vs after)**" in titles
    assert "**Inoculation curves (slow)**" in titles
    # closed sections send nothing: no breakdown selectbox, no cue tables; the headline shows
    assert not [s for s in at.selectbox if s.label == "Column"]
    metrics = {m.label for m in at.metric}
    assert "Bias removed beyond size: hypothesis-only n-grams" in metrics
    n_tables = len(at.dataframe)
    # open the breakdown section as its expander would
    at.session_state["report:section:breakdown"] = True
    at.run()
    assert [s for s in at.selectbox if s.label == "Column"]
    assert len(at.dataframe) > n_tables
    assert "breakdown" in at.session_state[OPEN_SECTIONS]
    goto(at, "explore")
    goto(at, "report", open_sections=False)
    assert [s for s in at.selectbox if s.label == "Column"]  # remembered


def test_label_issues_section_opens_explore_on_the_flagged_rows(runs_root, shared_run) -> None:
    """The Report's label issues: counts per status and label pair, and a button to Explore
    filtered to the flagged rows, lowest label quality first, the suggested label shown."""
    issues = pd.read_parquet(shared_run / "label_issues.parquet")
    flagged = int(issues["is_label_issue"].sum())
    assert flagged > 0
    at = new_app().run()
    open_run(at, shared_run)
    goto(at, "report")
    assert_clean(at)
    per_status = next(df.value for df in at.dataframe if "share flagged" in df.value.columns)
    assert per_status.set_index("rows").loc["all", "label issues"] == flagged
    button = next(b for b in at.button if b.label.startswith("Show the"))
    assert button.label == f"Show the {flagged:,} flagged rows in Explore"
    button.click().run()
    assert_clean(at)
    assert f"**{flagged:,} rows** match" in texts(at)
    page = at.dataframe[-1].value
    assert set(page["label issue"]) == {"flagged"}
    quality = page["label quality"].to_numpy()
    assert (quality[:-1] <= quality[1:]).all()  # lowest label quality first
    # given label, suggested label and label quality side by side, before the wide texts
    columns = [c for c in page.columns if c != "row_id"]
    assert columns[:3] == ["label", "suggested label", "label quality"]
    assert columns.index("hypothesis") > 2


def test_the_stages_section_says_each_stages_time_and_where_it_ran(runs_root,
                                                                   shared_run) -> None:
    """Closed, it draws nothing; opened, one row per stage the run timed, where it ran (a run
    without a scheduler: every stage on this machine), the wall total last."""
    from aflite_core.runs.folder import load_run

    run = load_run(shared_run)
    at = new_app().run()
    open_run(at, shared_run)
    goto(at, "report", open_sections=False)
    assert "**Stages: time, and where each ran**" in [e.label for e in at.expander]
    at.session_state["report:section:stages"] = True
    at.run()
    assert_clean(at)
    shown = next(d.value for d in at.dataframe if list(d.value.columns) ==
                 ["stage", "seconds", "ran on"])
    timings = run.summary["timings"]
    # reading is placed (engines) but not timed, the report written before its time is known
    untimed = [s for s in run.summary["engines"] if s not in timings]
    assert shown["stage"].tolist() == (["read"] + [s for s in timings if s != "total"]
                                       + [s for s in untimed if s != "read"]
                                       + ["total (wall)"])
    assert set(shown["ran on"].iloc[:-1]) == {"local"}
    assert shown["seconds"].iloc[-1] == f"{timings['total']:,.2f}"
    assert (shown.set_index("stage")["seconds"][untimed] == "– (not timed)").all()
    assert "Every stage ran on the machine that ran the audit" in texts(at)
