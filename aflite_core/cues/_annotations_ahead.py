"""The cue extraction's token counts and tags made ahead of it, in a child process, into the
annotation cache (:func:`annotate_ahead`: the audit's work ahead for the cue measure,
``Measure.ahead``)."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from aflite_core.cues._tagging import ner_method, tag_into_cache
from aflite_core.cues.linguistic import (
    EXTRACT_LOCK,
    FAMILIES,
    TAGGED_FAMILIES,
    cache_folder,
    check_families,
    count_tokens_cached,
)

__all__ = ["annotate_ahead"]


def annotate_ahead(hypotheses: Sequence[str], premises: Sequence[str] | None = None, *,
                   features: Iterable[str] = FAMILIES, text: str = "hypothesis",
                   cache: bool = True, cache_dir: str | os.PathLike | None = None,
                   stop: threading.Event | None = None) -> bool:
    """Count the tokens and tag the texts now, into the on-disk cache, as
    :func:`~aflite_core.cues.linguistic.extract_features` with these arguments will, so that
    it reads them from the cache: the audit's cue extraction started as soon as the data is
    loaded, beside Φ and the filter, whose cores it would otherwise leave idle
    (:mod:`aflite_core.measure_runs`, ``Measure.ahead``).

    The work runs in one child process (spawned), on one core: the token counts, NLTK, the
    tagger, the word list and the tagging are Python that would otherwise take turns with the
    audit for this interpreter, and one process loads them once (a pool of two tagging
    processes took 2.6 CPU-s more at 100,000 rows). This call holds the extraction lock
    (``linguistic.EXTRACT_LOCK``) until the child is done, so an extraction asked for meanwhile
    waits and then finds everything cached: the same annotations, made once.

    Parameters
    ----------
    hypotheses, premises, features, text, cache, cache_dir
        As :func:`~aflite_core.cues.linguistic.extract_features` will be called.
    stop : threading.Event, optional
        Set it to stop: the child drops what it has not done and saves no tags.

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
    folder = cache_folder(cache, cache_dir)
    if folder is None:
        return False
    read = ["hypothesis", "premise"] if text == "both" else [text]
    given = {"hypothesis": hypotheses, "premise": premises}
    counted = set(read) | ({"hypothesis", "premise"} if "overlap" in families else set())
    tagged = set(read) if families & set(TAGGED_FAMILIES) else set()
    sides = {side: given[side] for side in ("hypothesis", "premise")
             if side in counted | tagged and given[side] is not None}
    context = multiprocessing.get_context("spawn")  # as the tagging's workers: thread-safe
    halt = context.Event()
    receiving, sending = context.Pipe(duplex=False)
    with EXTRACT_LOCK:
        # not a daemon: a daemonic process may not start processes (nor may its caller's)
        child = context.Process(target=_annotate_in_child, name="aflite-annotate-ahead",
                                args=(receiving, sorted(tagged), str(folder), halt))
        child.start()
        receiving.close()
        sent = _send_texts(sending, sides, stop)
        while child.exitcode is None:
            if stop is not None and stop.is_set():
                halt.set()
            child.join(0.2)
    return sent and child.exitcode == 0 and tagged <= set(sides)


#: Texts sent to :func:`annotate_ahead`'s child at a time: this process never holds a list of
#: every row's texts for it (a lazy column, ``RowTexts``, makes them a chunk at a time).
SEND_ROWS = 50_000


def _send_texts(connection: Any, sides: dict[str, Sequence[str]],
                stop: threading.Event | None) -> bool:
    """Each side's texts to the child, :data:`SEND_ROWS` at a time, then ``None``; False
    when ``stop`` was set first or the child is gone."""
    try:
        with connection:
            for side, texts in sides.items():
                for start in range(0, len(texts), SEND_ROWS):
                    if stop is not None and stop.is_set():
                        return False
                    connection.send((side, list(texts[start:start + SEND_ROWS])))
            connection.send(None)
    except (BrokenPipeError, EOFError, OSError):  # the child failed: it says so by its exit
        return False
    return True


def _annotate_in_child(connection: Any, tagged: list[str], folder: str, halt: Any) -> None:
    """:func:`annotate_ahead`'s child: receive each side's texts, then make their token
    counts and the tags of the sides ``tagged`` in the cache ``folder``; exit 0 when all are
    there."""
    sides: dict[str, list[str]] = {}
    try:
        while (message := connection.recv()) is not None:
            sides.setdefault(message[0], []).extend(message[1])
    except EOFError:  # the audit stopped sending: asked to stop
        raise SystemExit(1) from None
    cache_dir = Path(folder)
    hashes = {}
    for side, texts in sides.items():
        if halt.is_set():
            raise SystemExit(1)
        hashes[side] = count_tokens_cached(texts, cache_dir)
    method = ner_method() if tagged else ""
    ok = all(tag_into_cache(sides[side], ner_method=method, cache_dir=cache_dir,
                            texts_hash=hashes[side], stop=halt) for side in tagged)
    raise SystemExit(0 if ok else 1)
