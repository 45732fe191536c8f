"""The table of hostile and broken inputs shared by ``test_hostile_inputs.py`` (and documented,
case by case, in ``docs/hostile-inputs.md``).

Each :class:`Case` writes one input (plus, for embedding cases, an embeddings file) into a
folder and says what must happen:

* ``stage="load"``: the loader refuses the file. The CLI prints one ``error:`` line holding
  every fragment of ``error``; the dashboard's upload loader raises an error the Data page
  catches and shows, holding ``ui_error`` (default: ``error``).
* ``stage="audit"``: the file loads (the dashboard shows it, often with a warning) but the
  audit refuses it before any work: the CLI's error line and ``run_audit``'s message (what
  the dashboard's Audit page shows) hold ``error`` / ``ui_error``.
* ``stage="cli"``: a CLI-only problem (argument parsing, a path).
* ``error=()``: valid but odd data; the run succeeds and ``check`` verifies its result.

``args`` may use ``{dir}`` for the input folder (embedding paths).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

#: Rows of the base dataset: two labels, enough words for TF-IDF, 30 rows per label.
N = 60
#: CLI options that keep an audit of the small inputs fast.
FAST = ("--partitions", "4", "--target-size", "0.5", "--measures", "none", "--no-report", "-q")


def base_frame(n: int = N) -> pd.DataFrame:
    """A small, valid NLI-style table (premise, hypothesis, label)."""
    return pd.DataFrame({
        "premise": [f"A person number {i} walks a dog in the green park." for i in range(n)],
        "hypothesis": [
            (f"Somebody {i} is outside with an animal." if i % 2
             else f"Nobody {i} ever leaves the house at night.")
            for i in range(n)
        ],
        "label": ["entailment" if i % 2 else "contradiction" for i in range(n)],
    })


def csv_text(frame: pd.DataFrame) -> str:
    """RFC 4180 CSV text of ``frame``: CRLF line ends, so that a lone ``\\r`` inside a value
    is quoted (with ``\\n`` line ends Python's csv writer leaves it bare, which ends the
    record for every CSV reader)."""
    return frame.to_csv(index=False, lineterminator="\r\n")


def _writer(name: str, content: bytes | Callable[[], bytes]) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(content() if callable(content) else content)
        return path

    write.file_name = name  # type: ignore[attr-defined]  # see written_file_name
    return write


def written_file_name(case: Case) -> str | None:
    """The name of the one file ``case`` writes, told without writing it (the size cases
    take seconds to make); None when it writes a folder or does not say."""
    return getattr(case.write, "file_name", None)


def _frame_writer(name: str, frame: Callable[[], pd.DataFrame], *, encoding: str = "utf-8"
                  ) -> Callable[[Path], Path]:
    return _writer(name, lambda: csv_text(frame()).encode(encoding))


def _jsonl(records: list[Any]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.to_dict(orient="records")


def _with(**changes: Any) -> Callable[[], pd.DataFrame]:
    """The base frame with cells replaced: ``{column: {row: value}}``."""

    def make() -> pd.DataFrame:
        frame = base_frame()
        for column, cells in changes.items():
            for row, value in cells.items():
                frame.loc[row, column] = value
        return frame

    return make


def _gzip_bomb() -> bytes:
    # 64 MiB of one repeated CSV-looking line compresses to about 64 KiB
    return gzip.compress(b"premise,hypothesis,label\n" + b"a,b,c\n" * ((64 << 20) // 6), 6)


def _single_line_bomb() -> bytes:
    """A few KB of gzip whose second line is 65 MiB long: past the default line limit."""
    stream = io.BytesIO()
    with gzip.GzipFile(fileobj=stream, mode="wb", compresslevel=6) as fh:
        fh.write(b"premise,hypothesis,label\n")
        block = b"a" * (1 << 20)
        for _ in range(65):
            fh.write(block)
        fh.write(b",b,c\n")
    return stream.getvalue()


def _categorical_parquet_bomb(rows: int = 60, width: int = 200_000) -> bytes:
    """Like :func:`_parquet_dictionary_bomb`, with the column a pandas Categorical: the
    file's schema says ``dictionary<string>``, which the size budget once did not count."""
    frame = base_frame(rows)
    frame["blob"] = pd.Categorical(["x" * width] * rows)
    buffer = io.BytesIO()
    frame.to_parquet(buffer, compression="zstd")
    return buffer.getvalue()


def _jsonl_bad_byte_late() -> bytes:
    """JSON Lines valid for 40 lines, then a Latin-1 byte on line 41 (read as a stream)."""
    lines = [json.dumps(r) for r in base_frame().to_dict("records")[:40]]
    return ("\n".join(lines) + "\n").encode() + \
        b'{"premise": "caf\xe9", "hypothesis": "h", "label": "entailment"}\n'


def _parquet_dictionary_bomb(rows: int = 60, width: int = 200_000) -> bytes:
    """A few KB of Parquet whose text column ``blob`` (one 200 KB value on every row,
    dictionary-encoded by the writer as any Parquet writer does) decodes to
    ``rows * width`` bytes (12 MB here): the footer's ``total_byte_size`` counts the
    dictionary page once, so it stays under a 1 MiB ceiling."""
    frame = base_frame(rows)
    blob = pa.array(["x" * width] * rows, pa.string())
    table = pa.table({**{c: frame[c].tolist() for c in frame.columns}, "blob": blob})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    meta = pq.ParquetFile(io.BytesIO(buffer.getvalue())).metadata
    assert meta.row_group(0).total_byte_size < (1 << 20) < rows * width  # the footer lies
    return buffer.getvalue()


def _binary_parquet(valid: bool) -> Callable[[], bytes]:
    def make() -> bytes:
        frame = base_frame()
        hyps = [h.encode("utf-8") for h in frame["hypothesis"]]
        if not valid:
            hyps[6] = b"\xff\xfe not text"
        table = pa.table({"premise": frame["premise"].tolist(),
                          "hypothesis": pa.array(hyps, pa.binary()),
                          "label": frame["label"].tolist()})
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        return buffer.getvalue()

    return make


def _deep_jsonl(depth: int, *, in_extra_column: bool) -> Callable[[], bytes]:
    """JSON Lines whose line 4 nests ``depth`` arrays (the hypothesis, or an unused column)."""
    def make() -> bytes:
        lines = _jsonl(_records(base_frame())).decode().splitlines()
        nested = "[" * depth + "]" * depth
        if in_extra_column:
            lines[3] = lines[3][:-1] + f', "meta": {nested}}}'
        else:
            lines[3] = '{"premise": "p", "hypothesis": ' + nested + ', "label": "entailment"}'
        return ("\n".join(lines) + "\n").encode()

    return make


