"""Work a measure does ahead (``Measure.ahead``): the cue measure's token counts and tagging
start in a child process once the data is loaded, beside Φ and the filter. The extraction
then reads them from the cache: the same tables bit for bit, tagged once; a stopped or
cancelled audit waits for its child to stop and leaves no tags behind
(aflite_core.measure_runs.work_ahead, aflite_core.cues.annotate_ahead)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aflite_core import measure_runs, pipeline
from aflite_core.cues import (
    _tagging,
    _tagging_children,
    annotate_ahead,
    extract_features,
    linguistic,
    tags_cached,
)
from aflite_core.io.datasets import load_dataset
from aflite_core.measures import registry
from aflite_core.pipeline import AuditCancelled, AuditConfig, _stage_spans, run_audit
from aflite_core.runs.folder import load_run

CONFIG = {"representation_params": {"n_components": 16}, "n_partitions": 8,
          "measures": ("cues",), "report": False}


@pytest.fixture(scope="module")
def snli_1200(snli_dev_head) -> Path:
    return snli_dev_head(1200)


def _no_tagging_here(monkeypatch) -> None:
    """Tagging in this process fails: what passes read its tags from the cache (the child
    process the work ahead runs in is spawned, so it does not see this patch)."""
    def refuse(*args, **kwargs):
        raise AssertionError("tagged in the audit's process")

    monkeypatch.setattr(_tagging, "_tag_unique", refuse)


def test_the_extraction_reads_what_was_annotated_ahead(snli_dir, tmp_path, monkeypatch):
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False, nrows=400)
    hyps, prems = list(frame["hypothesis"]), list(frame["premise"])
    expected = extract_features(hyps, prems, cache_dir=tmp_path / "plain", n_jobs=1)

    folder = tmp_path / "ahead"
    assert not tags_cached(hyps, prems, cache_dir=folder)
    assert annotate_ahead(hyps, prems, cache_dir=folder)
    assert tags_cached(hyps, prems, cache_dir=folder)
    # the token counts of both sides (the overlap family reads the premises) and the tags
    assert sorted(p.name.split("-")[0] for p in folder.glob("*.npz")) == [
        "tagged", "tokens", "tokens"]
    _no_tagging_here(monkeypatch)
    got = extract_features(hyps, prems, cache_dir=folder, n_jobs=1)
    assert (got.X != expected.X).nnz == 0 and got.X.shape == expected.X.shape
    assert np.array_equal(got.feature, expected.feature)
    assert np.array_equal(got.feature_type, expected.feature_type)
    assert annotate_ahead(hyps, prems, cache_dir=folder)  # found there: True at once


def test_every_text_reaches_the_child_as_it_is(tmp_path):
    """The texts cross the pipe as ASCII JSON lines: line breaks, accents, emoji and a lone
    surrogate (as a file read with errors="surrogateescape" gives) arrive unchanged, so the
    child's cache entries are the ones the extraction looks for."""
    texts = ["a dog\nruns", "café au lait", "a cat 😀 sleeps", "bad byte \udcff here", ""] * 20
    folder = tmp_path / "cache"
    assert annotate_ahead(texts, None, cache_dir=folder)
    assert tags_cached(texts, None, cache_dir=folder)


def test_annotating_ahead_asked_to_stop_saves_no_tags(snli_dir, tmp_path):
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False, nrows=50)
    hyps = list(frame["hypothesis"])
    stop = threading.Event()
    stop.set()
    assert not annotate_ahead(hyps, None, cache_dir=tmp_path, stop=stop)
    assert not tags_cached(hyps, None, cache_dir=tmp_path)


def test_the_tags_made_ahead_by_a_pool_are_the_ones_made_in_one_process(snli_dir, tmp_path,
                                                                      monkeypatch):
    """On many cores the work ahead tags with processes of its own (``n_jobs`` above one):
    the cache entry is the same arrays, under the same key, as one process's."""
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False, nrows=600)
    hyps = list(frame["hypothesis"])
    texts_hash = linguistic.hash_texts(hyps)
    monkeypatch.setattr(_tagging, "_PARALLEL_MIN", 0)  # a pool for these few texts
    made = {}
    for jobs in (1, 3):
        folder = tmp_path / f"jobs{jobs}"
        folder.mkdir()
        assert _tagging.tag_into_cache(hyps, ner_method="heuristic", cache_dir=folder,
                                       texts_hash=texts_hash, stop=threading.Event(),
                                       n_jobs=jobs)
        (entry,) = folder.glob("tagged-*.npz")
        with np.load(entry) as arrays:
            made[jobs] = (entry.name, {name: arrays[name] for name in arrays.files})
    assert made[1][0] == made[3][0]
    assert made[1][1].keys() == made[3][1].keys() == {"tense", "ner", "typo"}
    for name, values in made[1][1].items():
        assert np.array_equal(values, made[3][1][name]) and len(values) == 600
    assert made[1][1]["tense"].any()  # real tags, not zeros


