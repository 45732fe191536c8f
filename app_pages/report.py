"""Report page: before vs after AFLite, the measures, and every download."""

from __future__ import annotations

import streamlit as st

from ui import components, current
from ui.panels import breakdown as breakdown_view
from ui.report import view as report_view

st.title("Report")
components.explainer(report_view.SUMMARY, report_view.FORMULA, title="Measures, formulas")

path, run = current.open_run_or_stop("and its report appears here")

st.caption(f"Run {components.md_escape(run.name)} · input "
           f"{components.md_escape(run.input.get('name', '?'))} · created "
           f"{run.created.replace('T', ' ')[:19]} UTC")
report_view.downloads(run)
st.divider()
report_view.sizes(run)
report_view.labels(run)
st.caption("Each section below is drawn when you open it (a closed one costs nothing); the "
           "HTML report under Downloads holds them all.")
breakdown = report_view.lazy_section("breakdown", "**Removal rate by column**")
if breakdown.open:
    with breakdown, components.shown_errors("The removal rate by column"):
        breakdown_view.report_panel(run, path)
report_view.measure_sections(run)
stages = report_view.lazy_section("stages", "**Stages: time, and where each ran**")
if stages.open:
    with stages, components.shown_errors("The stages"):
        report_view.stages(run)
failed = {k: v for k, v in run.measures.items() if isinstance(v, dict)
          and v.get("status") not in (None, "ok") and k not in run.measure_states()}
if failed:
    with st.expander(f"{len(failed)} step(s) could not be completed"):
        for name, info in failed.items():
            st.text(f"{name}: {info.get('error', info.get('status'))}")
