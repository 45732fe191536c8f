"""Measures declared ``beside`` (the map) run on a thread of their own beside the others:
same tables bit for bit, really side by side, a bar that still counts, cancelling and failing
as in order (aflite_core.measure_runs)."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aflite_core.io.datasets import load_dataset
from aflite_core.measures import registry
from aflite_core.measures.registry import Measure, MeasureResult
from aflite_core.pipeline import AuditCancelled, AuditConfig, _stage_spans, run_audit
from aflite_core.runs.folder import load_run
from ui import jobs

MEASURES = ("cues", "knn", "projection", "baselines", "label_issues")
CONFIG = {"representation_params": {"n_components": 32}, "n_partitions": 8,
          "measures": MEASURES}


@pytest.fixture(scope="module")
def snli_1500(snli_dev_head) -> Path:
    return snli_dev_head(1500)


def _outputs(path: Path) -> dict[str, object]:
    """Every table and document of a run folder, without times and names."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in ("timings", "seconds", "created", "name", "engines")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    out: dict[str, object] = {}
    for file in sorted(path.iterdir()):
        if file.suffix == ".parquet":
            out[file.name] = pd.read_parquet(file)
        elif file.suffix == ".json":
            out[file.name] = strip(json.loads(file.read_text(encoding="utf-8")))
    return out


