"""AppTest: hostile input through the real dashboard pages (upload, audit, explore).

``test_hostile_inputs.py`` runs every case of the table through the Data page's loader
functions; here a representative subset goes through the pages themselves, as a browser
session would: the page must show one error (never raise), keep nothing half-loaded, and
show dataset text as text.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from apptest_support import (
    errors,
    goto,
    new_app,
    plain,
    texts,
    wait_for_job,
    widget_key,
)
from hostile_cases import CASES, PICKLE_SENTINEL, Case, N, base_frame, csv_text, write_pickle_npy

from aflite_core.runs.folder import list_runs

BY_ID = {c.id: c for c in CASES}
#: Refused uploads shown by the Data page as soon as the file arrives.
UPLOAD_REFUSALS = ["latin1-accents", "jsonl-bad-line", "duplicate-columns", "unbalanced-quote",
                   "json-not-records", "parquet-nested", "gzip-bomb", "empty-file"]
SCRIPT = "<script>alert('x')</script>"


def upload(at, name: str, data: bytes, mime: str = "text/csv"):
    """Choose Upload on the Data page and upload ``data`` as ``name``."""
    at.segmented_control(key="data:source").set_value("upload").run()
    at.file_uploader(key="data:file").upload(name, data, mime)
    return at.run()


def dataset_of(at):
    return at.session_state["app:dataset"] if "app:dataset" in at.session_state else None  # noqa: SIM401


def no_exception(at) -> None:
    assert not at.exception, [e.message for e in at.exception]


@pytest.mark.parametrize("case_id", UPLOAD_REFUSALS)
def test_refused_upload_shows_one_error(case_id: str, runs_root: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from ui import cache

    case: Case = BY_ID[case_id]
    if "max_bytes" in case.options:  # the dashboard's decompression ceiling, lowered
        monkeypatch.setattr(cache, "MAX_DATASET_BYTES", case.options["max_bytes"])
    data = case.write(tmp_path)
    at = upload(new_app(autoload=False).run(), data.name, data.read_bytes(),
                "application/octet-stream")
    no_exception(at)
    assert len(at.error) == 1, errors(at)
    message = errors(at)[0]
    for fragment in case.dashboard_error():
        assert fragment in message, (fragment, message)
    assert dataset_of(at) is None


def test_wrong_encoding_then_the_right_one(runs_root: Path, tmp_path: Path) -> None:
    data = BY_ID["latin1-named"].write(tmp_path)
    at = upload(new_app(autoload=False).run(), data.name, data.read_bytes())
    no_exception(at)
    assert "Encoding" in errors(at)[0] and "line 2" in errors(at)[0]
    at.selectbox(key="data:encoding").set_value("latin-1").run()
    no_exception(at)
    assert not at.error, errors(at)
    dataset = dataset_of(at)
    assert dataset.frame["premise"].iloc[0] == "A café número 0 walks a dog."
    assert dataset.report.encoding == "latin-1"


def test_duplicate_ids_chosen_in_the_mapping(runs_root: Path, tmp_path: Path) -> None:
    data = BY_ID["duplicate-ids"].write(tmp_path)
    at = upload(new_app(autoload=False).run(), data.name, data.read_bytes())
    assert dataset_of(at) is not None  # loaded with positions as row ids
    at.selectbox(key=widget_key(at, "data:id:")).set_value("pid")
    at.button(key=widget_key(at, "data:load:")).click().run()
    no_exception(at)
    assert len(at.error) == 1
    for fragment in BY_ID["duplicate-ids"].dashboard_error():
        assert fragment in errors(at)[0]


def _run_audit_on_page(at, *, t: float | None = None, name: str | None = None):
    goto(at, "audit")
    at.number_input(key=widget_key(at, "audit:m:")).set_value(4)
    if t is not None:
        at.number_input(key=widget_key(at, "audit:t:")).set_value(t)
    if name is not None:
        at.text_input(key=widget_key(at, "audit:name:")).set_value(name)
    at.multiselect(key=widget_key(at, "audit:measures:")).set_value([])
    at.run()
    at.button(key="audit:run").click().run()
    no_exception(at)
    return wait_for_job(at, timeout=120)


def test_single_label_is_explained_then_refused(runs_root: Path, tmp_path: Path) -> None:
    case = BY_ID["all-labels-identical"]
    data = case.write(tmp_path)
    at = upload(new_app(autoload=False).run(), data.name, data.read_bytes())
    no_exception(at)
    assert "same label 'entailment'" in plain("\n".join(w.value for w in at.warning))
    job = _run_audit_on_page(at)
    assert job.state == "failed"
    no_exception(at)
    assert len(at.error) == 1
    for fragment in case.error:
        assert fragment in errors(at)[0]
    assert list_runs(runs_root) == []
    if runs_root.exists():
        assert not [p for p in runs_root.iterdir() if p.name.startswith(".tmp-")]


def test_train_size_over_the_set_is_refused(runs_root: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text(csv_text(base_frame()), encoding="utf-8")
    at = upload(new_app(autoload=False).run(), data.name, data.read_bytes())
    job = _run_audit_on_page(at, t=float(N))
    assert job.state == "failed"
    assert "train_size" in errors(at)[0] and "t < |S|" in errors(at)[0]
    assert list_runs(runs_root) == []


def test_pickled_embeddings_are_refused_not_run(runs_root: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text(csv_text(base_frame()), encoding="utf-8")
    emb = write_pickle_npy(tmp_path)
    at = upload(new_app(autoload=False).run(), data.name, data.read_bytes())
    goto(at, "audit")
    at.selectbox(key=widget_key(at, "audit:representation:")).set_value("precomputed").run()
    at.file_uploader(key=widget_key(at, "audit:embeddings:")).upload(
        "emb.npy", emb.read_bytes(), "application/octet-stream")
    at.run()
    at.number_input(key=widget_key(at, "audit:m:")).set_value(4)
    at.multiselect(key=widget_key(at, "audit:measures:")).set_value([])
    at.run()
    at.button(key="audit:run").click().run()
    job = wait_for_job(at, timeout=120)
    no_exception(at)
    assert job.state == "failed"
    assert "Python objects" in errors(at)[0] and "unpickling" in errors(at)[0]
    assert not (tmp_path / PICKLE_SENTINEL).exists()
    assert list_runs(runs_root) == []


def test_hostile_text_and_run_name_after_a_real_audit(runs_root: Path, tmp_path: Path) -> None:
    """Hostile text is shown as text on Data and Explore; a ``../`` run name stays inside the
    runs root; a half-written run folder left by a killed process is never listed."""
    frame = base_frame()
    frame["hypothesis"] = SCRIPT + " " + frame["hypothesis"]
    frame.loc[0, "premise"] = "**bold** [link](javascript:alert(1)) <img src=x onerror=alert(1)>"
    data = tmp_path / "hostile.csv"
    data.write_text(csv_text(frame), encoding="utf-8")
    # what a killed process leaves: a hidden temporary folder with partial files, one even
    # holding a summary.json, and a visible folder without one
    half = runs_root / ".tmp-killed-0a1b2c3d"
    half.mkdir(parents=True)
    (half / "summary.json").write_text('{"format_version": 1, "name": "killed"}')
    (half / "scores.parquet").write_bytes(b"PAR1 partial")
    (runs_root / "no-summary").mkdir()
    (runs_root / "no-summary" / "retained.csv").write_text("row_id\r\n0\r\n")

    at = upload(new_app(autoload=False).run(), data.name, data.read_bytes())
    no_exception(at)
    assert not at.error
    assert any(SCRIPT in df.value.to_string() for df in at.dataframe)
    assert "<script>" not in texts(at) and not at.get("html")

    goto(at, "audit")
    assert "No run in" in texts(at)  # neither leftover is listed
    job = _run_audit_on_page(at, name="../../escape")
    assert job.state == "done", job.error
    assert job.result.parent.resolve() == runs_root.resolve()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.csv", "runs"]
    assert [r.name for r in list_runs(runs_root)] == [job.result.name]
    table = at.dataframe[-1].value
    assert list(table["run"]) == [job.result.name]

    goto(at, "explore")
    no_exception(at)
    assert any(SCRIPT in df.value.to_string() for df in at.dataframe)
    assert "<script>" not in texts(at) and not at.get("html")


def test_same_file_name_different_content_in_two_sessions(runs_root: Path) -> None:
    """The upload cache is keyed by content: two sessions uploading ``data.csv`` with
    different rows each get their own dataset."""
    small = base_frame(40)
    large = pd.concat([base_frame(60), base_frame(60)], ignore_index=True)
    first = upload(new_app(autoload=False).run(), "data.csv", csv_text(small).encode())
    second = upload(new_app(autoload=False).run(), "data.csv", csv_text(large).encode())
    first.run()
    no_exception(first)
    no_exception(second)
    assert len(dataset_of(first).frame) == 40
    assert len(dataset_of(second).frame) == 120
    metrics = {m.label: m.value for m in first.metric}
    assert metrics["Rows read"] == "40"
    metrics = {m.label: m.value for m in second.metric}
    assert metrics["Rows read"] == "120"


def test_upload_limit_is_configured_and_stated(runs_root: Path) -> None:
    """The upload limit comes from .streamlit/config.toml, sits below the loader's
    decompression ceiling, and the Data page states it."""
    import tomllib

    from ui import cache

    config = tomllib.loads((Path(__file__).parents[2] / ".streamlit" / "config.toml")
                           .read_text(encoding="utf-8"))
    limit_mb = config["server"]["maxUploadSize"]
    assert 0 < limit_mb * 1024 * 1024 <= cache.MAX_DATASET_BYTES
    at = new_app(autoload=False).run()
    at.segmented_control(key="data:source").set_value("upload").run()
    no_exception(at)
    captions = " ".join(c.value for c in at.caption)
    assert f"up to {limit_mb} MB" in captions


def test_a_single_line_bomb_upload_is_refused_and_another_session_goes_on(
        runs_root: Path) -> None:
    """A .csv.gz of a few hundred KB that expands to one 100 MB line: refused at that line
    while it is decompressed (the 64 MB line limit, far below the 1 GB upload ceiling),
    with one error; a second session meanwhile loads and shows its own data."""
    import gzip

    bomb = gzip.compress(b"premise,hypothesis,label\n" + b"a" * (100 << 20) + b",b,c\n",
                         compresslevel=9)
    assert len(bomb) < 1 << 20
    other = new_app().run()  # the bundled sample, in its own session
    first = upload(new_app(autoload=False).run(), "bomb.csv.gz", bomb,
                   "application/octet-stream")
    no_exception(first)
    assert len(first.error) == 1, errors(first)
    message = errors(first)[0]
    assert "line 2 is longer than 64.0 MiB" in message and dataset_of(first) is None
    other.run()
    no_exception(other)
    assert dataset_of(other) is not None and len(dataset_of(other).frame) == 4000
    goto(other, "audit")
    no_exception(other)
