"""Every caveat travels with its number (issue 64, item 4): a warning a measure writes into
``summary.json`` is printed beside that measure's figures in the HTML report, the Markdown
card, the Report page and the CLI summary, all from ``registry.measure_caveats``. A toy
measure plants one."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from apptest_support import goto, new_app, open_run, plain

from aflite_core.cli import main
from aflite_core.measures import registry
from aflite_core.measures.registry import Measure, MeasureResult
from aflite_core.report._card import markdown_card
from aflite_core.runs.folder import load_run

SAMPLE = Path(__file__).resolve().parents[2] / "aflite_core" / "data" / "snli_sample.csv"
PLANTED = "PLANTED CAVEAT: this toy figure means nothing"


def _toy(ctx) -> MeasureResult:
    table = pd.DataFrame({"scope": ["before", "after"], "rows": [len(ctx.keep),
                                                                 int(ctx.keep.sum())]})
    return MeasureResult(tables={"toy.parquet": table}, info={"warnings": [PLANTED]})


def test_a_measures_caveat_reaches_all_four_places(tmp_path, monkeypatch, capsys):
    toy = Measure(name="toy", label="Toy rows", compute=_toy, files=("toy.parquet",),
                  default=False, order=98,
                  tables=lambda run: {"Toy rows": run.read_parquet("toy.parquet")})
    monkeypatch.setattr(registry, "_EXTRA", {})
    registry.register(toy)
    data = tmp_path / "small.csv"
    pd.read_csv(SAMPLE).head(500).to_csv(data, index=False)
    root = tmp_path / "runs"
    code = main(["run", str(data), "--out", str(root / "r"), "--measures", "toy",
                 "--partitions", "8", "--target-size", "300"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"caveat (toy): {PLANTED}" in err  # 1. the CLI summary
    run = load_run(root / "r")
    assert registry.measure_caveats(run, "toy") == [PLANTED]
    html = (root / "r" / "report.html").read_text(encoding="utf-8")  # 2. the HTML report
    section = html[html.index('<section id="toy">'):]
    section = section[: section.index("</section>")]
    assert PLANTED in section
    card = markdown_card(run)  # 3. the card: its other caveats (no section of its own there)
    assert f"- toy: {PLANTED}" in card.splitlines()
    monkeypatch.setenv("AFLITE_RUNS_DIR", str(root))
    at = new_app(autoload=False)  # 4. the Report page, in the measure's section
    open_run(at, root / "r")
    goto(at, "report")
    assert not at.exception, [e.message for e in at.exception]
    assert any(PLANTED in plain(w.value) for w in at.warning)
