"""Hostile and broken input: every case of ``hostile_cases.py`` through the CLI and through
the dashboard's upload loader, plus parameters, paths, run names and output safety.

For each refused case: a non-zero exit code, exactly one ``error:`` line on stderr that
names the file, the place and what to do, no traceback, and nothing left next to the run
folder (no run, no hidden temporary folder). For valid-but-odd data: a run whose folder
holds every input row exactly once with its exact original values.

Most CLI checks call :func:`aflite_core.cli.main` in-process (the code path of
``python -m aflite_core``); ``test_real_processes`` runs a few as real subprocesses for the
exit codes and the absence of tracebacks.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hostile_cases import (
    API_TYPE_CASES,
    ARGPARSE_CASES,
    BAD_RUN_NAMES,
    CASES,
    FAST,
    PARAMETER_CASES,
    PATH_CASES,
    PICKLE_SENTINEL,
    RUN_CASES,
    RUN_NAMES,
    Case,
    N,
    base_frame,
    csv_text,
    read_csv_rows,
    write_pickle_npy,
)

from aflite_core.cli import main
from aflite_core.commands.run import parse_representation
from aflite_core.io.datasets import load_dataset
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.runs.folder import ROW_CSV_FILES, list_runs, load_run

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE = REPO_ROOT / "aflite_core" / "data" / "snli_sample.csv"
#: The longest error line we accept as "one clear line".
MAX_MESSAGE = 1200
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


# --------------------------------------------------------------------------- helpers


def cli(capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse errors
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The one ``error:`` line of ``err`` (asserting there is exactly one, no traceback)."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    assert len(lines[0]) <= MAX_MESSAGE, f"{len(lines[0])} characters: {lines[0][:300]}"
    return lines[0]


def assert_fragments(message: str, fragments: tuple[str, ...]) -> None:
    missing = [f for f in fragments if f not in message]
    assert not missing, f"{missing} not in {message!r}"


def assert_nothing_left(parent: Path) -> None:
    """No run folder and no hidden temporary folder in the runs root."""
    if parent.exists():
        assert sorted(p.name for p in parent.iterdir()) == []


def input_rows(data: Path, encoding: str | None = None) -> list[list[str]]:
    """The input's CSV rows (header included), parsed independently of aflite_core."""
    raw = data.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    codec = "utf-16" if raw[:2] in UTF16_BOMS else (encoding or "utf-8-sig")
    text = raw.decode(codec).lstrip("\ufeff")  # a BOM written twice is dropped too
    csv.field_size_limit(2**31 - 1)  # million-character cells
    return [row for row in csv.reader(io.StringIO(text, newline="")) if row]


def run_rows(run_dir: Path) -> tuple[list[str], dict[str, list[str]]]:
    """Header and ``{row_id: values}`` over the run folder's per-status CSV files."""
    header: list[str] | None = None
    rows: dict[str, list[str]] = {}
    for filename in ROW_CSV_FILES.values():
        path = run_dir / filename
        if not path.is_file():
            continue
        table = read_csv_rows(path)
        assert header is None or table[0] == header
        header = table[0]
        for row in table[1:]:
            assert row[0] not in rows, f"row {row[0]} appears twice"
            rows[row[0]] = row[1:]
    assert header is not None and header[0] == "row_id"
    return header[1:], rows


def assert_rows_exact(run_dir: Path, data: Path, encoding: str | None) -> None:
    """Every input row appears exactly once across the status CSVs, values unchanged."""
    expected = input_rows(data, encoding)
    columns, rows = run_rows(run_dir)
    assert columns == expected[0]
    assert sorted(rows, key=int) == [str(i) for i in range(len(expected) - 1)]
    for i, values in enumerate(expected[1:]):
        assert rows[str(i)] == values, f"row {i} changed"


def config_for(case: Case, folder: Path) -> AuditConfig:
    """The AuditConfig the dashboard would pass for the case's CLI options."""
    args = case.cli_args(folder)
    representation, params = "tfidf_svd", {}
    if "--representation" in args:
        representation, params = parse_representation(args[args.index("--representation") + 1])
    return AuditConfig(representation=representation, representation_params=params,
                       n_partitions=4, measures=(), report=False)


