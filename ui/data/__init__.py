"""The Data page's code (``app_pages/data.py`` draws it)."""
