"""AppTest: the Compare page (two runs, row overlap, the same sections in two columns)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from apptest_support import (
    assert_clean,
    goto,
    new_app,
    open_run,
    texts,
)
from compare_support import build_runs

from aflite_core.report.compare import compare_runs, format_value


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    return build_runs(str(tmp_path_factory.getbasetemp() / "compare-runs"))


def _copy(built: dict[str, Path], root: Path, *names: str) -> dict[str, Path]:
    root.mkdir(parents=True, exist_ok=True)
    return {n: Path(shutil.copytree(built[n], root / n)) for n in names}


def _section_columns(at) -> tuple[list[list[str]], list[list[str]]]:
    """Subheadings of the left and right columns of every section row, in page order."""
    with_heads = [c for c in at.columns if len(c.subheader)]
    return ([[s.value for s in c.subheader] for c in with_heads[0::2]],
            [[s.value for s in c.subheader] for c in with_heads[1::2]])


def test_needs_two_runs(runs_root, built) -> None:
    _copy(built, runs_root, "aflite")
    at = goto(new_app(autoload=False).run(), "compare")
    assert_clean(at)
    assert "Comparing needs two complete runs" in texts(at)


def test_two_columns_same_sections_and_overlap(runs_root, built) -> None:
    paths = _copy(built, runs_root, "aflite", "zfilter")
    at = new_app(autoload=False).run()
    open_run(at, paths["aflite"])  # the open run starts as run A
    goto(at, "compare")
    assert_clean(at)
    assert at.selectbox(key="compare:run_a").value == str(paths["aflite"].resolve())
    assert at.selectbox(key="compare:run_b").value == str(paths["zfilter"].resolve())
    left, right = _section_columns(at)
    assert left == right
    flat = [h for heads in left for h in heads]
    assert flat[:5] == ["Run", "Headline", "Sizes", "Labels (before vs after)", "Splits"]
    assert {"Label shift (before vs after)", "Baselines vs random control"} <= set(flat)
    c = compare_runs(paths["aflite"], paths["zfilter"])
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Removed-set Jaccard"] == format_value(c.removed_jaccard)
    assert metrics["Jaccard of random removals"] == format_value(c.expected_jaccard_random)
    assert metrics["Removed in both"] == f"{c.n_removed_both:,}"
    # per run: the Z-filter's max |z| on the right, none recorded for AFLite on the left
    z_metrics = [m.value for m in at.metric if m.label == "Max |z| after"]
    assert z_metrics[0] == "–" and z_metrics[1] != "–"
    assert "Z-filter" in texts(at)
    assert "Comparison as HTML" in [b.label for b in at.download_button]


def test_swapping_runs_and_different_inputs(runs_root, built) -> None:
    paths = _copy(built, runs_root, "aflite", "aflite_seed1", "other_input")
    at = goto(new_app(autoload=False).run(), "compare")
    assert_clean(at)
    at.selectbox(key="compare:run_a").set_value(str(paths["aflite"].resolve()))
    at.selectbox(key="compare:run_b").set_value(str(paths["other_input"].resolve())).run()
    assert_clean(at)
    assert "different inputs" in texts(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Removed-set Jaccard"] == "not applicable"
    left, right = _section_columns(at)
    assert left == right
    at.selectbox(key="compare:run_b").set_value(str(paths["aflite_seed1"].resolve())).run()
    assert_clean(at)
    c = compare_runs(paths["aflite"], paths["aflite_seed1"])
    assert {m.label: m.value for m in at.metric}["Removed-set Jaccard"] == format_value(
        c.removed_jaccard)
    params = next(t.value for t in at.table if "parameter" in t.value.columns)
    assert params.set_index("parameter").loc["random_state"].tolist() == ["0", "1"]