# --------------------------------------------------------------------------- the case table


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cli_case(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    data = case.write(folder)
    runs = tmp_path / "runs"
    code, out, err = cli(capsys, ["run", str(data), "--out", str(runs / "r"), *FAST,
                                  *case.cli_args(folder)])
    assert not (folder / PICKLE_SENTINEL).exists(), "data was unpickled"
    if case.ok:
        assert code == 0, err
        assert "Traceback" not in err and "error:" not in err
        run_dir = Path(out.strip())
        assert run_dir == runs / "r" and sorted(p.name for p in runs.iterdir()) == ["r"]
        run = load_run(run_dir)
        if data.suffix not in (".jsonl", ".parquet") and data.is_file():
            assert_rows_exact(run_dir, data, case.options.get("encoding"))
        else:
            assert run.sizes["input"] == N
        if case.check is not None:
            case.check(run, data)
        return
    assert code == 2, err
    assert out == ""
    message = error_line(err)
    assert message.startswith("error: ")
    assert_fragments(message, case.error)
    assert_nothing_left(runs)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_dashboard_loader_case(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                               ) -> None:
    """What the Data page does with an upload (``ui.data.view.upload_panel``): read the
    columns, guess the roles, load with that mapping. A refusal must be an exception the
    page catches and shows (``ValueError``/``OSError``), never anything else."""
    from ui import cache

    folder = tmp_path / "in"
    folder.mkdir()
    data = case.write(folder)
    options = dict(case.options)
    if "max_bytes" in options:  # the dashboard's ceiling, lowered for the test
        monkeypatch.setattr(cache, "MAX_DATASET_BYTES", options.pop("max_bytes"))
    encoding = options.pop("encoding", None)
    if not data.is_file():  # a folder or a glob: the Data page's "path on this server"
        monkeypatch.setenv("AFLITE_DATA_ROOTS", str(folder))
        _path_panel_case(case, data, options)
        return
    content = data.read_bytes()

    def load():
        columns, preview = cache.read_columns(content, data.name, encoding=encoding)
        assert len(preview) <= 20
        guess = cache.guess_roles(columns)
        mapping = {role: guess[role] for role in ("hypothesis", "premise", "label", "split")}
        mapping.update(options)
        return cache.load_upload(content, data.name, encoding=encoding, **mapping)

    if case.stage == "load" and not case.ok:
        _assert_refused_in_the_dashboard(load, case)
        return
    dataset = load()
    assert len(dataset.frame) == dataset.report.n_read == case.rows
    if case.ok:
        return
    if case.group == "content" and case.id != "ten-thousand-labels-twice":
        assert dataset.report.warnings  # the Data page warns before any audit
    # refused at audit time: the Audit page's job calls run_audit and shows its message
    root = tmp_path / "runs"
    with pytest.raises((ValueError, OSError)) as info:
        run_audit(dataset, config_for(case, folder), runs_root=root)
    assert_fragments(str(info.value), case.dashboard_error())
    assert not (folder / PICKLE_SENTINEL).exists(), "data was unpickled"
    assert_nothing_left(root)


def _path_panel_case(case: Case, data: Path, options: dict) -> None:
    """What the Data page's "path on this server" does (``ui.data.view.path_panel``), with
    ``AFLITE_DATA_ROOTS`` set to the input's folder: stamp the path (every file it reads
    must lie inside the roots), read its columns, load with the guessed mapping."""
    from ui import cache

    def load():
        stamp = cache.path_stamp(str(data))
        columns, _preview = cache.read_path_columns(str(data), stamp)
        guess = cache.guess_roles(columns)
        mapping = {role: guess[role] for role in ("hypothesis", "premise", "label", "split")}
        mapping.update(options)
        return cache.load_server_path(str(data), stamp, **mapping)

    if not case.ok:
        _assert_refused_in_the_dashboard(load, case)
        return
    dataset = load()
    assert len(dataset.frame) == dataset.report.n_read == case.rows


def _assert_refused_in_the_dashboard(load, case: Case) -> None:
    """The page's load raises what the Data page catches and shows (``ValueError`` or
    ``OSError``), holding the case's fragments, in one message of a readable length."""
    with pytest.raises((ValueError, OSError)) as info:
        load()
    assert_fragments(str(info.value), case.dashboard_error())
    assert len(str(info.value)) <= MAX_MESSAGE


def test_the_pickle_payload_is_live(tmp_path: Path) -> None:
    """The refusal tests mean something: loading the payload with pickling allowed runs it."""
    path = write_pickle_npy(tmp_path)
    assert not (tmp_path / PICKLE_SENTINEL).exists()
    np.load(path, allow_pickle=True)
    assert (tmp_path / PICKLE_SENTINEL).read_text().startswith("unpickled")


# --------------------------------------------------------------------------- parameters


@pytest.fixture
def good_data(tmp_path: Path) -> Path:
    path = tmp_path / "in" / "data.csv"
    path.parent.mkdir()
    path.write_text(csv_text(base_frame()), encoding="utf-8")
    return path


@pytest.mark.parametrize("flags,fragments", [(c[1], c[3]) for c in PARAMETER_CASES],
                         ids=[c[0] for c in PARAMETER_CASES])
def test_cli_parameter(flags, fragments, good_data: Path, tmp_path: Path,
                       capsys: pytest.CaptureFixture) -> None:
    runs = tmp_path / "runs"
    code, out, err = cli(capsys, ["run", str(good_data), "--out", str(runs / "r"), *FAST,
                                  *flags])
    assert code == 2 and out == ""
    line = error_line(err)
    # names the option: checked when the flag is read (the declared bounds) or when the data
    # is (a size against the rows)
    assert line.startswith((f"error: {flags[0]}", f"error: argument {flags[0]}:"))
    assert_fragments(line, fragments)
    assert_nothing_left(runs)


@pytest.mark.parametrize("kwargs,fragments", [(c[2], c[3]) for c in PARAMETER_CASES],
                         ids=[c[0] for c in PARAMETER_CASES])
def test_api_parameter(kwargs, fragments, good_data: Path, tmp_path: Path) -> None:
    """``run_audit`` (the dashboard's job) refuses the same values, leaving nothing."""
    dataset = load_dataset(good_data)
    config = AuditConfig(**{"n_partitions": 4, "measures": (), "report": False, **kwargs})
    root = tmp_path / "runs"
    with pytest.raises((ValueError, TypeError)) as info:
        run_audit(dataset, config, runs_root=root)
    assert str(info.value).startswith(next(iter(kwargs)))  # names the keyword
    assert_fragments(str(info.value), fragments)
    assert_nothing_left(root)


@pytest.mark.parametrize("flags,fragments", [(c[1], c[2]) for c in ARGPARSE_CASES],
                         ids=[c[0] for c in ARGPARSE_CASES])
def test_cli_argument_errors(flags, fragments, good_data: Path, tmp_path: Path,
                             capsys: pytest.CaptureFixture) -> None:
    runs = tmp_path / "runs"
    code, out, err = cli(capsys, ["run", str(good_data), "--out", str(runs / "r"), *flags])
    assert code == 2 and out == ""
    line = error_line(err)
    assert err.rstrip().endswith(line)  # the usage comes first, the error line last
    assert_fragments(line, fragments)
    assert not runs.exists()


@pytest.mark.parametrize("kwargs,kind,fragments", [c[1:] for c in API_TYPE_CASES],
                         ids=[c[0] for c in API_TYPE_CASES])
def test_api_argument_errors(kwargs, kind, fragments) -> None:
    with pytest.raises(kind) as info:
        AuditConfig(**kwargs).validate()
    assert_fragments(str(info.value), fragments)


@pytest.mark.parametrize("argv,fragments", [c[1:] for c in PATH_CASES],
                         ids=[c[0] for c in PATH_CASES])
def test_cli_paths(argv, fragments, good_data: Path, tmp_path: Path,
                   capsys: pytest.CaptureFixture) -> None:
    folder = good_data.parent
    fifo = folder / "pipe.csv"
    if any("{fifo}" in a for a in argv):
        os.mkfifo(fifo)  # never opened: opening a FIFO blocks until a writer comes
    empty = folder / "no_data"
    if any("{empty}" in a for a in argv):
        empty.mkdir()
        (empty / "notes.txt").write_text("not a dataset")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    args = [a.replace("{dir}", str(folder)).replace("{data}", str(good_data))
            .replace("{fifo}", str(fifo)).replace("{empty}", str(empty)) for a in argv]
    code, out, err = cli(capsys, ["run", *args, *FAST])
    assert code == 2 and out == ""
    assert_fragments(error_line(err), fragments)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


# --------------------------------------------------------------------------- run names


@pytest.mark.parametrize("name", RUN_NAMES)
def test_hostile_run_name_stays_inside_the_root(name: str, tmp_path: Path,
                                                good_data: Path) -> None:
    """The dashboard's Run-name field goes to run_audit(name=...): sanitised, never outside."""
    root = tmp_path / "deep" / "runs"
    dataset = load_dataset(good_data)
    path = run_audit(dataset, AuditConfig(n_partitions=4, measures=(), report=False),
                     runs_root=root, name=name)
    assert path.parent == root.resolve() or path.parent == root
    assert "/" not in path.name and "\\" not in path.name and ".." not in path.name
    assert not path.name.startswith((".", "-"))
    assert [p.name for p in root.iterdir()] == [path.name]
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["runs"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "in"]


@pytest.mark.parametrize("name", BAD_RUN_NAMES)
def test_unusable_run_name_is_refused(name: str, tmp_path: Path, good_data: Path) -> None:
    root = tmp_path / "runs"
    with pytest.raises(ValueError, match="run name"):
        run_audit(load_dataset(good_data), AuditConfig(n_partitions=4, measures=()),
                  runs_root=root, name=name)
    assert_nothing_left(root)


# --------------------------------------------------------------------------- output safety

FORMULAS = ["=HYPERLINK(\"http://x\",\"click\")", "+1+1", "-2+3", "@SUM(A1)", "\tTAB",
            "\rCR", "=cmd|' /C calc'!A0"]
SCRIPT = "<script>alert('x')</script>"
IMG = "<img src=x onerror=alert(1)>"


def _hostile_frame():
    frame = base_frame()
    for i, text in enumerate(FORMULAS):
        frame.loc[i, "hypothesis"] = text + f" words {i}"
        frame.loc[i + 10, "premise"] = text
    rest = frame.index >= 20
    frame.loc[rest, "hypothesis"] = SCRIPT + " " + frame.loc[rest, "hypothesis"]
    frame["label"] = frame["label"].replace("contradiction", IMG)  # shown in every label table
    frame["=note"] = ["@x"] * len(frame)  # a hostile column name and values
    return frame


def test_exports_are_spreadsheet_safe_and_the_report_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data = tmp_path / "hostile.csv"
    frame = _hostile_frame()
    data.write_text(csv_text(frame), encoding="utf-8")
    run_dir = tmp_path / "runs" / "r"
    code, out, err = cli(capsys, ["run", str(data), "--out", str(run_dir), "--partitions", "4",
                                  "--measures", "none", "-q"])
    assert code == 0, err
    # the run folder's CSVs are exact (machine use)
    assert_rows_exact(run_dir, data, None)

    # spreadsheet export (default): every formula-like cell and header gets a leading '
    target = tmp_path / "all.csv"
    code, _, err = cli(capsys, ["export", str(run_dir), "--what", "all", "--format", "csv",
                                "--out", str(target)])
    assert code == 0, err
    table = read_csv_rows(target)
    assert "'=note" in table[0]
    cells = [cell for row in table[1:] for cell in row]
    dangerous = [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")
                 and not _numeric(c)]
    assert dangerous == []
    for text in FORMULAS:
        assert "'" + text in cells
    # machine export: exact values
    exact = tmp_path / "exact.csv"
    code, _, err = cli(capsys, ["export", str(run_dir), "--what", "all", "--format", "csv",
                                "--out", str(exact), "--no-sanitize"])
    assert code == 0, err
    exact_cells = {c for row in read_csv_rows(exact)[1:] for c in row}
    assert set(FORMULAS) <= exact_cells

    # the dashboard's streamed download (ui.cache.stream_export) is spreadsheet-safe too
    from ui import cache

    downloaded = b"".join(cache.stream_export(run_dir, "all")).decode("utf-8")
    assert "'=HYPERLINK" in downloaded and "\n=HYPERLINK" not in downloaded

    # the HTML report shows the hostile text escaped, never as markup
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert SCRIPT not in html and "<img" not in html


def _numeric(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------- processes


def _spawn(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen([sys.executable, "-m", "aflite_core", *args], cwd=REPO_ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_real_processes(tmp_path: Path) -> None:
    """Exit codes and stderr of real ``python -m aflite_core run`` processes (run together)."""
    ids = ["latin1-accents", "gzip-bomb", "embeddings-pickled-object", "all-labels-identical",
           "rtl-and-emoji"]
    jobs = {}
    for case in (c for c in CASES if c.id in ids):
        folder = tmp_path / case.id
        folder.mkdir()
        data = case.write(folder)
        jobs[case.id] = (case, folder, _spawn(
            ["run", str(data), "--out", str(folder / "runs" / "r"), *FAST,
             *case.cli_args(folder)]))
    good = tmp_path / "good.csv"
    good.write_text(csv_text(base_frame()), encoding="utf-8")
    jobs["seed-as-text"] = (None, tmp_path, _spawn(
        ["run", str(good), "--out", str(tmp_path / "runs" / "r"), "--seed", "abc"]))
    for name, (case, folder, process) in jobs.items():
        out, err = process.communicate(timeout=120)
        assert "Traceback" not in err, (name, err)
        assert not (folder / PICKLE_SENTINEL).exists()
        if case is not None and case.ok:
            assert process.returncode == 0, (name, err)
            assert Path(out.strip()) == folder / "runs" / "r"
            continue
        assert process.returncode == 2, (name, err)
        assert out == ""
        line = error_line(err)
        if case is not None:
            assert_fragments(line, case.error)
            assert_nothing_left(folder / "runs")
        else:
            assert "expected a whole number, got 'abc'" in line
            assert not (tmp_path / "runs").exists()


def test_killed_run_is_never_listed_and_rerunning_works(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """SIGKILL a real run mid-way: its hidden folder is not a run; the same --out works."""
    runs = tmp_path / "runs"
    process = _spawn(["run", str(SAMPLE), "--out", str(runs / "sample"), "--partitions", "64",
                      "--target-size", "0.2", "--slice-size", "20", "--measures", "none",
                      "--no-report"])
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if runs.exists() and list(runs.glob(".tmp-*")):  # the run has started writing
                time.sleep(0.3)
                break
            time.sleep(0.05)
        assert process.poll() is None, "the run finished before it could be killed"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    leftovers = [p.name for p in runs.iterdir()]
    assert leftovers and all(name.startswith(".tmp-sample-") for name in leftovers)
    assert list_runs(runs) == []
    assert not (runs / "sample").exists()

    code, out, err = cli(capsys, ["run", str(SAMPLE), "--out", str(runs / "sample"),
                                  "--partitions", "4", "--target-size", "0.8",
                                  "--measures", "none", "--no-report", "-q"])
    assert code == 0, err
    assert [r.name for r in list_runs(runs)] == ["sample"]
    assert load_run(runs / "sample").sizes["input"] == 4000


def test_every_case_is_documented() -> None:
    """docs/hostile-inputs.md lists every case of the table (and nothing is renamed away)."""
    doc = (REPO_ROOT / "docs" / "hostile-inputs.md").read_text(encoding="utf-8")
    ids = [c.id for c in CASES] + [c[0] for c in (*PARAMETER_CASES, *ARGPARSE_CASES,
                                                  *PATH_CASES)] + [c.id for c in RUN_CASES]
    assert len(set(ids)) == len(ids)
    assert [i for i in ids if f"`{i}`" not in doc] == []


ESTIMATOR_CASES = [
    ("target-size-equals-data", {"target_size": 40}, ValueError, ("target_size", "40")),
    ("train-size-whole-set", {"target_size": 10, "train_size": 40}, ValueError,
     ("train_size", "40")),
    ("slice-size-zero", {"target_size": 10, "slice_size": 0}, ValueError, ("slice_size", "0")),
    ("tau-over-one", {"target_size": 10, "tau": 1.5}, ValueError, ("tau", "1.5")),
    ("seed-as-text", {"target_size": 10, "random_state": "abc"}, TypeError,
     ("random_state", "'abc'")),
]


@pytest.mark.parametrize("kwargs,kind,fragments", [c[1:] for c in ESTIMATOR_CASES],
                         ids=[c[0] for c in ESTIMATOR_CASES])
def test_aflite_estimator_parameter(kwargs, kind, fragments) -> None:
    """The estimator itself (Python API) names the parameter and the value it got."""
    from aflite_core.filter._aflite import AFLite

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4)).astype(np.float32)
    y = np.array(["a", "b"] * 20)
    with pytest.raises(kind) as info:
        AFLite(**kwargs).fit(X, y)
    assert_fragments(str(info.value), fragments)


def test_dashboard_never_renders_raw_html() -> None:
    """Dataset text reaches the page only through escaped widgets: no page or ui module
    uses unsafe_allow_html, st.html or custom components."""
    sources = [REPO_ROOT / "app.py", *sorted((REPO_ROOT / "ui").glob("*.py")),
               *sorted((REPO_ROOT / "app_pages").glob("*.py"))]
    assert len(sources) > 5
    offenders = [f"{p.name}:{n}" for p in sources
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if "unsafe_allow_html=True" in line.replace(" ", "") or "st.html(" in line
                 or "components.v1" in line]
    assert offenders == []
