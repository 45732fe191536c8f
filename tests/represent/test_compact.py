"""The compact Φ a run keeps (issue 62: a reviewed row's neighbours in Φ, not on the map):
128 bytes a row whose nearest rows are Φ's own, read back by the Review page's row card."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aflite_core.represent._builders import tfidf_svd_features
from aflite_core.represent._compact import (
    COMPACT_FILE,
    code_norms,
    compact_phi,
    nearest_codes,
    place,
    unpack,
)

SAMPLE = Path(__file__).resolve().parents[2] / "aflite_core" / "data" / "snli_sample.csv"


@pytest.fixture(scope="module")
def phi() -> np.ndarray:
    frame = pd.read_csv(SAMPLE, keep_default_na=False)
    return tfidf_svd_features(frame["hypothesis"].tolist(), frame["premise"].tolist(),
                              n_components=256, random_state=0)


def test_the_nearest_rows_by_the_codes_are_the_nearest_by_phi(phi):
    """On the bundled SNLI sample (Φ of 256 dimensions), 128 bytes a row; the 10 nearest rows
    by the codes hold at least 80 % of the 10 nearest by exact cosine on Φ."""
    codes, basis = compact_phi(phi)
    assert basis is None and codes.dtype == np.uint8 and codes.shape == (len(phi), 128)
    unit = phi / np.linalg.norm(phi, axis=1, keepdims=True)
    norms = code_norms(codes)
    recall = []
    for i in range(0, len(phi), 40):
        exact = unit @ unit[i]
        exact[i] = -np.inf
        got, similarity = nearest_codes(codes, codes[i], 10, exclude=i, norms=norms)
        assert i not in got and np.all(np.diff(similarity) <= 1e-6)  # most similar first
        recall.append(len(set(np.argsort(-exact)[:10]) & set(got)) / 10)
    assert np.mean(recall) >= 0.8, np.mean(recall)


def test_the_scores_are_the_cosines_of_the_codes_and_a_wide_phi_is_reduced_first():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 301)).astype(np.float32)  # wider than 256, an odd width
    codes, basis = compact_phi(X, random_state=0)
    assert basis.shape == (301, 256) and codes.shape == (500, 128)
    np.testing.assert_array_equal(codes[:7], place(X[:7], basis))  # placing is the same
    levels = unpack(codes)
    assert levels.min() >= -7 and levels.max() <= 7
    query = levels[3] / np.linalg.norm(levels[3])
    cosine = levels @ query / np.linalg.norm(levels, axis=1)
    cosine[3] = -np.inf
    rows, similarity = nearest_codes(codes, codes[3], 5, exclude=3)
    np.testing.assert_array_equal(rows, np.argsort(-cosine, kind="stable")[:5])
    np.testing.assert_allclose(similarity, cosine[rows], atol=1e-5)
    # an odd narrow Φ and a row of zeros
    narrow = np.vstack([np.zeros((1, 5)), rng.normal(size=(9, 5))]).astype(np.float32)
    codes, basis = compact_phi(narrow)
    assert basis is None and codes.shape == (10, 3) and not unpack(codes[:1]).any()
    assert nearest_codes(codes[:1], codes[0], 3, exclude=0)[0].size == 0


def test_a_run_keeps_its_compact_phi_and_the_review_card_reads_it(tmp_path):
    """An audit writes ``phi_compact.parquet`` (at most 150 bytes a row on disk); a reviewed
    row's neighbours come from it, by similarity in Φ; a run without it (made before it was
    kept) shows the map's neighbours and says so."""
    from aflite_core.io import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit
    from aflite_core.runs import load_run
    from aflite_core.runs.review import row_card

    frame = pd.read_csv(SAMPLE, keep_default_na=False).head(1200)
    data = tmp_path / "small.csv"
    frame.to_csv(data, index=False)
    path = run_audit(load_dataset(data), AuditConfig(
        target_size=900, n_partitions=4, report=False, measures=("projection",),
        measure_params={"projection": {"method": "pca"}}), runs_root=tmp_path / "runs")
    compact = path / COMPACT_FILE
    assert compact.stat().st_size / len(frame) <= 150
    run = load_run(path)
    row_id = run.score_columns(["row_id"])["row_id"].iloc[10]
    card = row_card(run, row_id)
    assert card["neighbours_in"] == "phi" and len(card["neighbours"]) == 5
    similarity = [n["similarity"] for n in card["neighbours"]]
    assert similarity == sorted(similarity, reverse=True) and all(s <= 1 for s in similarity)
    assert row_id not in [n["row_id"] for n in card["neighbours"]]
    compact.unlink()
    old = row_card(load_run(path), row_id)
    assert old["neighbours_in"] == "map" and "distance" in old["neighbours"][0]


def test_a_query_code_of_another_width_is_refused():
    codes = place(np.random.default_rng(0).normal(size=(50, 16)))
    with pytest.raises(ValueError, match="expected a code of 8 bytes, as the rows' codes, "
                                         "got 10"):
        nearest_codes(codes, place(np.ones((1, 20)))[0], 3)
