"""Golden runs: the same seed gives the same masks and scores before and after a refactor.

The expected files in ``tests/data/golden/`` were written by ``tests/golden_run.py --write``
from the code before the module reorganisation; see that file for when to regenerate them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from golden_run import (
    GOLDEN,
    mc_result,
    models_result,
    planted_result,
    sample_result,
    slices_result,
    zfilter_result,
)


def test_planted_workload_masks_and_scores_are_unchanged():
    expected = np.load(GOLDEN / "planted.npz")
    got = planted_result()
    assert set(got) == set(expected.files)
    for name in expected.files:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert 0 < got["keep_mask"].sum() < len(got["keep_mask"])  # a real filtering happened


@pytest.mark.parametrize(("name", "result"), [("multiple_choice", mc_result),
                                              ("zfilter", zfilter_result)])
def test_multiple_choice_and_zfilter_rounds_are_unchanged(name, result):
    """The round loops the filters share: masks, scores and every history column (but the
    seconds) of the same seed, bit for bit."""
    expected = np.load(GOLDEN / f"{name}.npz")
    got = result()
    assert set(got) == set(expected.files)
    for key in expected.files:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{name}: {key}")
    assert 0 < got["keep_mask"].sum() < len(got["keep_mask"])


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return sample_result(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("name", ["scores", "cues", "knn"])
def test_bundled_sample_audit_is_unchanged(sample, name):
    expected = pd.read_parquet(GOLDEN / f"sample_{name}.parquet")
    got = sample[name].reset_index(drop=True)
    assert list(got.columns) == list(expected.columns)
    # Masks and predictability scores must match bit for bit. Cue and KNN statistics are sums
    # whose last bit depends on the installed numpy/pandas summation order (a fresh venv moved
    # 0.8 % of cueness values by 1 ulp), so they are held to 1e-12 relative; KNN distances are
    # float32 BLAS products (a different OpenBLAS build moves them by ~1e-8), held to 1e-6.
    exact = name == "scores"
    rtol = {"scores": 0.0, "cues": 1e-12, "knn": 1e-6}[name]
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, check_exact=exact,
                                  rtol=rtol, atol=0)
    if name == "scores":
        assert set(got["status"]) == {"retained", "removed"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return models_result(tmp_path_factory.mktemp("golden_models"))


def test_fold_fitted_figures_stay_within_their_spread(models):
    """Issue 30, item 3: a cheaper way to the baselines, PVI and label issues may move their
    figures by float noise, never by more than the spread they report. Baselines: each
    accuracy within its own spread over folds/draws (at least 0.5 pp); PVI: per label within
    0.02 bits, rows correlated >= 0.99; label quality within 0.01 on average, the flagged
    rows the same (Jaccard >= 0.9)."""
    expected = pd.read_parquet(GOLDEN / "models_baselines.parquet").set_index(
        ["baseline", "subset"])
    got = models["baselines"].set_index(["baseline", "subset"])
    assert list(got.index) == list(expected.index)
    allowed = np.maximum(expected["accuracy_std"].to_numpy(), 0.005)
    gap = np.abs(got["accuracy"].to_numpy() - expected["accuracy"].to_numpy())
    assert (gap <= allowed).all(), pd.DataFrame({"gap": gap, "allowed": allowed},
                                                index=expected.index)
    pvi = models["pvi"].merge(pd.read_parquet(GOLDEN / "models_pvi.parquet"), on="row_id",
                              suffixes=("", "_expected"))
    assert len(pvi) == len(models["pvi"]) == 4000
    per_label = pvi.groupby("label")[["pvi", "pvi_expected"]].mean()
    assert (per_label["pvi"] - per_label["pvi_expected"]).abs().max() <= 0.02, per_label
    assert np.corrcoef(pvi["pvi"], pvi["pvi_expected"])[0, 1] >= 0.99
    issues = models["label_issues"].merge(pd.read_parquet(
        GOLDEN / "models_label_issues.parquet"), on="row_id", suffixes=("", "_expected"))
    assert (issues["label_quality"] - issues["label_quality_expected"]).abs().mean() <= 0.01
    flagged, before = issues["is_label_issue"], issues["is_label_issue_expected"]
    assert (flagged & before).sum() / max((flagged | before).sum(), 1) >= 0.9


@pytest.fixture(scope="module")
def slices(tmp_path_factory):
    return slices_result(tmp_path_factory.mktemp("golden_slices"))


@pytest.mark.parametrize("name", ["table", "members"])
def test_bundled_sample_slices_are_unchanged(slices, name):
    """The ranked slices (ids, sizes, removed counts, z, folds, examples) and the stored
    slices' row bitmaps of the seeded sample audit, pinned before their counts moved to row
    chunks (issue 27). Counts are integers and z the same arithmetic on them: exact, but for
    the Wilson bounds and rates, held to 1e-12 relative like the cue statistics."""
    expected = pd.read_parquet(GOLDEN / f"slices_{name}.parquet")
    got = slices[name].reset_index(drop=True)
    assert list(got.columns) == list(expected.columns)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, check_exact=False,
                                  rtol=1e-12, atol=0)
    if name == "table":
        assert set(got["kind"]) == {"cue", "pair", "cluster"}  # every kind of slice is pinned
        assert (got["same_rows"] != "").any() and (got["folded"] != "").any()
        assert (got["examples"].head(len(slices["members"])) != "").all()
