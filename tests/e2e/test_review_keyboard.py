"""Real browser (issue 62, item 7): review ten rows with the keyboard on the Review page,
reload the page and find the decisions, download the curated CSV and check it against them."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from aflite_core.io.datasets import load_dataset
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.runs.folder import load_run
from aflite_core.runs.review import review_queue
from tests.e2e.test_browser import PAGE_TIMEOUT_MS, VIEWPORT, follow_download, settle

SAMPLE = Path(__file__).resolve().parents[2] / "aflite_core" / "data" / "snli_sample.csv"
#: What is done to ten rows with one key each: keep (K), drop (D), relabel (r: the number key
#: of the first label that is not the row's own), skip (S).
KEYS = ["k", "d", "r", "k", "r", "d", "s", "k", "d", "r"]


def _press(page, key: str, here: str, next_row: str) -> None:
    """Press ``key`` on the page until the card shows ``next_row``. A press the page did not
    take (its shortcuts not yet bound on a loaded machine: the app idle and the card still
    at ``here``) is pressed again, at most twice more; a press it took is never repeated."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(3):
        page.get_by_role("heading", name="Review", exact=True).first.click()  # not a field
        page.keyboard.press(key)
        try:
            page.get_by_text(next_row).first.wait_for(timeout=15_000)
            return
        except PlaywrightTimeout:
            settle(page)
            if page.get_by_text(next_row).count():
                return
            if not page.get_by_text(here).count():
                raise  # the card moved elsewhere: a real failure
    page.get_by_text(next_row).first.wait_for(timeout=PAGE_TIMEOUT_MS)


def _progress(page) -> str:
    return page.get_by_test_id("stProgress").first.inner_text()


def test_ten_rows_reviewed_with_the_keyboard_survive_a_reload_and_reach_the_csv(
        server, browser, artifacts_dir, tmp_path) -> None:
    data = tmp_path / "small.csv"
    original = pd.read_csv(SAMPLE).head(900)
    original.to_csv(data, index=False)
    config = AuditConfig(target_size=600, n_partitions=8, random_state=0, report=False,
                         measures=("projection", "label_issues"),
                         measure_params={"projection": {"method": "pca"}})
    run_dir = run_audit(load_dataset(data), config, runs_root=server.runs_root, name="kb")
    run = load_run(run_dir)
    queue = list(review_queue(run, "label_issues"))
    labels = sorted(run.score_columns(["label"])["label"].unique())
    given = run.score_columns(["row_id", "label"]).set_index("row_id")["label"]

    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    page = context.new_page()
    page.goto(f"{server.url}/review?run=kb")
    page.get_by_role("heading", name="Review", exact=True).first.wait_for(
        timeout=PAGE_TIMEOUT_MS)
    page.get_by_text("Reviewed 0 of").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    settle(page)
    expected = {}
    for i, action in enumerate(KEYS):
        row = queue[i]
        key = action
        if action == "r":
            number = next(j for j, lab in enumerate(labels) if lab != given[row])
            key = str(number + 1)
            expected[row] = ("relabel", labels[number])
        elif action == "k":
            expected[row] = ("keep", None)
        elif action == "d":
            expected[row] = ("drop", None)
        _press(page, key, f"row {i + 1} of", f"row {i + 2} of")
        settle(page, 200)
    page.screenshot(path=str(artifacts_dir / "11-review-after-ten-keys.png"))
    force = load_run(run_dir).decisions().set_index("row_id")
    assert {r: (d, lab if d == "relabel" else None)
            for r, d, lab in zip(force.index, force["decision"], force["label"],
                                 strict=True)} == expected
    # a reload is a new session: the decisions are on disk, and the page counts them
    page.reload()
    page.get_by_text(f"Reviewed {len(expected)} of").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    settle(page)
    # the curated CSV from the page applies them
    page.get_by_role("button", name="Prepare the curated CSV").click()
    page.get_by_role("button", name="Download curated.csv").wait_for(timeout=PAGE_TIMEOUT_MS)
    target = tmp_path / "curated.csv"
    follow_download(context, page, page.get_by_role("button", name="Download curated.csv"),
                    target)
    curated = pd.read_csv(io.BytesIO(target.read_bytes()))
    dropped = [r for r, (d, _) in expected.items() if d == "drop"]
    assert len(curated) == len(original) - len(dropped)
    assert list(curated.columns) == list(original.columns)
    ids = run.score_columns(["row_id"])["row_id"].tolist()
    by_id = curated.set_index("id")["label"]
    for row, (decision, label) in expected.items():
        source_id = original.loc[ids.index(row), "id"]
        if decision == "drop":
            assert source_id not in by_id.index
        elif decision == "relabel":
            assert by_id[source_id] == label
        else:
            assert by_id[source_id] == original.loc[ids.index(row), "label"]
    context.close()
