"""What the driver holds: AFLite fits on Φ itself when one block holds every row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core import pipeline
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
    # a copy of all of Φ would double the driver's Φ while AFLite runs (1 GB at 1M rows)
    assert np.shares_memory(fitted, phi) is (not with_splits)
    assert len(fitted) == (len(phi) if not with_splits else int(0.75 * len(phi)))
