"""This machine's pace (aflite_core.progress_pace): what a finished audit records, what the
next audit's bar makes of it, what it never touches (the run files), and files that are not
what they should be."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from run_files import summaries_without_times

from aflite_core import measure_runs
from aflite_core.io.datasets import load_dataset
from aflite_core.measure_runs import Progress, StagePlan, learn_pace, stage_plan
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.progress_pace import (
    MAX_FACTOR,
    RECENT_WEIGHT,
    bucket,
    learned_factors,
    pace_file,
    record_pace,
)

PLANNED = {"representation": 4.0, "aflite": 1.0, "pvi": 1.0}


def _record(path: Path, taken: dict[str, float], *, cores: int = 2, rows: int = 100_000,
            planned: dict[str, float] = PLANNED) -> dict[str, float]:
    return record_pace(planned, taken, planned_total=sum(planned.values()),
                       taken_total=sum(taken.values()), cores=cores, n_rows=rows, path=path)


def test_a_stage_slower_than_planned_against_the_rest_is_planned_longer(tmp_path):
    path = tmp_path / "pace.json"
    # PVI took twice its share of the audit, the others in step: the machine's speed (here
    # 2x the plan's seconds overall) cancels out
    ratios = _record(path, {"representation": 8.0, "aflite": 2.0, "pvi": 4.0})
    whole = math.log(14.0 / 6.0)
    assert ratios["pvi"] == pytest.approx(math.log(4.0 / 1.0) - whole)
    assert ratios["representation"] == pytest.approx(math.log(8.0 / 4.0) - whole)
    factors = learned_factors(2, 100_000, path=path)
    assert factors["pvi"] / factors["aflite"] == pytest.approx(2.0, rel=1e-3)
    assert factors["representation"] == pytest.approx(factors["aflite"], rel=1e-3)
    # another core count, another half-decade of rows: nothing learned there
    assert learned_factors(1, 100_000, path=path) == {}
    assert learned_factors(2, 300_000, path=path) == {}
    assert learned_factors(2, 150_000, path=path) == factors  # 10^5.18 rounds to 10^5


def test_the_pace_is_the_mean_of_the_first_audits_then_follows_the_recent_ones(tmp_path):
    path = tmp_path / "pace.json"
    seen = []
    for pvi in (2.0, 4.0, 3.0, 1.0, 1.0):
        seen.append(_record(path, {"representation": 4.0, "aflite": 1.0, "pvi": pvi})["pvi"])
    stored = json.loads(path.read_text())["buckets"][bucket(2, 100_000)]["pvi"]
    mean = sum(seen[:3]) / 3
    for ratio in seen[3:]:
        mean += RECENT_WEIGHT * (ratio - mean)
    assert stored["audits"] == 5
    assert stored["log_ratio"] == pytest.approx(mean, abs=1e-4)


def test_a_pace_is_bounded_and_a_thin_stage_is_not_learned(tmp_path):
    path = tmp_path / "pace.json"
    planned = {"representation": 100.0, "aflite": 10.0, "pvi": 10.0, "datamap": 0.5}
    ratios = _record(path, {"representation": 100.0, "aflite": 0.1, "pvi": 100.0,
                            "datamap": 5.0}, planned=planned)
    assert "datamap" not in ratios  # 0.4 % of the bar: its ratio is noise
    factors = learned_factors(2, 100_000, path=path)
    assert factors["aflite"] == pytest.approx(1 / MAX_FACTOR, rel=1e-3)  # 1/100 planned
    assert factors["pvi"] == pytest.approx(MAX_FACTOR, rel=1e-3)  # 10x planned


@pytest.mark.parametrize("content", [
    b"not json", b"[1, 2]", b'{"version": 99, "buckets": {}}',
    b'{"version": 1, "buckets": {"2 cores, 10^5 rows": {"pvi": {"log_ratio": NaN, '
    b'"audits": 1}, "knn": {"log_ratio": "1", "audits": 1}, "slices": [1]}}}',
    b"[" * 100 + b"]" * 100, b"\xff\xfe",
])
def test_a_damaged_pace_file_is_ignored_and_replaced(tmp_path, content):
    path = tmp_path / "pace.json"
    path.write_bytes(content)
    assert learned_factors(2, 100_000, path=path) == {}
    _record(path, {"representation": 4.0, "aflite": 1.0, "pvi": 2.0})
    assert set(learned_factors(2, 100_000, path=path)) == {"representation", "aflite", "pvi"}


def test_the_pace_can_be_turned_off_or_moved(tmp_path, monkeypatch):
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("AFLITE_PACE_FILE", raising=False)
    assert pace_file() == tmp_path / "cache" / "stage_pace.json"
    monkeypatch.setenv("AFLITE_PACE_FILE", str(tmp_path / "elsewhere.json"))
    assert pace_file() == tmp_path / "elsewhere.json"
    for off in ("off", "0", ""):
        monkeypatch.setenv("AFLITE_PACE_FILE", off)
        assert pace_file() is None
        assert record_pace(PLANNED, PLANNED, planned_total=6.0, taken_total=6.0, cores=2,
                           n_rows=10) == {}
        assert learned_factors(2, 10) == {}
    assert not (tmp_path / "cache").exists()


def test_a_pace_file_that_cannot_be_written_leaves_the_audit_alone(tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    path = blocker / "pace.json"  # its folder cannot be made
    assert _record(path, {"representation": 4.0, "aflite": 1.0, "pvi": 2.0})
    assert learned_factors(2, 100_000, path=path) == {}


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_only_stages_that_ran_alone_and_ended_ok_are_learned(tmp_path, monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(measure_runs, "time", clock)
    monkeypatch.setenv("AFLITE_PACE_FILE", str(tmp_path / "pace.json"))
    planned = {"representation": 4.0, "knn": 2.0, "slices": 2.0, "pvi": 1.0,
               "projection": 1.0}
    keys = {name: name for name in planned if name != "projection"}
    plan = StagePlan(spans={}, knee=(1.0, 1.0), planned=planned, pace_keys=keys, cores=2,
                     rows=100_000)
    progress = Progress(None)
    for at, stage in ((0.0, "representation"), (4.0, "knn"), (7.0, "slices"), (9.0, "pvi")):
        clock.now = at
        progress.step(stage, "computing", 0.0)
        if stage == "knn":  # the map beside from 5 s to 6 s: KNN's seconds are not its own
            clock.now = 5.0
            progress.side_step("projection", "laying out", 0.0)
            clock.now = 6.0
            progress.side_ended()
    clock.now = 12.0
    progress.step("pvi", "done", 1.0)
    recorded = learn_pace(plan, progress, failed={"slices"})
    whole = math.log(12.0 / 10.0)
    assert set(recorded) == {"representation", "pvi"}
    assert recorded["representation"] == pytest.approx(math.log(4.0 / 4.0) - whole)
    assert recorded["pvi"] == pytest.approx(math.log(3.0 / 1.0) - whole)


def test_a_dask_audit_neither_learns_nor_uses_the_pace(tmp_path, monkeypatch, snli_dev_head):
    monkeypatch.setenv("AFLITE_PACE_FILE", str(tmp_path / "pace.json"))
    dataset = load_dataset(snli_dev_head(600))
    plan = stage_plan(dataset, AuditConfig(measures=("knn",), backend="dask",
                                           report=False).validate())
    assert plan.pace_keys == {}
    assert learn_pace(plan, Progress(None), set()) == {}


def test_an_audit_teaches_the_next_ones_bar_and_not_its_results(tmp_path, monkeypatch,
                                                                snli_dev_head):
    path = tmp_path / "pace.json"
    monkeypatch.setenv("AFLITE_PACE_FILE", str(path))
    dataset = load_dataset(snli_dev_head(1500))
    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=8,
                         measures=("knn", "baselines", "label_issues"),
                         report=False).validate()
    before = stage_plan(dataset, config)
    assert before.spans == stage_plan(dataset, config).spans  # nothing learned yet
    first = run_audit(dataset, config, runs_root=tmp_path / "runs", name="first")

    stored = json.loads(path.read_text())["buckets"]
    rows = int(dataset.included_mask.sum())
    learned = stored[bucket(measure_runs.available_cores(), rows)]
    assert {"representation", "aflite", "knn", "baselines", "label_issues"} <= set(learned)
    # each ratio is the stage's seconds against its plan, less the whole audit's
    timings = json.loads((first / "summary.json").read_text())["timings"]
    whole = math.log(timings["total"] / sum(before.planned.values()))
    limit = math.log(MAX_FACTOR) - 1e-3
    for stage in ("knn", "baselines", "label_issues"):
        expected = math.log(timings[stage] / before.planned[stage]) - whole
        if abs(expected) < limit:
            assert learned[stage]["log_ratio"] == pytest.approx(expected, abs=0.2), stage

    # the next audit's spans: each learned stage scaled by its factor, the others as they were
    after = stage_plan(dataset, config)
    factors = learned_factors(after.cores, rows)
    width = {s: (hi - lo) for s, (lo, hi) in after.spans.items()}
    base = {s: (hi - lo) for s, (lo, hi) in before.spans.items()}
    scale = width["knn"] / base["knn"] / factors["knn"]
    for stage in ("representation", "aflite", "baselines", "label_issues"):
        assert width[stage] / base[stage] == pytest.approx(scale * factors[stage], rel=1e-6)
    assert after.planned == before.planned  # the seconds it learns against stay the plan's

    second = run_audit(dataset, config, runs_root=tmp_path / "runs", name="second")
    tables = [{f.name: f.read_bytes() for f in sorted(run.glob("*.parquet"))}
              for run in (first, second)]
    assert len(tables[0]) >= 4 and tables[0] == tables[1]  # the same bytes, another bar
    one, two = summaries_without_times(first, second)
    assert {**one, "name": None} == {**two, "name": None}
    assert json.loads(path.read_text())["buckets"][bucket(after.cores, rows)]["knn"][
        "audits"] == 2


def test_keys_say_how_a_stage_ran(snli_dev_head, tmp_path, monkeypatch):
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cold"))  # no cue tags cached
    monkeypatch.setattr(measure_runs, "available_cores", lambda: 2)
    dataset = load_dataset(snli_dev_head(600))
    config = AuditConfig(measures=("cues", "knn", "projection"), report=True).validate()
    monkeypatch.setattr(measure_runs, "AHEAD_MIN_ROWS", 10**9)  # the tagging in its stage
    in_turn = stage_plan(dataset, config).pace_keys
    assert "projection" not in in_turn  # beside the others: its seconds are shared
    assert in_turn["report"] == "report" and in_turn["knn"] == "knn"
    assert in_turn["representation"] == "representation"
    assert in_turn["cues"] == "cues+cold"
    monkeypatch.setattr(measure_runs, "AHEAD_MIN_ROWS", 0)  # tagged ahead, beside Φ
    ahead = stage_plan(dataset, config).pace_keys
    assert ahead["representation"] == "representation+ahead"
    assert ahead["aflite"] == "aflite+ahead" and ahead["write"] == "write+ahead"
    assert ahead["cues"] == "cues+ahead" and ahead["knn"] == "knn"
    other = SimpleNamespace(**{**vars(config), "representation": "sentence_transformer"})
    assert stage_plan(dataset, other).pace_keys["representation"] == (
        "representation:sentence_transformer+ahead")
