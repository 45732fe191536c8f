"""Entry point for ``python -m aflite_core``."""

from aflite_core.cli import console

if __name__ == "__main__":
    console()
