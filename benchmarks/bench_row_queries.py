"""Explore's row queries at scale: the dashboard's RowIndex (NumPy + Arrow compute) vs DuckDB.

Answers the question of docs/dashboard.md "Filters at a million rows": which engine should
filter, search and sort a run's rows? For one run folder (e.g. the 1,000,000-row run that
``bench_dashboard_scale.py --keep`` leaves), every query below runs twice on each engine and
the second time is printed (the first in brackets: a column decoded, a sort computed, a
search made for the first time):

- the page of 50 rows with no filter, sorted by predictability (descending);
- removed rows with the label ``entailment``;
- the substring ``dog`` in the premise or hypothesis, case-insensitive;
- the whole-word regular expression ``\\bdogs?\\b``, case-insensitive;
- every row sorted by the hypothesis text;
- the removal rate per label (the breakdown).

Each query returns the count of matching rows and the first page; the counts of the two
engines are compared. DuckDB is not a dependency of the project: ``pip install duckdb`` in a
separate environment, or the DuckDB rows are skipped.

Run: ``.venv/bin/python benchmarks/bench_row_queries.py RUN_DIR``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from aflite_core.runs._row_index import RowIndex  # noqa: E402
from aflite_core.runs.folder import load_run  # noqa: E402
from aflite_core.runs.views import rows_table  # noqa: E402
from ui import filters  # noqa: E402


def _twice(fn: Callable[[], int]) -> tuple[float, float, int]:
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    start = time.perf_counter()
    count = fn()
    return first, time.perf_counter() - start, count


def arrow_queries(run_dir: Path) -> dict[str, Callable[[], int]]:
    """The queries as the Explore page runs them (ui.filters over a RowIndex)."""
    run = load_run(run_dir)
    table = rows_table(run)
    index = RowIndex(table)
    label = run.columns.get("label")
    text = [c for c in (run.columns.get("premise"), run.columns.get("hypothesis")) if c]

    def query(flt: filters.RowFilter, sort_by: str = "predictability",
              ascending: bool = False) -> int:
        mask = filters.mask_of(table, flt, index)
        positions = filters.sorted_positions(index.order(sort_by, ascending=ascending), mask)
        index.page(positions, 0, 50)
        return len(positions)

    def breakdown() -> int:
        codes, values = index.codes(label, strip=False)
        status = index.isin("status", ["removed"])
        filtered = index.isin("status", ["retained", "removed"])
        counts = np.bincount(codes[filtered], minlength=len(values))
        np.bincount(codes[filtered & status], minlength=len(values)) / np.maximum(counts, 1)
        return int((counts > 0).sum())

    base = {"label_column": label, "search_columns": text}
    return {
        "page, no filter, by predictability": lambda: query(filters.RowFilter(**base)),
        "removed + label entailment": lambda: query(filters.RowFilter(
            **base, statuses=["removed"], labels=["entailment"])),
        "search 'dog' (any case)": lambda: query(filters.RowFilter(**base, search="dog")),
        "regex \\bdogs?\\b (any case)": lambda: query(filters.RowFilter(
            **base, search=r"\bdogs?\b", regex=True)),
        "every row sorted by hypothesis": lambda: query(filters.RowFilter(**base),
                                                        sort_by=text[-1], ascending=True),
        "breakdown by label": breakdown,
    }


def duckdb_queries(run_dir: Path) -> dict[str, Callable[[], int]] | None:
    """The same queries in DuckDB over a table loaded from the run's Parquet files."""
    try:
        import duckdb
    except ImportError:
        return None
    run = load_run(run_dir)
    premise, hypothesis = run.columns.get("premise"), run.columns.get("hypothesis")
    label = run.columns.get("label")
    con = duckdb.connect()
    start = time.perf_counter()
    con.execute(f"CREATE TABLE r AS SELECT d.*, s.status, s.predictability FROM "
                f"read_parquet('{run_dir / 'dataset.parquet'}') d JOIN "
                f"read_parquet('{run_dir / 'scores.parquet'}') s USING (row_id)")
    print(f"duckdb: rows table loaded in {time.perf_counter() - start:.2f} s")

    def query(where: str, order: str = "predictability DESC") -> int:
        con.execute(f"SELECT * FROM r WHERE {where} ORDER BY {order} LIMIT 50").fetchall()
        return con.execute(f"SELECT count(*) FROM r WHERE {where}").fetchone()[0]

    regex = r"regexp_matches({c}, '\bdogs?\b', 'i')"
    return {
        "page, no filter, by predictability": lambda: query("true"),
        "removed + label entailment": lambda: query(
            f"status = 'removed' AND trim(\"{label}\") = 'entailment'"),
        "search 'dog' (any case)": lambda: query(
            f"\"{premise}\" ILIKE '%dog%' OR \"{hypothesis}\" ILIKE '%dog%'"),
        "regex \\bdogs?\\b (any case)": lambda: query(
            regex.format(c=f'"{premise}"') + " OR " + regex.format(c=f'"{hypothesis}"')),
        "every row sorted by hypothesis": lambda: query("true", f"\"{hypothesis}\""),
        "breakdown by label": lambda: len(con.execute(
            f"SELECT \"{label}\", count(*), avg((status = 'removed')::INT) FROM r WHERE "
            f"status IN ('retained', 'removed') GROUP BY 1").fetchall()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path, help="a run folder (e.g. of 1,000,000 rows)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    engines = {"arrow": arrow_queries(args.run_dir)}
    print(f"arrow: rows table read in {time.perf_counter() - start:.2f} s")
    duck = duckdb_queries(args.run_dir)
    if duck is None:
        print("duckdb: not installed (pip install duckdb to compare)")
    else:
        engines["duckdb"] = duck
    print(f"\n{'query':38s} " + " ".join(f"{e + ' s (first)':>22s}" for e in engines)
          + "  rows")
    for name in engines["arrow"]:
        cells, counts = [], []
        for queries in engines.values():
            first, again, count = _twice(queries[name])
            cells.append(f"{again:8.3f} ({first:7.3f})")
            counts.append(count)
        same = "" if len(set(counts)) == 1 else f"  DIFFERENT COUNTS {counts}"
        print(f"{name:38s} " + " ".join(f"{c:>22s}" for c in cells) + f"  {counts[0]:,}{same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
