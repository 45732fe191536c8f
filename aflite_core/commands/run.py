"""``python -m aflite_core run DATA --out RUN_DIR``: a headless audit into one run folder.

``--out`` names the run folder itself. It is written as a hidden sibling temporary
folder and renamed at the end, so a failed or interrupted run leaves nothing under that
name. An existing ``--out`` is refused unless ``--overwrite`` is given (and even then
only a run folder or an empty folder is replaced). One progress line per AFLite round
goes to stderr; the finished folder's path goes to stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from aflite_core._validation import available_cores
from aflite_core.audit_client import audit_client
from aflite_core.cgroup_limits import limit_native_threads, usable_memory
from aflite_core.commands._input import (  # noqa: F401 - parse_bytes, DEFAULT_MAX_BYTES re-exported
    DEFAULT_MAX_BYTES,
    ShardsOnCluster,
    add_input_arguments,
    cli_hint,
    load_input,
    parse_bytes,
)
from aflite_core.commands._parameter_flags import (
    add_measure_flags,
    add_parameter_flags,
    given_parameters,
    measure_options,
)
from aflite_core.filter import filter_units
from aflite_core.heap_trim import (
    HEAP_THRESHOLD,
    arrow_on_c_heap,
    limit_arenas,
    map_large_allocations,
    numpy_small_pages,
    release_free_heap,
)
from aflite_core.measures import default_names
from aflite_core.measures import names as measure_names
from aflite_core.parameters import FIELD, FILTER_PARAM, PARAMETERS, REPRESENTATION_PARAM
from aflite_core.runs import (
    DATASET_FILE,
    SUMMARY_FILE,
    TEMP_PREFIX,
    check_run_name,
    claim,
    hidden_name,
    load_run,
)

#: Rows from which the driver of a cluster's audit keeps mapping its large allocations after
#: the load (:func:`~aflite_core.heap_trim.map_large_allocations`): at 1M rows it held
#: 0.05-0.11 GB less at the stages' ends; at 100k rows the fresh pages of the driver's own
#: work cost 1 s of 8 (the slices' k-means 1.75 -> 1.0-1.2 s, AFLite's rounds 2.6 -> 2.4 s on
#: two local workers), so below it temporaries reuse the heap (``HEAP_THRESHOLD``).
DRIVER_MAPS_FROM_ROWS = 1_000_000
#: A local default audit's peak RSS, measured on SNLI-like rows (``bench_pipeline.py``,
#: 2026-11-30: 1.52-1.54 GB at 1M rows, 2.49 at 2M, 5.00 at 5M): about this much...
PEAK_BASE_BYTES = 500 << 20
#: ... plus this much a row (longer texts hold more).
PEAK_ROW_BYTES = 1_000


def memory_note(n_rows: int, usable: int | None) -> str | None:
    """What to say before a local audit of ``n_rows`` rows whose expected peak
    (:data:`PEAK_BASE_BYTES` + :data:`PEAK_ROW_BYTES` a row) is more than ``usable`` bytes
    (:func:`~aflite_core.cgroup_limits.usable_memory`: the machine's, or its container's
    limit), past which the system would kill it; None when it fits or nothing is known.

    Examples
    --------
    >>> memory_note(100_000, 16 << 30) is None
    True
    >>> memory_note(5_000_000, 4 << 30)[:44]
    'note: a local audit of 5,000,000 rows peaks '
    """
    if usable is None:
        return None
    expected = PEAK_BASE_BYTES + PEAK_ROW_BYTES * int(n_rows)
    if expected <= usable:
        return None
    return (f"note: a local audit of {n_rows:,} rows peaks at about {expected / 2**30:.1f} GB "
            f"on SNLI-like texts, more than the {usable / 2**30:.1f} GB this process may use "
            "(the machine's memory or its container's limit): it may be stopped by the system "
            "part way. A Dask cluster holds the rows on its workers (--scheduler; "
            "docs/scaling.md), or give it a machine with more memory")

#: AuditConfig / AFLite parameter names and the CLI options that set them.
_PARAMETER_FLAGS = {**{p.name: p.flag for p in PARAMETERS}, "measures": "--measures"}


def cli_parameter(message: str) -> str:
    """Name the CLI option in a parameter error (``tau: ...`` -> ``--tau: ...``), keeping the
    library's name when it differs (``--seed (random_state): expected ...``)."""
    match = re.match(r"(\w+)(?=[:= ])", message)
    if match and match.group(1) in _PARAMETER_FLAGS:
        name, flag = match.group(1), _PARAMETER_FLAGS[match.group(1)]
        shown = flag if flag == f"--{name}" else f"{flag} ({name})"
        return shown + message[match.end() :]
    return message


