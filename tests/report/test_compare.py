"""Two runs side by side: the core (side_by_side), the HTML page and ``compare`` on the CLI.

Real runs of 1,200 SNLI rows (dev + test splits): AFLite, AFLite with another seed, the
Z-filter, and AFLite on other rows (tests/compare_support.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from compare_support import build_runs

from aflite_core.cli import main
from aflite_core.report.compare import (
    HEADLINE,
    compare_runs,
    format_value,
    side_by_side,
    summary_text,
)
from aflite_core.report.compare_html import build_compare_html
from aflite_core.runs.folder import load_run

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    return build_runs(str(tmp_path_factory.getbasetemp() / "compare-runs"))


def _removed(path: Path) -> np.ndarray:
    return load_run(path).status_mask("removed")


# --------------------------------------------------------------------------- core


def test_aflite_vs_zfilter_overlap_by_hand(runs):
    side = side_by_side(runs["aflite"], runs["zfilter"])
    assert side.same_input and side.note is None
    ra, rb = _removed(runs["aflite"]), _removed(runs["zfilter"])
    both, either = int((ra & rb).sum()), int((ra | rb).sum())
    c = side.comparison
    assert (c.n_removed_a, c.n_removed_b, c.n_removed_both) == (ra.sum(), rb.sum(), both)
    assert c.removed_jaccard == pytest.approx(both / either)
    pool = 1200  # every row filtered in both runs (no warm-up, none excluded)
    expected = ra.sum() * rb.sum() / pool
    assert c.expected_jaccard_random == pytest.approx(expected / (ra.sum() + rb.sum() - expected))
    # the same numbers as the row-level comparison the pipeline tests use
    again = compare_runs(runs["aflite"], runs["zfilter"])
    assert again.to_dict() == c.to_dict()
    assert side.parameter_changes["filter"] == ("aflite", "z")
    shown = dict(side.overlap_table().itertuples(index=False, name=None))
    assert shown["Removed-set Jaccard"] == format_value(both / either)
    assert shown["Removed in both"] == f"{both:,}"


def test_profiles_headline_from_the_run_files(runs):
    side = side_by_side(runs["aflite"], runs["zfilter"])
    for profile, path in ((side.a, runs["aflite"]), (side.b, runs["zfilter"])):
        summary = json.loads((path / "summary.json").read_text())
        baselines = json.loads((path / "baselines.json").read_text())["hypothesis_only"]
        h = profile.headline
        assert h["retained"] == summary["sizes"]["retained"]
        assert h["removed"] == summary["sizes"]["removed"]
        assert h["hyp_only_retained"] == pytest.approx(baselines["retained"]["accuracy"])
        assert h["hyp_only_full"] == pytest.approx(baselines["full"]["accuracy"])
        assert h["bias_removed_pp"] == pytest.approx(baselines["bias_removed_beyond_size_pp"])
        assert list(profile.headline_table()["figure"]) == [label for _, label, _ in HEADLINE]
    assert side.a.filter == "AFLite" and side.b.filter == "Z-filter"
    zstats = json.loads((runs["zfilter"] / "summary.json").read_text())["aflite"]["zfilter"]
    assert side.b.headline["max_abs_z_after"] == pytest.approx(zstats["max_abs_z_after"])
    assert side.b.headline["max_abs_z_before"] == pytest.approx(zstats["max_abs_z_before"])
    assert side.a.headline["max_abs_z_after"] is None  # AFLite records no word z
    assert "–" in summary_text(side)


def test_label_and_split_changes_by_hand(runs):
    side = side_by_side(runs["aflite"], runs["zfilter"])
    for profile, path in ((side.a, runs["aflite"]), (side.b, runs["zfilter"])):
        scores = load_run(path).scores
        labels = profile.labels.set_index("label")
        removed = scores[scores["status"] == "removed"]["label"].astype(str).value_counts()
        before = scores["label"].astype(str).value_counts()
        for label, row in labels.iterrows():
            assert row["before"] == before[label]
            assert row["removed"] == removed.get(label, 0)
            assert row["share_removed"] == pytest.approx(removed.get(label, 0) / before[label])
        tvd = 0.5 * np.abs(labels["share_before"] - labels["share_after"]).sum()
        assert profile.headline["label_tvd"] == pytest.approx(tvd)
        assert labels["change_pp"].sum() == pytest.approx(0, abs=1e-9)
        frame = load_run(path).frame
        splits = profile.splits.set_index("split")
        assert set(splits.index) == {"dev", "test"}
        for split, row in splits.iterrows():
            ids = frame.index[frame["split"] == split]
            status = scores.set_index("row_id").loc[ids, "status"]
            assert row["removed"] == int((status == "removed").sum())
            assert row["retained"] == int((status == "retained").sum())
    # both columns list the labels in the same order
    assert list(side.a.labels["label"]) == list(side.b.labels["label"])


def test_measure_tables_aligned_by_title(runs):
    side = side_by_side(runs["aflite"], runs["aflite_seed1"])
    by_name = {s.name: s for s in side.sections}
    # label shift in both, cues and baselines only in A; measures neither has are left out
    assert set(by_name) == {"cues", "label_shift", "baselines"}
    shift = by_name["label_shift"]
    assert [t.title for t in shift.tables] == ["Label distribution before vs after"]
    assert shift.tables[0].a is not None and shift.tables[0].b is not None
    assert not shift.tables[0].a.equals(shift.tables[0].b)  # another seed, other rows
    cues = by_name["cues"]
    assert (cues.state_a, cues.state_b) == ("ok", "not run")
    assert all(t.a is not None and t.b is None for t in cues.tables)
    assert side.parameter_changes["random_state"] == (0, 1)
    assert side.cue_changes is None  # B has no cue table


def test_different_inputs_overlap_not_applicable(runs):
    with pytest.raises(ValueError, match="different inputs"):
        compare_runs(runs["aflite"], runs["other_input"])
    side = side_by_side(runs["aflite"], runs["other_input"])
    assert side.comparison is None and not side.same_input
    assert "different inputs" in side.note and "not applicable" in side.note
    assert set(side.overlap_table()["value"]) == {"not applicable"}
    # the columns are still filled from each run's own files
    assert side.b.headline["retained"] == load_run(runs["other_input"]).sizes["retained"]
    assert "not applicable" in summary_text(side)


def test_html_page_two_columns_same_sections(runs):
    side = side_by_side(runs["aflite"], runs["zfilter"])
    page = build_compare_html(side)
    heads = {k: re.findall(rf'data-side="{k}"><h3>(.*?)</h3>', page) for k in "ab"}
    assert heads["a"] == heads["b"]
    assert heads["a"][:5] == ["Run", "Headline", "Sizes", "Labels (before vs after)", "Splits"]
    assert [s.label for s in side.sections] == heads["a"][5:]
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert format_value(side.comparison.removed_jaccard) in page


# --------------------------------------------------------------------------- CLI


def test_cli_prints_summary_and_writes_html(runs, tmp_path, capsys):
    out = tmp_path / "compare.html"
    assert main(["compare", str(runs["aflite"]), str(runs["zfilter"]), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    c = compare_runs(runs["aflite"], runs["zfilter"])
    line = next(x for x in text.splitlines() if "Removed-set Jaccard" in x)
    assert line.split()[-1] == format_value(c.removed_jaccard)
    assert "filter: aflite -> z" in text
    assert "Hypothesis-only accuracy, retained" in text
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Z-filter" in page
    # an existing file is kept unless --overwrite
    assert main(["compare", str(runs["aflite"]), str(runs["zfilter"]), "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["compare", str(runs["aflite"]), str(runs["zfilter"]), "--out", str(out),
                 "--overwrite"]) == 0


def test_cli_json_and_different_inputs(runs, capsys):
    assert main(["compare", str(runs["aflite"]), str(runs["other_input"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "different inputs" in data["note"]
    assert data["headline"]["b"]["retained"] == load_run(runs["other_input"]).sizes["retained"]


def test_cli_missing_and_damaged_runs_exit_2(runs, tmp_path, capsys):
    assert main(["compare", str(runs["aflite"]), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run B") and "does not exist" in err
    damaged = tmp_path / "damaged"
    shutil.copytree(runs["zfilter"], damaged)
    (damaged / "scores.parquet").unlink()
    assert main(["compare", str(damaged), str(runs["aflite"])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run A") and "scores.parquet" in err
    (damaged / "scores.parquet").write_bytes(b"not parquet at all")
    assert main(["compare", str(damaged), str(runs["aflite"])]) == 2
    assert capsys.readouterr().err.startswith("error: run A")


def test_python_m_compare(runs):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "aflite_core", "compare",
                           str(runs["aflite"]), str(runs["aflite_seed1"])],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "random_state: 0 -> 1" in done.stdout
    line = next(x for x in done.stdout.splitlines() if "Removed-set Jaccard" in x)
    assert line.split()[-1] == format_value(
        compare_runs(runs["aflite"], runs["aflite_seed1"]).removed_jaccard)


def test_a_run_from_before_the_term_side_svd_is_flagged(runs, tmp_path):
    """A run whose summary does not name its SVD was reduced by scikit-learn's: comparing it
    with a new run lists the protocol change beside the parameters."""
    import json
    import shutil

    old = tmp_path / "old-run"
    shutil.copytree(runs["aflite_seed1"], old)
    summary = json.loads((old / "summary.json").read_text(encoding="utf-8"))
    summary["representation"]["params"].pop("svd")
    (old / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    side = side_by_side(runs["aflite"], old)
    assert side.parameter_changes["representation svd"] == (
        "row_space_randomized", "scikit-learn TruncatedSVD")
    assert "representation svd" not in side_by_side(runs["aflite"],
                                                    runs["aflite_seed1"]).parameter_changes
