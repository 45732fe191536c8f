"""Numeric and text core of the dataset-bias audit dashboard.

The core never imports streamlit: everything here runs headless, from the CLI
(``python -m aflite_core``), from tests, or behind the dashboard's cached wrappers.
"""

__version__ = "0.1.0"
