"""``python -m aflite_core report RUN_DIR --out report.html``: one self-contained HTML file.

The page inlines Plotly's JavaScript, so it opens offline; all dataset text is escaped.
``--format md`` (or an ``.md`` file) writes the card to hand on instead: GitHub Markdown of
at most 150 lines for a dataset card or a README (what was audited, the headline figures with
their caveats, top cues and slices, label issues, the review decisions and the curated
export), with no HTML and no link to this machine.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``report`` command."""
    p = subparsers.add_parser(
        "report",
        help="write the self-contained HTML report of a run",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="file to write (HTML, or Markdown with --format md or a .md name)")
    p.add_argument("--format", choices=("html", "md"), default=None,
                   help="html (default) or md: the Markdown card for a dataset card")
    p.add_argument("--samples", type=int, default=5, metavar="N",
                   help="examples shown per label and status (default 5)")
    p.add_argument("--top-cues", type=int, default=20, metavar="N",
                   help="cues shown (default 20)")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build and write the report."""
    fmt = args.format or ("md" if str(args.out).lower().endswith(".md") else "html")
    if fmt == "md":
        from aflite_core.report import write_card  # lazy: +1099 ms to import

        print(f"wrote {write_card(args.run_dir, args.out, overwrite=args.overwrite)}",
              file=sys.stderr)
        return 0
    from aflite_core.report import write_report  # lazy: +1216 ms to import

    path = write_report(args.run_dir, args.out, overwrite=args.overwrite,
                        n_samples=args.samples, top_cues=args.top_cues, callback=_progress)
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _progress(event: dict) -> None:
    """A line on standard error per section drawn (a large run's report takes minutes)."""
    print(f"[{float(event['fraction']):4.0%}] {event['message']}", file=sys.stderr, flush=True)
