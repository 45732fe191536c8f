"""``python -m aflite_core resources``: which NLTK data the linguistic features can use.

Lists every resource as installed or missing, with the feature families that need it,
where it was found (the copy bundled with the package, or a folder of your own NLTK data,
which takes precedence) and where NLTK looks (``NLTK_DATA``). ``--download`` fetches the
missing ones with NLTK's downloader (needs network access); nothing is ever downloaded
otherwise. ``--check`` exits with status 1 when a required (non-optional) resource is missing.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``resources`` command."""
    p = subparsers.add_parser(
        "resources",
        help="list (and download) the NLTK data the linguistic features use",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("--download", action="store_true",
                   help="download the missing resources (network access needed)")
    p.add_argument("--only", metavar="NAMES",
                   help="comma-separated resource names to download (default: all missing)")
    p.add_argument("--dir", metavar="DIR",
                   help="download folder (default: NLTK's, e.g. ~/nltk_data); add it to "
                        "NLTK_DATA if it is not on NLTK's search path")
    p.add_argument("--check", action="store_true",
                   help="exit with status 1 when a required resource is missing")
    p.set_defaults(func=run)


def _where(location: str | None) -> str:
    """Say where a resource was found: the bundled copy, or the user's own folder."""
    from aflite_core.cues import BUNDLED_DATA  # lazy: +27 ms to import

    if location is None:
        return "not found"
    if location.startswith(str(BUNDLED_DATA)):
        return f"bundled with aflite_core ({location})"
    return location


def _print_status() -> list:
    # lazy: +27 ms to import
    from aflite_core.cues import BUNDLED_DATA, refused_entries, search_path, status

    refused = refused_entries()
    if refused:
        print(f"WARNING: NLTK refuses the data bundled with aflite_core: {refused[0]} is "
              f"writable by another account (group or world write bit, e.g. installed with "
              f"umask 002). Fix: chmod -R go-w {BUNDLED_DATA}\n")
    rows = status()
    width = max(len(s.resource.name) for s in rows)
    print("NLTK search path (NLTK_DATA / nltk.data.path; the bundled copy is searched last):")
    for folder in search_path():
        print(f"  {folder}")
    print()
    for s in rows:
        state = "installed" if s.installed else "MISSING  "
        kind = "optional" if s.resource.optional else "required"
        families = ",".join(s.resource.families)
        print(f"{state}  {s.resource.name:<{width}}  {kind}  [{families}]  {s.resource.purpose}")
        print(f"{'':<11}{'':<{width}}  found: {_where(s.location)}")
    return rows


def run(args: argparse.Namespace) -> int:
    """Print the status; download missing resources when asked."""
    # lazy: +27 ms to import
    from aflite_core.cues import DOWNLOAD_COMMAND, download, get_resource, nltk_command

    rows = _print_status()
    missing = [s.resource.name for s in rows if not s.installed]
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        for name in wanted:
            get_resource(name)  # ValueError names the valid resources
        missing = [n for n in wanted if n in missing]
    if not args.download:
        if missing:
            print(f"\n{len(missing)} missing. Install with: {DOWNLOAD_COMMAND}"
                  f"\n  or: {nltk_command(missing)}")
        required_missing = [s.resource.name for s in rows
                            if not s.installed and not s.resource.optional]
        return 1 if args.check and required_missing else 0
    if not missing:
        print("\nnothing to download")
        return 0
    print(f"\ndownloading {', '.join(missing)} ...")
    result = download(missing, download_dir=args.dir, quiet=True)
    failed = [name for name, ok in result.items() if not ok]
    for name, ok in result.items():
        print(f"  {name}: {'ok' if ok else 'FAILED'}")
    if failed:
        print(f"error: could not download {', '.join(failed)} (offline, or the NLTK data "
              "server is unreachable); copy an nltk_data folder and set NLTK_DATA instead",
              file=sys.stderr)
        return 1
    return 0