#: JSON Lines labels that Python's equality merges (True == 1 == 1.0, False == 0).
MIXED_LABELS = [True, 1.0, 1, "1", False, 0]


def _mixed_label_records() -> list[dict]:
    records = _records(base_frame())
    for i, rec in enumerate(records):
        rec["label"] = MIXED_LABELS[i % len(MIXED_LABELS)]
    return records


def _id_records_equal_as_text() -> list[dict]:
    records = _records(base_frame())
    for i, rec in enumerate(records):
        rec["uid"] = i
    records[5]["uid"] = "4"  # 4 (line 5) and "4" (line 6): distinct in JSON, equal as text
    return records


def _huge_int_records() -> list[dict]:
    records = _records(base_frame())
    for i, rec in enumerate(records):
        rec["count"] = i
    records[2]["count"] = 10**30
    return records


def _surrogate_jsonl() -> bytes:
    lines = _jsonl(_records(base_frame())).decode().splitlines()
    lines[6] = '{"premise": "p", "hypothesis": "broken \\ud800 text", "label": "entailment"}'
    return ("\n".join(lines) + "\n").encode()


class PicklePayload:
    """Unpickling this object writes the file it names: proof that nothing was unpickled."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self) -> tuple:
        return (Path.write_text, (self.target, "unpickled: code from the data ran"))


#: File that :class:`PicklePayload` creates when (and only when) it is unpickled.
PICKLE_SENTINEL = "PWNED.txt"


def write_pickle_npy(folder: Path, name: str = "emb.npy") -> Path:
    """An object ``.npy`` (NumPy pickles object arrays) whose loading would run code."""
    array = np.empty(N, dtype=object)
    for i in range(N):
        array[i] = PicklePayload(folder / PICKLE_SENTINEL)
    path = folder / name
    with open(path, "wb") as fh:
        np.lib.format.write_array(fh, array, allow_pickle=True)
    return path


# ------------------------------------------------------------ datasets folders, shards


def _arrow_stream(frame: pd.DataFrame) -> bytes:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _hf_dataset(folder: Path, frame: pd.DataFrame, *, names: list[Any] | None = None,
                info: Any = None) -> Path:
    """A ``Dataset.save_to_disk`` folder written with pyarrow alone: one Arrow stream file,
    ``state.json`` naming ``names`` (default: that file) and ``dataset_info.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data-00000-of-00001.arrow").write_bytes(_arrow_stream(frame))
    files = names if names is not None else ["data-00000-of-00001.arrow"]
    state = {"_data_files": [{"filename": f} for f in files], "_fingerprint": "f00d",
             "_format_type": None, "_split": None}
    (folder / "state.json").write_text(json.dumps(state), encoding="utf-8")
    (folder / "dataset_info.json").write_text(
        json.dumps(info if info is not None else {"features": {}}), encoding="utf-8")
    return folder


def _hf_writer(names: Callable[[Path], list[Any]] | None = None, *, info: Any = None,
               state_text: str | None = None) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        data = folder / "ds"
        outside = folder / "outside.arrow"  # a readable Arrow file next to the dataset
        outside.write_bytes(_arrow_stream(base_frame()))
        _hf_dataset(data, base_frame(), names=names(folder) if names else None, info=info)
        if state_text is not None:
            (data / "state.json").write_text(state_text, encoding="utf-8")
        return data

    return write


def _hf_link_out(folder: Path) -> list[Any]:
    (folder / "ds").mkdir(parents=True, exist_ok=True)
    (folder / "ds" / "linked.arrow").symlink_to(folder / "outside.arrow")
    return ["linked.arrow"]


def _hf_dict_writer(splits: list[Any]) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        data = folder / "dd"
        _hf_dataset(data / "train", base_frame())
        _hf_dataset(folder / "elsewhere", base_frame())
        (data / "dataset_dict.json").write_text(json.dumps({"splits": splits}),
                                                encoding="utf-8")
        return data

    return write


def _damaged_arrow_body(folder: Path) -> Path:
    data = _hf_dataset(folder / "ds", base_frame())
    arrow = data / "data-00000-of-00001.arrow"
    body = bytearray(arrow.read_bytes())
    middle = len(body) // 2  # inside the text data and its offsets
    body[middle:middle + 64] = bytes(range(200, 256)) + b"\x00" * 8
    arrow.write_bytes(bytes(body))
    return data


def _shards_writer(make: Callable[[Path], None], pattern: str | None = None
                   ) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        data = folder / "shards"
        data.mkdir()
        make(data)
        return data / pattern if pattern else data

    return write


def _label_types_differ(data: Path) -> None:
    frame = base_frame()
    first = frame.iloc[:30].assign(label=np.arange(30) % 2)  # integer labels
    first.to_parquet(data / "part-0.parquet", index=False)
    frame.iloc[30:].to_parquet(data / "part-1.parquet", index=False)  # text labels


def _self_links(data: Path) -> None:
    (data / "a.csv").write_text(csv_text(base_frame()), encoding="utf-8")
    (data / "loop1").symlink_to(data)
    (data / "loop2").symlink_to(data)


def _shard_link_out(data: Path) -> None:
    frame = base_frame()
    (data / "a.csv").write_text(csv_text(frame.iloc[:30]), encoding="utf-8")
    outside = data.parent / "secret.csv"
    outside.write_text(csv_text(frame.iloc[30:]), encoding="utf-8")
    (data / "b.csv").symlink_to(outside)


def _big_parquet_cell() -> bytes:
    """60 rows, one premise of 65 MiB (over the 64 MiB cell limit), a few KB compressed."""
    frame = base_frame()
    premise = frame["premise"].tolist()
    premise[3] = "w" * (65 << 20)
    table = pa.table({"premise": pa.array(premise).dictionary_encode(),
                      "hypothesis": frame["hypothesis"].tolist(),
                      "label": frame["label"].tolist()})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return buffer.getvalue()


def _with_embeddings(make: Callable[[Path], None]) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        data = folder / "data.csv"
        data.write_text(csv_text(base_frame()), encoding="utf-8")
        make(folder)
        return data

    write.file_name = "data.csv"  # type: ignore[attr-defined]  # see written_file_name
    return write


def _npy(array: np.ndarray, name: str = "emb.npy") -> Callable[[Path], None]:
    return lambda folder: np.save(folder / name, array, allow_pickle=False)


def _features(n: int = N, d: int = 8) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)).astype(np.float32)


def _nan_features() -> np.ndarray:
    X = _features()
    X[5, 2] = np.nan
    return X


def _inf_features() -> np.ndarray:
    X = _features()
    X[7, 0] = np.inf
    return X


