"""The cue extraction's token counts and tags made ahead of it, in a child process, into the
annotation cache (:func:`annotate_ahead`: the audit's work ahead for the cue measure,
``Measure.ahead``).

The child is ``python -m aflite_core.cues._annotations_ahead FOLDER SIDES JOBS``: it reads
the texts from its standard input (JSON lines, ``[side, [texts...]]`` a chunk, then ``null``:
no pickle crosses the pipe), makes each side's token counts
and the tags of ``SIDES`` in the cache ``FOLDER`` (with ``JOBS`` tagging processes of its
own above one: :func:`ahead_jobs`), and exits 0 when all are there. Started without arguments
before the data is read (:func:`~aflite_core.cues._spare_child.start_spare_child`: the CLI's
audit and the dashboard's audit worker, first thing), it loads NLTK and the
tagger while the audit reads, and reads those three arguments as its first line of input:
at 100,000 rows on two cores the load's idle core-seconds went from 0.62-0.78 to 0.23-0.29
(``bench_cores.py --keep``, 2026-11-30). A plain
interpreter, not a ``multiprocessing`` child: a spawned one would first run the caller's main
script again (a user's script without an ``if __name__ == "__main__"`` guard would start a
second audit in it). SIGTERM asks it to stop at its next chunk, saving no tags.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

from aflite_core._validation import available_cores
from aflite_core.cues._spare_child import take_spare_child
from aflite_core.cues._tagging import ner_method, preload_tagging, tag_into_cache
from aflite_core.cues._tagging_children import start_child
from aflite_core.cues.linguistic import (
    EXTRACT_LOCK,
    FAMILIES,
    TAGGED_FAMILIES,
    cache_folder,
    check_families,
    count_tokens_cached,
    preload,
)
from aflite_core.cues.resources import import_nltk_lean

__all__ = ["AHEAD_SPARE_CORES", "SEND_ROWS", "ahead_jobs", "annotate_ahead", "annotate_here"]

#: Texts sent to the child at a time: this process never holds a list of every row's texts
#: for it (a lazy column, ``RowTexts``, makes them a chunk at a time).
SEND_ROWS = 50_000
#: How often the waiting call looks whether it was asked to stop, seconds.
POLL_SECONDS = 0.2
#: Cores the tagging ahead leaves to Φ and the filter, which run beside it. On two cores it
#: is one process (a pool of two took 2.6 CPU-s more at 100,000 rows); on 16 the one
#: process was the audit's critical path: the cue stage waited 17 s for it at 300,000 rows
#: with 15 of the 16 cores idle (``bench_cores.py --cores 16 --keep``, 2026-11-30).
AHEAD_SPARE_CORES = 2


def ahead_jobs(cores: int) -> int:
    """Tagging processes of the work ahead on ``cores`` cores: all but
    :data:`AHEAD_SPARE_CORES`, at least one.

    >>> ahead_jobs(2), ahead_jobs(4), ahead_jobs(16)
    (1, 2, 14)
    """
    return max(1, cores - AHEAD_SPARE_CORES)


def annotate_ahead(hypotheses: Sequence[str], premises: Sequence[str] | None = None, *,
                   features: Iterable[str] = FAMILIES, text: str = "hypothesis",
                   cache: bool = True, cache_dir: str | os.PathLike | None = None,
                   stop: threading.Event | None = None, n_jobs: int | None = None) -> bool:
    """Count the tokens and tag the texts now, into the on-disk cache, as
    :func:`~aflite_core.cues.linguistic.extract_features` with these arguments will, so that
    it reads them from the cache: the audit's cue extraction started as soon as the data is
    loaded, beside Φ and the filter, whose cores it would otherwise leave idle
    (:mod:`aflite_core.measure_runs`, ``Measure.ahead``).

    The work runs in one child process (see the module docstring): the token counts, NLTK,
    the tagger, the word list and the tagging are Python that would otherwise take turns with
    the audit for this interpreter, and one process loads them once. It tags with
    ``n_jobs`` processes of its own (:func:`ahead_jobs`: one on two cores). The texts go to it
    :data:`SEND_ROWS` at a time. This call holds the extraction lock
    (``linguistic.EXTRACT_LOCK``) until the child is done, so an extraction asked for meanwhile
    waits and then finds everything cached: the same annotations, made once.

    Parameters
    ----------
    hypotheses, premises, features, text, cache, cache_dir
        As :func:`~aflite_core.cues.linguistic.extract_features` will be called.
    stop : threading.Event, optional
        Set it to stop: the child drops what it has not done and saves no tags.
    n_jobs : int, optional
        Tagging processes; default :func:`ahead_jobs` of the cores this process may use.

    Returns
    -------
    bool
        Whether the child made (or found) everything the extraction reads.

    Examples
    --------
    >>> import tempfile
    >>> annotate_ahead(["a dog runs"], None, features=["word"], cache_dir=tempfile.mkdtemp())
    True
    >>> annotate_ahead(["a dog runs"], None, cache=False)  # nowhere to keep them
    False
    """
    families = set(check_families(features))
    planned = _sides_read(hypotheses, premises, families=families, text=text, cache=cache,
                          cache_dir=cache_dir)
    if planned is None:
        return False
    folder, sides, tagged = planned
    jobs = ahead_jobs(available_cores()) if n_jobs is None else n_jobs
    if jobs < 1:
        raise ValueError(f"n_jobs must be at least 1, got {jobs}")
    with EXTRACT_LOCK:
        args = [str(folder), ",".join(sorted(tagged & set(sides))), str(jobs)]
        child = _child_for(args)
        sent = _send_texts(child.stdin, sides, stop)
        preload(families)  # NLTK and its lists, here while the child tags
        asked = False
        while child.poll() is None:
            if not asked and stop is not None and stop.is_set():
                child.terminate()  # SIGTERM: the child stops at its next chunk
                asked = True
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(POLL_SECONDS)
    return sent and child.returncode == 0 and tagged <= set(sides)


def annotate_here(hypotheses: Sequence[str], premises: Sequence[str] | None = None, *,
                  features: Iterable[str] = FAMILIES, text: str = "hypothesis",
                  cache_dir: str | os.PathLike | None = None,
                  stop: threading.Event | None = None) -> bool:
    """:func:`annotate_ahead`'s work in this process, on one core: the token counts and tags
    that :func:`~aflite_core.cues.linguistic.extract_features` with these arguments reads,
    into this process's annotation cache (``cache_dir``, default
    :func:`~aflite_core.text.default_cache_dir`). For a task on a Dask worker, where the
    cue measure's work ahead tags each chunk of rows that a later task of the cue table
    (:mod:`~aflite_core.cues.count_tables`) extracts.

    Returns
    -------
    bool
        Whether everything the extraction reads is in the cache (False: no cache folder, or
        ``stop`` set before the tagging's last chunk).

    Examples
    --------
    >>> import tempfile
    >>> annotate_here(["a dog runs"], ["a dog"], cache_dir=tempfile.mkdtemp())
    True
    """
    planned = _sides_read(hypotheses, premises, families=set(check_families(features)),
                          text=text, cache=True, cache_dir=cache_dir)
    if planned is None:
        return False
    folder, sides, tagged = planned
    done = _annotate(sides, tagged, folder, stop or threading.Event(), jobs=1)
    return done and tagged <= set(sides)


def _sides_read(hypotheses: Sequence[str] | None, premises: Sequence[str] | None, *,
                families: set[str], text: str, cache: bool,
                cache_dir: str | os.PathLike | None,
                ) -> tuple[Path, dict[str, Sequence[str]], set[str]] | None:
    """The cache folder (None when there is none: nothing to do), the sides whose token
    counts an extraction of ``families`` reading ``text`` reads (side -> its texts; a side
    not given is left out), and those it reads tags of."""
    folder = cache_folder(cache, cache_dir)
    if folder is None:
        return None
    read = ["hypothesis", "premise"] if text == "both" else [text]
    given = {"hypothesis": hypotheses, "premise": premises}
    counted = set(read) | ({"hypothesis", "premise"} if "overlap" in families else set())
    tagged = set(read) if families & set(TAGGED_FAMILIES) else set()
    sides = {side: given[side] for side in ("hypothesis", "premise")
             if side in counted | tagged and given[side] is not None}
    return folder, sides, tagged


def _annotate(sides: dict[str, Sequence[str]], tagged: Iterable[str], cache_dir: Path,
              halt: threading.Event, *, jobs: int) -> bool:
    """Each side's token counts and the tags of the ``tagged`` sides into ``cache_dir``
    (with ``jobs`` tagging processes above one); False when ``halt`` was set first."""
    hashes = {}
    for side, texts in sides.items():
        if halt.is_set():
            return False
        hashes[side] = count_tokens_cached(texts, cache_dir)
    tagged = [side for side in tagged if side in sides]
    method = ner_method() if tagged else ""
    return all(tag_into_cache(sides[side], ner_method=method, cache_dir=cache_dir,
                              texts_hash=hashes[side], stop=halt, n_jobs=jobs)
               for side in tagged)


def _child_for(args: list[str]) -> subprocess.Popen:
    """The spare child (:mod:`aflite_core.cues._spare_child`) given ``args`` (its first
    line of input), or a child started with them when there is none (or it is gone)."""
    child = take_spare_child(json.dumps(args).encode("ascii") + b"\n")
    if child is not None:
        return child
    return start_child(__name__, args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _send_texts(stream: IO[bytes], sides: dict[str, Sequence[str]],
                stop: threading.Event | None) -> bool:
    """Each side's texts to the child, :data:`SEND_ROWS` at a time, then ``None``; False
    when ``stop`` was set first or the child is gone (its exit says why)."""
    try:
        with stream:
            for side, texts in sides.items():
                for start in range(0, len(texts), SEND_ROWS):
                    if stop is not None and stop.is_set():
                        return False
                    chunk = [side, list(texts[start:start + SEND_ROWS])]
                    stream.write(json.dumps(chunk).encode("ascii") + b"\n")
            stream.write(b"null\n")
    except (BrokenPipeError, OSError):
        return False
    return True


def _spare_arguments() -> list[str]:
    """A spare child's arguments, its first line of input, read while NLTK, the tagger and
    the spelling checker load; an empty line or the end of input (discarded: the audit does
    no work ahead) ends the process at once, whatever it was loading."""
    first: list[bytes] = []

    def read() -> None:
        first.append(sys.stdin.buffer.readline())
        if not first[0].strip():
            os._exit(0)  # nothing written yet: no cleanup to do

    reader = threading.Thread(target=read, name="spare-arguments", daemon=True)
    reader.start()
    # a resource that fails to load fails the same way where the tagging needs it (and the
    # cue measure says why); a spare whose texts need no tagging must not fail on it
    with contextlib.suppress(Exception):
        preload_tagging()
    reader.join()
    return json.loads(first[0])


def _main(argv: Sequence[str]) -> int:
    """The child: ``FOLDER SIDES JOBS`` (comma-separated sides to tag, tagging processes);
    texts on standard input. Without arguments, a spare
    (:mod:`~aflite_core.cues._spare_child`): what it tags with loaded first, then those
    three as the first line of its input (a JSON list); an empty line or the end of its
    input ends it."""
    halt = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: halt.set())
    import_nltk_lean()  # before any other thread of this process starts
    if not argv:  # a spare: what it tags with loaded while the audit reads its data
        argv = _spare_arguments()
    cache_dir, tagged = Path(argv[0]), [s for s in argv[1].split(",") if s]
    jobs = int(argv[2]) if len(argv) > 2 else 1
    sides: dict[str, list[str]] = {}
    for line in sys.stdin.buffer:  # ASCII JSON (escapes keep every str as it was)
        message = json.loads(line)
        if message is None:
            break
        sides.setdefault(message[0], []).extend(message[1])
    else:  # the audit stopped sending: asked to stop
        return 1
    return 0 if _annotate(sides, tagged, cache_dir, halt, jobs=jobs) else 1


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
