"""run_audit end to end: real SNLI rows, planted cues, cancellation, failing measures."""

from __future__ import annotations

import csv
import hashlib
import io
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aflite_core._validation import available_cores
from aflite_core.io.datasets import load_dataset
from aflite_core.measures.cues import cold_tagging_seconds
from aflite_core.pipeline import AuditCancelled, AuditConfig, run_audit
from aflite_core.report.compare import compare_runs
from aflite_core.runs.exports import export_run
from aflite_core.runs.folder import STATUSES, list_runs, load_run

STAGES = {"representation", "aflite", "cues", "knn", "projection", "baselines", "duplicates",
          "report", "write"}
FAST = {"representation_params": {"n_components": 32}, "n_partitions": 8}


def write_rows(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\r\n").writerows(rows)
    return path


def read_rows(path: Path) -> list[list[str]]:
    # bytes, not read_text(): universal newlines would turn a quoted \r\n into \n
    return list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))


@pytest.fixture(scope="module")
def snli_file(snli_dir, tmp_path_factory) -> Path:
    """The first 1,200 rows of SNLI dev, plus two rows with SNLI's '-' label (excluded)."""
    rows = read_rows(snli_dir / "snli_dev.csv")[:1201]
    rows += [["dev", "x1", "A man.", "A woman.", "-"], ["dev", "x2", "A dog.", "", "neutral"]]
    return write_rows(tmp_path_factory.mktemp("snli") / "snli_dev_1200.csv", rows)


@pytest.fixture(scope="module")
def audited(snli_file, tmp_path_factory):
    """The dataset, its run folder, the audit's progress events, and the spans the audit
    planned (made before it: what the annotation cache held then decides the cues' span)."""
    from aflite_core.pipeline import _stage_spans

    dataset = load_dataset(snli_file)
    events: list[dict] = []
    root = tmp_path_factory.mktemp("runs")
    config = AuditConfig(**FAST, measures=("cues", "knn"))
    spans = _stage_spans(dataset, config)
    path = run_audit(dataset, config, runs_root=root, callback=events.append)
    return dataset, path, events, spans


def test_run_folder_contents(audited, snli_file):
    dataset, path, _, _ = audited
    run = load_run(path)
    assert path.parent.name.startswith("runs") and not path.name.startswith(".")
    assert path.name.startswith("snli_dev_1200-tfidf_svd-greedy_slicing-m8-target600-seed0-")
    assert {"summary.json", "scores.parquet", "dataset.parquet", "retained.csv", "removed.csv",
            "excluded.csv", "cues.parquet", "knn.parquet", "report.html"} <= set(run.artifacts)
    assert run.summary["artifacts"] == run.artifacts
    s = run.summary
    assert s["format_version"] == 1
    assert set(s["versions"]) >= {"python", "aflite_core", "numpy", "scikit-learn", "pandas"}
    assert s["input"]["name"] == "snli_dev_1200.csv"
    assert s["input"]["sha256"] == hashlib.sha256(snli_file.read_bytes()).hexdigest()
    assert s["input"]["columns"]["hypothesis"] == "hypothesis"
    assert s["input"]["excluded"] == dataset.report.excluded
    sizes = s["sizes"]
    assert sizes["input"] == 1202 and sizes["excluded"] == 2 and sizes["warmup"] == 0
    assert sizes["retained"] + sizes["removed"] == sizes["filtered"] == 1200
    assert sizes["retained"] >= 600 == s["parameters"]["target_size_rows"]
    assert sum(s["labels"]["before"].values()) == 1200
    assert sum(s["labels"]["after"].values()) == sizes["retained"]
    assert len(s["history"]) == s["aflite"]["n_rounds"] >= 1
    assert sum(h["removed"] for h in s["history"]) == sizes["removed"]
    assert {"representation", "aflite", "write", "cues", "knn", "report", "total"} <= set(
        s["timings"])
    assert s["measures"]["cues"]["status"] == "ok" and s["measures"]["knn"]["status"] == "ok"


