"""The Explore page's code (``app_pages/explore.py`` draws it)."""
