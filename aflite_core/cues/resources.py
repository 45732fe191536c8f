"""NLTK resources used by the linguistic features: check them, explain a gap, download.

Nothing here downloads at import or at feature-extraction time. A missing resource makes
the feature family that needs it *unavailable*, with :class:`ResourceMissingError`
carrying the exact command that fixes it; only ``python -m aflite_core resources
--download`` (or :func:`download`) fetches data, and only when a user runs it.

NLTK looks for data in ``nltk.data.path`` (seeded from the ``NLTK_DATA`` environment
variable when NLTK is first imported). Every resource the default features need ships with
the package in :data:`BUNDLED_DATA` (see its README for origins and licences); the first
look-up appends that folder to the *end* of ``nltk.data.path``, so a user's own NLTK data
takes precedence and the bundled copy fills the gaps, offline, with no ``NLTK_DATA`` set.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aflite_core.errors import ResourceMissingError  # noqa: F401 - re-exported: its public home

#: NLTK resources shipped as package data (zips in NLTK's layout).
BUNDLED_DATA = Path(__file__).resolve().parent / "nltk_data"
_bundled_registered = False

#: The command that installs every missing resource the features can use.
DOWNLOAD_COMMAND = "python -m aflite_core resources --download"


@dataclass(frozen=True)
class Resource:
    """One NLTK data package and what it is used for.

    Attributes
    ----------
    name : str
        The identifier ``nltk.download`` takes.
    path : str
        The path ``nltk.data.find`` looks up to decide whether it is installed.
    families : tuple of str
        Feature families of :mod:`aflite_core.cues.linguistic` that need it.
    purpose : str
        One line for the ``resources`` listing.
    optional : bool
        True when the features work without it (another method or option is used).
    """

    name: str
    path: str
    families: tuple[str, ...]
    purpose: str
    optional: bool = False


#: Every NLTK resource the linguistic features can use. Tokenisation is a documented
#: regular expression (see ``aflite_core.cues.linguistic.TOKEN_PATTERN``), so punkt is not needed.
RESOURCES: tuple[Resource, ...] = (
    Resource(
        "averaged_perceptron_tagger_eng",
        "taggers/averaged_perceptron_tagger_eng/",
        ("tense", "ner", "typo"),
        "part-of-speech tagger (tense, NER heuristic, proper nouns skipped by typo)",
    ),
    Resource("stopwords", "corpora/stopwords/english", ("overlap",), "English stopwords"),
    Resource(
        "opinion_lexicon",
        "corpora/opinion_lexicon/positive-words.txt",
        ("sentiment",),
        "Hu & Liu opinion lexicon (sentiment, default lexicon)",
    ),
    Resource(
        "vader_lexicon",
        "sentiment/vader_lexicon.zip",
        ("sentiment",),
        "VADER lexicon (sentiment with lexicon='vader')",
        optional=True,
    ),
    Resource(
        "wordnet",
        "corpora/wordnet",
        ("word",),
        "WordNet lemmatiser (word features with lemma=True)",
        optional=True,
    ),
    Resource(
        "maxent_ne_chunker_tab",
        "chunkers/maxent_ne_chunker_tab/english_ace_multiclass/",
        ("ner",),
        "ne_chunk model; without it NER uses the proper-noun/number heuristic",
        optional=True,
    ),
    Resource(
        "words",
        "corpora/words/en",
        ("ner",),
        "English word list (common words for the NER heuristic; needed by ne_chunk)",
        optional=True,
    ),
)

_BY_NAME = {r.name: r for r in RESOURCES}


def missing_error(family: str, missing: Sequence[str]) -> ResourceMissingError:
    """The :class:`~aflite_core.errors.ResourceMissingError` for ``family``, whose message
    says what is missing, where NLTK looked, and the command that fixes it (``chmod`` when
    NLTK refuses the bundled copy because another account may write to it)."""
    missing = tuple(missing)
    names = ", ".join(f"'{m}'" for m in missing)
    refused = refused_entries()
    if refused:
        command = f"chmod -R go-w {BUNDLED_DATA}"
        message = (
            f"{family} features unavailable: NLTK refuses the copy of {names} bundled "
            f"with aflite_core because {refused[0]} is writable by another account "
            f"(group or world write bit, e.g. installed with umask 002). Fix: {command}"
        )
    else:
        command = fix_command(missing)
        message = (
            f"{family} features unavailable: NLTK resource {names} not installed "
            f"(searched {len(search_path())} folders of nltk.data.path / NLTK_DATA). "
            f"Fix: {command}"
        )
    return ResourceMissingError(family, missing, message=message, command=command)


@dataclass(frozen=True)
class ResourceStatus:
    """Whether one resource is installed, and where."""

    resource: Resource
    installed: bool
    location: str | None


def import_nltk_lean() -> None:
    """Import NLTK without the ``scipy.stats`` its package loads for one function no cue
    family calls (``nltk.metrics.association.fisher_exact``, which then raises
    ``NotImplementedError``): NLTK's import 1.09 -> 0.43 s (``python -c "import nltk"``,
    2026-11-30), in every tagging child, whose start is work the one-core audit (tagging in
    its own process) does not do. For a process's start only: meanwhile another thread's
    ``import scipy.stats`` would fail. Where NLTK or ``scipy.stats`` is loaded already (the
    audit's own process: scikit-learn loads it), a plain import; ``scipy.stats`` imports as
    ever afterwards.
    """
    if "nltk" in sys.modules or "scipy.stats" in sys.modules:
        return
    sys.modules["scipy.stats"] = None  # type: ignore[assignment] - NLTK's ImportError fallback
    try:
        import nltk  # noqa: F401 - lazy: +430 ms to import without scipy.stats
    finally:
        if sys.modules.get("scipy.stats", 0) is None:
            del sys.modules["scipy.stats"]


def use_bundled_data() -> None:
    """Append :data:`BUNDLED_DATA` to ``nltk.data.path`` (once per process).

    Called by every look-up in this module and by :mod:`aflite_core.cues.linguistic` before
    it loads NLTK data. Appending, not prepending, keeps a user's own resources first.
    Once registered it is not re-added, so a caller that sets ``nltk.data.path`` on
    purpose (for example to an empty folder) keeps what it set.
    """
    global _bundled_registered
    if _bundled_registered:
        return
    import nltk  # lazy: +2074 ms to import

    bundled = str(BUNDLED_DATA)
    if BUNDLED_DATA.is_dir() and bundled not in nltk.data.path:
        nltk.data.path.append(bundled)
    _bundled_registered = True


def search_path() -> list[str]:
    """Return the folders NLTK searches for data (``nltk.data.path``), bundled data last."""
    import nltk  # lazy: +2074 ms to import

    use_bundled_data()
    return [str(p) for p in nltk.data.path]


def get_resource(name: str) -> Resource:
    """Return the :class:`Resource` called ``name``.

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`RESOURCES`.
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(
            f"resource: expected one of {sorted(_BY_NAME)}, got {name!r}"
        ) from None


def unavailable_fix(folder: Path | None = None) -> str:
    """Why feature families are unavailable and how to fix it, in one sentence for a page.

    When NLTK refuses the bundled data (:func:`refused_entries`), downloading would not help:
    the fix is to remove the write bit. Otherwise a resource is missing and the fix is the
    download command.

    Parameters
    ----------
    folder : Path, optional
        The bundled data folder (default :data:`BUNDLED_DATA`).

    Returns
    -------
    str
        A sentence ending with the command to run (Markdown, command in backticks).
    """
    target = BUNDLED_DATA if folder is None else Path(folder)
    refused = refused_entries(target, limit=1)
    if refused:
        return (f"NLTK refuses the language data bundled with aflite_core because "
                f"{refused[0]} is writable by another account (group or world write bit, "
                f"e.g. installed with umask 002). Fix: `chmod -R go-w {target}`, then "
                "recompute.")
    return ("a language resource is missing. Fix: `python -m aflite_core resources "
            "--download` (needs internet once), then recompute.")


def refused_entries(folder: Path | None = None, *, limit: int = 5) -> list[str]:
    """Entries of the bundled NLTK data that NLTK (>= 3.10) refuses to read.

    NLTK reads no file or folder that another account could have written: one with a group
    or world write bit, or owned by neither this account nor root. A package installed with
    umask 002 (Debian/Ubuntu's default for personal groups) has group-writable folders, so
    NLTK refuses the copy bundled with aflite_core and the families that need it fail.

    Parameters
    ----------
    folder : Path, optional
        Default :data:`BUNDLED_DATA`.
    limit : int
        Stop after this many entries.

    Returns
    -------
    list of str
        Paths, the folder itself first when it is refused; empty off POSIX.
    """
    folder = BUNDLED_DATA if folder is None else Path(folder)
    if os.name != "posix" or not folder.is_dir():
        return []
    uid = os.getuid()
    out: list[str] = []
    for current, dirs, files in os.walk(folder):
        for path in [current] + [os.path.join(current, n) for n in dirs + files]:
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or st.st_uid not in (uid, 0):
                out.append(path)
                if len(out) >= limit:
                    return out
        dirs[:] = sorted(dirs)
    return list(dict.fromkeys(out))


def locate(name: str) -> str | None:
    """Return where resource ``name`` is installed, or None when NLTK cannot find it."""
    import nltk  # lazy: +2074 ms to import

    use_bundled_data()
    resource = get_resource(name)
    try:
        return str(nltk.data.find(resource.path))
    except (LookupError, OSError, ValueError):
        # LookupError: not found; OSError/ValueError: unreadable or refused (NLTK >= 3.10
        # refuses group/world-writable files). Either way the resource cannot be used.
        return None


def is_installed(name: str) -> bool:
    """Return True when NLTK can find resource ``name``."""
    return locate(name) is not None


def missing(names: Iterable[str]) -> list[str]:
    """Return the resources of ``names`` that are not installed, in the given order."""
    return [n for n in names if not is_installed(n)]


def require(family: str, names: Iterable[str]) -> None:
    """Raise :class:`ResourceMissingError` when any of ``names`` is missing.

    Parameters
    ----------
    family : str
        The feature family that needs the resources (named in the message).
    names : iterable of str
        NLTK resource names.
    """
    gaps = missing(names)
    if gaps:
        raise missing_error(family, gaps)


def nltk_command(names: Sequence[str]) -> str:
    """Return the plain-NLTK command line that downloads ``names``."""
    calls = "; ".join(f"nltk.download('{n}')" for n in names)
    return f'python -c "import nltk; {calls}"'


def fix_command(names: Sequence[str]) -> str:
    """Return the command line that installs ``names``.

    Both forms are given: the project's own command, and plain NLTK.
    """
    return f"{DOWNLOAD_COMMAND}  (or: {nltk_command(names)})"


def status(names: Iterable[str] | None = None) -> list[ResourceStatus]:
    """Return the installation status of ``names`` (default: every known resource)."""
    chosen = [get_resource(n) for n in names] if names is not None else list(RESOURCES)
    return [ResourceStatus(r, (loc := locate(r.name)) is not None, loc) for r in chosen]


def download(
    names: Iterable[str] | None = None, *, download_dir: str | None = None, quiet: bool = True
) -> dict[str, bool]:
    """Download resources with NLTK's downloader (needs network access).

    Parameters
    ----------
    names : iterable of str, optional
        Resources to fetch; default: every resource of :data:`RESOURCES` not installed.
    download_dir : str, optional
        Target folder; default: NLTK's own default (``~/nltk_data`` or the first writable
        folder of ``nltk.data.path``).
    quiet : bool
        Silence NLTK's progress output.

    Returns
    -------
    dict
        Resource name -> True when it is installed afterwards.
    """
    import nltk  # lazy: +2074 ms to import

    use_bundled_data()
    todo = list(names) if names is not None else missing(r.name for r in RESOURCES)
    result: dict[str, bool] = {}
    for name in todo:
        get_resource(name)
        try:
            ok = bool(nltk.download(name, download_dir=download_dir, quiet=quiet,
                                    raise_on_error=False))
        except (OSError, ValueError) as exc:  # network or disk failure: report, go on
            ok = False
            if not quiet:
                print(f"{name}: {exc}")
        if ok and download_dir is not None and download_dir not in nltk.data.path:
            nltk.data.path.append(download_dir)
        result[name] = ok and is_installed(name)
    return result
