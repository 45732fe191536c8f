"""``python -m aflite_core compare RUN_A RUN_B [--out compare.html]``: two runs side by side.

Prints the headline figures of both runs (sizes, hypothesis-only accuracy, max |z| of a
Z-filter run, label shift), the overlap of their removed sets against the overlap random
removals of the same sizes would have, the correlation of their scores and the parameters
that differ. With ``--out`` it also writes a self-contained HTML page with the same sections
in two columns (run A left, run B right). Runs of different inputs are compared too; their
row overlap is then reported as not applicable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from aflite_core.runs import RunError, load_run, to_jsonable


def register(subparsers: Any) -> None:
    """Add the ``compare`` command."""
    p = subparsers.add_parser(
        "compare",
        help="compare two runs side by side (text summary, optional HTML page)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("run_a", metavar="RUN_A", help="a run folder (left column)")
    p.add_argument("run_b", metavar="RUN_B", help="a run folder (right column)")
    p.add_argument("--out", metavar="FILE", default=None,
                   help="also write the two-column comparison as a self-contained HTML file")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.add_argument("--json", action="store_true",
                   help="print the row overlap and parameter changes as JSON instead of text")
    p.set_defaults(func=run)


def _open(path: str, which: str) -> Any:
    """The run at ``path``, or a RunError naming which run could not be opened and why."""
    try:
        return load_run(path)
    except (ValueError, OSError) as exc:  # RunError, or an unreadable scores.parquet
        raise RunError(f"run {which} ({path}) cannot be opened: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    """Compare the two runs, print the summary, write the HTML page if asked."""
    # lazy: +639 ms to import
    from aflite_core.report import side_by_side, summary_text, write_compare_html

    if args.out is not None and Path(args.out).exists() and not args.overwrite:
        raise FileExistsError(f"{args.out} already exists; pass --overwrite to replace it")
    run_a, run_b = _open(args.run_a, "A"), _open(args.run_b, "B")
    side = side_by_side(run_a, run_b)
    if args.json:
        data = (side.comparison.to_dict() if side.comparison is not None
                else {"a": side.a.name, "b": side.b.name, "note": side.note})
        data["headline"] = {"a": side.a.headline, "b": side.b.headline}

        print(json.dumps(to_jsonable(data), indent=2, ensure_ascii=False))
    else:
        print(summary_text(side))
    if args.out is not None:
        path = write_compare_html(run_a, run_b, args.out, overwrite=args.overwrite, side=side)
        print(f"wrote {path}", file=sys.stderr)
    return 0