def test_a_stopped_pool_saves_no_tags(snli_dir, tmp_path, monkeypatch):
    """Stop set while the pool tags: no chunk goes out after it, the children finish theirs,
    and nothing is saved (``tag_in_children`` raises ``InterruptedError``)."""
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False, nrows=2000)
    hyps = list(dict.fromkeys(frame["hypothesis"]))
    monkeypatch.setattr(_tagging, "_PARALLEL_MIN", 0)
    monkeypatch.setattr(_tagging_children, "TAG_CHUNK", 8)  # many chunks: stopped midway
    stop = threading.Event()

    class Texts(list):
        """The texts; taking the second chunk out sets stop."""
        taken = 0

        def __getitem__(self, index):
            if isinstance(index, slice):
                Texts.taken += 1
                if Texts.taken == 2:
                    stop.set()
            return super().__getitem__(index)

    with pytest.raises(InterruptedError):
        _tagging_children.tag_in_children(Texts(hyps), args=[str(_tagging.write_context(
            _tagging._loaded_context("heuristic"), tmp_path))], n_jobs=2, stop=stop)
    assert 2 <= Texts.taken < len(hyps) // 8 // 2  # stopped well before the last chunk
    assert not _tagging.tag_into_cache(hyps, ner_method="heuristic", cache_dir=tmp_path,
                                       texts_hash=linguistic.hash_texts(hyps), stop=stop,
                                       n_jobs=2)
    assert not list(tmp_path.glob("tagged-*.npz"))


def test_a_pool_of_no_processes_is_refused(tmp_path):
    with pytest.raises(ValueError, match="n_jobs must be at least 1, got 0"):
        annotate_ahead(["a dog runs"], None, cache_dir=tmp_path, n_jobs=0)


def test_a_script_without_a_main_guard_runs_once(tmp_path):
    """The child is a plain interpreter running the cue module: a caller's script with no
    ``if __name__ == "__main__"`` guard is not run again in it (a spawned multiprocessing
    child would run it again, and a script that audits would audit twice)."""
    script = tmp_path / "audit_script.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "from aflite_core.cues import annotate_ahead, tags_cached\n"
        "print('top-level code ran', flush=True)\n"
        f"texts = ['a dog runs', 'two cats sleep'] * 50\n"
        f"print(annotate_ahead(texts, None, cache_dir={str(tmp_path / 'cache')!r}))\n"
        f"print(tags_cached(texts, None, cache_dir={str(tmp_path / 'cache')!r}))\n",
        encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["top-level", "code", "ran", "True", "True"]


def _two_cores(monkeypatch) -> None:
    """The audit plans and runs as on two cores, whatever the test worker's count, and does
    work ahead on these few rows (from ``AHEAD_MIN_ROWS`` by default)."""
    for module in (pipeline, measure_runs):  # runs / plans
        monkeypatch.setattr(module, "available_cores", lambda: 2)
    monkeypatch.setattr(measure_runs, "AHEAD_MIN_ROWS", 0)


