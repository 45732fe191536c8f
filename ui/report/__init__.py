"""The Report page's code (``app_pages/report.py`` draws it)."""