def test_every_row_exactly_once(audited, snli_file):
    dataset, path, _, _ = audited
    run = load_run(path)
    scores = run.scores
    assert scores["row_id"].tolist() == dataset.frame.index.tolist()
    status = scores["status"].astype(str)
    removed = status == "removed"
    assert (scores.loc[removed, "removal_round"] >= 1).all()
    assert (scores.loc[~removed, "removal_round"] == -1).all()
    assert scores.loc[status == "excluded", "predictability"].isna().all()
    assert (scores.loc[removed, "predictability"] >= 0.75).all()
    original = read_rows(snli_file)
    seen: dict[int, list[str]] = {}
    for name in STATUSES:
        if not (path / f"{name}.csv").exists():
            assert not (status == name).any()
            continue
        rows = read_rows(path / f"{name}.csv")
        assert rows[0] == ["row_id", *original[0]]
        ids = [int(r[0]) for r in rows[1:]]
        assert ids == scores.loc[status == name, "row_id"].tolist()
        assert not set(ids) & set(seen)
        seen.update({int(r[0]): r[1:] for r in rows[1:]})
    assert [seen[i] for i in range(len(original) - 1)] == original[1:]


def test_progress_events(audited):
    _, _, events, _ = audited
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] >= 0.0
    assert {e["stage"] for e in events} <= STAGES
    assert all(isinstance(e["message"], str) and e["message"] for e in events)
    rounds = [e for e in events if e["stage"] == "aflite" and "round" in e]
    assert [e["round"] for e in rounds] == list(range(1, len(rounds) + 1))
    assert all({"size", "removed", "removed_total", "target_size", "seconds", "elapsed"}
               <= set(e) for e in rounds)


def test_run_can_be_reopened_and_exported(audited, tmp_path):
    _, path, _, _ = audited
    out = tmp_path / "removed.parquet"
    result = export_run(path, "removed", out)
    table = pd.read_parquet(out)
    assert result.n_rows == len(table) == load_run(path).sizes["removed"]
    assert {"premise", "hypothesis", "label", "status", "predictability",
            "removal_round"} <= set(table.columns)


@pytest.mark.parametrize("stage", ["representation", "aflite", "knn", "report"])
def test_cancel_leaves_nothing(planted_file, tmp_path, stage):
    dataset = load_dataset(planted_file)
    root = tmp_path / "runs"
    seen = []

    def cancel(event):
        seen.append(event["stage"])
        return event["stage"] == stage

    with pytest.raises(AuditCancelled, match=stage):
        run_audit(dataset, AuditConfig(**FAST, measures=("knn",)), runs_root=root,
                  callback=cancel)
    assert stage in seen
    assert not root.exists()


def test_the_report_moves_the_bar_section_by_section(planted_file, tmp_path):
    """The report stage reports each section it draws (a large run's report takes seconds,
    minutes on a busy machine), within its span; asked to stop in the middle, the audit
    leaves nothing."""
    dataset = load_dataset(planted_file)
    events = []
    run_audit(dataset, AuditConfig(**FAST, measures=("knn",)), runs_root=tmp_path / "runs",
              callback=events.append)
    report = [e for e in events if e["stage"] == "report"]
    assert any("(3 of" in e["message"] for e in report)
    fractions = [e["fraction"] for e in report]
    assert fractions == sorted(fractions) and fractions[-1] > fractions[0] > 0.5
    assert events[-1]["fraction"] == 1.0

    def cancel(event):
        return event["stage"] == "report" and "(3 of" in event["message"]

    root = tmp_path / "cancelled"
    with pytest.raises(AuditCancelled, match="report"):
        run_audit(dataset, AuditConfig(**FAST, measures=("knn",)), runs_root=root,
                  callback=cancel)
    assert not root.exists()


