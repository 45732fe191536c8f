"""Audit page: AFLite parameters, Run, live progress with Cancel, previous runs."""

from __future__ import annotations

import streamlit as st

from ui import components, state
from ui.audit import view as audit_view

st.title("Audit")
components.explainer(audit_view.SUMMARY, audit_view.FORMULA)

job = state.get(state.JOB)
if job is not None and job.running:
    audit_view.live_progress()
else:
    audit_view.last_job_outcome()

dataset = state.get_dataset()
if dataset is None:
    components.empty_state("Load a dataset first: the bundled sample, an upload or the "
                           "synthetic demo.", page="app_pages/data.py", label="Go to Data")
else:
    st.markdown(f"Auditing **{components.md_escape(dataset.name)}**: "
                f"{dataset.report.n_included:,} rows take part.")
    config, extras = audit_view.parameter_form(dataset)
    running = job is not None and job.running
    if st.button("Run audit", type="primary", icon=":material/play_arrow:",
                 disabled=config is None or running, key=state.key("audit", "run")):
        audit_view.start_run(dataset, config, **extras)
    if running:
        st.caption("An audit is running in this session; wait for it or cancel it above.")

st.divider()
audit_view.previous_runs()
