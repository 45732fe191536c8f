"""AppTest: every page renders, with no exception, for every kind of run the product writes
(``run_kinds.py``): baselines below majority and chance (warnings), a measure that failed
and measures not run, multiple choice, the Z-filter, a split column without a map."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_support import goto, new_app, open_run, plain, texts
from run_kinds import KINDS, build

PAGES = ("data", "audit", "explore", "cues", "review", "report", "compare")


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build(str(tmp_path_factory.getbasetemp() / "run-kinds"))


@pytest.mark.parametrize("kind", KINDS)
def test_every_page_renders_for_every_kind_of_run(kind, kinds, monkeypatch) -> None:
    monkeypatch.setenv("AFLITE_RUNS_DIR", str(kinds[kind].parent))
    at = new_app(autoload=False)
    open_run(at, kinds[kind])
    for page in PAGES:
        goto(at, page)
        assert not at.exception, (page, [e.message for e in at.exception])
        # the only error a page may show is the failed measure's own message
        unexpected = [e.value for e in at.error if "could not be computed" not in e.value]
        assert not unexpected, (page, unexpected)
    if kind == "failed":
        goto(at, "report")
        assert "planted failure of the KNN measure" in plain(
            "\n".join(e.value for e in at.error))
    if kind == "zfilter":  # no held-out predictions, no data map: the Report says why
        goto(at, "report")
        shown = plain("\n".join(i.value for i in at.info))
        assert "does not apply to this run" in shown and "trains no model" in shown


def test_a_measure_that_does_not_apply_is_skipped_with_its_reason(kinds) -> None:
    from aflite_core.runs.folder import load_run

    run = load_run(kinds["zfilter"])
    outcome = run.measures["datamap"]
    assert outcome["status"] == "skipped" and "Z-filter" in outcome["reason"]
    assert not run.has("datamap.parquet")  # no header-only file any more
    assert run.measure_states()["datamap"] == "skipped"
    html = (kinds["zfilter"] / "report.html").read_text(encoding="utf-8")
    assert "skipped" in html and "trains no model" in html
    assert load_run(kinds["heldout"]).measures["datamap"]["status"] == "ok"


def test_the_report_shows_each_caveat_beside_the_headline(kinds, monkeypatch) -> None:
    monkeypatch.setenv("AFLITE_RUNS_DIR", str(kinds["heldout"].parent))
    at = new_app(autoload=False)
    open_run(at, kinds["heldout"])
    goto(at, "report", open_sections=False)  # a first visit: the headline section is open
    assert not at.exception, [e.message for e in at.exception]
    shown = plain(texts(at))
    # the labels carry no signal, so the baselines fall below the majority rate: the
    # warnings are on the page, and each figure says how far it can be read
    assert "is below the majority-class rate" in shown
    assert "Not meaningful" in shown or "Overstated" in shown
    assert "trained on the representation AFLite filtered on" in shown
    labels = [m.label for m in at.metric if m.label.startswith("Bias removed")]
    assert labels[0].endswith("hypothesis-only n-grams"), labels  # unseen features lead
    assert labels[-1].endswith("linear probe on Φ"), labels
    values = {m.label: m.value for m in at.metric if m.label.startswith("Bias removed")}
    assert any("(not meaningful)" in v or "(overstated)" in v for v in values.values()), values


@pytest.mark.parametrize("kind", KINDS)
def test_the_html_report_is_written_for_every_kind(kind, kinds) -> None:
    import json

    summary = json.loads((kinds[kind] / "summary.json").read_text())
    assert summary["measures"]["report"]["status"] == "ok", summary["measures"]["report"]
    html = (kinds[kind] / "report.html").read_text(encoding="utf-8")
    # the dashboard's colour-blind-safe palette, not the old red/green status colours
    assert '"#c92a2a"' not in html and '"#2b8a3e"' not in html  # in the figures' JSON
    if kind == "heldout":
        assert "Not meaningful" in html or "Overstated" in html
        assert "trained on the representation AFLite filtered on" in html
    if kind == "no_map":  # the dev rows AFLite did not filter have their own status
        assert "kept, not filtered" in html
