"""Entry point for ``python -m aflite_core``."""

import sys

from aflite_core.cli import main

if __name__ == "__main__":
    sys.exit(main())
