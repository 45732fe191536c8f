"""The Review page's code (``app_pages/review.py`` draws it)."""
