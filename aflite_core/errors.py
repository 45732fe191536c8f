"""Every exception class of the package, in one module below all the others.

Each class is also importable from the module whose functions raise it (its documented home:
``aflite_core.io.datasets`` for the dataset errors, ``aflite_core.represent._builders`` for the
representation errors, ``aflite_core.cues.resources``, ``aflite_core.runs.folder`` and
``aflite_core.pipeline``); those names are the same objects as these. Catch the base class of
a family (:class:`DatasetError`, :class:`RepresentationError`) to catch all of it; every class
except :class:`AuditCancelled` and :class:`NulSeen` is also a standard exception
(``ValueError``, ``LookupError``, ``ImportError``) so code that predates these classes keeps
working.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AuditCancelled",
    "ColumnError",
    "DamagedFileError",
    "DatasetError",
    "DatasetFormatError",
    "DatasetSizeError",
    "DuplicateIdError",
    "EmbeddingFileError",
    "LoadWhole",
    "LostOnCluster",
    "MeasureSkipped",
    "NotStreamable",
    "NulSeen",
    "OptionalDependencyError",
    "PartitionLost",
    "RepresentationError",
    "ResourceMissingError",
    "RunError",
    "StreamClosed",
    "Unstreamable",
]


# ---------------------------------------------------------------- loading a dataset


class DatasetError(ValueError):
    """Any problem with an input dataset; the message names the file, where, and what."""


class DatasetFormatError(DatasetError):
    """Unreadable file, bad line, wrong structure, undecodable bytes."""


class ColumnError(DatasetError):
    """Missing, ambiguous, duplicate or unusable columns."""


class DuplicateIdError(DatasetError):
    """The chosen id column holds the same value on several rows."""


class DatasetSizeError(DatasetError):
    """The input (or its decompressed form) is over the configured ``max_bytes``."""


class NulSeen(Exception):  # noqa: N818 - a signal, not an error shown to anyone
    """NUL bytes in UTF-8 text; ``line`` is where. Raised by
    :class:`aflite_core.io._inflow.Inflow` so that the reader can still look for undecodable
    bytes, which are reported first; never leaves the readers."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class Unstreamable(Exception):  # noqa: N818 - a signal to the streamed load, never shown
    """A file must be read whole to give the whole read's table; the message says why
    (raised by :mod:`aflite_core.io._file_pieces`, caught by the streamed load)."""


class LoadWhole(Exception):  # noqa: N818 - a signal inside the streamed load, never shown
    """The streamed load must load the data whole (:mod:`aflite_core.io._streamed_load`);
    the message says why (``AuditDataset.loaded_whole_because``)."""


class NotStreamable(ValueError):
    """:func:`aflite_core.io.datasets.prepare_dataset` with given facts met data whose rows it
    must change (per-choice questions add columns): the caller loads the data whole instead."""


class StreamClosed(OSError):
    """The reader of a byte stream went away; the writer stops
    (:mod:`aflite_core.io._byte_stream`)."""


# ---------------------------------------------------------------- representations


class RepresentationError(ValueError):
    """A representation cannot be built from these inputs or parameters."""


class EmbeddingFileError(RepresentationError):
    """A precomputed-embedding file is unreadable, unsafe or does not fit the dataset."""


class OptionalDependencyError(ImportError, ValueError):
    """An optional package is missing; the message gives the install command."""


# ---------------------------------------------------------------- linguistic resources


class ResourceMissingError(LookupError):
    """A feature family cannot run because NLTK data is not installed.

    Built by :func:`aflite_core.cues.resources.missing_error`, which knows where NLTK looked
    and writes the message.

    Attributes
    ----------
    family : str
        The feature family that is unavailable.
    missing : tuple of str
        NLTK resource names that were not found.
    command : str
        A shell command that installs them.
    """

    def __init__(self, family: str, missing: Sequence[str], *, message: str,
                 command: str) -> None:
        super().__init__(message)
        self.family = family
        self.missing = tuple(missing)
        self.command = command


# ---------------------------------------------------------------- clusters


class LostOnCluster(RuntimeError):
    """Work lost with a worker that left the cluster, after the retries this project makes
    (the fit function's holder gone too often; partitions: :class:`PartitionLost`)."""


class PartitionLost(LostOnCluster):
    """A worker holding a partition of Φ's rows (or a step's result) left the cluster
    (:mod:`aflite_core.represent._partitions`)."""


# ---------------------------------------------------------------- runs


class DamagedFileError(ValueError):
    """A JSON file of a run, a cache or a datasets folder is over the size or nesting limit,
    not UTF-8 or not JSON (:mod:`aflite_core.json_files`); the message names the file (not
    its path) and the limit."""


class RunError(ValueError):
    """A run folder is missing, incomplete, or written by an incompatible version."""


class AuditCancelled(Exception):  # noqa: N818 - named for what happened, as asyncio does
    """The progress callback asked to stop; no run folder was written."""


class MeasureSkipped(Exception):  # noqa: N818 - named for what happened, not an error
    """A measure does not apply to this run; its message says why.

    Raised by a measure's ``compute``: the run records the measure as ``skipped`` with the
    reason (``summary.json["measures"][name]["reason"]``), writes none of its files, and the
    Report page and the HTML report say why it is absent. Not a failure of the run.
    """
