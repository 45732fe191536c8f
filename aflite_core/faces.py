"""What a subpackage's ``__init__.py`` needs to be a public face resolved on first use.

Each subpackage of ``aflite_core`` lists in ``_FACE`` (public name -> the module of the package
that defines it) and ``_NAMESPACES`` (modules used from outside as a namespace) what the rest
of the code may import from it, and makes its ``__getattr__`` and ``__dir__`` here::

    __getattr__, __dir__ = lazy_face(__name__, _FACE, _NAMESPACES)

A name is looked up in its module on every use (never cached in the package, so a test that
patches the defining module is seen), and the module is imported on first use: importing the
package costs nothing more than before it had a face (``docs/architecture.md``, *Public
faces*; ``tests/test_layers.py`` checks that only faces are imported from outside).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(package: str, face: Mapping[str, str], namespaces: Sequence[str] = ()
              ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package ``package`` whose face is ``face``
    (name -> module) and ``namespaces`` (modules)."""
    names = sorted([*face, *namespaces])

    def __getattr__(name: str) -> Any:
        if name in face:
            return getattr(importlib.import_module(f"{package}.{face[name]}"), name)
        if name in namespaces:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__
