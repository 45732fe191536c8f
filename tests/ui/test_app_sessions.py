"""AppTest: two sessions never see each other's data, runs or audits in progress."""

from __future__ import annotations

import pandas as pd
from apptest_support import (
    SAMPLE,
    assert_clean,
    goto,
    new_app,
    plain,
    start_small_audit,
    texts,
    wait_for_job,
)

OTHER = pd.DataFrame({
    "premise": [f"Person {i} walks a dog." for i in range(40)],
    "hypothesis": [f"Someone number {i} is outside." if i % 2 else f"Nobody {i} moves."
                   for i in range(40)],
    "label": ["entailment" if i % 2 else "contradiction" for i in range(40)],
})


def test_two_sessions_with_different_datasets(runs_root) -> None:
    first = new_app().run()
    second = new_app(autoload=False).run()
    second.segmented_control(key="data:source").set_value("upload").run()
    second.file_uploader(key="data:file").upload(
        "other.csv", OTHER.to_csv(index=False).encode(), "text/csv")
    second.run()
    assert_clean(first)
    assert_clean(second)
    assert first.session_state["app:dataset"].name == SAMPLE.name
    assert second.session_state["app:dataset"].name == "other.csv"
    assert "other.csv" not in texts(first) and SAMPLE.name not in texts(second)

    # an audit in progress in the first session is invisible to the second
    start_small_audit(first)
    assert first.session_state["audit:job"].running
    goto(second, "audit")
    assert_clean(second)
    assert "audit:job" not in second.session_state
    assert not [p for p in second.get("progress")]
    assert "Auditing **other.csv**: 40 rows take part" in plain(texts(second))

    job = wait_for_job(first)
    assert job.dataset_name == SAMPLE.name
    goto(first, "explore")
    assert_clean(first)
    assert len(first.dataframe[-1].value) > 0

    # the second session has no run open: its Explore page shows the empty state
    goto(second, "explore")
    assert_clean(second)
    assert "No audit run is open yet" in texts(second)
    assert second.session_state["app:run_path"] is None
    # and its dataset is still its own
    goto(second, "data")
    assert second.session_state["app:dataset"].name == "other.csv"


def test_sidebar_never_claims_an_audit_that_did_not_happen(runs_root) -> None:
    at = new_app().run()
    assert_clean(at)
    shown = texts(at)
    assert "4,000 of 4,000 rows included" in shown
    assert "none open (not audited yet)" in shown
    assert "audited" not in shown.replace("not audited yet", "")

    start_small_audit(at)
    assert at.session_state["audit:job"].running
    assert "audit running…" in texts(at)
    job = wait_for_job(at)
    at.run()
    assert job.result.name in texts(at)
    assert "not of the loaded dataset" not in texts(at)

    # a different dataset next to that run: the sidebar says the run is of another file
    goto(at, "data")
    at.segmented_control(key="data:source").set_value("upload").run()
    at.file_uploader(key="data:file").upload(
        "other.csv", OTHER.to_csv(index=False).encode(), "text/csv")
    at.run()
    at.session_state["app:run_path"] = job.result
    at.run()
    assert_clean(at)
    assert f"(a run of {SAMPLE.name}, not of the loaded dataset)" in texts(at)