def _reword(exc: BaseException, text: str) -> None:
    """Replace the message of ``exc`` in place (same type, same traceback)."""
    if text != str(exc):
        exc.args = (text,)


def parse_size(text: str) -> int | float:
    """``"5000"`` -> 5000 rows, ``"0.3"`` -> fraction 0.3, ``"30%"`` -> 0.3."""
    raw = text.strip()
    try:
        if raw.endswith("%"):
            value = float(raw[:-1]) / 100.0
        elif raw.isdigit():
            return int(raw)
        else:
            value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of rows (e.g. 5000) or a fraction (0.5 or 50%), got {text!r}"
        ) from None
    if value.is_integer() and value >= 1 and not raw.endswith("%"):
        return int(value)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(
            f"a fraction must be between 0 and 1 (exclusive), got {text!r}"
        )
    return value


def parse_representation(text: str) -> tuple[str, dict]:
    """``tfidf-svd`` | ``warmup`` | ``precomputed:PATH`` | ``static:NAME`` |
    ``sentence-transformers:NAME``."""
    method, _, arg = text.partition(":")
    key = method.strip().lower().replace("-", "_")
    if key in ("tfidf_svd", "warmup") and not arg:
        return key, {}
    if key == "precomputed" and arg:
        return key, {"path": arg}
    if key in ("static", "sentence_transformers") and arg:
        return key, {"model": arg}
    raise argparse.ArgumentTypeError(
        "expected tfidf-svd, warmup, precomputed:PATH, static:NAME or "
        f"sentence-transformers:NAME, got {text!r}"
    )


def parse_measures(text: str) -> tuple[str, ...]:
    """Comma-separated measure names; ``none`` for no measure."""
    known = measure_names()
    given = tuple(n.strip() for n in text.split(",") if n.strip())
    if given in ((), ("none",)):
        return ()
    bad = [n for n in given if n not in known]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown measure(s) {', '.join(bad)}; choose from {', '.join(known)} or none"
        )
    return given


