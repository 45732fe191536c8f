"""Start the dashboard with its streaming downloads: ``streamlit run serve.py``.

Streamlit runs ``app.py`` (the pages) inside an ``st.App`` whose server also has the route
of :mod:`ui.downloads`, which sends an export while it is written instead of building it in
memory first (a million-row CSV is a few hundred MB). ``streamlit run app.py`` still works;
its downloads are then built in memory when clicked.
"""

from __future__ import annotations

import streamlit as st

from ui import downloads

app = st.App("app.py", routes=downloads.routes())
