"""HTML report: self-contained, expected sections, hostile text escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from aflite_core.report.html import SECTIONS, build_report, plotly_js, section_ids, write_report
from aflite_core.runs._writer import write_run

HOSTILE = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def hostile_frame(n: int = 30) -> pd.DataFrame:
    labels = np.array(["entailment", "contradiction", f"bad{HOSTILE}"])[np.arange(n) % 3]
    hyps = [f"hypothesis number {i}" for i in range(n)]
    hyps[1] = HOSTILE
    hyps[27] = "x" * 5000  # removed, highest predictability of its label: always shown
    return pd.DataFrame(
        {"premise": [f"premise {i} & <b>bold</b>" for i in range(n)], "hypothesis": hyps,
         "label": labels, f"col{HOSTILE}": "v"},
        index=pd.Index(np.arange(n, dtype=np.int64), name="row_id"),
    )


def scores_for(frame: pd.DataFrame) -> pd.DataFrame:
    n = len(frame)
    status = np.where(np.arange(n) % 2 == 1, "removed", "retained").astype(object)
    status[-1] = "excluded"
    pred = np.where(status == "excluded", np.nan, np.linspace(0.2, 1.0, n))
    return pd.DataFrame({
        "row_id": frame.index.to_numpy(), "status": status, "predictability": pred,
        "removal_round": np.where(status == "removed", np.arange(n) % 3, -1).astype(np.int64),
        "label": frame["label"].to_numpy(),
    })


def summary_for(frame: pd.DataFrame) -> dict:
    return {
        "parameters": {"tau": 0.75, "n_partitions": 8, "strategy": "greedy_slicing"},
        "input": {"name": f"data{HOSTILE}.csv", "sha256": "ab" * 32, "n_rows": len(frame),
                  "columns": {"premise": "premise", "hypothesis": "hypothesis",
                              "label": "label"}},
        "versions": {"python": "3.x"},
        "history": [{"round": 0, "size": 29, "removed": 8},
                    {"round": 1, "size": 21, "removed": 6}],
        "measures": {"knn": {"status": "error", "error": f"ValueError: {HOSTILE}"}},
    }


# as the core stores it: each scope in the cue table's default ranking
CUES = pd.DataFrame({
    "scope": ["full", "full", "retained", "retained"],
    "feature_type": ["word", "word", "word", "word"],
    "feature": ["not", HOSTILE, "not", HOSTILE],
    "majority_label": ["contradiction"] * 4,
    "n_train": [40, 10, 20, 5],
    "cueness": [9.0, 3.0, 2.0, 1.0],
    "lmi": [2.0, 1.0, 0.1, 0.5],
})
KNN = pd.DataFrame({
    "scope": ["before", "before", "after", "after"], "class": ["all"] * 4,
    "relation": ["same_class"] * 4, "k": [1, 5, 1, 5],
    "mean_distance": [0.2, 0.3, 0.4, 0.5],
})


@pytest.fixture
def bare_run(tmp_path):
    frame = hostile_frame()
    return write_run(tmp_path / "runs", "bare", frame=frame, scores=scores_for(frame),
                     summary=summary_for(frame))


@pytest.fixture
def full_run(tmp_path):
    frame = hostile_frame()
    return write_run(
        tmp_path / "runs", "full", frame=frame, scores=scores_for(frame),
        summary=summary_for(frame),
        tables={"cues.parquet": CUES, "knn.parquet": KNN},
        json_files={
            "baselines.json": {"results": [
                {"baseline": "hypothesis-only", "subset": "full", "accuracy": 0.7},
                {"baseline": "hypothesis-only", "subset": "retained", "accuracy": 0.4},
                {"baseline": "hypothesis-only", "subset": "random", "accuracy": 0.69}]},
            "duplicates.json": {"params": {"threshold": 0.95}, "summary": [
                {"scope": "before", "kind": "exact", "n_rows": 29, "n_duplicate_rows": 3,
                 "share": 3 / 29},
                {"scope": "after", "kind": "exact", "n_rows": 15, "n_duplicate_rows": 0,
                 "share": 0.0}]},
            "inoculation.json": {"outcome": 1, "outcome_label": "dataset weakness",
                                 "explanation": f"gap closed {HOSTILE}", "summary": [
                                     {"n": 0, "original_mean": 0.9, "challenge_mean": 0.5},
                                     {"n": 50, "original_mean": 0.89, "challenge_mean": 0.85}]},
        },
    )


def without_plotly(text: str) -> str:
    bundle = f"<script>{plotly_js()}</script>"
    assert text.count(bundle) == 1, "plotly.js must be inlined exactly once"
    return text.replace(bundle, "")


class _TagCollector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def test_report_is_self_contained(bare_run):
    text = build_report(bare_run)
    rest = without_plotly(text)
    parser = _TagCollector()
    parser.feed(rest)
    assert not [a for t, a in parser.tags if t == "script" and "src" in a]
    assert not [t for t, _ in parser.tags if t in ("link", "iframe", "img")]
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", rest)


def test_hostile_text_is_escaped_everywhere(full_run):
    text = build_report(full_run)
    assert HOSTILE not in text
    rest = without_plotly(text)
    # hypothesis sample, label heading, column name, cue table, file name, error message,
    # inoculation explanation
    assert rest.count(ESCAPED) >= 6
    assert "&lt;b&gt;bold&lt;/b&gt;" in rest and "<b>bold</b>" not in rest
    # the only <script> tags are the Plotly bundle and the chart bootstraps
    parser = _TagCollector()
    parser.feed(rest)
    assert parser.scripts and all(
        body.strip().startswith("window.PLOTLYENV") for body in parser.scripts
    )


def test_all_sections_present_and_absent_ones_say_so(bare_run):
    text = build_report(bare_run)
    assert section_ids(text) == [a for a, _ in SECTIONS]
    for what in ("Cue statistics", "KNN distances", "Baselines", "Duplicate detection",
                 "Inoculation"):
        assert re.search(rf'class="absent">{what} (was|were) not computed', text), what


def test_sections_with_artifacts(full_run):
    text = without_plotly(build_report(full_run))
    cues = text[text.index('<section id="cues">'):text.index('<section id="knn">')]
    assert "cueness before" in cues and "cueness after" in cues
    assert cues.index("<td class=\"text\">not</td>") < cues.index(ESCAPED)  # stored ranking kept
    knn = text[text.index('<section id="knn">'):text.index('<section id="baselines">')]
    assert "plotly-graph-div" in knn and "same_class" in knn
    baselines = text[text.index('<section id="baselines">'):text.index('<section id="dupl')]
    assert "hypothesis-only" in baselines and "random" in baselines
    dup = text[text.index('<section id="duplicates">'):text.index('<section id="inoc')]
    assert "plotly-graph-div" in dup and "n_duplicate_rows" in dup and "0.95" in dup
    inoc = text[text.index('<section id="inoculation">'):text.index('<section id="samples')]
    assert "dataset weakness" in inoc and "plotly-graph-div" in inoc
    assert f"gap closed {ESCAPED}" in inoc
    rounds = text[text.index('<section id="rounds">'):text.index('<section id="predict')]
    assert "plotly-graph-div" in rounds and "<td class=\"num\">21</td>" in rounds


def test_samples_per_label(bare_run):
    text = without_plotly(build_report(bare_run, n_samples=2))
    samples = text[text.index('<section id="samples">'):]
    for label in ("entailment", "contradiction", f"bad{ESCAPED}"):
        assert f"<h3>Label {label}</h3>" in samples
    assert samples.count("<h4>Removed</h4>") == 3 and samples.count("<h4>Retained</h4>") == 3
    # the removed entailment rows with the highest predictability come first (rows 27, 21)
    ent = samples[samples.index("<h3>Label entailment</h3>"):]
    assert ent.index('<td class="num">27</td>') < ent.index('<td class="num">21</td>')
    assert "x" * 400 not in samples and "x" * 399 + "…" in samples  # long cell shortened


def test_measure_error_is_shown(bare_run):
    text = without_plotly(build_report(bare_run))
    prov = text[text.index('<section id="provenance">'):text.index('<section id="sizes">')]
    assert "error" in prov and f"ValueError: {ESCAPED}" in prov


def test_write_report(tmp_path, bare_run):
    out = tmp_path / "report.html"
    write_report(bare_run, out)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    with pytest.raises(FileExistsError):
        write_report(bare_run, out)
    with pytest.raises(ValueError, match="n_samples"):
        build_report(bare_run, n_samples=0)


def test_report_is_not_written_into_a_run(bare_run):
    with pytest.raises(ValueError, match="never modified"):
        write_report(bare_run, bare_run / "report2.html")
    assert not (bare_run / "report2.html").exists()


def test_charts_keep_their_colours_and_ticks_when_built_inside_streamlit(full_run,
                                                                          monkeypatch):
    """The dashboard builds reports in a Streamlit process, whose Plotly template has
    placeholder colours (#000001...) that render black in a standalone file."""
    import plotly.io as pio
    import streamlit.elements.plotly_chart  # noqa: F401 - installs Streamlit's template

    from aflite_core.report import html as report_html

    if pio.templates.default != "streamlit":
        monkeypatch.setattr(pio.templates, "default", "streamlit")
    seen = []
    draw = report_html._Figures.__call__

    def spy(self, fig, height=360):
        seen.append(fig)
        return draw(self, fig, height)

    monkeypatch.setattr(report_html._Figures, "__call__", spy)
    build_report(full_run)
    titles = {fig.layout.title.text: fig for fig in seen}
    for fig in seen:
        colorway = fig.layout.colorway or fig.layout.template.layout.colorway
        assert colorway and not any(c.startswith("#0000") for c in colorway), colorway
    baselines = next(f for t, f in titles.items() if t and t.startswith("Baselines"))
    colours = [trace.marker.color for trace in baselines.data]
    assert len(set(colours)) == 3 and None not in colours  # full / retained / random differ
    knn = next(f for t, f in titles.items() if t and t.startswith("Mean cosine distance"))
    assert knn.layout.xaxis.type == "log"
    assert list(knn.layout.xaxis.tickvals) == [1, 5]  # ticks at the k values, not 8 9 1 2
    assert all(trace.line.color for trace in knn.data)
    assert all(fig.layout.xaxis.automargin and fig.layout.yaxis.automargin for fig in seen)


def per_row_tables(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """A planted data map, PVI table and map of every filtered row (strings in every row)."""
    rng = np.random.default_rng(3)
    scores = scores_for(frame)
    rows = scores[scores["status"] != "excluded"].reset_index(drop=True)
    n = len(rows)
    regions = np.array(["easy", "ambiguous", "hard", "medium"])[np.arange(n) % 4]
    common = {"row_id": rows["row_id"], "status": rows["status"], "label": rows["label"]}
    return {
        "datamap.parquet": pd.DataFrame({
            **common, "confidence": rng.uniform(0, 1, n), "variability": rng.uniform(0, .3, n),
            "correctness": rng.uniform(0, 1, n), "n_heldout": np.full(n, 3),
            "label_quality": rng.uniform(0, 1, n), "region": regions}),
        "pvi.parquet": pd.DataFrame({
            **common, "pvi": rng.normal(size=n), "p_label": rng.uniform(0, 1, n),
            "p_prior": np.full(n, 1 / 3), "predicted": rows["label"],
            "correct": rng.uniform(0, 1, n) > 0.5, "fold": np.arange(n) % 5}),
        "projection.parquet": pd.DataFrame({
            "row_id": frame.index.to_numpy(), "x": rng.normal(size=len(frame)),
            "y": rng.normal(size=len(frame)), "method": "umap",
            "region": np.arange(len(frame)) % 2}),
    }


def test_the_report_reads_columns_as_codes_and_keeps_no_row_table(tmp_path):
    """The report of a run whose per-row tables are read as codes, a few columns at a time,
    is the report drawn from the whole tables as strings (the dashboard's run, which has
    read them already); and it keeps none of them read (a run of 5M rows), but leaves the
    caller's."""
    from aflite_core.runs.folder import load_run

    frame = hostile_frame()
    path = write_run(tmp_path / "runs", "rows", frame=frame, scores=scores_for(frame),
                     summary=summary_for(frame), tables=per_row_tables(frame))
    uuid = re.compile(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")
    fresh = load_run(path)
    by_codes = uuid.sub("", build_report(fresh))
    assert not {"scores", "projection", "frame"} & set(fresh.__dict__)
    read = load_run(path)
    read.scores, read.projection  # noqa: B018 - the dashboard's run: tables read whole
    assert uuid.sub("", build_report(read)) == by_codes
    assert {"scores", "projection"} <= set(read.__dict__)
    for section in ("datamap", "pvi", "projection", "predictability", "samples"):
        body = by_codes[by_codes.index(f'<section id="{section}">'):]
        body = body[:body.index("</section>")]
        assert "could not be drawn" not in body and 'class="absent"' not in body, section