def register(subparsers: Any) -> None:
    """Add the ``run`` command."""
    default_measures = default_names()

    p = subparsers.add_parser(
        "run",
        help="audit a dataset with AFLite and write a run folder",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("data", metavar="DATA",
                   help="dataset file (CSV, TSV, JSONL, JSON, Parquet, .gz)")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="run folder to create")
    p.add_argument("--overwrite", action="store_true",
                   help="replace RUN_DIR if it is an existing run folder")
    add_input_arguments(p, ("premise", "hypothesis", "label", "split"),
                        title="columns (guessed when omitted; SNLI/MNLI names are recognised)",
                        id_help="column of unique row ids (default: row position)")
    add_parameter_flags(p, {"size": parse_size, "representation": parse_representation})
    a = p.add_argument_group("measures and output")
    a.add_argument("--measures", type=parse_measures, default=None, metavar="LIST",
                   help="comma-separated measures, or none "
                        f"(default {','.join(default_measures)})")
    a.add_argument("--challenge", action="append", default=None, metavar="FILE",
                   help="a challenge file for the out-of-distribution measure (repeatable; "
                        "adds the ood measure)")
    a.add_argument("--no-report", action="store_true", help="do not write report.html")
    a.add_argument("--scheduler", metavar="ADDR", default=None,
                   help="run AFLite's partitions on Dask: tcp://HOST:PORT of an existing "
                        "scheduler, or local:N for a local cluster of N workers "
                        "(see docs/scaling.md)")
    add_measure_flags(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def _target(out: str, overwrite: bool) -> tuple[Path, str]:
    path = Path(out)
    name = path.name
    if name in ("", ".", ".."):
        raise ValueError(f"--out: expected a folder name for the run, got {out!r}")
    name = check_run_name(name, what="--out")  # NFC; says precisely what is wrong
    path = path.parent / name
    if path.exists() or path.is_symlink():
        if not overwrite:
            raise FileExistsError(
                f"--out: {path} already exists; pass --overwrite to replace it or choose "
                "another folder"
            )
        if not path.is_dir() or not ((path / SUMMARY_FILE).is_file() or not any(path.iterdir())):
            raise FileExistsError(
                f"--out: {path} exists and is not a run folder (no {SUMMARY_FILE}); "
                "refusing to overwrite it"
            )
    return path.parent, name


def exit_cleanly_on_sigterm() -> None:
    """Turn SIGTERM into ``SystemExit`` so the temporary run folder is removed on the way out
    (SIGKILL cannot be caught: its hidden folder is ignored and cleaned up later)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):  # noqa: ARG001 - signal handler signature
        print("terminated", file=sys.stderr)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


class _Printer:
    """Progress lines on stderr: one per AFLite round, one for the held-out rows' scoring
    after them, one per other stage."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.last_stage: str | None = None

    def __call__(self, event: dict) -> None:
        if self.quiet:
            return
        stage = event.get("stage", "")
        pct = f"{100 * float(event.get('fraction', 0)):3.0f}%"
        if stage == "aflite" and "round" in event:
            secs = event.get("seconds")
            timing = f" {secs:.1f}s" if isinstance(secs, (int, float)) else ""
            # the message names the filter: "AFLite round 3: ..." or "Z-filter step 3: ..."
            print(f"[{pct}] {event.get('message', '')}{timing}", file=sys.stderr,
                  flush=True)
        elif stage != self.last_stage or "status" in event or event.get("heldout"):
            # the held-out rows' scoring after the last round is a step of its own
            print(f"[{pct}] {stage}: {event.get('message', '')}", file=sys.stderr, flush=True)
        self.last_stage = stage


def run(args: argparse.Namespace) -> int:
    """Load the data, run the audit, print where the run folder is.

    Error messages name the CLI options (``--label``, ``--tau``) rather than the Python
    keywords the library uses.
    """
    from aflite_core.io import DatasetError  # lazy: +114 ms to import

    try:
        return _run(args)
    except DatasetError as exc:
        _reword(exc, cli_hint(str(exc)))
        raise
    except (ValueError, TypeError) as exc:
        _reword(exc, cli_hint(cli_parameter(str(exc))))
        raise


def audit_config(args: argparse.Namespace, n_rows: int):
    """The run's AuditConfig: the defaults for ``n_rows`` rows (``suggest_config``, as the
    dashboard's) with every option the user gave on top."""
    from aflite_core.config import suggest_config  # lazy: +14 ms to import

    given = given_parameters(args)
    changes = dict(given[FIELD])
    method, rep_params = changes.pop("representation", ("tfidf_svd", {}))
    seed = changes.pop("random_state", 0)
    config = suggest_config(n_rows, representation=method, measures=args.measures,
                            random_state=seed, **changes)
    rep_params = {**config.representation_params, **rep_params,
                  **given.get(REPRESENTATION_PARAM, {})}
    given_options = measure_options(args)
    if given_options:
        params = {name: dict(values) for name, values in config.measure_params.items()}
        for name, values in given_options.items():
            params.setdefault(name, {}).update(values)
        config = dataclasses.replace(config, measure_params=params)
    challenges = getattr(args, "challenge", None)
    if challenges:
        measures = tuple(dict.fromkeys([*config.measures, "ood"]))
        params = {**config.measure_params, "ood": {"challenges": list(challenges)}}
        config = dataclasses.replace(config, measures=measures, measure_params=params)
    return dataclasses.replace(
        config, filter_params=given.get(FILTER_PARAM, {}),
        representation_params=rep_params,
        report=not args.no_report, backend="dask" if args.scheduler else "local",
        scheduler=args.scheduler,
    ).validate()


def _warm(config: Any, *, local: bool) -> Any:
    """:func:`aflite_core.measure_runs.warm_ahead` of the audit's measures on the cores this
    process may use: what their work ahead needs started while the data is read."""
    from aflite_core.measure_runs import warm_ahead  # lazy: with the pipeline, below
    from aflite_core.measures import registry  # lazy: as above

    chosen = [m for m in registry.measures() if m.name in config.measures]
    return warm_ahead(chosen, cores=available_cores(), local=local)


def _run(args: argparse.Namespace) -> int:
    from aflite_core.pipeline import run_audit  # lazy: +438 ms to import

    root, name = _target(args.out, args.overwrite)
    audit_config(args, 10_000)  # options are checked before the data is read
    limit_arenas()  # the peak would grow with the threads, so with the cores
    numpy_small_pages()  # no huge pages zeroed for arrays that touch a part of them
    arrow_on_c_heap()  # as would Arrow's pool's (a heap per thread)
    limit_native_threads()  # a container's CPU quota below its affinity: BLAS to it
    if args.scheduler:  # and the scheduler answers as one, before minutes of reading
        from aflite_core.filter import probe_scheduler  # lazy: +146 ms to import

        probe_scheduler(args.scheduler)
    # while the data loads, its large arrays get pages of their own, handed back when freed
    # too; after it, the driver of a cluster's audit keeps that from
    # DRIVER_MAPS_FROM_ROWS rows on, any other audit reuses the heap (HEAP_THRESHOLD)
    map_large_allocations()
    from aflite_core.io import looks_like_glob  # lazy: +37 ms to import

    if not Path(args.data).exists() and not looks_like_glob(args.data):
        raise FileNotFoundError(f"DATA: no such file: {args.data}")
    exit_cleanly_on_sigterm()
    printer = _Printer(args.quiet)
    if not args.quiet:
        print(f"loading {args.data}", file=sys.stderr, flush=True)
    # with a scheduler, one client for all of it: the shards are read on its workers
    with audit_client(audit_config(args, 10_000)) as client, \
            _warm(audit_config(args, 10_000), local=client is None) as loaded:
        texts = None
        if client is not None:  # the driver keeps no text: read from the run's dataset file
            texts = Path(root) / hidden_name(TEMP_PREFIX, "texts")
            texts.mkdir(parents=True)
            claim(texts)  # killed outright, this process's folder goes at the next cleanup
        try:
            # with a client, shards are read on its workers and their texts go to the file a
            # shard at a time (streamed_load), never all in this process
            dataset = load_input(args.data, args,
                                 map_shards=None if client is None else ShardsOnCluster(client),
                                 texts_to=None if texts is None else texts / DATASET_FILE)
            # the read's pages handed back: not under every stage (at 5M rows on a
            # cluster: 1.2 GB held after the move, 0.5 trimmed)
            release_free_heap()
            if texts is None or len(dataset.frame) < DRIVER_MAPS_FROM_ROWS:
                map_large_allocations(HEAP_THRESHOLD)
            if texts is not None and dataset.loaded_whole_because and not args.quiet:
                print(f"note: {args.data} was loaded whole, every row's text in this "
                      f"process while it was checked: {dataset.loaded_whole_because} "
                      "(docs/scaling.md, 'One file a piece at a time')",
                      file=sys.stderr, flush=True)
            config = audit_config(args, filter_units(
                dataset, split_policy=args.split_policy or "auto",
                instance=args.instance or "auto"))
            note = None if client is not None else memory_note(len(dataset.frame),
                                                               usable_memory())
            if note and not args.quiet:
                print(note, file=sys.stderr, flush=True)
            loaded(int(dataset.included_mask.sum()))  # no work ahead: its child ends
            path = run_audit(dataset, config, runs_root=root, name=name, callback=printer,
                             overwrite=args.overwrite)
        finally:
            if texts is not None:  # the run folder links the file: its own name stays
                shutil.rmtree(texts, ignore_errors=True)
    from aflite_core.measures import registry  # after the audit: the CLI starts light

    run_ = load_run(path)
    sizes = run_.sizes
    if not args.quiet:
        for measure, info in run_.measures.items():
            if info.get("status") == "error":
                print(f"warning: {measure} failed: {info.get('error')}", file=sys.stderr)
            for caveat in registry.measure_caveats(run_, measure):  # as the report shows them
                print(f"caveat ({measure}): {caveat}", file=sys.stderr)
        unfiltered = int(sizes.get("unfiltered", 0))
        print(
            f"retained {sizes.get('retained', 0):,} of {sizes.get('filtered', 0):,} filtered rows "
            f"(removed {sizes.get('removed', 0):,}; "
            + (f"kept, not filtered {unfiltered:,}; " if unfiltered else "")
            + f"warm-up {sizes.get('warmup', 0):,}; excluded {sizes.get('excluded', 0):,})",
            file=sys.stderr,
        )
    print(path)
    return 0