def test_failing_measure_is_recorded_not_fatal(planted_file, tmp_path, monkeypatch):
    from aflite_core.measures import knn

    def broken(*args, **kwargs):
        raise RuntimeError("planted failure in knn")

    monkeypatch.setattr(knn, "knn_distance_measures", broken)
    dataset = load_dataset(planted_file)
    path = run_audit(dataset, AuditConfig(**FAST, measures=("knn",)), runs_root=tmp_path)
    run = load_run(path)
    assert run.measures["knn"]["status"] == "error"
    assert "RuntimeError: planted failure in knn" in run.measures["knn"]["error"]
    assert not run.has("knn.parquet") and run.has("report.html")
    assert "planted failure in knn" in (path / "report.html").read_text(encoding="utf-8")


def test_essential_failure_leaves_nothing(planted_file, tmp_path):
    dataset = load_dataset(planted_file)
    with pytest.raises(ValueError, match="target_size"):
        run_audit(dataset, AuditConfig(**FAST, target_size=5000, measures=()),
                  runs_root=tmp_path / "runs")
    with pytest.raises(ValueError, match="n_components"):
        run_audit(dataset, AuditConfig(representation_params={"n_components": 0}),
                  runs_root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"tau": 1.5}, ValueError, r"tau: expected a number in \[0, 1\], got 1.5"),
        ({"random_state": "seven"}, TypeError,
         r"random_state: expected an int in \[0, 4294967295\], got 'seven' \(str\)"),
        ({"random_state": True}, TypeError,
         r"random_state: expected an int in \[0, 4294967295\], got True"),
        ({"n_partitions": 0}, ValueError, r"n_partitions: expected an int in \[1, 512\], got 0"),
        ({"target_size": 1.0}, ValueError, r"target_size: expected .* a float in \(0, 1\)"),
        ({"target_size": 0}, ValueError, r"target_size: expected an int >= 1 \(rows\)"),
        ({"measures": ("cues", "magic")}, ValueError, r"measures: unknown \['magic'\]"),
        ({"strategy": "best"}, ValueError, "strategy: expected one of"),
        ({"representation": "bert"}, ValueError, "representation: expected one of"),
    ],
)
def test_config_validation(changes, error, match):
    with pytest.raises(error, match=match):
        AuditConfig(**changes).validate()


def test_user_name_is_sanitised_and_stays_in_root(planted_file, tmp_path):
    dataset = load_dataset(planted_file)
    root = tmp_path / "runs"
    path = run_audit(dataset, AuditConfig(**FAST, measures=(), report=False), runs_root=root,
                     name="../../etc/passwd")
    assert path == root.resolve() / "etc_passwd"
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]
    with pytest.raises(FileExistsError):
        run_audit(dataset, AuditConfig(**FAST, measures=()), runs_root=root, name="etc_passwd")
    again = run_audit(dataset, AuditConfig(**FAST, measures=(), random_state=1), runs_root=root,
                      name="etc_passwd", overwrite=True)
    assert load_run(again).parameters["random_state"] == 1
    assert [r.name for r in list_runs(root)] == ["etc_passwd"]


def test_warmup_rows_have_their_own_status(planted_file, tmp_path):
    dataset = load_dataset(planted_file)
    path = run_audit(
        dataset,
        AuditConfig(representation="warmup", n_partitions=8, measures=(), report=False,
                    representation_params={"n_components": 8, "warmup_fraction": 0.1}),
        runs_root=tmp_path,
    )
    run = load_run(path)
    n_warm = run.sizes["warmup"]
    assert n_warm == pytest.approx(60, abs=2)
    warm = read_rows(path / "warmup.csv")
    assert len(warm) - 1 == n_warm
    assert run.sizes["filtered"] == 600 - n_warm
    assert run.scores.loc[run.status_mask("warmup"), "predictability"].isna().all()
    assert (run.scores.loc[run.status_mask("warmup"), "removal_round"] == -1).all()


# ----------------------------------------------------------------------------- planted data