def test_an_audit_annotating_ahead_writes_the_same_cue_table(snli_1200, tmp_path,
                                                            monkeypatch):
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cache_in_turn"))
    for module in (pipeline, measure_runs):  # nothing ahead
        monkeypatch.setattr(module, "available_cores", lambda: 1)
    in_turn = load_run(run_audit(load_dataset(snli_1200), AuditConfig(**CONFIG),
                                 runs_root=tmp_path / "in_turn"))

    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cache_ahead"))
    _two_cores(monkeypatch)
    _no_tagging_here(monkeypatch)
    events: list[dict] = []
    ahead = load_run(run_audit(load_dataset(snli_1200), AuditConfig(**CONFIG),
                               runs_root=tmp_path / "ahead", callback=events.append))
    assert ahead.measures["cues"]["status"] == "ok", ahead.measures["cues"]
    pd.testing.assert_frame_equal(ahead.read_parquet("cues.parquet"),
                                  in_turn.read_parquet("cues.parquet"), check_exact=True)
    fractions = [e["fraction"] for e in events]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_the_plan_moves_the_work_done_ahead_to_the_stages_before_the_measures(
        snli_1200, tmp_path, monkeypatch):
    """Cold cue tags on two cores: without work ahead the cue stage plans its tagging; with
    it, the stages before the measures plan a share of the tagging and the cue stage none
    of it."""
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cold"))
    dataset, config = load_dataset(snli_1200), AuditConfig(**CONFIG).validate()
    _two_cores(monkeypatch)
    ahead = _stage_spans(dataset, config)
    monkeypatch.setattr(measure_runs, "AHEAD_MIN_ROWS", 10**9)
    in_measure = _stage_spans(dataset, config)

    def width(spans, stage):
        return spans[stage][1] - spans[stage][0]

    cues = registry.get("cues")
    cold = cues.expected_cost(1200, dataset=dataset) - cues.expected_cost(1200)
    assert cold > 0  # a first audit of these texts
    for spans in (ahead, in_measure):
        assert list(spans) == ["representation", "aflite", "write", "cues"]
    share = {name: width(ahead, name) / width(in_measure, name) for name in ahead}
    assert share["cues"] < 1 < min(share["representation"], share["aflite"], share["write"])


def test_cancelling_before_the_measures_stops_the_work_ahead(snli_1200, tmp_path,
                                                             monkeypatch):
    """Cancelled at the audit's first event (the child just started, still loading): the
    audit waits for the child to stop, which saves no tags, and leaves nothing."""
    from aflite_core.cues import _annotations_ahead

    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cache"))
    _two_cores(monkeypatch)
    children = []

    class Recording(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            children.append(self)

    monkeypatch.setattr(_annotations_ahead.subprocess, "Popen", Recording)
    root = tmp_path / "runs"
    with pytest.raises(AuditCancelled, match="cancelled during representation"):
        run_audit(load_dataset(snli_1200), AuditConfig(**CONFIG), runs_root=root,
                  callback=lambda event: True)
    assert len(children) == 1 and "aflite_core.cues._annotations_ahead" in children[0].args
    assert children[0].returncode not in (None, 0)  # stopped, and waited for
    assert not root.exists()
    assert not list((tmp_path / "cache").glob("tagged-*.npz"))


def test_nothing_is_done_ahead_on_one_core_or_outside_its_rows():
    """Locally from two cores and within its rows; on Dask (tasks on the workers) whatever
    this process's cores, from the same first row count, with no upper bound."""
    cues = registry.get("cues")
    assert cues.ahead is not None
    n = measure_runs.AHEAD_MIN_ROWS
    assert measure_runs.ahead_measures([cues], n, cores=2) == [cues]
    assert measure_runs.ahead_measures([cues], n, cores=1) == []
    low, top = measure_runs.AHEAD_MIN_ROWS, measure_runs.AHEAD_MAX_ROWS
    assert measure_runs.ahead_measures([cues], low - 1, cores=2) == []
    assert measure_runs.ahead_measures([cues], top + 1, cores=2) == []
    assert measure_runs.ahead_measures([cues], n, cores=1, local=False) == [cues]
    assert measure_runs.ahead_measures([cues], top + 1, cores=1, local=False) == [cues]
    assert measure_runs.ahead_measures([cues], low - 1, cores=8, local=False) == []
    others = [m for m in registry.measures() if m.name != "cues"]
    assert measure_runs.ahead_measures(others, low, cores=8) == []


def test_with_a_client_the_work_ahead_runs_inside_on_dask_of_it():
    """The audit's client reaches the work ahead's thread (a thread starts without the
    caller's context): the cue measure's ahead sees the cluster and sends tasks there."""
    import dataclasses
    from types import SimpleNamespace

    from aflite_core.represent import dask_folds

    seen = []
    cues = dataclasses.replace(registry.get("cues"),
                               ahead=lambda dataset, params, stop: seen.append(dask_folds()))
    dataset = SimpleNamespace(included_mask=np.ones(measure_runs.AHEAD_MIN_ROWS, dtype=bool))
    client = object()  # on_dask only records it
    with measure_runs.work_ahead([cues], dataset, {}, cores=1, client=client) as names:
        assert names == ["cues"]
    assert len(seen) == 1 and seen[0].client is client
    with measure_runs.work_ahead([cues], dataset, {}, cores=2) as names:
        assert names == ["cues"]
    assert len(seen) == 2 and seen[1] is None


def test_a_spare_child_tags_what_a_child_started_with_its_arguments_would(snli_dir, tmp_path):
    """The child started before the data is read (loading NLTK and the tagger meanwhile)
    takes its arguments from its first line of input: the work ahead hands it the texts, and
    the cache holds the same token counts and tags as a child started with them."""
    from aflite_core.cues import _spare_child, start_spare_child

    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False, nrows=300)
    hyps, prems = list(frame["hypothesis"]), list(frame["premise"])
    assert annotate_ahead(hyps, prems, cache_dir=tmp_path / "new")
    assert start_spare_child() and not start_spare_child()  # one spare at a time
    [spare] = _spare_child._SPARE
    assert annotate_ahead(hyps, prems, cache_dir=tmp_path / "spare")
    assert _spare_child._SPARE == [] and spare.returncode == 0  # it did the work
    made = {p.name: p for p in (tmp_path / "new").glob("*.npz")}
    spared = {p.name: p for p in (tmp_path / "spare").glob("*.npz")}
    assert sorted(made) == sorted(spared) and len(made) == 3
    for name, path in made.items():
        with np.load(path) as a, np.load(spared[name]) as b:
            assert sorted(a.files) == sorted(b.files)
            assert all(np.array_equal(a[k], b[k]) for k in a.files)


