"""A lasso on a sampled map selects every row inside it, not only the drawn sample.

The server draws at most 1,200 points (``AFLITE_MAP_MAX_POINTS``) of a 4,000-row run, the way
it draws 30,000 of a larger one. A lasso drawn in Chromium must filter the table to every row
whose map point is inside the lasso: the count the page shows is compared with the count of
rows of ``projection.parquet`` inside the lasso's path (read back from the Plotly figure),
computed here with a ray-casting test of the test's own.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.e2e.conftest import start_server, stop_server, wait_healthy

PAGE_TIMEOUT_MS = 60_000
DRAWN = 1_200


def inside(x: float, y: float, xs: list[float], ys: list[float]) -> bool:
    """Ray casting towards +x, even-odd, the half-open rule (upward-closed edges)."""
    result = False
    j = len(xs) - 1
    for i in range(len(xs)):
        if (ys[i] > y) != (ys[j] > y) and x < xs[i] + (y - ys[i]) * (xs[j] - xs[i]) / (
                ys[j] - ys[i]):
            result = not result
        j = i
    return result


def settled_map(page):
    """The map chart once the page has stopped drawing it again (a rerun replaces it)."""
    for _ in range(20):
        page.wait_for_timeout(700)
        scatter = page.locator("[data-testid='stPlotlyChart'] .js-plotly-plot").last
        try:
            scatter.scroll_into_view_if_needed(timeout=2_000)
            page.wait_for_timeout(500)
            scatter.evaluate("gd => gd._fullLayout.xaxis._offset")
            return scatter
        except Exception:  # noqa: BLE001 - detached while the page reruns: look again
            continue
    raise AssertionError("the map was not drawn in time")


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory) -> Path:
    """The bundled sample audited with the default map into a fresh runs root."""
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    root = tmp_path_factory.mktemp("lasso") / "runs"
    sample = Path(__file__).resolve().parents[2] / "aflite_core" / "data" / "snli_sample.csv"
    return run_audit(load_dataset(sample), AuditConfig(
        n_partitions=8, representation_params={"n_components": 32},
        measures=("projection",)), runs_root=root)


def test_a_lasso_on_a_sampled_map_selects_every_row_inside_it(sample_run, browser,
                                                             monkeypatch, artifacts_dir):
    monkeypatch.setenv("AFLITE_MAP_MAX_POINTS", str(DRAWN))
    log = sample_run.parent.parent / "streamlit.log"
    process, url = start_server(sample_run.parent, log)
    try:
        wait_healthy(url, process)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{url}/explore?run={sample_run.name}")
        page.get_by_text("Map of the rows").wait_for(timeout=PAGE_TIMEOUT_MS)
        page.get_by_text(re.compile(r"Drawing a uniform random sample of 1,200 of 4,000")) \
            .wait_for(timeout=PAGE_TIMEOUT_MS)
        scatter = page.locator("[data-testid='stPlotlyChart'] .js-plotly-plot").last
        scatter.scroll_into_view_if_needed()
        page.wait_for_timeout(800)
        scatter.hover()
        page.locator("[data-title='Lasso Select']").last.click()
        drag = scatter.locator(".nsewdrag").first
        box = drag.bounding_box()
        cx, cy = box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5
        rx, ry = box["width"] * 0.3, box["height"] * 0.3
        page.mouse.move(cx + rx, cy)
        page.mouse.down()
        for step in range(1, 41):  # a wobbly closed loop around the centre
            angle = 2 * math.pi * step / 40
            wobble = 1 + 0.25 * math.sin(5 * angle)
            page.mouse.move(cx + rx * wobble * math.cos(angle),
                            cy + ry * wobble * math.sin(angle))
        page.mouse.up()
        note = page.get_by_text(re.compile(r"[\d,]+ rows selected: every row inside the lasso"))
        note.wait_for(timeout=PAGE_TIMEOUT_MS)
        shown = int(re.search(r"([\d,]+) rows selected", note.inner_text()).group(1)
                    .replace(",", ""))
        path = scatter.evaluate("gd => (gd.layout.selections || []).map(s => s.path)")
        assert len(path) == 1 and path[0].startswith("M"), path
        vertices = [tuple(map(float, p.split(","))) for p in
                    path[0].strip("MZ").split("L")]
        xs, ys = [v[0] for v in vertices], [v[1] for v in vertices]
        projection = pd.read_parquet(sample_run / "projection.parquet")
        expected = sum(inside(x, y, xs, ys) for x, y in
                       zip(projection["x"], projection["y"], strict=True))
        assert shown == expected
        # the drawn sample alone (what the table used to show) holds far fewer of them
        from aflite_core.runs.folder import load_run
        from aflite_core.runs.views import map_points

        drawn, total = map_points(load_run(sample_run), max_points=DRAWN)
        assert total == 4000 and len(drawn) == DRAWN
        from_sample = sum(inside(x, y, xs, ys) for x, y in
                          zip(drawn["x"], drawn["y"], strict=True))
        assert expected > 2 * from_sample > 0
        page.get_by_text(f"{expected:,} rows match").wait_for(timeout=PAGE_TIMEOUT_MS)
        page.screenshot(path=str(artifacts_dir / "map-lasso-every-row.png"))

        # zoom to the lasso: the map is drawn again from every row in its bounding box
        page.get_by_role("button", name="Zoom to the selection").click()
        zoomed = page.get_by_text(re.compile(r"Zoomed in: [\d,]+ rows in view"))
        zoomed.wait_for(timeout=PAGE_TIMEOUT_MS)
        in_view = int(re.search(r"([\d,]+) rows in view", zoomed.inner_text()).group(1)
                      .replace(",", ""))
        x, y = projection["x"], projection["y"]
        assert in_view == int(((x >= min(xs)) & (x <= max(xs)) & (y >= min(ys))
                               & (y <= max(ys))).sum()) >= expected
        page.wait_for_timeout(1500)
        page.screenshot(path=str(artifacts_dir / "map-zoomed.png"))
        page.get_by_role("button", name="Whole map").click()
        page.get_by_text(re.compile(r"Drawing a uniform random sample of 1,200 of 4,000")) \
            .wait_for(timeout=PAGE_TIMEOUT_MS)

        # choosing a region selects every row of the region (a click on its diamond does the
        # same through the same code, charts.clicked_region; Plotly's hit test of a click on a
        # diamond over row points is left to the unit tests, it is timing-dependent here)
        page.get_by_role("button", name="Clear map selection").click()
        page.get_by_text(re.compile(r"click a region's ◇")).wait_for(timeout=PAGE_TIMEOUT_MS)
        settled_map(page)
        regions = pd.read_parquet(sample_run / "map_regions.parquet")
        target = regions.iloc[0]
        option = page.get_by_role("option", name=re.compile(rf"^{int(target['region'])} · "))
        for attempt in range(4):  # a rerun still drawing may replace the list as it opens
            page.locator("[data-testid='stSelectbox']").filter(has_text="Select a region") \
                .first.click()
            try:
                option.first.click(timeout=10_000)
                break
            except Exception:  # noqa: BLE001 - the list closed under a rerun: open it again
                if attempt == 3:
                    raise
                page.keyboard.press("Escape")
                page.wait_for_timeout(1_000)
        picked = page.get_by_text(re.compile(r"Region \d+ .*all [\d,]+ of its rows selected"))
        picked.wait_for(timeout=PAGE_TIMEOUT_MS)
        text = picked.inner_text()
        region = int(re.search(r"Region (\d+)", text).group(1))
        count = int(re.search(r"all ([\d,]+) of its rows", text).group(1).replace(",", ""))
        assert region == int(target["region"])
        assert count == int((projection["region"] == region).sum()) == int(target["rows"])
        page.get_by_text(f"{count:,} rows match").wait_for(timeout=PAGE_TIMEOUT_MS)
        page.screenshot(path=str(artifacts_dir / "map-region-click.png"))
    finally:
        stop_server(process)
