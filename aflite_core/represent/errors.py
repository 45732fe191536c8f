"""The errors of building a representation Φ, below the builders and the encoders that
raise them (``aflite_core.represent.builders`` re-exports them, their public home)."""

from __future__ import annotations


class RepresentationError(ValueError):
    """A representation cannot be built from these inputs or parameters."""


class EmbeddingFileError(RepresentationError):
    """A precomputed-embedding file is unreadable, unsafe or does not fit the dataset."""


class OptionalDependencyError(ImportError, ValueError):
    """An optional package is missing; the message gives the install command."""


for _cls in (RepresentationError, EmbeddingFileError, OptionalDependencyError):
    _cls.__module__ = "aflite_core.represent.builders"
