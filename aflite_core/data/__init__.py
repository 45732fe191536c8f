"""Data shipped with the package: the bundled SNLI sample (``snli_sample.csv``; source and
licence in ``assets/README.md``)."""

from __future__ import annotations

from pathlib import Path

#: The bundled sample: 4,000 SNLI pairs (3,000 train, 1,000 dev), CC BY-SA 4.0.
SAMPLE = Path(__file__).resolve().parent / "snli_sample.csv"


def sample_path() -> Path:
    """The bundled SNLI sample the dashboard opens on (works from any folder once the
    package is installed)."""
    return SAMPLE
