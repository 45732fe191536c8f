"""Helpers of the dashboard's AppTest tests (``tests/ui/test_app_*.py``; their fixtures,
``runs_root`` and ``shared_run``, are in ``tests/conftest.py``).

Every test gets its own runs root (``AFLITE_RUNS_DIR`` in a temporary folder) and drives
``app.py`` through ``st.navigation`` exactly as a browser session would: ``switch_page``
followed by ``run`` executes ``app.py``, which runs the page.
"""

from __future__ import annotations

import functools
import re
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

REPO_ROOT = Path(__file__).resolve().parent.parent
APP = REPO_ROOT / "app.py"
SAMPLE = REPO_ROOT / "aflite_core" / "data" / "snli_sample.csv"
#: First runs import pandas/sklearn/plotly: be generous.
TIMEOUT = 60

#: Small AFLite parameters for tests: a handful of rounds on the 4,000-row sample.
SMALL = {"m": 8, "k": 500, "target": 2000, "measures": ["projection"]}


def new_app(*, autoload: bool = True) -> AppTest:
    """A fresh session of the dashboard (not yet run).

    Parameters
    ----------
    autoload : bool
        False starts the session as if the user had cleared the dataset: no sample.
    """
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if not autoload:
        at.session_state["app:autoload_done"] = True
    return at


def goto(at: AppTest, page: str, *, open_sections: bool = True) -> AppTest:
    """Switch to ``app_pages/<page>.py`` and run.

    The Report draws a section only while it is open (``ui.report.view.lazy_section``); with
    ``open_sections`` every section is opened first, as a user reading all of them would.
    ``test_app_report.py`` checks what a first visit shows.
    """
    if page == "report" and open_sections:
        from aflite_core.measures import registry
        from ui.report.view import OPEN_SECTIONS

        at.session_state[OPEN_SECTIONS] = {"breakdown", *registry.names()}
    return at.switch_page(f"app_pages/{page}.py").run()


def assert_clean(at: AppTest) -> None:
    """No exception and no error element on the page."""
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def plain(text: object) -> str:
    """``text`` with the Markdown escapes of ``ui.components.md_escape`` removed."""
    return re.sub(r"\\(.)", r"\1", str(text))


def errors(at: AppTest) -> list[str]:
    """The error messages on the page, unescaped."""
    return [plain(e.value) for e in at.error]


def texts(at: AppTest) -> str:
    """Everything shown as Markdown, caption, info, warning, text or title (one string)."""
    parts = []
    for kind in ("title", "markdown", "caption", "info", "warning", "success", "error", "text",
                 "subheader", "header"):
        parts += [str(e.value) for e in getattr(at, kind)]
    return "\n".join(parts)


def widget_key(at: AppTest, prefix: str) -> str:
    """The one session-state key starting with ``prefix`` (keys carry a dataset hash)."""
    keys = [k for k in at.session_state if str(k).startswith(prefix)]
    assert len(keys) == 1, (prefix, keys)
    return str(keys[0])


def start_small_audit(at: AppTest, **overrides: object) -> AppTest:
    """On the Audit page: set small parameters and press Run (the job starts)."""
    params = {**SMALL, **overrides}
    goto(at, "audit")
    at.number_input(key=widget_key(at, "audit:m:")).set_value(params["m"])
    at.number_input(key=widget_key(at, "audit:k:")).set_value(params["k"])
    at.number_input(key=widget_key(at, "audit:target:")).set_value(params["target"])
    if "t" in params:
        at.number_input(key=widget_key(at, "audit:t:")).set_value(params["t"])
    at.multiselect(key=widget_key(at, "audit:measures:")).set_value(params["measures"])
    at.run()
    return at.button(key="audit:run").click().run()


def wait_for_job(at: AppTest, timeout: float = 180.0) -> object:
    """Rerun the page until the session's audit job has finished; return the job.

    The page is drawn again every 2 s while the job runs (its progress on the page), and
    once it has finished: the wait ends with the job, not with a fixed sleep."""
    job = at.session_state["audit:job"]
    deadline = time.monotonic() + timeout
    while job.running and time.monotonic() < deadline:
        job.join(min(2.0, max(0.0, deadline - time.monotonic())))
        if job.running:
            at.run()
    assert not job.running, "the audit did not finish in time"
    at.run()
    return job


@functools.cache
def make_shared_run(folder: str) -> Path:
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    dataset = load_dataset(SAMPLE)
    config = AuditConfig(
        target_size=2000, n_partitions=8, slice_size=500, random_state=0,
        measures=("cues", "knn", "projection", "baselines", "duplicates", "inoculation",
                  "label_issues"),
        measure_params={"projection": {"method": "pca"},
                        "baselines": {"n_random_draws": 1, "n_splits": 2},
                        "inoculation": {"n_repeats": 1}},
    )
    return run_audit(dataset, config, runs_root=Path(folder) / "runs")


def open_run(at: AppTest, path: Path) -> AppTest:
    """Open ``path`` in the session (as the Audit page's Open button does)."""
    at.session_state["app:run_path"] = str(path)
    return at
