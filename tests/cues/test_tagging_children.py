"""A large extraction's tagging in child processes (``cues._tagging_children``): the same tags
as in the calling process, a caller's unguarded script run once, a failed child's own words."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest

from aflite_core.cues import _tagging as tagging
from aflite_core.cues import _tagging_children as children

EXOTIC = ["", "He walked home.\nThen he slept.", "caf\u00e9 \u00fcber na\u00efve",
          "\U0001f600 Paris will win", "lone \ud800 surrogate", "tab\tand \"quotes\" \\ here",
          "A" * 5000]


def _children() -> set[int]:
    """This process's child processes (another test's cluster may have some running)."""
    return {child.pid for child in psutil.Process().children()}


def _in_process(texts):
    context = tagging._loaded_context("heuristic")
    return dict(zip(("tense", "ner", "typo"), tagging._annotate_tagged_chunk(texts, context),
                    strict=True))


def _context_folder(tmp_path, ner_method="heuristic"):
    return [str(tagging.write_context(tagging._loaded_context(ner_method), tmp_path))]


def test_the_children_tag_as_this_process_does(snli_dir, monkeypatch, tmp_path):
    texts = pd.read_csv(snli_dir / "snli_dev.csv")["hypothesis"].tolist()[:300] + EXOTIC
    monkeypatch.setattr(children, "TAG_CHUNK", 11)  # many chunks for each of three children
    before = _children()
    got = children.tag_in_children(texts, args=_context_folder(tmp_path), n_jobs=3)
    expected = _in_process(texts)
    for name, array in expected.items():
        assert got[name].dtype == array.dtype, name
        np.testing.assert_array_equal(got[name], array, err_msg=name)
    assert expected["tense"].any() and expected["ner"].any() and expected["typo"].any()
    assert _children() <= before  # every child has exited


def test_no_more_children_than_the_memory_holds(snli_dir, monkeypatch, tmp_path):
    """A container of 1 GiB on a host of many cores: one child where six were asked (each
    may hold CHILD_BYTES), and the same tags."""
    texts = pd.read_csv(snli_dir / "snli_dev.csv")["hypothesis"].tolist()[:200]
    monkeypatch.setattr(children, "TAG_CHUNK", 16)  # many chunks: six children had work
    monkeypatch.setattr(children, "usable_memory", lambda: 1 << 30)
    started = []
    start = children.start_child

    def counted(*args, **kwargs):
        started.append(args)
        return start(*args, **kwargs)

    monkeypatch.setattr(children, "start_child", counted)
    got = children.tag_in_children(texts, args=_context_folder(tmp_path), n_jobs=6)
    assert len(started) == 1
    for name, array in _in_process(texts).items():
        np.testing.assert_array_equal(got[name], array, err_msg=name)
    monkeypatch.setattr(children, "usable_memory", lambda: 3 * children.CHILD_BYTES * 4)
    started.clear()
    children.tag_in_children(texts, args=_context_folder(tmp_path), n_jobs=6)
    assert len(started) == 3  # a quarter of the memory: three children's worth


def test_more_children_than_chunks_and_no_texts(tmp_path):
    args = _context_folder(tmp_path)
    one = children.tag_in_children(["She will go."], args=args, n_jobs=4)
    assert one["tense"].tolist() == [3]
    none = children.tag_in_children([], args=args, n_jobs=2)
    assert {k: (v.dtype, v.shape) for k, v in none.items()} == {
        "tense": (np.int8, (0,)), "ner": (np.uint16, (0,)), "typo": (np.bool_, (0,))}
    with pytest.raises(ValueError, match="n_jobs must be at least 1, got 0"):
        children.tag_in_children(["x"], args=args, n_jobs=0)


def test_a_failed_child_says_why_and_none_is_left(tmp_path):
    """A context whose NER method is unknown fails in the children (``NER_COLUMNS`` has no
    such key): the error carries the child's traceback, and no child outlives the call; a
    folder with no context says which file it lacks."""
    folder = tagging.write_context(tagging._loaded_context("heuristic"), tmp_path)
    written = json.loads((folder / tagging.CONTEXT_FILES[0]).read_text(encoding="utf-8"))
    (folder / tagging.CONTEXT_FILES[0]).write_text(
        json.dumps({**written, "ner_method": "no-such-method"}), encoding="utf-8")
    before = _children()
    said = r"(?s)tagging process stopped \(exit 1\).*KeyError: .no-such-method"
    with pytest.raises(RuntimeError, match=said):
        children.tag_in_children(["a dog runs"] * 40, args=[str(folder)], n_jobs=2)
    assert _children() <= before
    with pytest.raises(RuntimeError, match="No such file.*tagging_context.json"):
        children.tag_in_children(["a dog runs"], args=[str(tmp_path / "nothing")], n_jobs=1)


def test_the_written_context_tags_as_the_loaded_one(snli_dir, tmp_path):
    """The tagger the children rebuild from plain parts (no NLTK) is NLTK's model."""
    texts = pd.read_csv(snli_dir / "snli_dev.csv")["premise"].tolist()[:200]
    loaded = tagging._loaded_context("heuristic")
    read = tagging._read_context(tagging.write_context(loaded, tmp_path))
    assert read.search_path == loaded.search_path
    # the common words: the same set, mapped from the context folder (not a copy a child)
    assert isinstance(read.common._words.base, np.memmap) and len(read.common) > 1000
    assert len(read.common) == len(loaded.common)
    assert all(word in read.common for word in loaded.common)
    others = ["", "a\0", "Tree", "trees!", "zzzqx", "naïveté", "x" * 200, "\u00e9t\u00e9"]
    for word in others + [w + "s" for w in sorted(loaded.common)[:500]]:
        assert (word in read.common) == (word in loaded.common), word
    # the weights are the file's pages, shared by the children, not a copy in each
    assert isinstance(read.tagger._weights.base, np.memmap)
    assert not read.tagger._weights.flags.writeable
    np.testing.assert_array_equal(read.tagger._weights, loaded.tagger._weights)
    for text in texts:
        tokens = tagging.tokenize(text)
        assert read.tagger.tag(tokens) == loaded.tagger.tag(tokens)
    with pytest.raises(ValueError, match=r"weights of shape \(3, 2\) expected"):
        tagging.FastPerceptronTagger.from_parts({}, ["A", "B"], ["f", "g"], np.zeros((2, 2)))


def test_a_script_without_a_main_guard_runs_once(tmp_path):
    """An extraction above ``_PARALLEL_MIN`` distinct texts on two jobs from a script with no
    ``if __name__ == "__main__"`` guard: the script runs once (a spawned pool ran it again in
    each worker, where it tried to start a pool of its own: the script hung)."""
    script = tmp_path / "extract_script.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from aflite_core.cues import _tagging\n"
        "from aflite_core.cues.linguistic import extract_features\n"
        "print('top-level code ran', flush=True)\n"
        "_tagging._PARALLEL_MIN = 10\n"
        "texts = [f'{n} dogs ran home' for n in range(60)]\n"
        "fm = extract_features(texts, features=['tense'], cache=False, n_jobs=2)\n"
        "print(int(fm.column('tense', 'past').sum()), flush=True)\n",
        encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=180, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["top-level", "code", "ran", "60"]
