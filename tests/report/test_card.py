"""The card to hand on (issue 62, item 6): ``report RUN --format md`` writes GitHub Markdown
of at most 150 lines, no HTML and no path of this machine, with the headline figures and
their caveats, every measure's warnings beside its figures, and the review decisions."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from aflite_core.cli import main
from aflite_core.io.datasets import load_dataset
from aflite_core.pipeline import AuditConfig, run_audit
from aflite_core.report._card import MAX_LINES, markdown_card
from aflite_core.runs.folder import load_run

SAMPLE = Path(__file__).resolve().parents[2] / "aflite_core" / "data" / "snli_sample.csv"


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("card")
    data = folder / "small.csv"
    pd.read_csv(SAMPLE).head(900).to_csv(data, index=False)
    config = AuditConfig(target_size=600, n_partitions=8, random_state=0, report=False,
                         measures=("cues", "slices", "baselines", "label_issues"),
                         measure_params={"baselines": {"n_random_draws": 1, "n_splits": 2}})
    return run_audit(load_dataset(data), config, runs_root=folder / "runs", name="r")


def test_the_card_is_short_plain_markdown_with_its_caveats(audited, tmp_path, capsys):
    run_dir = tmp_path / "runs" / "r"
    shutil.copytree(audited, run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["measures"]["cues"].setdefault("warnings", []).append("PLANTED CUE CAVEAT")
    (run_dir / "summary.json").write_text(json.dumps(summary))
    run = load_run(run_dir)
    issues = run.read_parquet("label_issues.parquet")
    flagged = issues[issues["is_label_issue"]].head(3)
    row = flagged.iloc[0]
    run.decide([row["row_id"]], "relabel", label=row["suggested_label"], reviewer="ana")
    run.decide([flagged.iloc[1]["row_id"]], "keep", reviewer="ana")
    out = tmp_path / "CARD.md"
    assert main(["report", str(run_dir), "--out", str(out)]) == 0  # .md: the card
    text = out.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES
    assert not re.search(r"<[a-zA-Z/][^>]*>", text), "no HTML"
    assert str(tmp_path) not in text and "/tmp" not in text and "file://" not in text
    assert lines[0] == "# Dataset audit: small.csv"
    for heading in ("## What AFLite kept", "## Bias removed beyond size",
                    "## Top lexical cues (all rows)", "## Slices AFLite removed most",
                    "## Label issues", "## Review decisions", "## The curated dataset"):
        assert heading in lines, heading
    # GitHub tables: a header, a separator of the same width, rows of the same width
    header = lines.index("| model | bias removed beyond size | reading |")
    assert lines[header + 1] == "|---|---|---|"
    assert "- Caveat: PLANTED CUE CAVEAT" in lines  # a measure's warning beside its figures
    cues_at, slices_at = lines.index("## Top lexical cues (all rows)"), \
        lines.index("## Slices AFLite removed most")
    assert cues_at < lines.index("- Caveat: PLANTED CUE CAVEAT") < slices_at
    assert "2 rows reviewed by ana." in lines
    assert any(line.startswith("Of 2 reviewed rows flagged as label issues, 1 were "
                               "relabelled (observed precision of the flags 0.50, 95 % "
                               "interval 0.09-0.91), 1 of them to the suggested label.")
               for line in lines)
    assert markdown_card(run_dir) == text


def test_a_card_of_a_run_without_measures_or_decisions(audited, tmp_path):
    text = markdown_card(audited)
    assert "No row has been reviewed yet." in text
    assert len(text.splitlines()) <= MAX_LINES


def test_every_bulk_drop_states_the_hardness_it_gives_up(audited, tmp_path, capsys):
    """Issue 62, item 5: ``retained_clean`` and the curated export with ``--apply-filter``
    state their hypothesis-only accuracy beyond a label-matched random subset of their size
    beside the retained set's: in summary.json, the Report's tables, the card and the CLI."""
    from aflite_core.measures import HARDNESS_TITLE, registry
    from aflite_core.runs import curated_hardness

    run_dir = tmp_path / "runs" / "r"
    shutil.copytree(audited, run_dir)
    run = load_run(run_dir)
    block = run.measures["label_issues"]["bulk_hardness"]
    kept, clean = block["retained"], block["retained_clean"]
    flagged_retained = run.read_parquet("label_issues.parquet").query(
        "is_label_issue and status == 'retained'")
    # the same rows, less the flagged retained ones (every scored row is in the sample here)
    assert kept["n_rows"] - clean["n_rows"] == len(flagged_retained) > 0
    for part in (kept, clean):
        assert part["beyond_random_pp"] == pytest.approx(
            100 * (part["random_accuracy"] - part["accuracy"]))
    table = registry.get("label_issues").before_after(run)[HARDNESS_TITLE]
    assert list(table["rows"]) == [kept["n_rows"], clean["n_rows"]]
    card = markdown_card(run_dir)
    assert f"{HARDNESS_TITLE}:" in card and f"| {clean['n_rows']} |" in card
    assert main(["export", str(run_dir), "--what", "retained_clean",
                 "--out", str(tmp_path / "clean.csv")]) == 0
    err = capsys.readouterr().err
    assert f"{clean['beyond_random_pp']:+.1f} pp beyond" in err
    assert f"the retained set {kept['beyond_random_pp']:+.1f} pp" in err
    # the curated export with the filter applied: the reviewers' drops leave it
    drops = flagged_retained["row_id"].head(5).tolist()
    run.decide(drops, "drop", reviewer="ana")
    figures = curated_hardness(run_dir)
    assert figures["n_decisions"] == len(drops)
    assert figures["curated_apply_filter"]["n_rows"] == figures["retained"]["n_rows"] - 5
    assert main(["export", str(run_dir), "--what", "curated", "--apply-filter",
                 "--out", str(tmp_path / "curated.csv")]) == 0
    assert "hardness: the" in capsys.readouterr().err
    assert "curated --apply-filter" in markdown_card(run_dir)
    # kept in summary.json by the export, and shown by the Report's label-issues tables
    recorded = load_run(run_dir).summary["curated_exports"]["apply_filter"]
    assert recorded["curated_apply_filter"] == figures["curated_apply_filter"]
    table = registry.get("label_issues").before_after(load_run(run_dir))[HARDNESS_TITLE]
    assert len(table) == 3 and table["set"].iloc[2].startswith("curated --apply-filter")
