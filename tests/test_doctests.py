"""The public API's docstring examples run as written (doctest), so what a reader copies
works: ``load_dataset``, ``run_audit``, ``load_run``, ``AFLite``, ``ZFilter``,
``MultipleChoiceAFLite`` and ``cue_statistics``, each reached from the package itself; and
every other example in the package's modules."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import aflite_core

PUBLIC_EXAMPLES = ("load_dataset", "run_audit", "load_run", "AFLite", "ZFilter",
                   "MultipleChoiceAFLite", "cue_statistics")


@pytest.mark.parametrize("name", PUBLIC_EXAMPLES)
def test_the_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing an example writes lands in the repository
    obj = getattr(aflite_core, name)
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    examples = sum(len(t.examples) for t in tests)
    assert examples >= 3, f"{name} has no runnable example in its docstring"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {name}'s examples failed (output above)"


def test_a_wrong_example_is_caught():
    """The runner above fails on a wrong expected output (the check can fail)."""

    def wrong() -> None:
        """
        >>> 1 + 1
        3
        """

    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(wrong, "wrong", globs={}):
        runner.run(test, out=lambda text: None)
    assert runner.summarize(verbose=False).failed == 1


def test_every_other_example_in_the_package_runs(tmp_path, monkeypatch):
    """The examples of every module of ``aflite_core`` beyond the public ones above run as
    written: a helper's example that went stale fails here (``progress_plan.beside_seconds``
    showed 1.0 for two seconds beside ten long after the share had become 0.3)."""
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    modules = [info.name for info in pkgutil.walk_packages(aflite_core.__path__, "aflite_core.")
               if not info.name.endswith("__main__")]
    for name in modules:
        for test in doctest.DocTestFinder().find(importlib.import_module(name), name):
            if test.examples and test.name.rsplit(".", 1)[-1] not in PUBLIC_EXAMPLES:
                runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 30 and result.failed == 0, result
