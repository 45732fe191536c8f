"""AppTest: the "why removed" slices on the Report page and the slice filter of Explore."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from apptest_support import (
    assert_clean,
    goto,
    new_app,
    open_run,
    texts,
)
from planted import planted_frame

from aflite_core.measures import slices
from ui.panels import slices as slices_view


@pytest.fixture(scope="module")
def slices_run(tmp_path_factory) -> Path:
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=16,
                         target_size=0.6, measures=("slices",))
    return run_audit(load_dataset(planted_frame(1000), name="planted"), config,
                     runs_root=tmp_path_factory.mktemp("slices") / "runs")


def test_report_ranks_the_slices_and_offers_their_rows(runs_root, slices_run):
    at = new_app().run()
    open_run(at, slices_run)
    goto(at, "report")
    assert_clean(at)
    assert "**Why removed: slices**" in [e.label for e in at.expander]
    stored = pd.read_parquet(slices_run / slices.FILE)
    shown = next(d.value for d in at.dataframe
                 if {"removal_rate", "description"} <= set(d.value.columns))
    assert shown["description"].tolist() == stored["description"].head(25).tolist()
    assert "Select a slice" in texts(at)
    # choosing the kind keeps only that kind
    at.segmented_control(key="report:slices_kind").set_value("cluster").run()
    assert_clean(at)
    shown = next(d.value for d in at.dataframe
                 if {"removal_rate", "description"} <= set(d.value.columns))
    assert set(shown["kind"]) == {"cluster"}


def test_a_slice_asked_for_filters_the_explore_table(runs_root, slices_run):
    table = pd.read_parquet(slices_run / slices.FILE)
    first = table.iloc[0]
    at = new_app().run()
    open_run(at, slices_run)
    at.session_state[slices_view.REQUEST] = first["slice_id"]  # the Report's button
    goto(at, "explore")
    assert_clean(at)
    assert at.selectbox(key=slices_view.EXPLORE_KEY).value == first["slice_id"]
    assert f"**{int(first['size']):,} rows** match" in [m.value for m in at.markdown]
    # cleared: every row again
    at.selectbox(key=slices_view.EXPLORE_KEY).set_value(None).run()
    assert_clean(at)
    assert f"**{int(first['size']):,} rows** match" not in [m.value for m in at.markdown]