def _npz_object(folder: Path) -> None:
    array = np.empty(N, dtype=object)
    array[:] = [PicklePayload(folder / PICKLE_SENTINEL)] * N
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=True)
    import zipfile

    with zipfile.ZipFile(folder / "emb.npz", "w") as archive:
        archive.writestr("X.npy", buffer.getvalue())


def _pickle_file(folder: Path) -> None:
    (folder / "emb.npy").write_bytes(pickle.dumps(PicklePayload(folder / PICKLE_SENTINEL)))


def _nested_parquet() -> bytes:
    frame = base_frame()
    table = pa.table({"premise": frame["premise"].tolist(),
                      "hypothesis": [[h] for h in frame["hypothesis"]],
                      "label": frame["label"].tolist()})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def _empty_parquet() -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.table({"hypothesis": pa.array([], pa.string()),
                             "label": pa.array([], pa.string())}), buffer)
    return buffer.getvalue()


def _embedded_newlines() -> pd.DataFrame:
    frame = base_frame()
    frame.loc[0, "hypothesis"] = 'Line one,\nline "two"\r\nline three\rend'
    frame.loc[1, "premise"] = "\n\nleading blank lines"
    return frame


def _rtl_emoji() -> pd.DataFrame:
    frame = base_frame()
    texts = ["مرحبا بالعالم، القطة نائمة", "שלום עולם \u200fהכלב רץ", "👩‍👩‍👧‍👦 family 🏳️‍🌈 flag",
             "e\u0301 combining accent", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math letters", "\u202eevil bidi override"]
    for i, text in enumerate(texts):
        frame.loc[i, "hypothesis"] = f"{text} {frame.loc[i, 'hypothesis']}"
    return frame


def _numeric_label_records() -> list[dict]:
    return [{**r, "label": int(r["label"] == "entailment")} for r in _records(base_frame())]


def _nan_text_records() -> list[dict]:
    records = _records(base_frame())
    records[0]["hypothesis"] = None
    records[1]["hypothesis"] = ""
    records[2]["hypothesis"] = float("nan")  # written as NaN (Python's JSON extension)
    records[3].pop("hypothesis")  # missing key
    return records


def _many_labels(per_label: int) -> Callable[[], pd.DataFrame]:
    def make() -> pd.DataFrame:
        n = 10_000 * per_label
        return pd.DataFrame({
            "hypothesis": [f"sentence about topic {i % 10_000} with words {i}" for i in range(n)],
            "label": [f"L{i % 10_000}" for i in range(n)],
        })

    return make


def _long_header() -> pd.DataFrame:
    return pd.DataFrame({"premise": ["p"], "hypothesis": ["h"], "x" * 1_000_000: ["y"]})


def _raw_csv(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


GOOD_LINES = csv_text(base_frame()).splitlines()


@dataclass(frozen=True)
class Case:
    """One hostile input and what must happen (see the module docstring)."""

    id: str
    group: str
    write: Callable[[Path], Path]
    expect: str
    error: tuple[str, ...] = ()
    ui_error: tuple[str, ...] | None = None
    stage: str = "load"
    args: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    check: Callable[[Any, Path], None] | None = None
    rows: int = N

    @property
    def ok(self) -> bool:
        return not self.error

    def dashboard_error(self) -> tuple[str, ...]:
        return self.error if self.ui_error is None else self.ui_error

    def cli_args(self, folder: Path) -> list[str]:
        return [a.replace("{dir}", str(folder)) for a in self.args]


# --------------------------------------------------------------------------- checks
# Each receives the completed run (aflite_core.runs.folder.AuditRun) and the input path.


def _check_bom(run: Any, data: Path) -> None:
    assert run.columns["premise"] == "premise"  # the BOM is not part of the first name
    assert run.sizes["input"] == N and run.sizes["excluded"] == 0


def _check_accents(run: Any, data: Path) -> None:
    assert run.sizes["input"] == N
    assert run.frame["premise"].iloc[0] == "A café número 0 walks a dog."


def _check_excluded(n: int, reason: str) -> Callable[[Any, Path], None]:
    def check(run: Any, data: Path) -> None:
        assert run.sizes["excluded"] == n, run.sizes
        assert run.summary["input"]["excluded"] == {reason: n}
        assert run.sizes["input"] == N

    return check


def _check_reasons(run: Any, reasons: dict[str, int]) -> None:
    assert run.summary["input"]["excluded"] == reasons
    assert run.sizes["excluded"] == sum(reasons.values())


def _check_numeric_labels(run: Any, data: Path) -> None:
    assert set(run.summary["labels"]["before"]) == {"0", "1"}
    assert run.sizes["excluded"] == 0


def _check_blank_lines(run: Any, data: Path) -> None:
    assert run.sizes["input"] == N
    assert any("blank line" in w for w in run.summary["input"]["warnings"])


def _check_same_label_merged(run: Any, data: Path) -> None:
    assert set(run.summary["labels"]["before"]) == {"entailment", "contradiction"}


def _check_mixed_labels(run: Any, data: Path) -> None:
    # True, False, 1 (= 1.0 = "1") and 0 stay four labels; Python's equality made them two
    before = run.summary["labels"]["before"]
    assert set(before) == {"True", "False", "1", "0"}, before
    assert before["1"] == 30 and before["True"] == 10 and before["False"] == 10


def _check_huge_int(run: Any, data: Path) -> None:
    assert str(10**30) in run.frame["count"].astype(str).tolist()


def _check_binary_decoded(run: Any, data: Path) -> None:
    hyps = run.frame["hypothesis"].tolist()
    assert all(isinstance(h, str) and not h.startswith("b'") for h in hyps), hyps[:2]
    assert hyps[1] == base_frame()["hypothesis"].iloc[1]
    assert any("binary" in w for w in run.summary["input"]["warnings"])


def _long_cell() -> pd.DataFrame:
    frame = base_frame()
    frame.loc[3, "hypothesis"] = "x" * 999_991 + " the end."
    return frame


def _check_long_cell_exact(run: Any, data: Path) -> None:
    assert run.sizes["input"] == N
    assert run.frame["hypothesis"].iloc[3] == "x" * 999_991 + " the end."


CASES: list[Case] = [
    # ------------------------------------------------------------------ encodings
    Case("utf8-bom", "encodings", _writer("bom.csv", lambda: b"\xef\xbb\xbf"
         + csv_text(base_frame()).encode()), "read; the BOM is dropped", check=_check_bom),
    Case("double-utf8-bom", "encodings", _writer("bom2.csv", lambda: b"\xef\xbb\xbf" * 2
         + csv_text(base_frame()).encode()),
         "read; every leading BOM is dropped, with a warning", check=_check_bom),
    Case("utf16-bom", "encodings", _frame_writer("utf16.csv", base_frame, encoding="utf-16"),
         "read (UTF-16 announced by its BOM)", check=_check_bom),
    Case("utf16-no-bom", "encodings", _frame_writer("utf16le.csv", base_frame,
                                                    encoding="utf-16-le"),
         "refused: NUL characters, name the encoding",
         error=("utf16le.csv", "line 1", "NUL", "--encoding 'utf-16-le'"),
         ui_error=("utf16le.csv", "line 1", "NUL", "encoding='utf-16-le'")),
    Case("latin1-accents", "encodings",
         _writer("latin1.csv", lambda: csv_text(base_frame()).replace(
             "A person number 0", "A café número 0").replace(" in the green park", "")
             .encode("latin-1")),
         "refused, naming the line and byte; the message says how to name the encoding",
         error=("latin1.csv", "line 2", "byte offset", "not valid UTF-8",
                "--encoding 'latin-1'"),
         ui_error=("latin1.csv", "line 2", "byte offset", "not valid UTF-8")),
    Case("latin1-named", "encodings",
         _writer("latin1ok.csv", lambda: csv_text(base_frame()).replace(
             "A person number 0", "A café número 0").replace(" in the green park", "")
             .encode("latin-1")),
         "read with --encoding latin-1 (dashboard: Encoding = Latin-1)",
         args=("--encoding", "latin-1"), options={"encoding": "latin-1"},
         check=_check_accents),
    Case("invalid-utf8-byte", "encodings",
         _writer("badbyte.csv", lambda: _raw_csv(GOOD_LINES[:30]) + b"p,h \xff\xfe x,no\n"),
         "refused, naming the line and byte offset",
         error=("badbyte.csv", "line 31", "byte offset", "cannot decode")),
    Case("binary-garbage", "encodings",
         _writer("garbage.csv", bytes(range(256)) * 8),
         "refused as undecodable", error=("garbage.csv", "line 2", "cannot decode")),
    Case("nul-in-utf8", "encodings",
         _writer("nul.csv", _raw_csv(GOOD_LINES[:5] + ["p,h\x00idden,entailment"])),
         "refused: a NUL character in UTF-8 text (corruption or UTF-16)",
         error=("nul.csv", "line 6", "NUL")),
    # ------------------------------------------------------------------ structure
    Case("empty-file", "structure", _writer("empty.csv", b""), "refused",
         error=("empty.csv", "empty")),
    Case("whitespace-file", "structure", _writer("blank.csv", b"\n  \r\n\t\n"), "refused",
         error=("blank.csv", "empty")),
    Case("header-only", "structure", _writer("header.csv", b"premise,hypothesis,label\n"),
         "refused, listing the header", error=("header.csv", "header", "no data rows")),
    Case("ragged-long-row", "structure",
         _writer("ragged.csv", _raw_csv(GOOD_LINES[:40] + ["a,b,c,d"] + GOOD_LINES[40:])),
         "refused, naming the line and both field counts",
         error=("ragged.csv", "line 41", "expected 3 fields", "found 4")),
    Case("ragged-short-row", "structure",
         _writer("short.csv", _raw_csv(GOOD_LINES[:12] + ["only,two"] + GOOD_LINES[12:])),
         "refused, naming the line", error=("short.csv", "line 13", "found 2")),
    Case("unbalanced-quote", "structure",
         _writer("quote.csv", _raw_csv(GOOD_LINES[:20] + ['"never closed,b,c'] + GOOD_LINES[20:])),
         "refused, naming the line where the quote opens",
         error=("quote.csv", "line 21", "never closed", "unbalanced")),
    Case("text-after-quote", "structure",
         _writer("afterquote.csv", _raw_csv(GOOD_LINES[:8] + ['"quoted"tail,b,c'])),
         "refused, naming the line", error=("afterquote.csv", "line 9", "closing quote")),
    Case("embedded-newlines", "structure", _frame_writer("newlines.csv", _embedded_newlines),
         "read; newlines, CR and quotes inside quoted cells are kept exactly"),
    Case("blank-lines", "structure",
         _writer("blanklines.csv", _raw_csv(GOOD_LINES[:10] + ["", ""] + GOOD_LINES[10:])),
         "read; blank lines skipped with a warning", check=_check_blank_lines),
    Case("semicolon-delimiter", "structure",
         _writer("semicolon.csv", _raw_csv([ln.replace(",", ";") for ln in GOOD_LINES])),
         "refused: one column; the message suggests the separator",
         error=("semicolon.csv", "no label column", "separated by ';'")),
    Case("tab-file-named-csv", "structure",
         _writer("tabs.csv", lambda: base_frame().to_csv(index=False, sep="\t").encode()),
         "refused: one column; the message suggests the separator",
         error=("tabs.csv", "separated by '\\t'")),
    Case("duplicate-columns", "structure",
         _writer("dupcols.csv", _raw_csv(["label,hypothesis,label"] + GOOD_LINES[1:])),
         "refused, naming the column and its positions",
         error=("dupcols.csv", "duplicate column names", "'label' at positions 1, 3")),
    Case("missing-label-column", "structure",
         _writer("nolabel.csv", _raw_csv(["premise,hypothesis,verdict_x"] + GOOD_LINES[1:])),
         "refused, listing the columns and the closest name",
         error=("nolabel.csv", "no label column", "'premise', 'hypothesis', 'verdict_x'",
                "--label 'verdict_x'"),
         ui_error=("nolabel.csv", "no label column", "'premise', 'hypothesis', 'verdict_x'")),
    Case("missing-text-column", "structure",
         _writer("notext.csv", _raw_csv(["foo,bar,label"] + GOOD_LINES[1:])),
         "refused, listing the columns",
         error=("notext.csv", "no hypothesis column", "'foo', 'bar', 'label'")),
    Case("named-column-absent", "structure", _frame_writer("named.csv", base_frame),
         "refused, listing the columns and the closest name",
         args=("--label", "lable"), options={"label": "lable"},
         error=("named.csv", "'lable' (--label) not found", "Did you mean 'label'?"),
         ui_error=("named.csv", "'lable' (label=) not found", "Did you mean 'label'?")),
    Case("huge-header-name", "structure", _frame_writer("wide.csv", _long_header),
         "refused; the 1,000,000-character name is shortened in the message",
         error=("wide.csv", "no label column", "1,000,000 characters")),
    Case("duplicate-ids", "structure",
         _frame_writer("dupid.csv", lambda: base_frame().assign(pid=[i // 2 for i in range(N)])),
         "refused, naming the values and their lines", args=("--id", "pid"),
         options={"id": "pid"},
         error=("dupid.csv", "'pid' has duplicate values", "'0' (line 2, line 3)",
                "omit --id"),
         ui_error=("dupid.csv", "'pid' has duplicate values", "'0' (line 2, line 3)")),
    Case("jsonl-bad-line", "structure",
         _writer("bad.jsonl", lambda: _jsonl(_records(base_frame())[:10]) + b"{bad json\n"),
         "refused, naming the line and column", error=("bad.jsonl", "line 11", "invalid JSON")),
    Case("jsonl-array-line", "structure",
         _writer("arr.jsonl", lambda: _jsonl(_records(base_frame())[:4]) + b"[1, 2]\n"),
         "refused, naming the line", error=("arr.jsonl", "line 5", "expected a JSON object")),
    Case("jsonl-null-id", "structure",
         _writer("nullid.jsonl", lambda: _jsonl([{**r, "uid": (None if i == 3 else i)}
                                                 for i, r in enumerate(_records(base_frame()))])),
         "refused, naming the line", args=("--id", "uid"), options={"id": "uid"},
         error=("nullid.jsonl", "missing value", "line 4")),
    Case("json-not-records", "structure",
         _writer("cols.json", lambda: json.dumps(base_frame().to_dict(orient="list")).encode()),
         "refused: an object of columns, not an array of records",
         error=("cols.json", "expected a JSON array of records", "'premise', 'hypothesis'")),
    Case("json-scalar", "structure", _writer("scalar.json", b"42\n"), "refused",
         error=("scalar.json", "expected a JSON array of records", "a number")),
    Case("json-truncated", "structure",
         _writer("trunc.json", lambda: json.dumps(_records(base_frame())).encode()[:500]),
         "refused, naming the line and column", error=("trunc.json", "line 1", "invalid JSON")),
    Case("json-duplicate-keys", "structure",
         _writer("dupkeys.json", b'[{"hypothesis": "a b", "label": "x", "label": "y"}]'),
         "refused, naming the key", error=("dupkeys.json", "duplicate key", "'label'")),
    Case("parquet-nested", "structure", _writer("nested.parquet", _nested_parquet),
         "refused, naming the column, type and record",
         error=("nested.parquet", "'hypothesis'", "nested values", "list", "record 1")),
    Case("parquet-no-rows", "structure", _writer("norows.parquet", _empty_parquet),
         "refused", error=("norows.parquet", "no rows")),
    Case("parquet-corrupt", "structure",
         _writer("corrupt.parquet", b"PAR1" + bytes(range(200)) + b"PAR1"),
         "refused", error=("corrupt.parquet", "not a readable Parquet file")),
    Case("gzip-corrupt", "structure", _writer("bad.csv.gz", b"\x1f\x8b\x08\x00" + b"\x00" * 64),
         "refused", error=("bad.csv.gz", "corrupt or truncated gzip")),
    Case("gzip-truncated", "structure",
         _writer("cut.csv.gz", lambda: gzip.compress(csv_text(base_frame()).encode())[:300]),
         "refused", error=("cut.csv.gz", "corrupt or truncated gzip")),
    Case("jsonl-deep-nesting", "structure", _writer("deep.jsonl", _deep_jsonl(200_000,
                                                                       in_extra_column=False)),
         "refused (200,000 nested arrays), naming the line; no RecursionError",
         error=("deep.jsonl", "line 4", "nested too deeply")),
    Case("jsonl-deep-unused-column", "structure",
         _writer("deepcol.jsonl", _deep_jsonl(3_000, in_extra_column=True)),
         "refused (3,000 levels in a column no role uses), naming the line",
         error=("deepcol.jsonl", "line 4", "nested too deeply")),
    Case("json-deep-nesting", "structure",
         _writer("deep.json", lambda: b'[{"hypothesis": "a b", "label": "x"},\n{"meta": '
                 + b"[" * 200_000 + b"]" * 200_000 + b"}]"),
         "refused, naming the line", error=("deep.json", "line 2", "nested too deeply")),
    Case("jsonl-lone-surrogate", "structure", _writer("surrogate.jsonl", _surrogate_jsonl),
         "refused: a lone surrogate escape, naming the line",
         error=("surrogate.jsonl", "line 7", "lone surrogate", "\\ud800")),
    Case("ids-equal-as-text", "structure",
         _writer("textids.jsonl", lambda: _jsonl(_id_records_equal_as_text())),
         "refused: ids 4 and \"4\" are one id once stored as text; both rows named",
         args=("--id", "uid"), options={"id": "uid"},
         error=("textids.jsonl", "'uid'", "4 (line 5)", "'4' (line 6)", "stored as text")),
    Case("parquet-binary-text", "structure",
         _writer("binary.parquet", _binary_parquet(True)),
         "read; a binary column holding UTF-8 is decoded as text, with a warning",
         check=_check_binary_decoded),
    Case("parquet-binary-not-text", "structure",
         _writer("notutf8.parquet", _binary_parquet(False)),
         "refused, naming the column and record",
         error=("notutf8.parquet", "'hypothesis'", "not UTF-8", "record 7")),
    Case("gzip-valid-misnamed", "structure",
         _writer("plain.csv", lambda: gzip.compress(csv_text(base_frame()).encode())),
         "read: gzip is recognised by its magic number whatever the name"),
    # ------------------------------------------------------------------ content
    Case("all-labels-identical", "content",
         _frame_writer("onelabel.csv", lambda: base_frame().assign(label="entailment")),
         "loaded with a warning; the audit is refused naming the label", stage="audit",
         error=("onelabel.csv", "all 60 audited rows have the label 'entailment'",
                "at least 2 labels", "'label' is the label column")),
    Case("label-with-one-example", "content",
         _frame_writer("solo.csv", _with(label={7: "neutral"})),
         "loaded with a warning; the audit is refused naming the label and its row",
         stage="audit",
         error=("solo.csv", "1 label(s) have a single audited row", "'neutral' (row_id 7)",
                "at least 2 rows per label")),
    Case("ten-thousand-labels-once", "content",
         _frame_writer("manylabels.csv", _many_labels(1)),
         "loaded with a warning; the audit is refused (every label has one row)",
         stage="audit", rows=10_000,
         error=("manylabels.csv", "10,000 distinct values", "limited to 1,000 labels")),
    Case("ten-thousand-labels-twice", "content",
         _frame_writer("manylabels2.csv", _many_labels(2)),
         "loaded; the audit is refused (more than 1,000 labels)", stage="audit", rows=20_000,
         error=("manylabels2.csv", "10,000 distinct values for 20,000", "1,000 labels")),
    Case("nan-or-empty-text", "content", _writer("nantext.jsonl",
                                                 lambda: _jsonl(_nan_text_records())),
         "read; null, NaN, missing and empty texts are excluded ('empty text') and exported",
         check=_check_excluded(4, "empty text")),
    Case("whitespace-only-text", "content",
         _frame_writer("ws.csv", _with(hypothesis={0: "   ", 1: "\t", 2: "\u3000\u00a0"})),
         "read; whitespace-only texts are excluded ('empty text')",
         check=_check_excluded(3, "empty text")),
    Case("empty-and-dash-labels", "content",
         _frame_writer("dash.csv", _with(label={0: "-", 1: "", 2: "   "})),
         "read; '-' and empty labels are excluded and counted by reason",
         check=lambda run, data: _check_reasons(run, {"label '-'": 1, "empty label": 2})),
    Case("numeric-labels", "content",
         _writer("numlabels.jsonl", lambda: _jsonl(_numeric_label_records())),
         "read; labels 0/1 become '0'/'1', original values unchanged",
         check=_check_numeric_labels),
    Case("labels-mixed-types", "content",
         _writer("mixedlabels.jsonl", lambda: _jsonl(_mixed_label_records())),
         "read; true, false, 1 (= 1.0 = \"1\") and 0 are four labels, with a warning",
         check=_check_mixed_labels),
    Case("jsonl-huge-integer", "content",
         _writer("bigint.jsonl", lambda: _jsonl(_huge_int_records())),
         "read; 10**30 in an extra column is kept as its text, with a warning",
         check=_check_huge_int),
    Case("label-whitespace", "content",
         _frame_writer("lspace.csv", _with(label={i: " entailment " for i in range(1, 20, 2)})),
         "read; surrounding whitespace of labels is ignored (the cell keeps it)",
         check=_check_same_label_merged),
    Case("million-char-cell", "content", _frame_writer("long.csv", _long_cell),
         "read and audited; the cell is kept exactly", check=_check_long_cell_exact),
    Case("rtl-and-emoji", "content", _frame_writer("rtl.csv", _rtl_emoji),
         "read and audited; text kept exactly"),
    # ------------------------------------------------------------------ size
    Case("over-size-limit", "size", _frame_writer("big.csv", base_frame),
         "refused before reading (CLI --max-bytes; dashboard: server.maxUploadSize and a "
         "1 GiB ceiling)", args=("--max-bytes", "2K"), options={"max_bytes": 2048},
         error=("big.csv", "over the limit of 2.0 KiB")),
    Case("gzip-bomb", "size", _writer("bomb.csv.gz", _gzip_bomb),
         "refused; decompression stops at the ceiling", args=("--max-bytes", "1M"),
         options={"max_bytes": 1 << 20},
         error=("bomb.csv.gz", "expands past the limit of 1.0 MiB", "stopped reading")),
    Case("too-many-columns", "size", _frame_writer("wide.csv", lambda: pd.concat(
        [base_frame(), pd.DataFrame({f"x{j}": ["0"] * N for j in range(2_001)})], axis=1)),
         "refused before the table is built (more than 2,000 columns; 100,000 columns once "
         "ran past 400 s)",
         error=("wide.csv", "2,004 columns", "more than the 2,000")),
    Case("parquet-dictionary-bomb", "size", _writer("dict.parquet", _parquet_dictionary_bomb),
         "refused while reading: the decoded size is counted batch by batch, not taken from "
         "the footer", args=("--max-bytes", "1M"), options={"max_bytes": 1 << 20},
         error=("dict.parquet", "expands past the limit of 1.0 MiB", "not read")),
    Case("single-line-bomb", "size", _writer("line.csv.gz", _single_line_bomb),
         "refused at the line that passes 64 MiB, while decompressing (a 1 MB .csv.gz of one "
         "600 MB line once grew the reader to 6.4 GB)",
         error=("line.csv.gz", "line 2 is longer than 64.0 MiB", "max-line-bytes")),
    Case("parquet-categorical-bomb", "size", _writer("cat.parquet", _categorical_parquet_bomb),
         "refused while reading: a dictionary<string> column's decoded size counts too",
         args=("--max-bytes", "1M"), options={"max_bytes": 1 << 20},
         error=("cat.parquet", "expands past the limit of 1.0 MiB")),
    Case("jsonl-bad-byte-late", "encodings", _writer("late.jsonl", _jsonl_bad_byte_late),
         "refused: the streamed reader names the line and byte offset of the first "
         "undecodable byte", error=("late.jsonl", "line 41", "byte offset", "cannot decode")),
    # ------------------------------------------------------------------ embeddings
    Case("embeddings-pickled-object", "embeddings", _with_embeddings(write_pickle_npy),
         "refused from the header; never unpickled", stage="audit",
         args=("--representation", "precomputed:{dir}/emb.npy"),
         error=("emb.npy", "Python objects", "refused", "unpickling")),
    Case("embeddings-pickled-npz", "embeddings", _with_embeddings(_npz_object),
         "refused; never unpickled", stage="audit",
         args=("--representation", "precomputed:{dir}/emb.npz"),
         error=("emb.npz", "Python objects", "refused")),
    Case("embeddings-raw-pickle", "embeddings", _with_embeddings(_pickle_file),
         "refused: not a .npy file; never unpickled", stage="audit",
         args=("--representation", "precomputed:{dir}/emb.npy"),
         error=("emb.npy", "not a valid .npy file")),
    Case("embeddings-wrong-rows", "embeddings", _with_embeddings(_npy(_features(N - 1))),
         "refused, giving both counts", stage="audit",
         args=("--representation", "precomputed:{dir}/emb.npy"),
         error=("emb.npy", "expected 60 embedding rows", "found 59")),
    Case("embeddings-nan", "embeddings", _with_embeddings(_npy(_nan_features())),
         "refused, naming the row", stage="audit",
         args=("--representation", "precomputed:{dir}/emb.npy"),
         error=("emb.npy", "non-finite", "row 5")),
    Case("embeddings-inf", "embeddings", _with_embeddings(_npy(_inf_features())),
         "refused, naming the row", stage="audit",
         args=("--representation", "precomputed:{dir}/emb.npy"),
         error=("emb.npy", "non-finite", "row 7")),
    Case("embeddings-strings", "embeddings",
         _with_embeddings(_npy(np.array([["a", "b"]] * N))),
         "refused, naming the dtype", stage="audit",
         args=("--representation", "precomputed:{dir}/emb.npy"),
         error=("emb.npy", "expected numbers", "<U1")),
    Case("embeddings-1d", "embeddings", _with_embeddings(_npy(np.arange(N, dtype=np.float32))),
         "refused, suggesting reshape", stage="audit",
         args=("--representation", "precomputed:{dir}/emb.npy"),
         error=("emb.npy", "expected a 2-D array", "(60,)", "reshape")),
    Case("embeddings-wrong-suffix", "embeddings",
         _with_embeddings(lambda folder: (folder / "emb.txt").write_text("1 2 3")),
         "refused", stage="audit", args=("--representation", "precomputed:{dir}/emb.txt"),
         error=("expected a .npy, .npz, .parquet file",)),
    Case("embeddings-missing-file", "embeddings", _with_embeddings(lambda folder: None),
         "refused", stage="audit", args=("--representation", "precomputed:{dir}/nope.npy"),
         error=("embedding file not found", "nope.npy")),
    # ------------------------------------------- datasets folders and shards (a path)
    Case("datasets-folder-absolute-name", "folders",
         _hf_writer(lambda folder: [str(folder / "outside.arrow")]),
         "refused: state.json names a file outside the folder (it was read: any Arrow file "
         "the server could read was served)",
         error=("ds:", "state.json names the data file", "outside.arrow",
                "not inside the folder")),
    Case("datasets-folder-dotdot-name", "folders", _hf_writer(lambda f: ["../outside.arrow"]),
         "refused: a '..' name leaves the folder",
         error=("ds:", "state.json names the data file '../outside.arrow'",
                "not inside the folder")),
    Case("datasets-folder-link-out", "folders", _hf_writer(_hf_link_out),
         "refused: a symbolic link leading out of the folder is not followed",
         error=("ds:", "'linked.arrow'", "symbolic link that leads out")),
    Case("datasets-folder-file-named-300-times", "folders",
         _hf_writer(lambda f: ["data-00000-of-00001.arrow"] * 300),
         "refused, naming the file and the count (it became 300 times the rows, past the "
         "size guard, which counted the file once)",
         error=("ds:", "'data-00000-of-00001.arrow' 300 times", "each must be named once")),
    Case("datasets-dict-split-named-200-times", "folders", _hf_dict_writer(["train"] * 200),
         "refused (a split listed 200 times turned 60 rows into 12,000, silently)",
         error=("dd:", "dataset_dict.json names the split 'train' 200 times")),
    Case("datasets-dict-split-outside", "folders", _hf_dict_writer(["train", "../elsewhere"]),
         "refused: a split must be a folder inside",
         error=("dd:", "the split '../elsewhere'", "not inside the folder")),
    Case("datasets-state-nested-1000-deep", "folders",
         _hf_writer(state_text="[" * 1000 + "]" * 1000),
         "refused as damaged (once: RecursionError)",
         error=("ds:", "state.json is damaged", "nested deeper than 64 levels")),
    Case("datasets-info-not-an-object", "folders", _hf_writer(info=[1, 2]),
         "refused (once: 'unexpected AttributeError')",
         error=("ds:", "dataset_info.json is not a datasets info file", "found list")),
    Case("datasets-arrow-body-damaged", "folders", _damaged_arrow_body,
         "refused, naming the file and batch; no byte of it in the message (once: binary "
         "garbage in an 'unexpected ArrowException', exit 1)",
         error=("ds:", "'data-00000-of-00001.arrow' is damaged", "record batch 1")),
    Case("glob-folder-linked-to-itself", "folders",
         _shards_writer(_self_links, "**/*.csv"),
         "read: links to folders are not followed, so the shard is read once (once: the "
         "glob followed the links without end and the CLI hung with no output)"),
    Case("shard-link-out", "folders", _shards_writer(_shard_link_out, "*.csv"),
         "refused: a shard that links out of the folder is not followed",
         error=("'b.csv' is a symbolic link to a file outside",)),
    Case("shards-label-int-and-text", "folders", _shards_writer(_label_types_differ),
         "refused: integer labels in one shard and text in another (once: merged, silently, "
         "into new classes)",
         error=("shards:", "column 'label' holds numbers in shard 'part-0.parquet' but text "
                "in shard 'part-1.parquet'")),
    Case("parquet-cell-over-the-limit", "size", _writer("cell.parquet", _big_parquet_cell),
         "refused at the cell limit, naming the record and column (once: Parquet cells had "
         "no limit, and 3 cells of 300 MB in a 30 KB file grew the server past 4.4 GB)",
         error=("cell.parquet", "record 4, column 'premise'", "a cell of 65.0 MiB",
                "over the limit of 64.0 MiB a cell")),
]

#: Parameter cases: CLI flags, the AuditConfig keywords the dashboard passes, and fragments
#: expected in both messages besides the parameter's name (the CLI names the option, e.g.
#: ``--tau``; the Python message the keyword, e.g. ``tau``).
PARAMETER_CASES = [
    ("target-size-equals-data", ("--target-size", str(N)), {"target_size": N},
     (f"smaller than the {N} filterable rows", f"got {N}")),
    ("target-size-over-data", ("--target-size", "500"), {"target_size": 500},
     (f"smaller than the {N} filterable rows", "got 500")),
    ("train-size-whole-set", ("--train-size", str(N)), {"train_size": N},
     ("t < |S|", f"train_size={N}")),
    ("slice-size-zero", ("--slice-size", "0"), {"slice_size": 0},
     ("int >= 1 (rows)", "got 0")),
    ("tau-over-one", ("--tau", "1.5"), {"tau": 1.5}, ("[0, 1]", "1.5")),
    ("tau-negative", ("--tau", "-0.1"), {"tau": -0.1}, ("[0, 1]", "-0.1")),
    ("partitions-zero", ("--partitions", "0"), {"n_partitions": 0}, ("[1, 512]", "0")),
    ("seed-negative", ("--seed", "-1"), {"random_state": -1}, ("expected", "-1")),
]

#: Argument-parsing errors: flags, fragment of argparse's error line.
ARGPARSE_CASES = [
    ("seed-as-text", ("--seed", "abc"), ("argument --seed", "expected a whole number, got 'abc'")),
    ("tau-as-text", ("--tau", "high"), ("argument --tau", "expected a number, got 'high'")),
    ("target-as-text", ("--target-size", "half"), ("argument --target-size", "'half'")),
    ("target-fraction-over-one", ("--target-size", "150%"), ("--target-size", "between 0 and 1")),
    ("representation-unknown", ("--representation", "magic"),
     ("argument --representation", "'magic'")),
    ("max-bytes-bad", ("--max-bytes", "lots"), ("argument --max-bytes", "'lots'")),
    ("strategy-unknown", ("--strategy", "best"),
     ("argument --strategy", "expected one of greedy_slicing, slice_sampling, greedy, got 'best'")),
    ("measure-unknown", ("--measures", "cues,magic"), ("argument --measures", "magic")),
]

#: Python-API parameter cases of the kinds argparse catches on the command line (the
#: dashboard's widgets only produce numbers): keywords, exception type, fragments.
API_TYPE_CASES = [
    ("seed-as-text", {"random_state": "abc"}, TypeError, ("random_state", "'abc'")),
    ("tau-as-text", {"tau": "high"}, TypeError, ("tau", "'high'")),
    ("target-as-text", {"target_size": "half"}, TypeError, ("target_size", "'half'")),
    ("target-fraction-over-one", {"target_size": 1.5}, ValueError, ("target_size", "(0, 1)")),
    ("representation-unknown", {"representation": "magic"}, ValueError,
     ("representation", "'magic'")),
    ("measure-unknown", {"measures": ("cues", "magic")}, ValueError, ("measures", "magic")),
]

#: Things the CLI refuses about paths: (id, argv after ``run``, fragments).
PATH_CASES = [
    ("data-missing", ["{dir}/nope.csv", "--out", "{dir}/runs/r"], ("no such file", "nope.csv")),
    # a folder is read as shards or a datasets folder (test_sharded_inputs.py); one holding
    # neither is refused, saying what was expected
    ("data-is-folder-without-data", ["{empty}", "--out", "{dir}/runs/r"],
     ("holds no dataset", "expected shard files", "Hugging Face datasets folder")),
    ("data-fifo", ["{fifo}", "--out", "{dir}/runs/r"],
     ("DATA:", "pipe.csv", "is a FIFO (named pipe), not a regular file")),
    ("data-char-device", ["/dev/zero", "--out", "{dir}/runs/r"],
     ("DATA: /dev/zero is a character device, not a regular file",)),
    ("out-dotdot", ["{data}", "--out", "{dir}/runs/.."], ("--out", "expected a folder name")),
    ("out-hidden", ["{data}", "--out", "{dir}/runs/.hidden"], ("--out", "not a safe run folder")),
    ("out-option-like", ["{data}", "--out", "{dir}/runs/-rf"], ("--out", "not a safe run folder")),
    ("out-exists", ["{data}", "--out", "{dir}"], ("--out", "already exists", "--overwrite")),
]

#: Hostile run names given to run_audit (the dashboard's Run-name field): each must give a
#: folder directly inside the runs root.
RUN_NAMES = ["../../escape", "/etc/passwd", "a/../../b", "..\\..\\win", "-rf --no-preserve-root",
             "name with spaces\nand newline", "~/.bashrc", "C:\\Windows\\x", "\u202eexe.txt"]
#: Names with nothing usable left: refused.
BAD_RUN_NAMES = ["..", "../", "/", "", "  "]


def read_csv_rows(path: Path, encoding: str = "utf-8") -> list[list[str]]:
    """Rows of a CSV file parsed with Python's csv module (RFC 4180), header included."""
    csv.field_size_limit(2**31 - 1)  # million-character cells
    with open(path, newline="", encoding=encoding) as fh:
        return [row for row in csv.reader(fh) if row]


# ------------------------------------------------------------------ damaged run folders


def _nested(depth: int) -> Any:
    """A JSON value nested ``depth`` levels (built without recursion)."""
    value: Any = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


def _summary_with(**changes: Any) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
        summary.update(changes)
        text = json.dumps(summary) if "deep" not in changes else (
            json.dumps({k: v for k, v in summary.items() if k != "deep"})[:-1]
            + ', "deep": ' + '{"k": ' * changes["deep"] + '"x"' + "}" * changes["deep"] + "}")
        (run / "summary.json").write_text(text, encoding="utf-8")

    return damage


def _truncate(name: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        path = run / name
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    return damage


def _zero_middle(name: str, span: int = 2000) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        path = run / name
        body = bytearray(path.read_bytes())
        middle = len(body) // 3
        body[middle:middle + span] = bytes(min(span, len(body) - middle))
        path.write_bytes(bytes(body))

    return damage


def _write(name: str, content: bytes) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / name).write_bytes(content)

    return damage


@dataclass(frozen=True)
class RunCase:
    """A complete run folder damaged by ``damage``: ``list_runs`` lists it as damaged with
    ``listed`` in its reason, ``load_run`` (the pages, the CLI) refuses it naming the run,
    and every page stays up with it in the runs root (``test_run_folder_cases.py``)."""

    id: str
    damage: Callable[[Path], None]
    expect: str
    listed: tuple[str, ...]


RUN_CASES: list[RunCase] = [
    RunCase("summary-extra-key-1000-deep", _summary_with(deep=1000),
            "listed as damaged (a 15 KB file once raised RecursionError in list_runs and took "
            "every page down)", ("summary.json is damaged", "nested deeper than 64 levels")),
    RunCase("summary-extra-key-100-deep", _summary_with(deep=100),
            "listed as damaged: parsed, but past the 64-level limit",
            ("summary.json is damaged", "nested deeper than 64 levels")),
    RunCase("summary-random-bytes", _write("summary.json", bytes(range(256)) * 4),
            "listed as damaged", ("summary.json is damaged", "not UTF-8")),
    RunCase("summary-not-json", _write("summary.json", b'{"format_version": 1,'),
            "listed as damaged", ("summary.json is damaged", "not valid JSON")),
    RunCase("summary-a-list", _write("summary.json", b"[1, 2]"),
            "listed as damaged", ("summary.json: expected a JSON object, found list",)),
    RunCase("summary-parameters-wrong-type", _summary_with(parameters=[1, 2]),
            "listed as damaged", ("summary.json", "parameters")),
    RunCase("summary-sizes-wrong-type", _summary_with(sizes="many"),
            "listed as damaged", ("summary.json", "sizes")),
    RunCase("summary-huge-integer", _write("summary.json", b'{"format_version": ' + b"9" * 5000
                                           + b"}"),
            "listed as damaged (an integer of 5,000 digits)", ("summary.json is damaged",)),
    RunCase("dataset-parquet-truncated", _truncate("dataset.parquet"),
            "listed as damaged (once listed as healthy; Explore and Cues then showed pyarrow's "
            "message with the server's path)", ("dataset.parquet is unreadable",)),
    RunCase("scores-parquet-truncated", _truncate("scores.parquet"),
            "listed as damaged", ("scores.parquet is unreadable",)),
    RunCase("dataset-parquet-damaged-page", _zero_middle("dataset.parquet"),
            "listed as ok (its footer is sound; listing reads no data); Explore and the "
            "Report's sections that read the rows each say the file cannot be read, with no "
            "server path, and the rest of the pages stand", ()),
    RunCase("baselines-json-deep", _write("baselines.json", b"[" * 5000 + b"]" * 5000),
            "the run opens; the Report's baselines section says the file is damaged",
            ()),
]
