"""The measure registry drives the pipeline, the run folder, exports and the report.

Every registered measure round-trips through a real run folder (its files, its before/after
tables, its export and its HTML section), a measure added with ``register`` reaches all of
them without touching any other module, and the core never imports Streamlit.
"""

from __future__ import annotations

import ast
import csv
import io
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from aflite_core.io.datasets import load_dataset
from aflite_core.measures import registry
from aflite_core.measures.registry import Measure, MeasureContext, MeasureResult, Option
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.report.html import section_ids
from aflite_core.runs.exports import export_bytes, table_exports
from aflite_core.runs.folder import load_run

CORE = Path(__file__).resolve().parents[2] / "aflite_core"
FAST = {
    "projection": {"method": "pca"},
    "baselines": {"n_random_draws": 2, "n_splits": 3},
    "inoculation": {"n_repeats": 1, "sizes": (0, 20, 80)},
}


@pytest.fixture(scope="module")
def snli_600(snli_dir, tmp_path_factory) -> Path:
    """The first 600 rows of SNLI dev (real data: three labels, premise and hypothesis)."""
    text = (snli_dir / "snli_dev.csv").read_bytes().decode("utf-8")
    rows = list(csv.reader(io.StringIO(text, newline="")))[:601]
    path = tmp_path_factory.mktemp("snli") / "snli_dev_600.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return path


@pytest.fixture(scope="module")
def every_measure(snli_600, real_data, tmp_path_factory):
    """One audit with every registered measure on (SICK as the OOD challenge set)."""
    params = {**FAST, "ood": {"challenges": [str(real_data / "sick" / "sick.csv")],
                              "n_draws": 2}}
    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=16,
                         target_size=0.7, measures=registry.names(), measure_params=params)
    path = run_audit(load_dataset(snli_600), config, runs_root=tmp_path_factory.mktemp("runs"))
    return load_run(path)


@pytest.mark.parametrize("measure", registry.measures(), ids=lambda m: m.name)
def test_every_registered_measure_round_trips_through_a_run_folder(every_measure, measure):
    run = every_measure
    outcome = run.measures[measure.name]
    assert outcome["status"] == "ok", outcome
    assert run.measure_states()[measure.name] == "ok"
    for filename in measure.files:  # what it declares is what it wrote
        assert run.has(filename), (measure.name, filename, run.artifacts)
    assert set(outcome["artifacts"]) <= set(measure.files)
    for what, filename in measure.exports.items():
        exported = pd.read_csv(io.BytesIO(export_bytes(run, what, format="csv")))
        assert len(exported) == len(run.read_parquet(filename)) > 0
        assert table_exports()[what] == filename
    if measure.tables is not None:
        tables = measure.before_after(run)
        assert tables and all(isinstance(t, pd.DataFrame) and not t.empty
                              for t in tables.values()), tables
        html = (run.path / "report.html").read_text(encoding="utf-8")
        assert measure.name in section_ids(html)


def test_measure_states_see_a_missing_file_and_a_measure_that_was_not_run(every_measure,
                                                                          tmp_path):
    import shutil

    copy = Path(shutil.copytree(every_measure.path, tmp_path / "copy"))
    (copy / "knn.parquet").unlink()
    states = load_run(copy).measure_states()
    assert states["knn"] == "damaged"
    assert states["cues"] == "ok"


def _word_count(ctx: MeasureContext) -> MeasureResult:
    """Mean hypothesis length in words, before vs after: a measure in a dozen lines."""
    hyps, _ = ctx.texts()
    words = np.array([len(h.split()) for h in hyps], dtype=float)
    table = pd.DataFrame({"scope": ["before", "after"],
                          "mean_words": [words.mean(), words[ctx.keep].mean()],
                          "min_words": [ctx.params["min_words"]] * 2})
    return MeasureResult(tables={"word_count.parquet": table})


PLANTED_TITLE = "Mean hypothesis words, before vs after (planted plug-in figure)"


def _word_count_figures(run) -> list:
    import plotly.graph_objects as go

    table = run.read_parquet("word_count.parquet")
    return [go.Figure(go.Bar(x=table["scope"], y=table["mean_words"]),
                      layout={"title": {"text": PLANTED_TITLE}})]


