"""``python -m aflite_core decide RUN --import FILE.csv`` / ``--export FILE.csv``.

Review decisions as a spreadsheet: ``--export`` writes the decisions in force (``row_id``,
``decision``, ``label``, ``note``, ``reviewer``, ``decided_at``); ``--import`` records the
lines of a CSV with the columns ``row_id`` and ``decision`` (keep, drop, relabel, revert) and
optionally ``label`` (the new label of a relabel), ``note`` and ``reviewer``, in file order.
Every line is checked first: an unknown row id, a label outside the run's labels or an
unknown decision is one message naming the first bad line and how many there are, exit 2,
and nothing is recorded. ``python -m aflite_core export RUN --what curated`` then writes
the dataset with the decisions applied.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path
from typing import Any

REQUIRED = ("row_id", "decision")
OPTIONAL = ("label", "note", "reviewer")


def register(subparsers: Any) -> None:
    """Add the ``decide`` command."""
    p = subparsers.add_parser(
        "decide", help="import or export a run's review decisions as CSV",
        description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--import", dest="import_file", metavar="FILE.csv",
                      help="record the decisions of FILE.csv (columns row_id, decision, "
                           "optional label, note, reviewer)")
    what.add_argument("--export", dest="export_file", metavar="FILE.csv",
                      help="write the decisions in force to FILE.csv")
    p.add_argument("--reviewer", default="",
                   help="--import: the reviewer of lines that name none")
    p.add_argument("--overwrite", action="store_true", help="--export: replace FILE.csv")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Import or export, and say how many decisions."""
    # lazy: +682 ms to import
    from aflite_core.runs import check_not_in_run, decide, decisions_in_force, load_run

    opened = load_run(args.run_dir)
    if args.export_file:
        out = check_not_in_run(Path(args.export_file))
        if out.exists() and not args.overwrite:
            raise FileExistsError(f"{out.name} already exists; pass --overwrite to replace it")
        table = decisions_in_force(opened)
        table.to_csv(out, index=False, lineterminator="\r\n")
        print(f"wrote {len(table):,} decisions in force to {args.export_file}",
              file=sys.stderr)
        return 0
    lines = read_decision_lines(Path(args.import_file))
    name = Path(args.import_file).name
    try:
        n = decide(opened, [r["row_id"] for r in lines], "keep",
                   decisions=[r["decision"].strip().lower() for r in lines],
                   labels=[(r.get("label") or "").strip() or None for r in lines],
                   notes=[r.get("note") or "" for r in lines],
                   reviewers=[(r.get("reviewer") or "").strip() or args.reviewer
                              for r in lines])
    except ValueError as exc:
        raise ValueError(f"{name}: {_as_line(str(exc))}") from None
    print(f"recorded {n:,} decisions from {args.import_file} in {opened.path.name}",
          file=sys.stderr)
    return 0


def read_decision_lines(path: Path) -> list[dict[str, str]]:
    """The lines of a decisions CSV as dicts (every value text), the header checked.

    Raises
    ------
    ValueError
        No such file, no header, or a required column missing.
    """
    if not path.is_file():
        raise ValueError(f"{path.name}: no such file")
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise ValueError(f"{path.name}: expected the columns {', '.join(REQUIRED)} (and "
                             f"optionally {', '.join(OPTIONAL)}); missing "
                             f"{', '.join(missing)}, found {', '.join(header) or 'none'}")
        reader.fieldnames = header
        return [{k: (v if v is not None else "") for k, v in row.items() if k}
                for row in reader]


def _as_line(message: str) -> str:
    """The batch's "row N of the batch" as the file's "line N + 1" (the header is line 1)."""
    match = re.search(r"\(row (\d+) of the batch\)", message)
    if not match:
        return message
    line = int(match.group(1)) + 1
    text = message.replace(match.group(0), "").replace("  ", " ")
    return f"line {line}: {text}"
