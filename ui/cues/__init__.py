"""The Cues page's code (``app_pages/cues.py`` draws it)."""
