"""The cue measure's child process started before the audit's data is read: the spare.

:func:`start_spare_child` starts ``python -m aflite_core.cues._annotations_ahead`` with no
arguments: it loads NLTK, the tagger, its word lists and the spelling checker (about 1.5 s
of a core) and then waits for its arguments, which
:func:`~aflite_core.cues._annotations_ahead.annotate_ahead` sends it as its first line of
input (:func:`take_spare_child`) with the texts. :func:`discard_spare_child` ends it when no
work ahead takes it; so does this process's end (its standard input closes).

A module of its own, light on purpose (no pandas, no NLTK: about 0.1 s to import, numpy's),
so that the command line's audit and the dashboard's audit worker start the spare first
thing, before their own imports (a second and more), which leave the other cores idle
(:func:`aflite_core.commands.warm_early`, :mod:`aflite_core.worker`).
"""

from __future__ import annotations

import contextlib
import subprocess
import threading

from aflite_core.cues._tagging_children import start_child

__all__ = ["AHEAD_MODULE", "discard_spare_child", "start_spare_child", "take_spare_child"]

#: The module the spare runs (its ``__main__``): the work ahead's child.
AHEAD_MODULE = "aflite_core.cues._annotations_ahead"

#: The child :func:`start_spare_child` started, until :func:`take_spare_child` takes it.
_SPARE: list[subprocess.Popen] = []
_SPARE_LOCK = threading.Lock()


def start_spare_child() -> bool:
    """Start the work ahead's child now, before the data is read (see the module
    docstring). Returns whether one was started (not when one waits already)."""
    with _SPARE_LOCK:
        if _SPARE:
            return False
        _SPARE.append(start_child(AHEAD_MODULE, [], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL))
        return True


def discard_spare_child() -> None:
    """End the child :func:`start_spare_child` started if nothing took it: its standard
    input closed, it exits once it has loaded what it was loading (this call does not
    wait). A no-op when none waits."""
    with _SPARE_LOCK:
        while _SPARE:
            with contextlib.suppress(OSError):
                _SPARE.pop().stdin.close()


def take_spare_child(first_line: bytes) -> subprocess.Popen | None:
    """The spare child, given ``first_line`` (its arguments, a JSON list and a newline) as
    its first input; None when none waits or it has ended (the caller starts one)."""
    with _SPARE_LOCK:
        while _SPARE:
            child = _SPARE.pop()
            try:
                child.stdin.write(first_line)
                return child
            except OSError:  # it ended
                with contextlib.suppress(OSError):
                    child.stdin.close()
    return None
