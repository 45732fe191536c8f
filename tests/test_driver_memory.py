"""What the driver holds: AFLite fits on Φ itself when one block holds every row, and reads
a split's rows of Φ through a RowSelection (no copy) when a block is a part; the numbers are
those of the copy, bit for bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core import pipeline
from aflite_core.filter._aflite import AFLite
from aflite_core.filter._rounds import RowSelection
from aflite_core.filter.synthetic import make_planted
from aflite_core.io.datasets import load_dataset
from aflite_core.pipeline import AuditConfig, run_audit


@pytest.mark.parametrize("with_splits", [False, True])
def test_aflite_fits_on_phi_itself_unless_a_block_is_a_part(snli_dir, tmp_path, monkeypatch,
                                                            with_splits):
    seen: dict[str, list] = {"phi": [], "fitted": []}
    build, fit = pipeline._build_representation, pipeline._fit_block

    def spy_build(*args, **kwargs):
        rep = build(*args, **kwargs)
        seen["phi"].append(rep.X)
        return rep

    def spy_fit(X, *args, **kwargs):
        seen["fitted"].append(X)
        return fit(X, *args, **kwargs)

    monkeypatch.setattr(pipeline, "_build_representation", spy_build)
    monkeypatch.setattr(pipeline, "_fit_block", spy_fit)
    frame = pd.read_csv(snli_dir / "snli_dev.csv").head(1200)
    if with_splits:  # train rows are filtered, the others scored: a block of a part
        frame["split"] = np.where(np.arange(len(frame)) % 4 == 0, "test", "train")
    else:
        frame = frame.drop(columns=[c for c in ("split",) if c in frame])
    config = AuditConfig(representation_params={"n_components": 16}, n_partitions=8,
                         target_size=0.7, measures=())
    run_audit(load_dataset(frame, name="blocks"), config, runs_root=tmp_path)
    (phi,), (fitted,) = seen["phi"], seen["fitted"]
    # a copy of all of Φ would double the driver's Φ while AFLite runs (1 GB at 1M rows), a
    # copy of the split's rows nearly so
    if with_splits:
        assert isinstance(fitted, RowSelection) and fitted.base is phi
        np.testing.assert_array_equal(fitted.rows, np.flatnonzero(np.arange(len(phi)) % 4))
    else:
        assert np.shares_memory(fitted, phi)
    assert len(fitted) == (len(phi) if not with_splits else int(0.75 * len(phi)))


@pytest.mark.parametrize("backend", ["local", "dask"])
def test_aflite_on_a_row_selection_is_aflite_on_the_copy(backend):
    """fit and score_heldout read a RowSelection block by block: the statuses, rounds,
    predictabilities, data map and held-out scores of the copied rows, bit for bit."""
    if backend == "dask":
        pytest.importorskip("distributed")
    X, y, _ = make_planted(7000, 24, random_state=2)
    rows = np.flatnonzero(np.random.default_rng(0).random(len(X)) < 0.8)[::-1].copy()
    heldout = np.setdiff1d(np.arange(len(X)), rows)
    params = {"target_size": 0.6, "n_partitions": 16, "random_state": 1, "backend": backend}
    if backend == "dask":
        params["scheduler"] = "local:2"
    copy = AFLite(**params).fit(X[rows], y[rows])
    through = AFLite(**params).fit(RowSelection(X, rows), y[rows])
    for name in ("keep_mask_", "removal_round_", "predictability_", "confidence_",
                 "variability_"):
        np.testing.assert_array_equal(getattr(through, name), getattr(copy, name))
    assert copy.n_rounds_ > 2
    a = copy.score_heldout(X[heldout], y[heldout], X=X[rows], y=y[rows], return_datamap=True)
    b = through.score_heldout(RowSelection(X, heldout), y[heldout], X=RowSelection(X, rows),
                              y=y[rows], return_datamap=True)
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_a_row_selection_is_checked():
    X = np.zeros((5, 2), dtype=np.float32)
    with pytest.raises(TypeError, match="2-D float32 C-contiguous"):
        RowSelection(X.astype(np.float64), [0])
    with pytest.raises(ValueError, match=r"positions in 0\.\.4"):
        RowSelection(X, [0, 5])
    assert RowSelection(X, [4, 0])[1:].shape == (1, 2)
