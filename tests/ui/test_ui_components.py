"""Streamlit helpers of ``ui.components`` that show dataset-controlled text."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _full_text_app() -> None:
    import pandas as pd

    from ui import components

    row = pd.Series({"status": "removed", "predictability": 0.875, "removal_round": 2,
                     "hypothesis ![c](http://127.0.0.1:9/b.png)": "A dog **runs**."})
    components.full_text(row, [c for c in row.index if c.startswith("hypothesis")])


def test_full_text_shows_column_names_and_values_as_text_not_markdown():
    app = AppTest.from_function(_full_text_app).run()
    assert not app.exception
    caption = app.caption[0].value
    # the Markdown image syntax is escaped: no <img> is rendered, nothing is fetched
    assert "![c](" not in caption and r"\!\[c\]" in caption
    texts = [t.value for t in app.text]
    assert texts[0] == "status removed · predictability 0.88 · removal_round 2"
    assert texts[1] == "A dog **runs**."  # st.text: shown verbatim, never as Markdown
