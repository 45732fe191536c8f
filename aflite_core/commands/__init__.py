"""Sub-commands of ``python -m aflite_core``; one module per command.

Each module exposes ``register(subparsers)``, which adds its parser and sets
``func`` to a callable taking the parsed arguments and returning an exit code.

Its face (``_FACE``, ``_NAMESPACES``) is what the rest of the code may import from it, resolved
on first use (:func:`aflite_core.faces.lazy_face`; ``docs/architecture.md``, *Public faces*).
"""

from __future__ import annotations

from aflite_core.faces import lazy_face

#: Public name -> the module of this package that defines it (a command is its module; the
#: others: what maps a folder's shards on a cluster, for the whole audit from Python,
#: ``docs/scaling.md``; what ``run`` starts before the parser imports the commands).
_FACE: dict[str, str] = {"ShardsOnCluster": "_input", "warm_early": "_early"}
#: The command modules, each with ``register(subparsers)`` (``aflite_core.cli`` loads them).
_NAMESPACES = ("run", "cues", "resources", "export", "decide", "report", "compare",
               "inoculate", "ood", "encoders")

__all__ = sorted([*_FACE, *_NAMESPACES])
__getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)
