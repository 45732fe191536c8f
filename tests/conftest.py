"""Shared fixtures: paths to the real shared datasets and the offline NLTK data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("AFLITE_SHARED", REPO_ROOT.parent / "shared"))
SHARED_DATA = SHARED / "data"

# Tests run offline: point NLTK at the shared resource folder unless the caller chose one.
if "NLTK_DATA" not in os.environ and (SHARED / "nltk_data").is_dir():
    os.environ["NLTK_DATA"] = str(SHARED / "nltk_data")

# Dashboard sessions in tests (AppTest and the browser test's server) start idle: no
# automatic audit of the bundled sample unless a test asks for it.
os.environ.setdefault("AFLITE_AUTORUN", "0")

# Annotation / projection caches go to a throw-away folder, never the user's ~/.cache.
if "AFLITE_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["AFLITE_CACHE_DIR"] = tempfile.mkdtemp(prefix="aflite-test-cache-")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Folder of the real public datasets (SNLI, SICK, ARCT, FEVER-Symmetric) as CSV."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data folder not found at {SHARED_DATA}; set AFLITE_SHARED")
    return SHARED_DATA


@pytest.fixture(scope="session")
def snli_dir(shared_data: Path) -> Path:
    """Folder with snli_dev.csv, snli_test.csv, snli_train_sample.csv."""
    return shared_data / "snli"
