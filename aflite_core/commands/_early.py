"""What ``python -m aflite_core run`` starts before it imports the rest: :func:`warm_early`.

Building the parser imports every command (pandas, pyarrow, the parameter schemas), and the
audit then imports the pipeline and the measures: about 1.4 s of one core from the process's
start to the first line of ``run``'s own code, on a 2-core machine, while the other cores sit
idle. The cue measure's child process (:func:`aflite_core.cues.start_spare_child`: NLTK, the
tagger, its word lists and the spelling checker, about 1.5 s of a core) is started here
instead, first thing, from the command line's words alone; ``run`` takes it as it took the
one it started itself (``Measure.warm``), and ends it once the rows are counted when they
need no work ahead.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["warm_early"]

#: Options after which the audit's measures or its backend are not the defaults (argparse
#: also takes any unambiguous prefix of them): the child is then left to ``run``.
_NOT_DEFAULT = ("--measures", "--scheduler")
_HELP = ("-h", "--help")


def _command(argv: Sequence[str]) -> str | None:
    """The sub-command named in ``argv`` (after the top-level ``--debug``), if any."""
    for word in argv:
        if word != "--debug":
            return word
    return None


def _changes_defaults(word: str) -> bool:
    """Whether ``word`` is one of :data:`_NOT_DEFAULT` or a prefix argparse would expand to
    one, with or without ``=VALUE``."""
    name = word.split("=", 1)[0]
    return len(name) > 2 and name.startswith("--") and any(
        option.startswith(name) for option in _NOT_DEFAULT)


def warm_early(argv: Sequence[str]) -> bool:
    """Start the cue measure's child now when ``argv`` is a default audit
    (``run DATA [options]``: neither ``--measures`` nor ``--scheduler``, no help) on the
    cores work ahead needs (:func:`aflite_core.ahead_bounds.ahead_possible`; the rows are not
    known yet). Returns whether it was started; it is ended by
    :func:`aflite_core.cues.discard_spare_child` when nothing takes it.

    Parameters
    ----------
    argv : sequence of str
        The command line's words after the program's name.

    Examples
    --------
    >>> warm_early(["export", "runs/x"]), warm_early(["run", "d.csv", "--measures", "cues"])
    (False, False)
    >>> warm_early(["run", "d.csv", "--sched=local:2"]), warm_early(["run", "--help"])
    (False, False)
    """
    if _command(argv) != "run" or any(w in _HELP or _changes_defaults(w) for w in argv):
        return False
    from aflite_core._validation import available_cores  # lazy: numpy, 0.1 s, only for run
    from aflite_core.ahead_bounds import ahead_possible  # lazy: as above

    if not ahead_possible(None, cores=available_cores()):
        return False
    from aflite_core.cgroup_limits import limit_native_threads  # lazy: as above
    from aflite_core.cues import start_spare_child  # lazy: as above
    from aflite_core.heap_trim import numpy_small_pages  # lazy: as above

    # a CPU quota below the affinity holds the child's BLAS, OpenMP and numba too (the
    # variables it inherits), as it holds those ``run`` starts after this; so does NumPy's
    # page size
    limit_native_threads()
    numpy_small_pages()
    return start_spare_child()
