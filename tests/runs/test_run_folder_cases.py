"""No file in a runs folder takes the product down (issue 60, item 1 and 5).

Every damaged run folder of ``hostile_cases.RUN_CASES`` is listed as damaged, saying why;
opening it (``load_run``, the CLI, the pages) gives one message naming the run and no
server path; every page of the dashboard stays up with all of them in the runs root. A
property-based test feeds ``list_runs`` random bytes, random JSON, deep nesting and wrong
types in ``summary.json`` and its parameters: it never raises.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from apptest_support import goto, new_app, open_run, texts
from hostile_cases import RUN_CASES, RunCase, _nested
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aflite_core.cli import main
from aflite_core.errors import RunError
from aflite_core.json_files import MAX_JSON_DEPTH, json_depth, loads_json, read_json_file
from aflite_core.runs.folder import list_runs, load_run

PAGES = ("data", "audit", "explore", "cues", "review", "report", "compare")


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small complete run (the sample's first 400 rows, projection and baselines)."""
    import pandas as pd

    from aflite_core.io.datasets import load_dataset
    from aflite_core.pipeline import AuditConfig, run_audit

    base = tmp_path_factory.mktemp("good")
    sample = Path(__file__).resolve().parents[2] / "aflite_core" / "data" / "snli_sample.csv"
    pd.read_csv(sample).head(400).to_csv(base / "small.csv", index=False)
    config = AuditConfig(target_size=300, n_partitions=4, slice_size=50, random_state=0,
                         measures=("projection", "baselines"),
                         measure_params={"projection": {"method": "pca"},
                                         "baselines": {"n_random_draws": 1, "n_splits": 2}})
    return run_audit(load_dataset(base / "small.csv"), config, runs_root=base / "runs",
                     name="good")


def _damaged(good: Path, root: Path, case: RunCase) -> Path:
    run = root / case.id
    shutil.copytree(good, run)
    case.damage(run)
    return run


@pytest.mark.parametrize("case", RUN_CASES, ids=[c.id for c in RUN_CASES])
def test_a_damaged_run_is_listed_and_refused_in_one_line(case, good_run, tmp_path, capsys):
    root = tmp_path / "runs"
    run = _damaged(good_run, root, case)
    [info] = list_runs(root)
    if not case.listed:  # damage found only when the file is read (a measure's record)
        assert info.damaged == ""
        return
    assert all(fragment in info.damaged for fragment in case.listed), info.damaged
    assert str(tmp_path) not in info.damaged
    with pytest.raises(RunError) as caught:
        load_run(run)
    assert f"{case.id}" in str(caught.value) and str(tmp_path) not in str(caught.value)
    code = main(["report", str(run), "--out", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and str(root) not in err
    assert not (tmp_path / "r.html").exists()


def test_a_damaged_measure_record_is_a_run_error_not_a_crash(good_run, tmp_path):
    run = _damaged(good_run, tmp_path, next(c for c in RUN_CASES
                                            if c.id == "baselines-json-deep"))
    opened = load_run(run)
    with pytest.raises(RunError, match="baselines.json is damaged: nested deeper than 64"):
        opened.read_json("baselines.json")


def test_every_page_stays_up_with_every_damaged_run_in_the_root(good_run, tmp_path,
                                                                monkeypatch):
    root = tmp_path / "runs"
    for case in RUN_CASES:
        _damaged(good_run, root, case)
    shutil.copytree(good_run, root / "good")
    monkeypatch.setenv("AFLITE_RUNS_DIR", str(root))
    at = new_app(autoload=False).run()
    for page in PAGES:
        goto(at, page)
        assert not at.exception, (page, [e.message for e in at.exception])
    goto(at, "audit")
    table = next(df.value for df in at.dataframe if "state" in df.value.columns)
    states = dict(zip(table["run"], table["state"], strict=True))
    assert states["good"] == "ok"
    assert all(states[c.id].startswith("damaged") for c in RUN_CASES if c.listed), states
    for name in ("good", "baselines-json-deep", "dataset-parquet-truncated",
                 "dataset-parquet-damaged-page", "summary-extra-key-1000-deep"):
        open_run(at, root / name)
        for page in PAGES:
            goto(at, page)
            assert not at.exception, (name, page, [e.message for e in at.exception])
            assert str(tmp_path) not in texts(at), (name, page)


# ----------------------------------------------------------------- property-based


def _json_values(depth: int = 4) -> st.SearchStrategy:
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) \
        | st.text(max_size=20)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                        max_leaves=20)


_SUMMARY_KEYS = ("format_version", "name", "created", "parameters", "sizes", "input",
                 "artifacts", "measures", "history", "labels")


@st.composite
def _summaries(draw) -> bytes:
    kind = draw(st.sampled_from(["bytes", "json", "summary", "deep"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "json":
        return json.dumps(draw(_json_values())).encode()
    if kind == "deep":  # written as text: json.dumps itself recurses
        depth = draw(st.integers(50, 3000))
        return ('{"format_version": 1, "extra": ' + '{"k": ' * depth + '"x"' + "}" * depth
                + "}").encode()
    summary = {key: draw(_json_values()) for key in _SUMMARY_KEYS if draw(st.booleans())}
    summary["format_version"] = draw(st.integers(-2, 3) | _json_values())
    return json.dumps(summary).encode()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=_summaries(), parameters=_json_values())
def test_list_runs_never_raises_whatever_a_folder_holds(content, parameters, tmp_path):
    root = tmp_path / "runs"
    shutil.rmtree(root, ignore_errors=True)
    run = root / "r"
    run.mkdir(parents=True)
    (run / "summary.json").write_bytes(content)
    (run / "parameters.json").write_text(json.dumps(parameters), encoding="utf-8")
    (run / "scores.parquet").write_bytes(content[:50])
    infos = list_runs(root)
    assert [i.name for i in infos] == ["r"]
    assert isinstance(infos[0].damaged, str) and isinstance(infos[0].status, str)
    try:
        load_run(run)
    except RunError as exc:
        assert str(root) not in str(exc)


def test_the_json_reader_holds_its_limits(tmp_path):
    assert json_depth(_nested(100)) == 100 and json_depth([]) == 1 and json_depth(3) == 0
    assert loads_json(json.dumps(_nested(MAX_JSON_DEPTH - 1)), name="x")
    for depth in (MAX_JSON_DEPTH + 1, 900, 100_000):
        with pytest.raises(ValueError, match="x is damaged: nested deeper than 64 levels"):
            loads_json("[" * depth + "]" * depth, name="x")
    big = tmp_path / "big.json"
    big.write_text(json.dumps(["a" * 1000] * 200))
    with pytest.raises(ValueError, match="big.json is damaged: larger than 1,000 bytes"):
        read_json_file(big, max_bytes=1000)
    with pytest.raises(FileNotFoundError):
        read_json_file(tmp_path / "missing.json")
