"""How long one review decision takes to save at 1M rows (issue 62: <= 0.3 s).

Builds a run folder of ``--rows`` rows (the run writer's own layout, random scores, three
labels; no audit is run) with ``--prior`` decisions already recorded, then times
``AuditRun.decide`` on single rows the way the Review page calls it (one click, one row),
and the Review page's per-row reads (``row_card``). Prints the median and the slowest.

Usage::

    python benchmarks/bench_decisions.py [--rows 1000000] [--prior 3000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from aflite_core.runs._writer import write_run  # noqa: E402
from aflite_core.runs.folder import load_run  # noqa: E402


def build(root: Path, rows: int) -> Path:
    rng = np.random.default_rng(0)
    labels = np.array(["entailment", "neutral", "contradiction"])[rng.integers(0, 3, rows)]
    frame = pd.DataFrame({"premise": [f"premise {i}" for i in range(rows)],
                          "hypothesis": [f"hypothesis {i}" for i in range(rows)],
                          "label": labels},
                         index=pd.Index(np.arange(rows, dtype=np.int64), name="row_id"))
    status = np.where(rng.random(rows) < 0.3, "removed", "retained").astype(object)
    scores = pd.DataFrame({"row_id": frame.index.to_numpy(), "status": status,
                           "predictability": rng.random(rows),
                           "removal_round": np.where(status == "removed", 1, -1),
                           "label": labels})
    counts = pd.Series(labels).value_counts().to_dict()
    summary = {"input": {"name": "synthetic.csv", "columns": {
        "premise": "premise", "hypothesis": "hypothesis", "label": "label"}},
        "labels": {"before": {k: int(v) for k, v in counts.items()}}}
    return write_run(root, "r", frame=frame, scores=scores, summary=summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--prior", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        path = build(Path(tmp) / "runs", args.rows)
        print(f"built a run of {args.rows:,} rows in {time.perf_counter() - start:.1f} s")
        run = load_run(path)
        run.decide(list(range(args.prior)), "keep", reviewer="bench")
        seconds = []
        for i in range(args.repeat):
            begin = time.perf_counter()
            run.decide([args.prior + i], "drop", note="bench", reviewer="bench")
            seconds.append(time.perf_counter() - begin)
        print(f"one decision saved (with {args.prior:,} before it): median "
              f"{statistics.median(seconds):.3f} s, slowest {max(seconds):.3f} s "
              f"(goal <= 0.3 s)")
        assert len(run.decisions()) == args.prior + args.repeat
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
