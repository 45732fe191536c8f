"""``python -m aflite_core export RUN_DIR --what W --format F --out FILE``.

Row exports carry ``row_id``, every original column unchanged, then ``status``,
``predictability`` and ``removal_round``. CSV cells starting with ``=``, ``+``, ``-``,
``@``, tab or carriage return get a leading ``'`` so spreadsheets do not run them as
formulas; ``--no-sanitize`` writes the exact values (machine use).

``--subset NAME`` exports only the rows of a subset saved in the run (``subsets/NAME.parquet``,
e.g. from the dashboard's Explore page).

``--scheduler ADDR`` (or ``local:N``) encodes a CSV export's chunks as tasks on a Dask
cluster's workers, a few ahead, and writes their bytes here in order: the same file.

The file is written as ``.FILE.part-<token>`` next to FILE and renamed at the end; on an
error (a full disk) or SIGTERM the temporary file is removed and FILE is left untouched.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aflite_core._validation import available_cores
from aflite_core.represent import stream_ordered
from aflite_core.runs import (
    CURATED_FORMATS,
    FORMATS,
    LABEL_ISSUE_EXPORTS,
    ROW_EXPORTS,
    TABLE_EXPORTS,
    curated_hardness,
    export_curated,
    export_run,
    load_run,
    load_subset,
)


def register(subparsers: Any) -> None:
    """Add the ``export`` command."""
    p = subparsers.add_parser(
        "export",
        help="export retained/removed rows, scores or cues of a run as CSV or Parquet",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder")
    p.add_argument("--what", required=True,
                   choices=[*ROW_EXPORTS, *LABEL_ISSUE_EXPORTS, *TABLE_EXPORTS, "curated"],
                   help="curated: the input's rows with the review decisions applied "
                        "(python -m aflite_core decide), every original column and nothing "
                        "added; OUT.changes.csv lists each change")
    p.add_argument("--format", choices=sorted({*FORMATS, *CURATED_FORMATS}), default=None,
                   help="csv or parquet (default: from the --out suffix, else csv); "
                        "--what curated also tsv, jsonl, json, hf (default: the input's own)")
    p.add_argument("--apply-filter", action="store_true",
                   help="--what curated: leave AFLite's removed rows out too (a row decided "
                        "keep stays)")
    p.add_argument("--out", required=True, metavar="FILE", help="file to write")
    p.add_argument("--no-sanitize", action="store_true",
                   help="CSV: write exact values, without spreadsheet formula neutralising")
    p.add_argument("--columns", metavar="A,B,...",
                   help="only these columns (row_id is always included in row exports)")
    p.add_argument("--rows", metavar="FILE",
                   help="only the row ids listed in FILE, one per line")
    p.add_argument("--subset", metavar="NAME",
                   help="only the rows of the subset NAME saved in the run (RUN_DIR/subsets/"
                        "NAME.parquet, e.g. from the dashboard's Explore page)")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.add_argument("--scheduler", metavar="ADDR", default=None,
                   help="CSV: encode the chunks on a Dask cluster's workers (tcp://HOST:PORT "
                        "of a running scheduler, or local:N for a local cluster of N "
                        "workers); the file is the same bytes")
    p.set_defaults(func=run)


def _read_row_ids(path: str) -> list[str]:
    text = Path(path).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def run(args: argparse.Namespace) -> int:
    """Write the export and report how many rows went out."""
    from aflite_core.commands.run import exit_cleanly_on_sigterm  # lazy: +9 ms to import

    exit_cleanly_on_sigterm()  # SIGTERM -> SystemExit: the .part- file is removed
    if args.what == "curated":
        return _curated(args)
    if args.apply_filter:
        raise ValueError("--apply-filter: only with --what curated")
    if args.format not in (None, *FORMATS):
        raise ValueError(f"--format {args.format}: only with --what curated; expected "
                         f"{' or '.join(FORMATS)}")
    columns = None
    if args.columns:
        columns = [c.strip() for c in args.columns.split(",") if c.strip()]
    if args.rows and args.subset:
        raise ValueError("--rows and --subset: give one of them, not both")
    row_ids = _read_row_ids(args.rows) if args.rows else None
    if args.subset:
        row_ids = load_subset(args.run_dir, args.subset).row_ids.tolist()
    with _chunk_mapper(args.scheduler) as map_chunks:
        result = export_run(
            args.run_dir, args.what, args.out, format=args.format, columns=columns,
            row_ids=row_ids, sanitize=not args.no_sanitize, overwrite=args.overwrite,
            map_chunks=map_chunks,
        )  # fmt: skip
    note = " (spreadsheet-safe)" if result.sanitized else ""
    print(f"wrote {result.n_rows:,} rows to {args.out} as {result.format}{note}",
          file=sys.stderr)
    if args.what == "retained_clean":
        record = (load_run(args.run_dir).measures or {}).get("label_issues") or {}
        _say_hardness(record.get("bulk_hardness"), "retained_clean")
    return 0


def _say_hardness(block: dict | None, name: str) -> None:
    """One line on stderr: the exported set's hypothesis-only accuracy beyond a label-matched
    random subset of its size, beside the retained set's (what the bulk action gives up)."""
    part, kept = ((block or {}).get(name), (block or {}).get("retained"))
    if not isinstance(part, dict) or not isinstance(kept, dict):
        return
    print(f"hardness: the {part['n_rows']:,}-row sample of this set is "
          f"{part['beyond_random_pp']:+.1f} pp beyond a label-matched random subset of its "
          f"size for a hypothesis-only model, the retained set {kept['beyond_random_pp']:+.1f}"
          f" pp (> 0: harder than random rows; the hardness a bulk drop gives up)",
          file=sys.stderr)


def _curated(args: argparse.Namespace) -> int:
    """The curated dataset (:func:`aflite_core.runs.export_curated`)."""
    for flag, given in (("--columns", args.columns), ("--rows", args.rows),
                        ("--subset", args.subset), ("--scheduler", args.scheduler)):
        if given:
            raise ValueError(f"{flag}: not with --what curated (it writes every row the "
                             "decisions keep, every original column)")
    result = export_curated(args.run_dir, args.out, format=args.format,
                            apply_filter=args.apply_filter, overwrite=args.overwrite)
    print(f"wrote {result.n_rows:,} rows to {args.out} as {result.format} "
          f"({result.dropped:,} dropped, {result.relabelled:,} relabelled, "
          f"{result.filtered:,} filtered out); the changes in {result.changes.name}",
          file=sys.stderr)
    if args.apply_filter:
        _say_hardness(curated_hardness(args.run_dir), "curated_apply_filter")
    return 0


@contextlib.contextmanager
def _chunk_mapper(scheduler: str | None) -> Iterator[Any]:
    """``export_run``'s ``map_chunks`` on the cluster of ``scheduler`` (None: here); a local
    cluster it started is closed at the end."""
    if not scheduler:
        yield None
        return

    from aflite_core.filter import check_scheduler, connect  # lazy: +32 ms to import

    check_scheduler(scheduler, "dask")  # local:N bounded; an address is probed by connect
    client, owned = connect(scheduler, available_cores())
    try:
        yield functools.partial(stream_ordered, client)
    finally:
        for obj in reversed(owned):
            obj.close()
