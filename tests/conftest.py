"""Shared fixtures: paths to the real datasets shipped in ``tests/data``.

Tests need nothing outside the repository: the datasets are small verbatim copies with their
sources and licences in ``tests/data/README.md``, and the NLTK resources ship with the package
(``aflite_core/nltk_data``), so neither the shared data folder beside the repository nor
``NLTK_DATA`` is read here.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TEST_DATA = REPO_ROOT / "tests" / "data"

# Dashboard sessions in tests (AppTest and the browser test's server) start idle: no
# automatic audit of the bundled sample unless a test asks for it.
os.environ.setdefault("AFLITE_AUTORUN", "0")

# Annotation / projection caches and numba's compiled kernels go to a throw-away folder,
# never the user's ~/.cache: made by pytest itself, shared by its xdist workers and the
# processes the tests start (they inherit the variable), removed when pytest exits.
if "AFLITE_CACHE_DIR" not in os.environ:
    os.environ["AFLITE_CACHE_DIR"] = tempfile.mkdtemp(prefix="aflite-test-cache-")
    atexit.register(shutil.rmtree, os.environ["AFLITE_CACHE_DIR"], ignore_errors=True)


# Dask's worker processes (the clusters of processes the tests start, a few dozen) are forked
# from a server process that imported the audit's modules once, instead of each starting
# Python afresh and importing them again ("spawn", Dask's default): about a second less of
# a core for each worker. The variable reaches the CLI runs the tests start too (without
# the preload there: their workers import what they use after the fork).
os.environ.setdefault("DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD", "forkserver")
multiprocessing.set_forkserver_preload([
    "numpy", "pandas", "pyarrow", "scipy.sparse", "sklearn.linear_model", "distributed",
    "aflite_core.filter._aflite", "aflite_core.filter._backends", "aflite_core.pipeline",
    "aflite_core.represent._partitioned_svd", "aflite_core.represent._partitioned_rows",
    "aflite_core.represent._partitioned_counts", "aflite_core.represent._fold_pool",
    "aflite_core.measures.knn", "aflite_core.measures.pvi", "aflite_core.measures.slices",
    "aflite_core.measures.projection", "aflite_core.measures.label_issues",
    "aflite_core.cues.count_tables", "aflite_core.io._text_columns",
])


@pytest.fixture(scope="session")
def real_data() -> Path:
    """Folder of the real public datasets (SNLI, SICK, ARCT, FEVER-Symmetric) as CSV."""
    return TEST_DATA


@pytest.fixture(scope="session")
def snli_dir(real_data: Path) -> Path:
    """Folder with snli_dev.csv, snli_test.csv (first 2,000 rows), snli_train_sample.csv."""
    return real_data / "snli"


@pytest.fixture(scope="module")
def cluster():
    """A Dask cluster of two in-process workers talking TCP on the loopback interface, and
    its client: ``(cluster, client)``, one per test module."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as local, distributed.Client(local) as client:
        yield local, client


@pytest.fixture(autouse=True)
def _keep_main_module():
    """AppTest.from_function runs its script as ``__main__`` from a temporary file; process
    spawns later in the session (Dask's nannies) re-import ``__main__`` and fail when that
    file is gone. Every test leaves ``sys.modules["__main__"]`` as it found it."""
    import sys

    main_module = sys.modules.get("__main__")
    yield
    if main_module is not None:
        sys.modules["__main__"] = main_module


def pytest_collection_modifyitems(session, config, items):
    """The slow tests (``@pytest.mark.slow``: the browser tests, the Dask clusters, the first
    UMAP calls, whose numba compiles take seconds on a fresh install) start first.

    On two workers a long test that starts last keeps its worker busy after the other has
    run out of tests; started first, it overlaps with everything else (longest first).
    The order within each part is kept.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def runs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty runs root for this test (``AFLITE_RUNS_DIR``), no sample audited."""
    root = tmp_path / "runs"
    monkeypatch.setenv("AFLITE_RUNS_DIR", str(root))
    monkeypatch.delenv("AFLITE_SAMPLE", raising=False)
    return root


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One complete run of the bundled sample with every measure (computed once a session,
    by ``apptest_support.make_shared_run``)."""
    from apptest_support import make_shared_run

    return make_shared_run(str(tmp_path_factory.getbasetemp() / "shared-run"))
