"""Sub-commands of ``python -m aflite_core``; one module per command.

Each module exposes ``register(subparsers)``, which adds its parser and sets
``func`` to a callable taking the parsed arguments and returning an exit code.
"""