def test_a_measure_added_through_the_registry_reaches_every_consumer(snli_600, tmp_path,
                                                                     monkeypatch):
    plugin = Measure(
        name="word_count", label="Hypothesis length", compute=_word_count,
        files=("word_count.parquet",), default=False, order=99,
        tables=lambda run: {"Mean hypothesis length": run.read_parquet("word_count.parquet")},
        figures=_word_count_figures,
        exports={"word_count": "word_count.parquet"},
        options=(Option("min_words", "Shortest hypothesis", 1, minimum=1, maximum=10),),
    )
    monkeypatch.setattr(registry, "_EXTRA", {})
    registry.register(plugin)
    assert "word_count" in registry.names() and "word_count" not in registry.default_names()

    from aflite_core.config import suggest_config

    config = suggest_config(600, measures=("word_count",), representation_params={
        "n_components": 32}, n_partitions=8)
    assert config.measure_params == {"word_count": {"min_words": 1}}  # option defaults
    run = load_run(run_audit(load_dataset(snli_600), config, runs_root=tmp_path))
    assert run.measure_states()["word_count"] == "ok"
    table = run.read_parquet("word_count.parquet")
    retained = run.frame.loc[run.scores["status"].eq("retained").to_numpy(), "hypothesis"]
    assert table["mean_words"].iloc[1] == pytest.approx(retained.str.split().str.len().mean())
    html = (run.path / "report.html").read_text(encoding="utf-8")
    assert "word_count" in section_ids(html) and "Mean hypothesis length" in html
    assert html.count(PLANTED_TITLE) == 1  # its figure, drawn once by the measure
    assert len(pd.read_csv(io.BytesIO(export_bytes(run, "word_count", format="csv")))) == 2
    # the dashboard's Report shows the same figure, from the same function
    from streamlit.testing.v1 import AppTest

    def report_app(path: str) -> None:
        import streamlit as st

        from aflite_core.measures import registry
        from ui import cache
        from ui.report.view import OPEN_SECTIONS, measure_section

        st.session_state[OPEN_SECTIONS] = {"word_count"}  # the section drawn open
        measure_section(cache.open_run(path), registry.get("word_count"))

    app = AppTest.from_function(report_app, args=(str(run.path),), default_timeout=60).run()
    assert not app.exception, app.exception
    specs = [c.proto.spec for c in app.get("plotly_chart")]
    assert sum(PLANTED_TITLE in spec for spec in specs) == 1

    from ui.audit.view import STAGES  # noqa: F401 - the dashboard imports without error


def test_cli_defaults_are_the_dashboard_defaults(snli_600):
    """The same file audited with defaults from the CLI and the dashboard gives one config."""
    from streamlit.testing.v1 import AppTest

    from aflite_core.cli import build_parser
    from aflite_core.commands.run import audit_config

    dataset = load_dataset(snli_600)
    n = int(dataset.report.n_included)
    cli = audit_config(build_parser().parse_args(["run", str(snli_600), "--out", "unused"]), n)

    def form_app(path: str, n_rows: int) -> None:
        import streamlit as st

        from aflite_core.io.datasets import load_dataset
        from ui import state
        from ui.audit.view import parameter_form

        dataset = load_dataset(path)
        assert int(dataset.report.n_included) == n_rows
        state.set_dataset(dataset, origin="upload")
        config, _ = parameter_form(dataset)
        st.session_state["config"] = config

    app = AppTest.from_function(form_app, args=(str(snli_600), n), default_timeout=60).run()
    assert not app.exception, app.exception
    dashboard = app.session_state["config"].validate()
    assert dashboard.to_dict() == cli.to_dict()
    assert cli.n_partitions == 32 and cli.slice_size == 30  # size_defaults(600): m=32, k=5%


def test_core_never_imports_streamlit():
    """Statically (no import statement names streamlit) and at run time (importing every
    module of the core leaves streamlit out of sys.modules)."""
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "streamlit"]
    assert not offenders, offenders
    code = (
        "import importlib, pkgutil, sys, aflite_core\n"
        "for m in pkgutil.walk_packages(aflite_core.__path__, 'aflite_core.'):\n"
        "    if not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "from aflite_core.measures import registry; registry.measures()\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] == 'streamlit'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=CORE.parent, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_baselines_spread_over_aflite_seeds(snli_600, tmp_path):
    """Where the user asks, AFLite reruns with more seeds and the Report gets the spread of
    'bias removed beyond size' over them; refit with the run's own seed gives its mask."""
    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=16,
                         target_size=0.7, measures=("baselines",),
                         measure_params={"baselines": {"n_random_draws": 2, "n_splits": 3,
                                                       "aflite_seeds": 3}})
    run = load_run(run_audit(load_dataset(snli_600), config, runs_root=tmp_path))
    block = run.baselines["hypothesis_only"]
    seeds = block["seeds"]
    assert seeds["random_states"] == [0, 1, 2] and len(seeds["retained_accuracy"]) == 3
    assert seeds["retained_accuracy"][0] == block["retained"]["accuracy"]
    assert len(set(seeds["retained_accuracy"])) > 1  # other seeds keep other rows
    assert seeds["bias_removed_std_pp"] > 0
    assert seeds["bias_removed_mean_pp"] == pytest.approx(np.mean(seeds["bias_removed_pp"]))
    summary = registry.get("baselines").before_after(run)["Bias removed beyond size"]
    assert summary.loc[summary["baseline"] == "hypothesis_only", "AFLite seeds"].iloc[0] == 3


