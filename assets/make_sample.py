"""Build ``aflite_core/data/snli_sample.csv``, the sample the dashboard opens on.

3,000 rows of ``snli_train_sample.csv`` (split ``train``) and 1,000 rows of
``snli_dev.csv`` (split ``dev``) from the shared data folder, drawn with a fixed seed
and kept in their file order, with the columns ``split,id,premise,hypothesis,label``
copied verbatim. Run from the repository root::

    python assets/make_sample.py [SHARED_DATA_DIR]

(default: ``../shared/data``). The output is deterministic.
"""

from __future__ import annotations

import csv
import random
import sys
from pathlib import Path

COLUMNS = ["split", "id", "premise", "hypothesis", "label"]
SEED = 20240601
PARTS = (("snli_train_sample.csv", 3000), ("snli_dev.csv", 1000))


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    shared = Path(argv[1]) if len(argv) > 1 else here.parent.parent / "shared" / "data"
    rng = random.Random(SEED)
    out_rows: list[dict[str, str]] = []
    for file_name, n in PARTS:
        rows = read_rows(shared / "snli" / file_name)
        picked = sorted(rng.sample(range(len(rows)), n))
        out_rows.extend({c: rows[i][c] for c in COLUMNS} for i in picked)
    out = here.parent / "aflite_core" / "data" / "snli_sample.csv"
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(out_rows)
    print(f"wrote {len(out_rows)} rows to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
