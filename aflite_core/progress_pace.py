"""What this machine's finished audits taught the progress bar: each stage's pace against plan.

The bar's spans are each stage's expected seconds (:mod:`aflite_core.progress_plan`), measured
on one machine. The ETA (:mod:`aflite_core.progress_eta`) absorbs a machine that is faster or
slower at everything; it cannot absorb one whose stages keep other *ratios*. On the 2-core
test VM of 2026-12-01 the hypothesis-only PVI took 0.70-0.79 of the label issues' time
where the plan (2026-11-30's VM) gives it 0.47, and the ETA at PVI's start was 1.51-1.90x the
time really left at 100,000 rows (three runs of ``benchmarks/bench_cores.py``); on one core
the stages before the measures took 18 % of the audit for 12-15 % of the bar.

So each finished local audit records, for every stage that ran alone (no measure beside it:
its seconds are its own), its log ratio of seconds taken to seconds planned, less the whole
audit's (``log(taken / planned) - log(audit's seconds / bar's planned seconds)``): 0 for a
stage in step with the rest, whatever the machine's speed. The next audit on this machine
with the same core count and the same half-decade of rows (10^5, 10^5.5, 10^6, ...) plans each
such stage at ``exp(mean log ratio)`` times its seconds (at most :data:`MAX_FACTOR` either
way). The mean is over the audits so far, then a moving one (:data:`RECENT_WEIGHT`).
A stage is keyed by how it ran: ``+ahead`` when work for the measures ran ahead beside it
(the front stages and that measure's own stage), ``+cold`` when a measure's caches were cold,
``representation:<name>`` for a representation other than TF-IDF + SVD.

Nothing the audit computes depends on it: only the bar's spans (the run files are the same
bytes). The file is :data:`FILE_NAME` in the cache folder
(:func:`aflite_core.text.default_cache_dir`), or ``$AFLITE_PACE_FILE``; ``AFLITE_PACE_FILE=off``
(or ``0``) neither reads nor writes one. A file that cannot be read, or holds values that are
not finite, is ignored (and replaced by the next audit); one that cannot be written is left.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from aflite_core.errors import DamagedFileError
from aflite_core.json_files import read_json_file
from aflite_core.text import default_cache_dir

__all__ = ["FILE_NAME", "MAX_FACTOR", "PACE_ENV", "RECENT_WEIGHT", "bucket", "learned_factors",
           "pace_file", "record_pace"]

#: The file in the cache folder.
FILE_NAME = "stage_pace.json"
#: Where the file is (a path), or ``off`` / ``0``: none.
PACE_ENV = "AFLITE_PACE_FILE"
#: A stage is planned at most this many times, or at least its inverse, its seconds.
MAX_FACTOR = 3.0
#: The weight of the newest audit once three are in the mean (the mean of the first three
#: before): a machine's pace follows its recent audits (a new version, a busier machine).
RECENT_WEIGHT = 0.3
#: A stage below this share of the bar's planned seconds is not learned (a few hundredths of
#: a second: its ratio is noise, and its span too thin to matter).
MIN_SHARE = 0.01
_VERSION = 1
_MAX_BYTES = 1 << 20


def pace_file() -> Path | None:
    """The pace file (:data:`PACE_ENV`, else :data:`FILE_NAME` in the cache folder); None
    when turned off."""
    value = os.environ.get(PACE_ENV)
    if value is None:
        return default_cache_dir() / FILE_NAME
    if value.strip().lower() in ("", "0", "off", "no", "false"):
        return None
    return Path(value)


def bucket(cores: int, n_rows: int) -> str:
    """The key of an audit's paces: its core count and its half-decade of rows (a whole
    decade mixed audits that run differently: at 100,000 rows the map runs beside the other
    measures, at 300,000 in turn, and the pace learned at 100k planned a 300k audit's ETA
    2.72x the time left, against 1.88x without it; 2026-12-01, two cores).

    Examples
    --------
    >>> bucket(2, 100_000), bucket(2, 40_000), bucket(2, 300_000), bucket(16, 1_200_000)
    ('2 cores, 10^5 rows', '2 cores, 10^4.5 rows', '2 cores, 10^5.5 rows', '16 cores, 10^6 rows')
    """
    half = round(2 * math.log10(max(int(n_rows), 1))) / 2
    return f"{max(int(cores), 1)} cores, 10^{half:g} rows"


def _read(path: Path) -> dict:
    try:
        data = read_json_file(path, max_bytes=_MAX_BYTES, max_depth=8)
    except (FileNotFoundError, DamagedFileError, OSError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return {}
    buckets = data.get("buckets")
    return buckets if isinstance(buckets, dict) else {}


def _entry(value: object) -> tuple[float, int] | None:
    """``(log ratio, audits)`` of a stored stage, None if it is not one."""
    if not isinstance(value, dict):
        return None
    ratio, audits = value.get("log_ratio"), value.get("audits")
    if (not isinstance(ratio, (int, float)) or isinstance(ratio, bool)
            or not isinstance(audits, int) or isinstance(audits, bool) or audits < 1
            or not math.isfinite(ratio)):
        return None
    limit = math.log(MAX_FACTOR)
    return min(max(float(ratio), -limit), limit), audits


def learned_factors(cores: int, n_rows: int, *, path: Path | None = None) -> dict[str, float]:
    """Each learned stage key's factor on its planned seconds, for an audit of ``n_rows``
    rows on ``cores`` cores; empty when nothing was learned (or the pace is off).

    Parameters
    ----------
    cores, n_rows : int
        The audit's cores and rows (:func:`bucket`).
    path : Path, optional
        The pace file (default :func:`pace_file`).
    """
    path = pace_file() if path is None else path
    if path is None:
        return {}
    stages = _read(path).get(bucket(cores, n_rows))
    if not isinstance(stages, dict):
        return {}
    factors = {}
    for key, value in stages.items():
        entry = _entry(value)
        if isinstance(key, str) and entry is not None:
            factors[key] = math.exp(entry[0])
    return factors


def record_pace(planned: Mapping[str, float], taken: Mapping[str, float], *,
                planned_total: float, taken_total: float, cores: int, n_rows: int,
                path: Path | None = None) -> dict[str, float]:
    """Add one finished audit's paces to the file.

    Parameters
    ----------
    planned, taken : mapping of stage key -> seconds
        The stages that ran alone: their seconds planned (before any learned factor) and
        taken. A key in only one of them, or below :data:`MIN_SHARE` of ``planned_total``, is
        not learned.
    planned_total, taken_total : float
        The bar's planned seconds (every stage, before any learned factor) and the audit's
        seconds from its first stage to its end.
    cores, n_rows : int
        The audit's cores and rows (:func:`bucket`).
    path : Path, optional
        The pace file (default :func:`pace_file`).

    Returns
    -------
    dict
        The log ratios this audit added (empty if none, or the pace is off).
    """
    path = pace_file() if path is None else path
    if path is None or planned_total <= 0 or taken_total <= 0:
        return {}
    whole = math.log(taken_total / planned_total)
    limit = math.log(MAX_FACTOR)
    ratios = {}
    for key, seconds in planned.items():
        took = taken.get(key)
        if took is None or took <= 0 or seconds < MIN_SHARE * planned_total:
            continue
        ratio = math.log(took / seconds) - whole
        if math.isfinite(ratio):
            ratios[key] = min(max(ratio, -limit), limit)
    if not ratios:
        return {}
    buckets = _read(path)
    name = bucket(cores, n_rows)
    stages = buckets.get(name) if isinstance(buckets.get(name), dict) else {}
    for key, ratio in ratios.items():
        mean, audits = _entry(stages.get(key)) or (0.0, 0)
        weight = max(1.0 / (audits + 1), RECENT_WEIGHT)
        stages[key] = {"log_ratio": round(mean + weight * (ratio - mean), 4),
                       "audits": min(audits + 1, 1_000_000)}
    buckets[name] = stages
    _write(path, {"version": _VERSION, "buckets": buckets})
    return ratios


def _write(path: Path, data: dict) -> None:
    """Write ``data`` whole or not at all (a reader never sees half a file); a folder that
    cannot be written leaves the file as it was."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".pace-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass
