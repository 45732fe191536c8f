"""Small real runs for the comparison tests (``test_compare.py``, ``test_app_compare.py``).

The input is 600 rows of SNLI dev and 600 of SNLI test (``tests/data/snli``, split column
``dev`` / ``test``, filtered jointly), audited with fast settings:

``aflite``      AFLite, cues + label shift + baselines
``aflite_seed1`` AFLite with another seed, label shift only (no cues, no baselines)
``zfilter``     the Z-filter on the same input, label shift + baselines
``other_input`` AFLite on the next 600 + 600 rows (a different input)

Built once per test session into a temporary folder; tests copy what they need.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

REPO_ROOT = Path(__file__).resolve().parent.parent
SNLI = REPO_ROOT / "tests" / "data" / "snli"
FAST = {"representation_params": {"n_components": 32}, "n_partitions": 8, "report": False}
BASELINES = {"baselines": {"n_random_draws": 1, "n_splits": 2}}
RUN_NAMES = ("aflite", "aflite_seed1", "zfilter", "other_input")


def snli_subset(folder: Path, *, offset: int = 0, n: int = 600) -> Path:
    """``n`` rows of SNLI dev and ``n`` of SNLI test from ``offset`` as one CSV."""
    read = functools.partial(pd.read_csv, dtype=str, keep_default_na=False)
    dev = read(SNLI / "snli_dev.csv").iloc[offset:offset + n]
    test = read(SNLI / "snli_test.csv").iloc[offset:offset + n]
    test = test.assign(id="test-" + test["id"])
    path = folder / f"snli_dev_test_{offset}_{n}.csv"
    pd.concat([dev, test], ignore_index=True).to_csv(path, index=False)
    return path


@functools.cache
def build_runs(folder: str) -> dict[str, Path]:
    """The four runs under ``folder/runs`` (computed once per folder); name -> run folder."""
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    base = Path(folder)
    base.mkdir(parents=True, exist_ok=True)
    root = base / "runs"
    same = load_dataset(snli_subset(base))
    other = load_dataset(snli_subset(base, offset=600))
    specs = {
        "aflite": (same, {"measures": ("cues", "label_shift", "baselines"),
                          "measure_params": BASELINES}),
        "aflite_seed1": (same, {"measures": ("label_shift",), "random_state": 1}),
        "zfilter": (same, {"filter": "z", "measures": ("label_shift", "baselines"),
                           "measure_params": BASELINES}),
        "other_input": (other, {"measures": ("label_shift",)}),
    }
    return {name: run_audit(data, AuditConfig(**FAST, **config), runs_root=root, name=name)
            for name, (data, config) in specs.items()}