def test_a_discarded_spare_child_exits_and_tags_nothing(tmp_path, monkeypatch):
    from aflite_core.cues import _spare_child, discard_spare_child, start_spare_child

    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path))
    assert start_spare_child()
    [spare] = _spare_child._SPARE
    discard_spare_child()
    assert _spare_child._SPARE == []
    assert spare.wait(timeout=120) == 0
    assert not list(tmp_path.glob("*.npz"))
    discard_spare_child()  # nothing left to end: a no-op


def test_warm_ahead_starts_on_two_local_cores_and_ends_what_the_rows_do_not_use():
    import dataclasses

    calls: list[str] = []

    def warm():
        calls.append("start")
        return lambda: calls.append("end")

    cues = dataclasses.replace(registry.get("cues"), warm=warm)
    low = measure_runs.AHEAD_MIN_ROWS
    for cores, local in ((1, True), (2, False)):  # no work ahead there: nothing started
        with measure_runs.warm_ahead([cues], cores=cores, local=local) as loaded:
            loaded(low)
        assert calls == []
    with measure_runs.warm_ahead([cues], cores=2) as loaded:
        assert calls == ["start"]
        loaded(low - 1)  # too few rows for work ahead: ended once the rows are known
        assert calls == ["start", "end"]
    assert calls == ["start", "end"]
    calls.clear()
    with measure_runs.warm_ahead([cues], cores=2) as loaded:
        loaded(low)  # the work ahead will take it: left running
        assert calls == ["start"]
    assert calls == ["start", "end"]  # on leaving, what is left is ended (a no-op if taken)
    calls.clear()
    with pytest.raises(OSError), measure_runs.warm_ahead([cues], cores=2):
        raise OSError("the data could not be read")
    assert calls == ["start", "end"]


def test_the_cli_audit_ends_its_spare_child_when_the_rows_need_no_work_ahead(
        snli_1200, spare_children, tmp_path, monkeypatch):
    """1,200 rows are too few for work ahead: the child started before the data was read
    exits once the rows are counted; the audit is the same as without it."""
    from aflite_core.cli import main
    from aflite_core.cues import _spare_child

    started = spare_children
    monkeypatch.setenv("AFLITE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("aflite_core.commands.run.available_cores", lambda: 2)
    assert main(["run", str(snli_1200), "--out", str(tmp_path / "run"), "--no-report", "-q",
                 "--partitions", "8", "--measures", "cues"]) == 0
    assert len(started) == 1 and started[0].args[-1].endswith("_annotations_ahead")
    assert started[0].wait(timeout=120) == 0
    assert _spare_child._SPARE == []
    assert load_run(tmp_path / "run").measures["cues"]["status"] == "ok"
