"""The README and docs/ say only true things about the code's names.

Every file path they name exists, every dotted ``aflite_core...`` name imports (a module, or
an attribute of one), every ``python -m aflite_core COMMAND --flag`` they show is a command
whose parser takes those flags, and every ``benchmarks/bench_*.py --flag`` is a flag of that
benchmark. Statements that look like paths but are not the repository's (a run folder's
files, ``RUN_DIR/...``, templates with ``<...>`` or ``*``) are told apart by shape, listed
in :data:`NOT_REPO_PATHS`.
"""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

#: Top-level folders of the repository: a path starting with one of them is the repository's.
REPO_ROOTS = ("aflite_core/", "ui/", "app_pages/", "tests/", "benchmarks/", "docs/", "assets/",
              ".ci/")
#: Paths a text names that are deliberately not in the repository: outputs and examples.
NOT_REPO_PATHS = ("test-artifacts/", "tests/data/golden/")

_PATH = re.compile(r"(?<![\w./-])((?:aflite_core|ui|app_pages|tests|benchmarks|docs|assets|\.ci)"
                   r"/[\w./-]*)")
_DOTTED = re.compile(r"(?<![\w./-])(aflite_core(?:\.\w+)+)")
_COMMAND = re.compile(r"python3? -m aflite_core ((?:[^`\n|]|\\\n)+)")
_BENCH = re.compile(r"(benchmarks/bench_\w+\.py)((?: +[^`\n|;&]+)?)")


def _texts() -> list[tuple[str, str]]:
    return [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in DOCS]


def _named_paths() -> list[tuple[str, str]]:
    out = []
    for doc, text in _texts():
        for match in _PATH.finditer(text):
            path = match.group(1).rstrip(".,;:)")
            template = text[match.end():match.end() + 1] in ("*", "<", "{")
            if template or path.startswith(NOT_REPO_PATHS):
                continue
            out.append((doc, path))
    return sorted(set(out))


@pytest.mark.parametrize(("doc", "path"), _named_paths())
def test_every_named_path_exists(doc, path):
    assert (REPO / path).exists(), f"{doc} names {path}, which is not in the repository"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _named_modules() -> list[tuple[str, str]]:
    out = set()
    for doc, text in _texts():
        for match in _DOTTED.finditer(text):
            out.add((doc, match.group(1).rstrip(".")))
    return sorted(out)


@pytest.mark.parametrize(("doc", "dotted"), _named_modules())
def test_every_named_module_or_function_exists(doc, dotted):
    assert _resolves(dotted), f"{doc} names {dotted}, which does not import"


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from aflite_core import cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _shown_commands() -> list[tuple[str, str, tuple[str, ...]]]:
    out = set()
    for doc, text in _texts():
        for match in _COMMAND.finditer(text):
            words = match.group(1).replace("\\\n", " ").split()
            if not words or not re.fullmatch(r"[a-z][\w-]*", words[0]):
                continue
            flags = tuple(w.split("=")[0] for w in words[1:] if re.fullmatch(r"--[\w-]+(=.*)?", w))
            out.add((doc, words[0], flags))
    return sorted(out)


@pytest.mark.parametrize(("doc", "command", "flags"), _shown_commands())
def test_every_shown_command_and_flag_exists(doc, command, flags):
    parsers = _parsers()
    assert command in parsers, f"{doc} shows 'python -m aflite_core {command}': no such command"
    unknown = sorted(set(flags) - _flags(parsers[command]))
    assert not unknown, f"{doc} shows {command} with {unknown}, which it does not take"


def _shown_benchmarks() -> list[tuple[str, str, tuple[str, ...]]]:
    out = set()
    for doc, text in _texts():
        for match in _BENCH.finditer(text):
            flags = tuple(re.findall(r"(?<!\S)(--[\w-]+)", match.group(2) or ""))
            out.add((doc, match.group(1), flags))
    return sorted(out)


