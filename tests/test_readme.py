"""The README's Python example runs as written, from a folder outside the repository (the
README's set-up installs the package, so ``import aflite_core`` works from anywhere), and
the two set-up commands install the package."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_readme_python_example_runs_from_any_folder(tmp_path):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Python (notebooks)"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert 'runs_root="runs"' in code
    # no PYTHONPATH and a folder outside the repository: only an installed package imports
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (
        "the README example failed outside the repository (is the package installed? the "
        f"README's set-up runs 'pip install ... -e .'):\n{proc.stderr[-2000:]}")
    kept = re.search(r"([\d,]+) of the ([\d,]+) filtered rows kept, ([\d,]+) rows kept "
                     r"without filtering", proc.stdout)
    assert kept, proc.stdout
    retained, filtered, unfiltered = (int(g.replace(",", "")) for g in kept.groups())
    # 4,000 rows: AFLite filtered the 3,000 train rows; the 1,000 dev rows are all kept
    assert filtered == 3000 and unfiltered == 1000 and 1000 < retained < filtered
    assert "cueness_shrunk" in proc.stdout
    assert len(list((tmp_path / "runs").iterdir())) == 1


def test_setup_commands_install_the_package():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```bash\n(python3 -m venv .*?)\n```", text)
    assert len(commands) >= 2
    for command in commands[:2]:
        assert " -e . " in command, command
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "-e ." in ci
