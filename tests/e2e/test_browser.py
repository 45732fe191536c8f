"""Real-browser end-to-end test: `streamlit run serve.py` driven by headless Debian chromium.

sample loaded -> audit with small parameters -> histogram and 2-D map visible -> retained CSV
downloaded and its row count checked; a second tab with another dataset sees nothing of the
first. Screenshots of every page go to ``test-artifacts/``.
"""

from __future__ import annotations

import contextlib
import csv
import re

import pandas as pd
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: Long waits: the machine may be busy; an audit of the sample takes seconds to a minute.
AUDIT_TIMEOUT_MS = 240_000
PAGE_TIMEOUT_MS = 60_000
VIEWPORT = {"width": 1400, "height": 2200}
HOSTILE_NAME = "<img src=x onerror=alert(1)>.csv"


#: A page's heading where it differs from its name in the navigation.
HEADINGS = {"Compare": "Compare runs"}


def nav(page, name: str) -> None:
    """Click a page in the sidebar navigation."""
    page.get_by_test_id("stSidebarNavLink").filter(has_text=name).click()
    page.get_by_role("heading", name=HEADINGS.get(name, name), exact=True).first.wait_for(
        timeout=PAGE_TIMEOUT_MS)


def settle(page, ms: int = 500) -> None:
    """Wait until the app is idle (no 'Running' indicator), then a little for the charts."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || !/Running/.test(document.querySelector('[data-testid=\"stStatusWidget\"]')"
        ".innerText)", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_timeout(ms)


def shoot(page, path, *, below: bool = True) -> None:
    """Screenshot the page, and a second one scrolled down (the main area scrolls)."""
    page.screenshot(path=str(path))
    if below:
        page.mouse.move(900, 600)
        page.mouse.wheel(0, 2000)
        page.wait_for_timeout(400)
        page.screenshot(path=str(path.with_name(path.stem + "-below.png")))
        page.mouse.wheel(0, -10_000)
        page.wait_for_timeout(400)


def set_number(page, label: str, value: int) -> None:
    """Type a value into a number input and commit it."""
    field = page.get_by_label(label, exact=True)
    field.fill(str(value))
    field.press("Enter")
    settle(page, 300)


def follow_download(context, page, link, target) -> None:
    """Click a download link (it may open a tab of its own, which the download closes) and
    save what the browser downloaded to ``target``."""
    seen: list = []
    def keep(download) -> None:
        seen.append(download)

    context.on("page", lambda opened: opened.on("download", keep))
    page.on("download", keep)
    link.click()
    for _ in range(PAGE_TIMEOUT_MS // 200):
        if seen:
            break
        page.wait_for_timeout(200)
    assert seen, "clicking the link started no download"
    seen[0].save_as(target)


def test_sample_audit_explore_and_download(server, browser, artifacts_dir, tmp_path) -> None:
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    dialogs: list[str] = []
    page = context.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    # 1. the app opens on the bundled sample, already loaded
    page.goto(server.url)
    page.get_by_text("The bundled sample is loaded.").wait_for(timeout=PAGE_TIMEOUT_MS)
    from playwright.sync_api import expect

    expect(page.get_by_test_id("stMetric").filter(has_text="Rows read")).to_contain_text(
        "4,000", timeout=PAGE_TIMEOUT_MS)
    settle(page)
    page.screenshot(path=str(artifacts_dir / "1-data.png"))

    # 2. audit with small parameters
    nav(page, "Audit")
    page.get_by_role("button", name="Run audit").wait_for(timeout=PAGE_TIMEOUT_MS)
    set_number(page, "Partitions m", 8)
    set_number(page, "Slice size k (rows)", 400)
    page.screenshot(path=str(artifacts_dir / "2-audit-parameters.png"))
    page.get_by_role("button", name="Run audit").click()
    page.get_by_role("button", name="Cancel").wait_for(timeout=PAGE_TIMEOUT_MS)
    page.get_by_test_id("stProgress").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    # best effort: catch the progress mid-AFLite (a fast machine may already be past it: the
    # audit's end stops the wait, which otherwise sat out its 20 s on the 4,000-row sample)
    with contextlib.suppress(PlaywrightTimeout):
        page.get_by_text(re.compile(r"round \d+ · size")).or_(
            page.get_by_text("Last audit finished")).first.wait_for(timeout=20_000)
    page.screenshot(path=str(artifacts_dir / "3-audit-running.png"))
    page.get_by_text("Last audit finished").wait_for(timeout=AUDIT_TIMEOUT_MS)
    settle(page)
    page.screenshot(path=str(artifacts_dir / "4-audit-finished.png"))

    # 3. histogram, removal per round and the map are drawn
    nav(page, "Explore")
    page.get_by_text("Map of the rows").wait_for(timeout=PAGE_TIMEOUT_MS)
    charts = page.locator("[data-testid='stPlotlyChart'] .js-plotly-plot")
    charts.nth(2).wait_for(timeout=PAGE_TIMEOUT_MS)
    # the histogram, the removals per round and the 2-D map; the data map on request
    assert charts.count() == 3
    histogram = charts.nth(0)
    assert histogram.locator(".barlayer .point").count() > 0  # bars of the histogram
    scatter = charts.nth(2)
    assert scatter.locator("canvas, .scatterlayer .point").count() > 0  # the map's points
    settle(page, 1200)
    shoot(page, artifacts_dir / "5-explore.png")

    # a box drawn on the map filters the table to the selected rows (every row inside it)
    drag = scatter.locator(".nsewdrag").first
    drag.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    scatter.hover()
    page.locator("[data-title='Box Select']").last.click()  # the map opens in pan mode
    box = drag.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.35, box["y"] + box["height"] * 0.35)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.65, box["y"] + box["height"] * 0.65, steps=12)
    page.mouse.up()
    note = page.get_by_text(re.compile(r"Showing only the [\d,]+ rows selected on the map"))
    note.wait_for(timeout=PAGE_TIMEOUT_MS)
    selected = int(re.search(r"only the ([\d,]+) rows", note.inner_text()).group(1)
                   .replace(",", ""))
    settle(page)
    assert 0 < selected < 4000
    assert page.get_by_text(f"{selected:,} rows match").count() == 1
    page.screenshot(path=str(artifacts_dir / "5c-explore-map-selection.png"))
    page.get_by_role("button", name="Clear map selection").click()
    page.get_by_text("4,000 rows match").wait_for(timeout=PAGE_TIMEOUT_MS)

    # the data map is drawn on request
    page.get_by_text("Data map", exact=True).first.click()
    charts.nth(3).wait_for(timeout=PAGE_TIMEOUT_MS)
    assert charts.nth(3).locator("canvas, .scatterlayer .point").count() > 0
    settle(page)
    page.screenshot(path=str(artifacts_dir / "5d-explore-datamap.png"), full_page=True)

    nav(page, "Cues")
    settle(page, 1200)
    shoot(page, artifacts_dir / "6-cues.png")

    # 4. the retained CSV downloads with the right number of rows
    nav(page, "Report")
    page.get_by_role("link", name="Retained CSV").wait_for(timeout=PAGE_TIMEOUT_MS)
    settle(page, 1200)
    shoot(page, artifacts_dir / "7-report.png")
    # a Report section is drawn when it is opened (closed ones send nothing)
    report_charts = page.locator("[data-testid='stPlotlyChart'] .js-plotly-plot")
    drawn = report_charts.count()
    page.get_by_text("Why removed: slices", exact=True).first.click()
    report_charts.nth(drawn).wait_for(timeout=PAGE_TIMEOUT_MS)
    settle(page)
    page.screenshot(path=str(artifacts_dir / "7c-report-slices-open.png"))
    # a streamed download: a link to the server's download route, saved by the browser
    target = artifacts_dir / "retained.csv"
    follow_download(context, page, page.get_by_role("link", name="Retained CSV"), target)
    with target.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    runs = [p for p in server.runs_root.iterdir() if not p.name.startswith(".")]
    assert len(runs) == 1
    scores = pd.read_parquet(runs[0] / "scores.parquet")
    retained = int((scores["status"] == "retained").sum())
    assert len(rows) == retained > 0
    assert {r["status"] for r in rows} == {"retained"}
    shown = page.get_by_test_id("stMetric").filter(has_text="Retained (after)")
    assert f"{retained:,}" in shown.inner_text()

    # 5. a second tab is a second session: its own data, no run, nothing executed
    other = context.new_page()
    other.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    other.goto(server.url)
    other.get_by_text("The bundled sample is loaded.").wait_for(timeout=PAGE_TIMEOUT_MS)
    other.get_by_text("Upload a file").click()
    data = "premise,hypothesis,label\n" + "".join(
        f"p{i},<script>alert({i})</script> h{i},{'yes' if i % 2 else 'no'}\n" for i in range(30))
    other.locator("input[type=file]").first.set_input_files(
        files=[{"name": HOSTILE_NAME, "mimeType": "text/csv", "buffer": data.encode()}])
    sidebar = other.get_by_test_id("stSidebar")
    sidebar.get_by_text(HOSTILE_NAME).wait_for(timeout=PAGE_TIMEOUT_MS)
    settle(other)
    other.screenshot(path=str(artifacts_dir / "8-second-tab-upload.png"))
    assert "30 of 30 rows included" in sidebar.inner_text()
    nav(other, "Explore")
    other.get_by_text("No audit run is open yet").wait_for(timeout=PAGE_TIMEOUT_MS)
    # the first tab still has its own dataset and run
    page.bring_to_front()
    nav(page, "Explore")
    page_sidebar = page.get_by_test_id("stSidebar").inner_text()
    assert "snli_sample.csv" in page_sidebar and HOSTILE_NAME not in page_sidebar
    assert runs[0].name in page_sidebar.replace("\n", "")
    assert dialogs == []  # no script from the data ran
    context.close()


def test_a_held_out_file_audits_and_every_page_renders(server, browser, artifacts_dir) -> None:
    """A curator's held-out NLI file (premises shared by three hypotheses, labels no model
    can predict): upload, audit with the defaults, visit every page; no page shows an
    exception and the Report shows the baselines' warning beside the headline."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from run_kinds import heldout_frame

    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(server.url)
    page.get_by_text("The bundled sample is loaded.").wait_for(timeout=PAGE_TIMEOUT_MS)
    page.get_by_text("Upload a file").click()
    data = heldout_frame(400).to_csv(index=False).encode()
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": "heldout_matched.csv", "mimeType": "text/csv", "buffer": data}])
    page.get_by_test_id("stSidebar").get_by_text("heldout_matched.csv").wait_for(
        timeout=PAGE_TIMEOUT_MS)
    settle(page)

    nav(page, "Audit")
    page.get_by_role("button", name="Run audit").click()
    page.get_by_text("Last audit finished").wait_for(timeout=AUDIT_TIMEOUT_MS)
    settle(page)
    for name in ("Data", "Audit", "Explore", "Cues", "Report", "Compare"):
        nav(page, name)
        settle(page, 1000)
        assert page.get_by_test_id("stException").count() == 0, name
        page.screenshot(path=str(artifacts_dir / f"9-heldout-{name.lower()}.png"))
    nav(page, "Report")
    page.get_by_text(re.compile("is below the majority-class rate")).first.wait_for(
        timeout=PAGE_TIMEOUT_MS)
    body = page.inner_text("body")
    assert "Not meaningful" in body or "Overstated" in body
    assert "trained on the representation AFLite filtered on" in body
    assert page.get_by_test_id("stException").count() == 0
    shoot(page, artifacts_dir / "9-heldout-report.png")
    context.close()


def test_a_hostile_link_renders_no_markup_and_no_server_path(server, browser,
                                                             artifacts_dir) -> None:
    """``?run=`` carrying a Markdown link and image: the notice quotes it as code; no link
    to the outside host, no request for the image, no server path on the page."""
    from urllib.parse import quote, urlparse

    name = ("x [Session expired - click to log in](http://evil.example/login) "
            "![i](http://evil.example/pixel.png)")
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url)
            if urlparse(r.url).hostname == "evil.example" else None)
    page.goto(f"{server.url}/explore?run={quote(name)}")
    page.get_by_text("not a valid run name").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    settle(page)
    page.screenshot(path=str(artifacts_dir / "10-hostile-link.png"))
    assert page.locator("a[href*='evil.example']").count() == 0
    assert page.locator("img[src*='evil.example']").count() == 0
    body = page.inner_text("body")
    root = str(server.runs_root)
    assert root not in body and str(server.runs_root.resolve()) not in body
    assert outside == []
    context.close()
