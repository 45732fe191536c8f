"""The Compare page's code (``app_pages/compare.py`` draws it)."""