HOSTILE = ['=cmd|" /C calc"!A0', "-2+3", "@SUM(1)", "+1", "\ttab", "a,b", 'say "hi"',
           "two\nlines", "crlf\r\nhere", "ünïcödé 中文 😀", "<script>alert(1)</script>", ""]


def planted_rows(n: int = 600, seed: int = 0) -> list[list[str]]:
    """Two labels; 40% of rows carry a token that gives their label away."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(60)]
    rows = [["premise", "hypothesis", "label", "note"]]
    for i in range(n):
        label = "yes" if i % 2 else "no"
        text = " ".join(rng.choice(words, size=6))
        if i % 5 < 2:
            text += " cueyes" if label == "yes" else " cueno"
        # hostile cells paired across labels (i // 2) so that they carry no label signal
        rows.append([HOSTILE[(i // 2) % len(HOSTILE)] + f" p{i}", text, label,
                     HOSTILE[(i // 2 * 7) % len(HOSTILE)]])
    return rows


@pytest.fixture(scope="module")
def planted_file(tmp_path_factory) -> Path:
    return write_rows(tmp_path_factory.mktemp("planted") / "planted.csv", planted_rows())


def test_round_trip_through_a_real_audit(planted_file, tmp_path):
    dataset = load_dataset(planted_file)
    path = run_audit(dataset, AuditConfig(**FAST, measures=()), runs_root=tmp_path / "runs")
    original = read_rows(planted_file)
    for fmt in ("csv", "parquet"):
        rebuilt: dict[int, list[str]] = {}
        for what in STATUSES:
            out = tmp_path / f"{what}.{fmt}"
            export_run(path, what, out, sanitize=False)
            if fmt == "csv":
                rows = read_rows(out)
                part = {int(r[0]): r[1:5] for r in rows[1:]}
            else:
                table = pd.read_parquet(out)
                part = dict(zip(table["row_id"].tolist(),
                                table[original[0]].to_numpy().tolist(), strict=True))
            assert not set(part) & set(rebuilt)
            rebuilt.update(part)
        assert [rebuilt[i] for i in range(len(original) - 1)] == original[1:], fmt


def test_two_seeds_agree_on_the_planted_rows(planted_file, tmp_path):
    dataset = load_dataset(planted_file)
    config = {"representation_params": {"n_components": 32}, "n_partitions": 32,
              "target_size": 0.7, "measures": (), "report": False}
    paths = [run_audit(dataset, AuditConfig(**config, random_state=s), runs_root=tmp_path)
             for s in (0, 1)]
    cmp = compare_runs(*paths)
    assert cmp.parameter_changes == {"random_state": (0, 1)}
    assert cmp.n_removed_a > 0 and cmp.n_removed_b > 0
    assert cmp.removed_jaccard > 2 * cmp.expected_jaccard_random
    assert cmp.spearman > 0.3
    planted = np.array([i % 5 < 2 for i in range(600)])
    for path in paths:
        removed = load_run(path).status_mask("removed")
        # what AFLite removes is mostly the planted cue (40 % of the rows); over seeds 0-5
        # the share is 0.76-0.82 (scikit-learn's SVD) and 0.78-0.82 (represent/_svd.py)
        assert planted[removed].mean() > 0.7


def test_copy_of_run_still_loads(audited, tmp_path):
    _, path, _, _ = audited
    copy = tmp_path / "copied"
    shutil.copytree(path, copy)
    run = load_run(copy)
    assert run.frame.shape[0] == 1202 and run.cues is not None and run.knn is not None
    assert set(run.knn_examples["scope"]) == {"before", "after"}
    assert set(run.cues["scope"]) == {"full", "retained"}


def test_projection_and_baselines_measures(planted_file, tmp_path):
    dataset = load_dataset(planted_file)
    config = AuditConfig(
        representation_params={"n_components": 32}, n_partitions=32, target_size=0.7,
        measures=("projection", "baselines"),
        measure_params={"projection": {"method": "pca"},
                        "baselines": {"n_random_draws": 2, "n_splits": 3}},
    )
    run = load_run(run_audit(dataset, config, runs_root=tmp_path))
    assert run.measures["projection"]["status"] == "ok", run.measures
    assert run.measures["baselines"]["status"] == "ok", run.measures
    projection = run.projection
    assert projection["row_id"].tolist() == list(range(600))
    assert np.isfinite(projection[["x", "y"]].to_numpy()).all()
    hyp = run.baselines["hypothesis_only"]
    # the planted cue lives in the hypothesis: filtering removes it, a random subset does not
    assert hyp["full"]["accuracy"] > 0.6
    assert hyp["bias_removed_beyond_size"] > 0.04  # random-draw std is about 0.015 here
    assert run.baselines["linear_probe"]["bias_removed_beyond_size"] > 0.04
    text = (run.path / "report.html").read_text(encoding="utf-8")
    baselines = text[text.index('<section id="baselines">'):text.index('<section id="dupl')]
    assert "bias removed beyond size" in baselines and "hypothesis_only" in baselines


def test_duplicates_and_inoculation_measures(planted_file, tmp_path):
    dataset = load_dataset(planted_file)
    config = AuditConfig(
        representation_params={"n_components": 32}, n_partitions=32, target_size=0.7,
        measures=("duplicates", "inoculation"),
        measure_params={"inoculation": {"n_repeats": 1, "sizes": (0, 10, 100)}},
    )
    run = load_run(run_audit(dataset, config, runs_root=tmp_path))
    assert run.measures["duplicates"]["status"] == "ok", run.measures
    assert run.measures["inoculation"]["status"] == "ok", run.measures
    dup = run.read_json("duplicates.json")
    rows = {(r["scope"], r["kind"]): r["n_rows"] for r in dup["summary"]}
    assert rows[("before", "exact")] == 600 and rows[("after", "exact")] == run.sizes["retained"]
    inoc = run.read_json("inoculation.json")
    assert [r["n"] for r in inoc["summary"]] == [0, 10, 100]
    assert inoc["params"]["n_challenge_pool"] + inoc["params"]["n_challenge_test"] == 420
    text = (run.path / "report.html").read_text(encoding="utf-8")
    inoc_section = text[text.index('<section id="inoculation">'):]
    assert esc_text(inoc["outcome_label"]) in inoc_section


def esc_text(value: str) -> str:
    import html

    return html.escape(value)


def test_failed_measure_leaves_no_half_written_artifact(planted_file, tmp_path, monkeypatch):
    from types import SimpleNamespace

    from aflite_core.measures import duplicates

    def half(*args, **kwargs):  # duplicates.json is written, then the listing fails
        return SimpleNamespace(to_dict=lambda: {"summary": []}, exact_groups="not a table",
                               near_pairs=None, params={})

    monkeypatch.setattr(duplicates, "find_duplicates", half)
    dataset = load_dataset(planted_file)
    run = load_run(run_audit(dataset, AuditConfig(**FAST, measures=("duplicates",)),
                             runs_root=tmp_path))
    assert run.measures["duplicates"]["status"] == "error"
    assert not run.has("duplicates.json") and "duplicates.json" not in run.summary["artifacts"]


def test_each_stage_fills_its_expected_share_of_the_bar(audited):
    """Spans follow the expected seconds (progress_plan), so the ETA is not fooled by a fast
    AFLite followed by slow measures: every event of a stage lies within its span."""
    from aflite_core import progress_plan
    from aflite_core.pipeline import _stage_spans

    dataset, _, events, spans = audited
    assert list(spans) == ["representation", "aflite", "write", "cues", "knn", "report"]
    assert spans["representation"][0] == 0.0 and spans["report"][1] == 1.0
    n = len(dataset.labels())
    cold = spans != _stage_spans(dataset, AuditConfig(**FAST, measures=("cues", "knn")))
    expected = progress_plan.expected_seconds(
        [("knn", registry_cost("knn", n)),
         ("cues", registry_cost("cues", n)
          + (cold_tagging_seconds(n) * 100_000 / n if cold else 0.0))], n)
    cores = available_cores()
    expected = {name: value * progress_plan.core_factor(name, cores)
                for name, value in expected.items()}
    width = {s: hi - lo for s, (lo, hi) in spans.items()}
    assert width["knn"] / width["cues"] == pytest.approx(expected["knn"] / expected["cues"])
    for event in events:
        stage = event["stage"]
        if stage in ("cues", "knn", "representation", "aflite"):
            lo, hi = spans[stage]
            assert lo - 1e-9 <= event["fraction"] <= hi + 1e-9, event


def registry_cost(name: str, n_rows: int) -> float:
    from aflite_core.measures import registry

    return registry.get(name).expected_cost(n_rows)


def test_progress_moves_in_every_stage_and_names_it(tmp_path):
    """Every stage reports by name, the representation reports fractions inside its span
    (not 0 % until it is done), and the map's share of the bar follows its method."""
    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import _stage_spans

    dataset = load_dataset(Path(__file__).parent / "data" / "snli" / "snli_dev.csv")
    events: list[dict] = []
    config = AuditConfig(representation_params={"n_components": 32}, n_partitions=8,
                         measures=("cues", "knn", "projection"),
                         measure_params={"projection": {"method": "pca"}})
    run_audit(dataset, config, runs_root=tmp_path, callback=events.append)
    stages = [e["stage"] for e in events]
    for stage in ("representation", "aflite", "write", "cues", "knn", "projection", "report"):
        assert stage in stages, stage
    assert events[0]["temp_folder"]  # a supervisor can remove it if the process dies
    spans = _stage_spans(dataset, config)
    lo, hi = spans["representation"]
    inside = [e["fraction"] for e in events
              if e["stage"] == "representation" and lo < e["fraction"] < hi]
    assert len(inside) >= 3, inside  # TF-IDF, then the SVD's iterations
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    umap = AuditConfig(**{**config.__dict__, "measure_params": {"projection": {"method": "umap"}}})
    width = {name: hi - lo for name, (lo, hi) in _stage_spans(dataset, umap).items()}
    pca_width = {name: hi - lo for name, (lo, hi) in spans.items()}
    assert width["projection"] > 1.2 * pca_width["projection"]  # UMAP fits a neighbour graph


