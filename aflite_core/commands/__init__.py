"""Sub-commands of ``python -m aflite_core``; one module per command.

Each module exposes ``register(subparsers)``, which adds its parser and sets
``func`` to a callable taking the parsed arguments and returning an exit code.

Its face: what the rest of ``aflite_core``, ``ui/`` and the pages may import from it
(``from aflite_core.commands import NAME``; never from one of its modules). Names are resolved
on first use, so importing the package stays as cheap as importing one of its modules
(the dashboard's first paint and ``python -m aflite_core --help`` import it).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module of this package that defines it (none: a command is its module).
_FACE: dict[str, str] = {}
#: The command modules, each with ``register(subparsers)`` (``aflite_core.cli`` loads them).
_NAMESPACES = ("run", "cues", "resources", "export", "decide", "report", "compare",
               "inoculate", "ood", "encoders")

__all__ = sorted([*_FACE, *_NAMESPACES])


def __getattr__(name: str) -> Any:
    # not cached in the package: a test that patches the defining module is seen
    if name in _FACE:
        return getattr(importlib.import_module(f"{__name__}.{_FACE[name]}"), name)
    if name in _NAMESPACES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
