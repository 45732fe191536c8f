"""Shared fixtures: paths to the real datasets shipped in ``tests/data``.

Tests need nothing outside the repository: the datasets are small verbatim copies with their
sources and licences in ``tests/data/README.md``, and the NLTK resources ship with the package
(``aflite_core/nltk_data``), so neither the shared data folder beside the repository nor
``NLTK_DATA`` is read here.
"""

from __future__ import annotations

import atexit
import gc
import multiprocessing
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TEST_DATA = REPO_ROOT / "tests" / "data"

# The suite starts a few hundred Python processes (CLI runs, dashboard audit workers, Dask
# workers, the browser tests' server). With bytecode writing turned off (PYTHONDONTWRITEBYTECODE,
# as some CI images set it) every one of them compiled the project's modules from source again,
# and every xdist worker rewrote every test module again: 17 s of the suite's 371 s on the
# 2-core VM. The suite writes bytecode (into the gitignored __pycache__ folders), as Python does
# by default; the processes it starts inherit that.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Dashboard sessions in tests (AppTest and the browser test's server) start idle: no
# automatic audit of the bundled sample unless a test asks for it.
os.environ.setdefault("AFLITE_AUTORUN", "0")
# Nor do their audits learn this machine's pace (aflite_core.progress_pace): a test's bar
# would depend on the audits run before it. tests/test_progress_pace.py turns it on.
os.environ.setdefault("AFLITE_PACE_FILE", "off")

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
FORKSERVER_PRELOAD = [
    # what distributed itself preloads (distributed.utils.get_mp_context) ...
    "distributed", "dask", "msgpack", "cloudpickle", "tornado", "toolz", "numpy", "pandas",
    # ... and what the audit's tasks import on a worker: scikit-learn's preprocessing (1.2 s)
    # and NLTK (2 s) are imported inside the functions that use them
    "pyarrow", "scipy.sparse", "sklearn.linear_model", "sklearn.preprocessing", "nltk",
    "aflite_core.filter._aflite", "aflite_core.filter._backends", "aflite_core.filter._linear",
    "aflite_core.pipeline", "aflite_core.represent._partitioned_svd",
    "aflite_core.represent._partitioned_rows", "aflite_core.represent._partitioned_counts",
    "aflite_core.represent._partitioned_tfidf", "aflite_core.represent._fold_pool",
    "aflite_core.measures.knn", "aflite_core.measures.pvi", "aflite_core.measures.slices",
    "aflite_core.measures._slices_on_workers", "aflite_core.measures.projection",
    "aflite_core.measures._map_reduction", "aflite_core.represent._row_products",
    "aflite_core.measures._umap_layout", "aflite_core.measures.label_issues",
    "aflite_core.cues.count_tables", "aflite_core.cues.resources", "aflite_core.io._text_columns",
]
multiprocessing.set_forkserver_preload(FORKSERVER_PRELOAD)
# distributed sets its own, shorter preload list the first time it makes a worker process
# unless told it has done so: without this line the list above is replaced, and every
# worker imported scikit-learn and NLTK again (about 45 s of a core over the suite).
try:
    import distributed.utils as _distributed_utils
except ImportError:  # the Dask tests skip themselves without distributed
    pass
else:
    _distributed_utils._forkserver_preload_set = True


@pytest.fixture(scope="session")
def real_data() -> Path:
    """Folder of the real public datasets (SNLI, SICK, ARCT, FEVER-Symmetric) as CSV."""
    return TEST_DATA


@pytest.fixture(scope="session")
def snli_dir(real_data: Path) -> Path:
    """Folder with snli_dev.csv, snli_test.csv (first 2,000 rows), snli_train_sample.csv."""
    return real_data / "snli"


@pytest.fixture(scope="session")
def snli_dev_head(snli_dir: Path, tmp_path_factory):
    """``snli_dev_head(n)``: a CSV file of SNLI dev's first ``n`` rows, written once a
    session for each ``n`` (the audits of the pipeline's tests read it as a user's file)."""
    import pandas as pd  # lazy: most test modules never ask for it

    made: dict[int, Path] = {}

    def head(n: int) -> Path:
        if n not in made:
            frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).iloc[:n]
            made[n] = tmp_path_factory.mktemp(f"snli_dev_{n}") / f"snli_{n}.csv"
            frame.to_csv(made[n], index=False)
        return made[n]

    return head


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


def pytest_collection_finish(session):
    """Everything alive once the tests are collected (the modules imported, the test
    functions, their parameters: about 230,000 objects) is moved out of the garbage
    collector's reach (``gc.freeze``): it lives to the end of the session anyway, and every
    full collection scanned it again. Halves the time an xdist worker spends collecting
    garbage (8.5 s to 4.6 s of 81 s of CPU for ``tests/ui`` and ``tests/runs`` on one
    worker)."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last test of a file (its fixtures torn down): what is still alive (modules
    imported since, session fixtures, caches) is frozen too, after one collection, so the
    next file starts with a small heap for the collector to scan. Every audit ends with a
    full collection (``run_audit``), which scanned the modules the tests had imported since
    collection again: 140 ms each late in a worker's session, about 23 s of the suite."""
    if nextitem is None or nextitem.path != item.path:
        gc.collect()
        gc.freeze()


@pytest.fixture
def runs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty runs root for this test (``AFLITE_RUNS_DIR``), no sample audited."""
    root = tmp_path / "runs"
    monkeypatch.setenv("AFLITE_RUNS_DIR", str(root))
    monkeypatch.delenv("AFLITE_SAMPLE", raising=False)
    return root


@pytest.fixture
def spare_children(monkeypatch: pytest.MonkeyPatch) -> list:
    """The processes the cue measure's spare child starts (``cues._spare_child.start_child``,
    really started), in order; none is left waiting after the test."""
    from aflite_core.cues import _spare_child  # lazy: most test modules never ask for it

    started: list = []
    start = _spare_child.start_child

    def recording(*args, **kwargs):
        started.append(start(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(_spare_child, "start_child", recording)
    yield started
    _spare_child.discard_spare_child()


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One complete run of the bundled sample with every measure (computed once a session,
    by ``apptest_support.make_shared_run``)."""
    from apptest_support import make_shared_run

    return make_shared_run(str(tmp_path_factory.getbasetemp() / "shared-run"))
