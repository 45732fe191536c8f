"""Φ kept on disk (issue 63, item 5): read by blocks, the same rows bit for bit, and an audit
with Φ on disk writes the run folder an audit with Φ in memory writes, timings aside."""

from __future__ import annotations

import numpy as np
import pytest
from run_files import summaries_without_times

from aflite_core import AuditConfig, load_dataset, run_audit
from aflite_core.data import SAMPLE
from aflite_core.represent import _phi_on_disk as phi_module
from aflite_core.represent import is_partitioned, on_cluster, phi_on_disk
from aflite_core.represent._phi_on_disk import PHI_FILE


@pytest.fixture
def phi(tmp_path):
    X = np.random.default_rng(0).standard_normal((1_003, 5)).astype(np.float32)
    return X, phi_on_disk(X, tmp_path, partition_rows=100)


def test_rows_read_from_disk_are_the_rows_written(phi, tmp_path):
    X, on_disk = phi
    assert is_partitioned(on_disk) and not on_cluster(on_disk)
    assert on_disk.shape == X.shape and (tmp_path / PHI_FILE).stat().st_size == X.nbytes
    rng = np.random.default_rng(1)
    positions = rng.integers(0, len(X), 300)  # any order, repeats, across partitions
    mask = rng.random(len(X)) < 0.3
    for index in (slice(95, 905), positions, mask, slice(None)):
        np.testing.assert_array_equal(on_disk[index], X[index])
    np.testing.assert_array_equal(np.asarray(on_disk), X)
    view = on_disk.select(np.flatnonzero(mask))
    np.testing.assert_array_equal(view[10:50], X[mask][10:50])
    # chunks across partition bounds: the sums of the rows in memory, in the same order
    for got, lo in zip(on_disk.chunk_sums(64), range(0, len(X), 64), strict=True):
        np.testing.assert_array_equal(got, X[lo:lo + 64].sum(axis=0, dtype=np.float64))
    assert on_disk.all_finite()
    on_disk.release()
    assert not (tmp_path / PHI_FILE).exists()  # the file goes with the matrix


def test_only_a_float32_matrix_goes_to_disk(tmp_path):
    with pytest.raises(ValueError, match="expected a 2-D float32 array, got float64"):
        phi_on_disk(np.zeros((3, 2)), tmp_path)
    with pytest.raises(ValueError, match="partition_rows: expected a positive count"):
        phi_on_disk(np.zeros((3, 2), dtype=np.float32), tmp_path, partition_rows=0)


@pytest.mark.parametrize("representation", ["tfidf_svd", "warmup"])
def test_an_audit_with_phi_on_disk_writes_the_same_run(tmp_path, monkeypatch, representation):
    """tfidf_svd writes Φ's rows to the file as the SVD makes them; another representation's
    Φ is moved there once built. Either way the run folder is the one of Φ in memory."""
    dataset = load_dataset(SAMPLE)
    small = load_dataset(dataset.frame.head(600).reset_index(), name="small.csv")
    config = AuditConfig(random_state=0, report=False, representation=representation,
                         representation_params={"n_components": 32}, n_partitions=8)
    in_memory = run_audit(small, config, runs_root=tmp_path / "memory", name="run")

    written = []
    monkeypatch.setattr(phi_module, "PHI_ON_DISK_MIN_ROWS", 1)
    monkeypatch.setattr(phi_module, "PARTITION_ROWS", 97)  # every reader crosses bounds
    real_matrix = phi_module.PhiWriter.matrix

    def matrix(self):
        written.append(self.n_rows)
        return real_matrix(self)

    monkeypatch.setattr(phi_module.PhiWriter, "matrix", matrix)
    on_disk = run_audit(small, config, runs_root=tmp_path / "disk", name="run")
    assert written == [600]

    names = sorted(p.name for p in in_memory.iterdir())
    assert names == sorted(p.name for p in on_disk.iterdir()) and PHI_FILE not in names
    assert {"phi_compact.parquet", "knn.parquet", "projection.parquet"} <= set(names)
    differ = [n for n in names if n != "summary.json"
              and (in_memory / n).read_bytes() != (on_disk / n).read_bytes()]
    assert differ == []
    summaries = summaries_without_times(in_memory, on_disk)
    assert summaries[0] == summaries[1]


def test_phi_stays_in_memory_below_its_size_or_without_room(tmp_path, monkeypatch):
    from collections import namedtuple

    assert phi_module.phi_folder_for(tmp_path, phi_module.PHI_ON_DISK_MIN_ROWS - 1) is None
    Usage = namedtuple("Usage", "total used free")
    need = 1_000_000 * 256 * 4
    monkeypatch.setattr(phi_module.shutil, "disk_usage", lambda _: Usage(0, 0, need))
    assert phi_module.phi_folder_for(tmp_path, 1_000_000) is None  # no room beyond Φ itself
    monkeypatch.setattr(phi_module.shutil, "disk_usage", lambda _: Usage(0, 0, 2 * need))
    assert phi_module.phi_folder_for(tmp_path, 1_000_000) == tmp_path
    assert phi_module.phi_folder_for(tmp_path, 1_000_000, 1_024) is None  # a wider Φ
