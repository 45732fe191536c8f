"""``encoders``: the text encoders available for Φ, and a static model built offline.

    python -m aflite_core encoders list
    python -m aflite_core encoders distill all-MiniLM-L6-v2 --out ~/models/minilm-static

``list`` says which encoder libraries and packaged models are installed, where embeddings are
cached and how long embedding takes per 1,000 texts. ``distill`` builds a static
(model2vec-format) model from a sentence-transformers model (see
:mod:`aflite_core.represent._distill`); use it with ``run --representation static:FOLDER``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``encoders`` command."""
    p = subparsers.add_parser("encoders", help="text encoders for Φ: list them, or distil a "
                                               "static model offline",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="encoders_command", metavar="ACTION")
    ls = sub.add_parser("list", help="installed encoder libraries, packaged models, cache")
    ls.set_defaults(func=_list)
    d = sub.add_parser("distill", help="build a static model2vec folder from a "
                                       "sentence-transformers model (CPU, about a minute)")
    d.add_argument("model", help="sentence-transformers folder or packaged model name "
                                 "(e.g. all-MiniLM-L6-v2)")
    d.add_argument("--out", required=True, metavar="DIR", help="folder to write")
    d.add_argument("--dims", type=int, default=256, help="PCA dimension (default 256)")
    d.set_defaults(func=_distill)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), 2)[1])


def _list(args: argparse.Namespace) -> int:
    from aflite_core.represent import default_cache_dir, encoders  # lazy: +458 ms to import

    for family in encoders.FAMILIES:
        module = encoders._MODULE[family]
        found = importlib.util.find_spec(module) is not None
        state = "installed" if found else f"not installed ({encoders.INSTALL[family]})"
        print(f"{family}: {module} {state}; about "
              f"{encoders.DEFAULT_RATES[family]:g} s per 1,000 texts on 2 cores")
    for model in encoders.PACKAGED_MODELS.values():
        folder = model.folder()
        where = str(folder) if folder else f"not installed (pip install {model.distribution})"
        print(f"packaged {model.family} model {model.name}: {where}; about "
              f"{model.seconds_per_1k_texts:g} s per 1,000 texts")
    print(f"embedding cache: {default_cache_dir()}")
    return 0


def _distill(args: argparse.Namespace) -> int:
    from aflite_core.represent import distill_static  # lazy: +115 ms to import

    last = [-1]

    def progress(event: dict) -> None:
        tenth = int(event["fraction"] * 10)
        if tenth != last[0]:
            last[0] = tenth
            print(f"  {event['message']}", file=sys.stderr)

    out = distill_static(args.model, args.out, dims=args.dims, callback=progress)
    print(f"wrote {out}; use it with: python -m aflite_core run DATA --out RUN "
          f"--representation static:{out}")
    return 0
