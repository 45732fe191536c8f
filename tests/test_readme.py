"""The README's Python example runs as written (with the runs folder in a temporary place)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Python (notebooks)"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert 'runs_root="runs"' in code
    monkeypatch.chdir(REPO)  # the example reads assets/snli_sample.csv
    code = code.replace('runs_root="runs"', f'runs_root={str(tmp_path / "runs")!r}')
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    kept = re.search(r"(\d+) of (\d+) rows kept", out)
    # 4,000 rows: AFLite filtered the 3,000 train rows, the 1,000 dev rows are all kept
    assert kept and 1000 < int(kept.group(1)) < int(kept.group(2)) == 4000
    assert "cueness_shrunk" in out
    assert len(list((tmp_path / "runs").iterdir())) == 1
