"""AppTest: the data map and the PVI column/filter on Explore, their panels on Report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from apptest_support import (
    SAMPLE,
    assert_clean,
    goto,
    new_app,
    open_run,
    texts,
)

from aflite_core.measures import datamap, pvi


@pytest.fixture(scope="module")
def datamap_run(tmp_path_factory) -> Path:
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    config = AuditConfig(target_size=2000, n_partitions=8, slice_size=500, random_state=0,
                         measures=("projection", "datamap", "pvi"),
                         measure_params={"projection": {"method": "pca"},
                                         "pvi": {"n_splits": 3}})
    return run_audit(load_dataset(SAMPLE), config,
                     runs_root=tmp_path_factory.mktemp("dm") / "runs")


def _explore(path):
    at = new_app().run()
    open_run(at, path)
    return goto(at, "explore")


def test_explore_draws_the_data_map_and_filters_by_pvi_and_region(runs_root, datamap_run):
    at = _explore(datamap_run)
    assert_clean(at)
    # drawn on request (it costs half a second of every page switch)
    assert len(at.get("plotly_chart")) == 3
    at.toggle(key="explore:dm_show").set_value(True).run()
    assert_clean(at)
    # histogram, removal per round, the 2-D map and the data map
    assert len(at.get("plotly_chart")) == 4
    table = pd.read_parquet(datamap_run / "datamap.parquet")
    assert f"exact over all {len(table):,} scored rows" in texts(at)
    rows = at.dataframe[-1].value
    assert {pvi.COLUMN, "confidence", "variability", "data-map region"} <= set(rows.columns)

    # the region counts follow the shares typed in: the thresholds are recalibrated
    at.number_input(key="explore:dm_ambiguous_share").set_value(0.0).run()
    at.number_input(key="explore:dm_hard_share").set_value(0.2).run()
    assert_clean(at)
    counts = next(d.value for d in at.dataframe if "share easy" in d.value.columns)
    all_rows = counts.set_index("status").loc["all"]
    # no share of the band is ambiguous: only rows that swing past the fixed bound anywhere
    swinging = int((table["variability"] >= datamap.SWING_VARIABILITY).sum())
    assert all_rows.get("ambiguous", 0) == swinging
    assert all_rows["total"] == len(table)
    assert 0.1 < all_rows["share hard"] <= 0.2
    assert "in it ambiguous if variability ≥" in texts(at)

    # the PVI filter keeps rows whose hypothesis gives the label away
    at.slider(key="explore:pvi").set_value((1.0, at.slider(key="explore:pvi").max)).run()
    assert_clean(at)
    rows = at.dataframe[-1].value
    assert len(rows) > 0 and (rows[pvi.COLUMN] >= 1.0).all()

    at.multiselect(key="explore:dm_regions").set_value(["easy"]).run()
    assert_clean(at)
    rows = at.dataframe[-1].value
    assert len(rows) > 0 and set(rows["data-map region"]) == {"easy"}


def test_report_shows_the_data_map_and_pvi_per_label(runs_root, datamap_run):
    at = new_app().run()
    open_run(at, datamap_run)
    at = goto(at, "report")
    assert_clean(at)
    page = texts(at).replace("\\", "")  # titles are Markdown-escaped
    assert "**Data map (confidence × variability)**" in [e.label for e in at.expander]
    assert "Hypothesis-only PVI per label" in page
    assert any("mean PVI (bits)" in d.value.columns for d in at.dataframe)