def test_the_plan_follows_the_cores_and_what_the_cache_holds(snli_file, tmp_path, monkeypatch):
    """A first audit of a dataset (its cue tags not in the annotation cache) gives the cues a
    wider span of the bar than the next one; on one core KNN's share grows, and grows against
    the representation's (which gains least from a second core), so the ETA keeps in step
    with time on any core count."""
    import aflite_core.pipeline as pipeline
    from aflite_core.cues import extract_features

    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cache"))
    dataset = load_dataset(snli_file)
    config = AuditConfig(**FAST, measures=("cues", "knn"))

    def width(spans, stage):
        return spans[stage][1] - spans[stage][0]

    cold = pipeline._stage_spans(dataset, config)
    extract_features(list(dataset.hypotheses()), None, features=["tense"], n_jobs=1)
    warm = pipeline._stage_spans(dataset, config)
    assert width(cold, "cues") > width(warm, "cues") and width(cold, "knn") < width(warm, "knn")
    import aflite_core.measure_runs as measure_runs  # where the plan is made

    monkeypatch.setattr(measure_runs, "available_cores", lambda: 1)
    one = pipeline._stage_spans(dataset, config)
    monkeypatch.setattr(measure_runs, "available_cores", lambda: 2)
    two = pipeline._stage_spans(dataset, config)
    assert width(one, "knn") > width(two, "knn")
    assert (width(one, "representation") / width(one, "knn")
            < width(two, "representation") / width(two, "knn"))
    dask = pipeline._stage_spans(dataset, AuditConfig(**FAST, measures=("cues", "knn"),
                                                      backend="dask"))
    assert dask == two  # the two-core plan, no cache looked into (the workers tag chunks)