def test_refit_with_the_runs_seed_reproduces_its_mask(snli_600):
    from aflite_core.measures.registry import MeasureResult

    seen = {}

    def probe(ctx):
        seen["same"] = bool((ctx.refit(ctx.random_state) == ctx.keep).all())
        seen["other"] = bool((ctx.refit(ctx.random_state + 1) != ctx.keep).any())
        return MeasureResult()

    plugin = Measure(name="refit_probe", label="refit probe", compute=probe, files=(),
                     default=False)
    import tempfile

    registry.register(plugin)
    try:
        config = AuditConfig(representation_params={"n_components": 32}, n_partitions=8,
                             target_size=0.7, measures=("refit_probe",), report=False)
        run_audit(load_dataset(snli_600), config, runs_root=tempfile.mkdtemp())
    finally:
        registry._EXTRA.pop("refit_probe", None)
    assert seen == {"same": True, "other": True}


def test_default_train_size_is_fixed_rows_below_the_target():
    """The paper's recipe: t is a number of rows, drawn afresh each round, below the target."""
    from aflite_core.config import suggest_config

    for n in (600, 9_842, 50_000, 550_000):
        config = suggest_config(n)
        assert isinstance(config.train_size, int), (n, config.train_size)
        assert 0 < config.train_size < config.target_size < n
    assert suggest_config(550_000).train_size == 50_000  # the paper's SNLI setting
    # a smaller target given by the user brings the default t down with it
    assert suggest_config(9_842, target_size=1_000).train_size == 800


def test_stop_explanation_says_why_and_what_to_change(every_measure):
    from aflite_core.runs.views import stop_explanation

    text = stop_explanation(every_measure)
    reason = every_measure.summary["aflite"]["stop_reason"]
    if reason == "too_few_above_tau":
        assert "fewer than k" in text and "lower tau" in text
    else:
        assert reason == "target_size" and "reached its target" in text


def test_knn_spread_over_aflite_seeds(snli_600, tmp_path):
    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=16,
                         target_size=0.7, measures=("knn",), report=False,
                         measure_params={"knn": {"aflite_seeds": 2, "n_random_draws": 2}})
    run = load_run(run_audit(load_dataset(snli_600), config, runs_root=tmp_path))
    table = run.knn
    seeds = table[table["scope"] == "after_seeds"]
    after = table[table["scope"] == "after"].set_index(["class", "relation", "k"])
    assert len(seeds) == len(after) and (seeds["n_seeds"] == 2).all()
    assert (seeds["seeds_std"].dropna() >= 0).all() and seeds["seeds_std"].notna().any()
    # the mean over seeds includes this run's own 'after' distance
    own = after["mean_distance"].reindex(seeds.set_index(["class", "relation", "k"]).index)
    assert (seeds["mean_distance"].to_numpy() != own.to_numpy()).any()
    wide = registry.get("knn").before_after(run)
    assert "after_seeds" in next(iter(wide.values())).columns


# --- the measures' view of Φ: no copy of every row, and never writable


def _phi_ctx(filterable: np.ndarray) -> tuple:
    from aflite_core.measures.registry import MeasureContext

    X = np.arange(24, dtype=np.float32).reshape(6, 4)
    rep = SimpleNamespace(X=X, row_ids=np.arange(6))
    ctx = MeasureContext(dataset=None, representation=rep, filterable=filterable,
                         labels=np.array(list("abcabc"), dtype=object),
                         keep=np.ones(int(filterable.sum()), dtype=bool), scores=pd.DataFrame(),
                         retained_ids=np.empty(0), random_state=0)
    return ctx, X


def test_every_row_filterable_gives_phi_itself_read_only():
    ctx, X = _phi_ctx(np.ones(6, dtype=bool))
    view = ctx.X
    assert np.shares_memory(view, X) and view.shape == X.shape  # 1 GB at 1M rows: no copy
    np.testing.assert_array_equal(view, X)
    with pytest.raises(ValueError, match="read-only"):
        view[0, 0] = -1.0  # a measure cannot change Φ for the measures after it
    assert X.flags.writeable and X[0, 0] == 0.0


def test_warm_up_rows_are_left_out_of_a_read_only_copy():
    keep = np.array([False, True, True, False, True, True])
    ctx, X = _phi_ctx(keep)
    part = ctx.X
    np.testing.assert_array_equal(part, X[keep])
    assert not np.shares_memory(part, X)
    with pytest.raises(ValueError, match="read-only"):
        part[0, 0] = -1.0
    np.testing.assert_array_equal(ctx.y, np.array(list("bcbc"), dtype=object))