@pytest.mark.parametrize(("doc", "bench", "flags"), _shown_benchmarks())
def test_every_shown_benchmark_flag_exists(doc, bench, flags):
    source = (REPO / bench).read_text(encoding="utf-8")
    unknown = [f for f in flags if f'"{f}"' not in source and f"'{f}'" not in source]
    assert not unknown, f"{doc} shows {bench} with {unknown}, which it does not declare"


def test_the_checks_catch_planted_stale_statements():
    """Each check fails on a planted stale name (so the tests above can fail)."""
    assert not (REPO / "aflite_core/runs.py").exists()
    assert not _resolves("aflite_core.runs.folder.no_such_function")
    assert _resolves("aflite_core.runs.folder.load_run")
    assert "--no-such-flag" not in _flags(_parsers()["run"])
    assert _PATH.search("see `aflite_core/report.py`").group(1) == "aflite_core/report.py"


def test_the_readmes_snli_dev_figures_are_a_fresh_runs(tmp_path):
    """The README says where the default audit of SNLI dev stops; a fresh run agrees."""
    from aflite_core.cli import main
    from aflite_core.runs.folder import load_run

    text = (REPO / "README.md").read_text(encoding="utf-8")
    said = re.search(r"SNLI dev stops after (\d+) rounds at\s+([\d,]+) of ([\d,]+) rows "
                     r"\(target ([\d,]+)\)", text)
    assert said, "the README no longer says where SNLI dev stops"
    rounds, kept, total, target = (int(g.replace(",", "")) for g in said.groups())
    data = REPO / "tests" / "data" / "snli" / "snli_dev.csv"
    out = tmp_path / "snli-dev"
    assert main(["run", str(data), "--out", str(out), "--measures", "none", "--no-report",
                 "-q"]) == 0
    run = load_run(out)
    block = run.summary["aflite"]["blocks"]["all"]
    assert (run.summary["aflite"]["n_rounds"], run.sizes["retained"], run.sizes["filtered"],
            block["target"]) == (rounds, kept, total, target)


def test_every_exception_class_of_the_core_is_in_errors_py():
    """docs/architecture.md: "every exception class of the package is in aflite_core/errors.py";
    five once lived beside the code that raised them."""
    import ast as syntax

    errors = REPO / "aflite_core" / "errors.py"
    defined_there = {node.name for node in syntax.walk(syntax.parse(errors.read_text()))
                     if isinstance(node, syntax.ClassDef)}
    known = set(defined_there) | {"Exception", "BaseException", "ValueError", "OSError",
                                  "RuntimeError", "LookupError", "ImportError", "TypeError",
                                  "KeyError", "IndexError", "TimeoutError", "Warning",
                                  "UserWarning", "ArithmeticError", "MemoryError"}
    elsewhere = []
    for path in sorted((REPO / "aflite_core").rglob("*.py")):
        if path == errors:
            continue
        for node in syntax.walk(syntax.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, syntax.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if bases & known:
                    elsewhere.append(f"{path.relative_to(REPO)}: {node.name}")
    assert elsewhere == [], elsewhere


def test_pages_reach_the_core_only_through_ui():
    """docs/architecture.md: app_pages/ are thin scripts that call ui/; no page imports
    aflite_core (the shared and page modules of ui/ do, cache.py for the cached work)."""
    offenders = [f"{p.relative_to(REPO)}: {line.strip()}"
                 for p in sorted((REPO / "app_pages").glob("*.py"))
                 for line in p.read_text(encoding="utf-8").splitlines()
                 if re.match(r"\s*(from|import) aflite_core", line)]
    assert offenders == [], offenders


def test_the_scaling_guide_stays_a_guide():
    """docs/scaling.md is a user's guide of at most 500 lines (issue 61); the history of its
    measurements lives in docs/changelog.md."""
    lines = (REPO / "docs" / "scaling.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 500, f"docs/scaling.md: {len(lines)} lines; move history out"
