"""The Audit page's code (``app_pages/audit.py`` draws it)."""
