"""Dataset-bias audit dashboard: the pages (``streamlit run serve.py`` starts them with the
streaming download route of ``ui.downloads``; ``streamlit run app.py`` works too).

The entry point only sets the page up, loads the bundled sample into a new session, shows
where the session stands in the sidebar, and routes to the pages in ``app_pages/``.

The page scripts are deliberately *not* in a folder called ``pages/``: Streamlit treats such a
folder next to the entry point as its legacy multipage layout until the first
``st.navigation`` call of the process, so after a server restart a tab reconnecting to, say,
``/explore`` would run that page without this file (no sample, no sidebar, wrong menu), and
``AppTest`` would do the same on every rerun.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui import session

# The favicon is a file of the repository: a ``:material/...`` page icon makes the browser
# fetch an SVG from a font server, which fails quietly offline (the navigation icons below
# use the font Streamlit bundles and need no network).
ICON = Path(__file__).resolve().parent / "assets" / "icon.png"

st.set_page_config(
    page_title="AFLite dataset audit",
    page_icon=str(ICON),
    layout="wide",
)

session.start()

PAGES = [
    st.Page("app_pages/data.py", title="Data", icon=":material/table_view:", default=True),
    st.Page("app_pages/audit.py", title="Audit", icon=":material/filter_alt:"),
    st.Page("app_pages/explore.py", title="Explore", icon=":material/travel_explore:"),
    st.Page("app_pages/cues.py", title="Cues", icon=":material/key:"),
    st.Page("app_pages/review.py", title="Review", icon=":material/rate_review:"),
    st.Page("app_pages/report.py", title="Report", icon=":material/summarize:"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
]
page = st.navigation(PAGES)
session.sidebar()
page.run()
