"""The HTML report of a run folder, section by section: seconds and the process's RSS before
and after each (the report is built at the end of every audit, on the driver).

    .venv/bin/python benchmarks/bench_report_sections.py RUN_FOLDER

A run folder of a million rows comes from ``bench_distributed.py`` (its temporary folder) or
``python -m aflite_core run DATA --out RUN_FOLDER``.
"""

from __future__ import annotations

import functools
import resource
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aflite_core.report import html  # noqa: E402
from aflite_core.runs.folder import load_run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    run = load_run(argv[0])
    process = psutil.Process()

    def timed(name: str, section):
        @functools.wraps(section)
        def inner(*args, **kwargs):
            before, start = process.memory_info().rss, time.perf_counter()
            out = section(*args, **kwargs)
            what = getattr(args[1], "name", "") if len(args) > 1 else ""
            print(f"{name:<24} {what:<14} {time.perf_counter() - start:6.2f} s  RSS "
                  f"{before / 2**30:.2f} -> {process.memory_info().rss / 2**30:.2f} GB",
                  flush=True)
            return out
        return inner

    for name in dir(html):
        if name.startswith("_section"):
            setattr(html, name, timed(name, getattr(html, name)))
    start = time.perf_counter()
    text = html.build_report(run)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(f"report: {time.perf_counter() - start:.1f} s, {len(text) / 1e6:.1f} MB, RSS "
          f"{process.memory_info().rss / 2**30:.2f} GB at the end, the process's peak "
          f"{peak / 2**30:.2f} GB (load_run included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
