"""The public API's docstring examples run as written (doctest), so what a reader copies
works: ``load_dataset``, ``run_audit``, ``load_run``, ``AFLite``, ``ZFilter``,
``MultipleChoiceAFLite`` and ``cue_statistics``, each reached from the package itself."""

from __future__ import annotations

import doctest

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