def test_the_map_beside_the_others_gives_the_same_tables_bit_for_bit(snli_1500, tmp_path,
                                                                     monkeypatch):
    assert registry.get("projection").beside  # the default audit's map runs beside
    beside_events: list[dict] = []
    beside = run_audit(load_dataset(snli_1500), AuditConfig(**CONFIG),
                       runs_root=tmp_path / "beside", callback=beside_events.append)

    in_turn = dataclasses.replace(registry.get("projection"), beside=False)
    monkeypatch.setattr(registry, "_EXTRA", {"projection": in_turn})
    in_order = run_audit(load_dataset(snli_1500), AuditConfig(**CONFIG),
                         runs_root=tmp_path / "in_order")

    a, b = _outputs(beside), _outputs(in_order)
    assert sorted(a) == sorted(b) and "projection.parquet" in a and "knn.parquet" in a
    for name in a:
        if isinstance(a[name], pd.DataFrame):
            pd.testing.assert_frame_equal(a[name], b[name], check_exact=True, obj=name)
        else:
            assert a[name] == b[name], name
    run = load_run(beside)
    assert all(run.measures[m]["status"] == "ok" for m in MEASURES)
    assert [m for m in run.measures if m in MEASURES] == list(MEASURES)  # registry order

    # the bar: monotone, ends at 1, and the map's events came while the others ran
    fractions = [e["fraction"] for e in beside_events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    stages = [e["stage"] for e in beside_events]
    first_map, last_map = stages.index("projection"), len(stages) - 1 - stages[::-1].index(
        "projection")
    assert "knn" in stages[first_map:last_map] or "baselines" in stages[first_map:last_map]
    assert {e["stage"] for e in beside_events if e.get("beside")} == {"projection"}

    # the dashboard's progress names the stage run in order, the map beside it: the stage
    # shown moves forward only (before, it alternated between the map and the others)
    job = jobs.AuditJob(lambda *a, **k: None, None, None, runs_root=tmp_path)
    shown, alongside = [], set()
    for event in beside_events:
        job._callback(event)
        snap = job.snapshot()
        shown.append(snap["stage"])
        if snap.get("beside"):
            assert snap["beside"]["stage"] == "projection" and snap["beside"]["message"]
            alongside.add(snap["stage"])
    measures = [s for s in shown if s in MEASURES]  # ("write" comes twice: scores, then rows)
    stretches = [s for i, s in enumerate(measures) if i == 0 or s != measures[i - 1]]
    assert len(stretches) == len(set(stretches)), " > ".join(stretches)
    assert alongside & {"knn", "baselines", "pvi", "label_issues"}
    assert "beside" not in job.snapshot()  # the map finished


def test_the_beside_span_is_the_last_before_the_report(snli_1500, monkeypatch):
    from aflite_core import measure_runs

    dataset = load_dataset(snli_1500)
    spans = _stage_spans(dataset, AuditConfig(**CONFIG))
    order = list(spans)
    assert order[-2:] == ["projection", "report"]
    assert spans["projection"][0] == pytest.approx(spans["label_issues"][1])
    # above BESIDE_MAX_ROWS the map runs in turn, in its registry place, with its whole time
    monkeypatch.setattr(measure_runs, "BESIDE_MAX_ROWS", len(dataset.labels()) - 1)
    in_turn = _stage_spans(dataset, AuditConfig(**CONFIG))
    assert list(in_turn) == ["representation", "aflite", "write", *MEASURES, "report"]
    width = {name: hi - lo for name, (lo, hi) in in_turn.items()}
    assert width["projection"] > (spans["projection"][1] - spans["projection"][0]) * 1.2


def test_on_many_cores_the_map_runs_beside_up_to_more_rows():
    """Above ``BESIDE_MAX_ROWS`` rows the map runs in turn on two cores (its working set
    beside the others' for no gain), beside them on ``BESIDE_MANY_CORES`` cores or more (it
    kept one or two of 16 cores busy) up to ``BESIDE_MAX_ROWS_MANY_CORES`` rows."""
    from aflite_core import measure_runs as m

    chosen = [m_ for m_ in registry.measures() if m_.name in CONFIG["measures"]]

    def names(n: int, cores: int) -> list[str]:
        return [x.name for x in m.beside_measures(chosen, n, cores=cores)]

    assert names(m.BESIDE_MAX_ROWS, 2) == ["projection"]
    assert names(m.BESIDE_MAX_ROWS + 1, 2) == names(m.BESIDE_MAX_ROWS + 1, 7) == []
    assert names(m.BESIDE_MAX_ROWS + 1, m.BESIDE_MANY_CORES) == ["projection"]
    assert names(m.BESIDE_MAX_ROWS_MANY_CORES, 16) == ["projection"]
    assert names(m.BESIDE_MAX_ROWS_MANY_CORES + 1, 16) == []
    assert m.beside_measures(chosen, 300_000, cores=16, local=False) == []


def test_on_a_cluster_every_measure_runs_in_turn(snli_1500):
    """On Dask the map's layout is a task holding a worker, and the tasks reading Φ's rows
    there would wait behind it: nothing runs beside, and the plan has the map in its place."""
    from aflite_core import measure_runs

    chosen = [m for m in registry.measures() if m.name in CONFIG["measures"]]
    assert [m.name for m in measure_runs.beside_measures(chosen, 1_500)] == ["projection"]
    assert measure_runs.beside_measures(chosen, 1_500, local=False) == []
    dataset = load_dataset(snli_1500)
    on_dask = _stage_spans(dataset, AuditConfig(**{**CONFIG, "backend": "dask"}))
    assert list(on_dask) == ["representation", "aflite", "write", *MEASURES, "report"]


def _planted(name: str, compute, *, beside: bool, order: int) -> Measure:
    return Measure(name=name, label=name, compute=compute, files=(f"{name}.parquet",),
                   default=False, order=order, beside=beside)


def _audit_beside(monkeypatch, data: Path, root: Path, beside: tuple, in_order: tuple):
    """The audit of ``data`` with two planted measures, ``(name, compute)`` each: the first
    declared beside, the second in order after it."""
    monkeypatch.setattr(registry, "_EXTRA", {
        beside[0]: _planted(beside[0], beside[1], beside=True, order=1),
        in_order[0]: _planted(in_order[0], in_order[1], beside=False, order=2)})
    config = AuditConfig(representation_params={"n_components": 16}, n_partitions=8,
                         measures=(beside[0], in_order[0]))
    return load_run(run_audit(load_dataset(data), config, runs_root=root))


def test_a_beside_measure_really_runs_while_the_others_run(snli_1500, tmp_path, monkeypatch):
    """The beside measure waits for an in-order measure that comes after it in the registry:
    in order this would time out; beside, both finish and see each other."""
    started, released = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def slow(ctx):
        started.set()
        seen["released"] = released.wait(timeout=20)
        seen["thread"] = threading.current_thread().name
        for k in range(1, 5):
            ctx.progress(k / 4, f"step {k}")
        return MeasureResult(tables={"slow.parquet": pd.DataFrame({"n": [int(ctx.keep.sum())]})})

    def quick(ctx):
        seen["started"] = started.wait(timeout=20)
        released.set()
        return MeasureResult(tables={"quick.parquet": pd.DataFrame({"n": [len(ctx.labels)]})})

    run = _audit_beside(monkeypatch, snli_1500, tmp_path, ("slow", slow), ("quick", quick))
    assert seen["released"] and seen["started"]
    assert str(seen["thread"]).startswith("measure-beside")
    assert run.measures["slow"]["status"] == run.measures["quick"]["status"] == "ok"
    assert run.read_parquet("slow.parquet")["n"].tolist() == [int((run.scores["status"]
                                                                  == "retained").sum())]


def test_the_beside_span_fills_on_the_plans_knee_then_alone_to_its_end(snli_1500, tmp_path,
                                                                      monkeypatch):
    """Issue 63 item 7: while the others run, a beside measure's work fills its span on the
    plan's knee (here: half its work, a quarter of the span); once they end, what it has left
    runs alone and fills the rest of the span in step with its work. Filled in step with its
    work throughout (as before), the map's last fifth and its regions had a tenth of the bar
    for a fifth of the time at 20,000 rows, and the ETA there was 2.6x on a busy machine."""
    import aflite_core.progress_plan as progress_plan

    monkeypatch.setattr(progress_plan, "beside_plan",
                        lambda own, others, n_rows, cores=2: (own, 0.5, 0.25))
    waiting = threading.Event()

    def slow(ctx):
        ctx.progress(0.25, "a quarter")
        assert waiting.wait(timeout=30)  # the other measure ended: the audit waits for this
        for k in (2, 3, 4):
            ctx.progress(k / 4, f"step {k}")
        return MeasureResult(tables={"slow.parquet": pd.DataFrame({"n": [1]})})

    def quick(ctx):
        return MeasureResult(tables={"quick.parquet": pd.DataFrame({"n": [1]})})

    monkeypatch.setattr(registry, "_EXTRA", {
        "slow": _planted("slow", slow, beside=True, order=1),
        "quick": _planted("quick", quick, beside=False, order=2)})
    config = AuditConfig(representation_params={"n_components": 16}, n_partitions=8,
                         measures=("slow", "quick"))
    dataset = load_dataset(snli_1500)
    events: list[dict] = []

    def callback(event: dict) -> None:
        events.append(event)
        if str(event.get("message", "")).startswith("waiting for"):
            waiting.set()

    run_audit(dataset, config, runs_root=tmp_path, callback=callback)
    lo, hi = _stage_spans(dataset, config)["slow"]
    width = hi - lo
    at = {e["message"]: e["fraction"] for e in events if e.get("stage") == "slow"}
    # a quarter of the work before the knee: an eighth of the span (beside what the stages
    # in order reached); when they end, the bar stands at the span's start plus that eighth
    assert at["waiting for slow"] == pytest.approx(lo + width / 8)
    # the three quarters left fill the seven eighths left, a third each
    for k, filled in ((2, 1 / 8 + 7 / 24), (3, 1 / 8 + 14 / 24), (4, 1.0)):
        assert at[f"step {k}"] == pytest.approx(lo + width * filled)
    assert [e["fraction"] for e in events] == sorted(e["fraction"] for e in events)


def test_the_bar_moves_between_finding_and_naming_the_maps_regions(snli_1500, tmp_path):
    """Issue 63 item 7: the map's regions report when they are found and again before they
    are named, in proportion to the two steps' planned seconds (under load the regions took
    5 s without a report while the ETA counted down)."""
    from aflite_core.measures import projection

    events: list[dict] = []
    dataset = load_dataset(snli_1500)
    config = AuditConfig(**{**CONFIG, "measures": ("projection",)}, report=False)
    run_audit(dataset, config, runs_root=tmp_path, callback=events.append)
    steps = {e["message"]: e["fraction"] for e in events if e.get("stage") == "projection"}
    lo, hi = _stage_spans(dataset, config)["projection"]
    find, describe = projection._regions_seconds(1500)
    assert 0 < find < find + describe
    assert steps["finding the map's regions"] == pytest.approx(lo + 0.9 * (hi - lo))
    assert steps["naming the map's regions"] == pytest.approx(
        lo + (0.9 + 0.1 * find / (find + describe)) * (hi - lo))


def test_cancelling_during_a_beside_measure_leaves_nothing(snli_1500, tmp_path, monkeypatch):
    def slow(ctx):
        for k in range(200):
            ctx.progress(k / 200, f"step {k}")
            threading.Event().wait(0.01)
        return MeasureResult(tables={"slow.parquet": pd.DataFrame({"n": [1]})})

    monkeypatch.setattr(registry, "_EXTRA", {"slow": _planted("slow", slow, beside=True,
                                                              order=1)})
    config = AuditConfig(representation_params={"n_components": 16}, n_partitions=8,
                         measures=("slow", "cues"))
    root = tmp_path / "runs"

    def cancel(event):
        return event["stage"] == "slow" and event["message"] == "step 20"

    # the side that sees the cancellation first raises: the beside measure, or the measure
    # in order when it is still running then (it reports at its next step)
    with pytest.raises(AuditCancelled, match="cancelled during (slow|cues)"):
        run_audit(load_dataset(snli_1500), config, runs_root=root, callback=cancel)
    assert not root.exists()


def test_a_failing_beside_measure_removes_only_its_own_files(snli_1500, tmp_path,
                                                             monkeypatch):
    """The failing measure wrote one file and then failed writing the next: that file goes,
    the other measure's file written meanwhile stays."""
    from aflite_core.runs._writer import RunWriter

    other_written = threading.Event()
    write_parquet = RunWriter.write_parquet

    def noting(self, filename, frame, **options):
        path = write_parquet(self, filename, frame, **options)
        if filename == "other.parquet":
            other_written.set()
        return path

    monkeypatch.setattr(RunWriter, "write_parquet", noting)

    def failing(ctx):  # fails after the other measure wrote its file
        assert other_written.wait(timeout=20)
        return MeasureResult(tables={"failing.parquet": pd.DataFrame({"n": [1]}),
                                     "failing_b.parquet": "not a table"})

    def other(ctx):
        return MeasureResult(tables={"other.parquet": pd.DataFrame({"x": np.arange(3)})})

    run = _audit_beside(monkeypatch, snli_1500, tmp_path, ("failing", failing),
                        ("other", other))
    assert run.measures["failing"]["status"] == "error"
    assert not run.has("failing.parquet") and run.has("other.parquet")
    assert run.measures["other"]["status"] == "ok"


def test_the_audit_collects_garbage_less_often_and_restores_the_callers_thresholds(
        snli_1500, tmp_path, monkeypatch):
    """GC_THRESHOLDS while the audit runs (its measures included), the caller's after, also
    when the audit stops with an error."""
    import gc

    from aflite_core import pipeline

    seen = []

    def probe(ctx):
        seen.append(gc.get_threshold())
        return MeasureResult(tables={"probe.parquet": pd.DataFrame({"n": [1]})})

    monkeypatch.setattr(registry, "_EXTRA", {"probe": _planted("probe", probe, beside=False,
                                                               order=1)})
    before = gc.get_threshold()
    config = AuditConfig(representation_params={"n_components": 16}, n_partitions=8,
                         measures=("probe",))
    run_audit(load_dataset(snli_1500), config, runs_root=tmp_path / "ok")
    assert seen == [pipeline.GC_THRESHOLDS] and gc.get_threshold() == before

    def cancel(event):
        return event["stage"] == "probe"

    with pytest.raises(AuditCancelled):
        run_audit(load_dataset(snli_1500), config, runs_root=tmp_path / "stop", callback=cancel)
    assert gc.get_threshold() == before
    # above GC_MAX_ROWS the caller's thresholds stay (lingering garbage raised the 1M peak)
    monkeypatch.setattr(pipeline, "GC_MAX_ROWS", 1499)
    run_audit(load_dataset(snli_1500), config, runs_root=tmp_path / "big")
    assert seen[-1] == before
