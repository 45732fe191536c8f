"""Streamlit helper package of the dashboard.

The pages in ``app_pages/`` only lay out widgets and call into this package:

- :mod:`ui.state`: namespaced session-state keys and per-session accessors (no module-level
  mutable state: two browser tabs are two independent sessions);
- :mod:`ui.cache`: ``st.cache_data`` / ``st.cache_resource`` wrappers over :mod:`aflite_core`,
  keyed by content hash and parameters;
- :mod:`ui.jobs`: the background audit job of one session (progress, cancel);
- :mod:`ui.components`: shared page furniture (explainers, empty states, tables);
- :mod:`ui.charts`: Plotly figure builders from already-computed data.
"""
