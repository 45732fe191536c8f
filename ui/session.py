"""Session start-up and the sidebar: what every page run does before the page itself.

A new session gets the bundled SNLI sample loaded (so the pages show something real at once)
and, when the runs root already holds an audit of that sample, the newest one opened;
otherwise the default audit of the sample starts in the background (``AFLITE_AUTORUN=0``
turns that off). A
finished background audit is opened here, whatever page the user is on.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from aflite_core.config import suggest_config
from aflite_core.filter import filter_units
from aflite_core.runs import cleanup_stale
from ui import cache, components, current, jobs, state, url_state


def load_sample() -> str | None:
    """Load the bundled sample into the session; return an error message or ``None``."""
    path = state.sample_path()
    if not path.is_file():
        return f"The bundled sample {path.name} was not found at {path}."
    try:
        dataset = cache.load_path(path)
    except (ValueError, OSError) as exc:  # DatasetError derives from ValueError
        return f"The bundled sample could not be loaded: {exc}"
    current.use_dataset(dataset, origin="sample")
    return None


def audit_sample() -> None:
    """Start the default audit of the just-loaded sample in the background.

    A newcomer then sees a finished audit (about 16 s on a 2-core laptop) without choosing
    anything; later sessions reopen that run instead of recomputing it.
    """
    dataset = state.get_dataset()
    try:
        config = suggest_config(filter_units(dataset))
    except (ValueError, TypeError) as exc:
        state.notify(f"The sample could not be audited automatically: {exc}",
                     icon=":material/warning:")
        return
    job = jobs.start_audit(dataset, config, runs_root=state.runs_root(),
                           job_dir=state.session_dir())
    state.put(state.JOB, job)
    state.notify("Auditing the bundled sample with the default parameters; the Audit page "
                 "shows its progress.", icon=":material/play_arrow:")


@st.cache_resource(show_spinner=False)
def _sweep_once(runs_root: str) -> bool:
    """Once per server process and runs root: restore runs a killed swap hid, sweep stale
    temporary folders and files, and other dead sessions' folders (see docs/hostile-inputs.md)."""
    try:
        state.sweep_stale_sessions()
        cleanup_stale(runs_root)
    except OSError:  # a sweep must never stop the dashboard
        return False
    return True


def start() -> None:
    """Per-rerun set-up: first-visit sample, finished jobs, one-shot notices."""
    _sweep_once(str(state.runs_root()))
    if not state.get(state.AUTOLOAD_DONE):
        state.put(state.AUTOLOAD_DONE, True)
        if state.get_dataset() is None:
            problem = load_sample()
            url_state.open_run_from_url()  # a shared link's run, before any autorun
            if problem:
                state.notify(problem + " Load a file on the Data page.", icon=":material/warning:")
            elif state.get_run_path() is None and state.autorun_enabled():
                audit_sample()
    url_state.open_run_from_url()
    collect_job()
    notice = state.pop_notice()
    if notice:
        st.toast(notice[0], icon=notice[1])


def collect_job() -> None:
    """Open the result of this session's finished audit (once)."""
    job = state.get(state.JOB)
    if job is None or job.running or job.consumed:
        return
    job.consumed = True
    if job.state == jobs.DONE and job.result is not None:
        state.set_run_path(job.result)
        name = components.md_escape(job.result.name)
        state.notify(f"Audit finished: {name}. Explore, Cues and Report show it now.")


def sidebar() -> None:
    """Where this session stands: dataset, open run, audit in progress."""
    with st.sidebar:
        st.caption("SESSION")
        dataset = state.get_dataset()
        if dataset is None:
            st.markdown(":material/database: No dataset loaded")
        else:
            report = dataset.report
            origin = {"sample": "bundled sample", "upload": "upload", "path": "server path",
                      "synthetic": "synthetic demo"}.get(state.get(state.DATASET_ORIGIN), "")
            st.markdown(":material/database: **Dataset**")
            st.text(f"{dataset.name}\n{report.n_included:,} of {report.n_read:,} rows included"
                    + (f"\n({origin})" if origin else ""))
        run_path = state.get_run_path()
        job = state.get(state.JOB)
        st.markdown(":material/folder_open: **Run**")
        st.text(run_status(dataset, run_path, running=job is not None and job.running))
        if job is not None and job.running:
            job_progress()


def run_status(dataset, run_path: Path | None, *, running: bool) -> str:
    """One honest line on the dataset's audit: running, not audited yet, or which run.

    A run of another file than the loaded dataset is named as such, so the sidebar never
    puts dataset X next to a run of dataset Y without saying so.
    """
    if run_path is None:
        return "audit running…" if running else "none open (not audited yet)"
    line = run_path.name
    if dataset is not None:
        try:
            run = cache.open_run(run_path)
        except (ValueError, OSError):
            return f"{line}\n(cannot be opened)"
        if run.input.get("sha256") != dataset.content_hash:
            other = run.input.get("name") or "another file"
            line += f"\n(a run of {other}, not of the loaded dataset)"
    return line + ("\n(another audit running…)" if running else "")


@st.fragment(run_every=1.0)
def job_progress() -> None:
    """Live progress of the session's audit in the sidebar, on every page.

    When the audit finishes, the whole app reruns so that the new run opens wherever the
    user is (see :func:`collect_job`).
    """
    job = state.get(state.JOB)
    if job is None:
        return
    if not job.running:
        st.rerun()
        return
    snap = job.snapshot()
    from ui.audit.view import stage_label  # lazy: +62 ms to import

    st.progress(snap["fraction"], text=f"Audit running: {snap['fraction']:.0%} · "
                f"{stage_label(snap.get('stage', ''))} · ETA "
                f"{components.fmt_seconds(snap.get('eta'))}")
    st.page_link("app_pages/audit.py", label="Follow it on the Audit page")
