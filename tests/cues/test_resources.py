"""NLTK resources: status, the documented error when one is missing, the CLI listing."""

from __future__ import annotations

import nltk
import numpy as np
import pytest

from aflite_core import cli
from aflite_core.cues import resources
from aflite_core.cues.linguistic import FAMILIES, extract_features
from aflite_core.cues.resources import DOWNLOAD_COMMAND, ResourceMissingError
from aflite_core.cues.statistics import resolve_split

TEXTS = ["A man isn't sleeping.", "Two dogs will run in Paris.", "A happy girl smiles."]
PREMISES = ["A man sleeps.", "Dogs run.", "A girl smiles."]


@pytest.fixture
def empty_nltk_path(tmp_path):
    """Point NLTK at an empty folder, as on a machine without NLTK data; restore after.

    The bundled folder is registered first (once per process), so it is not re-added.
    """
    resources.use_bundled_data()
    saved = list(nltk.data.path)
    nltk.data.path[:] = [str(tmp_path)]
    try:
        yield tmp_path
    finally:
        nltk.data.path[:] = saved


@pytest.fixture
def bundled_only():
    """Search only the NLTK data shipped with the package; restore after."""
    resources.use_bundled_data()
    saved = list(nltk.data.path)
    nltk.data.path[:] = [str(resources.BUNDLED_DATA)]
    try:
        yield resources.BUNDLED_DATA
    finally:
        nltk.data.path[:] = saved


def test_bundled_data_has_every_required_resource(bundled_only):
    rows = {s.resource.name: s for s in resources.status()}
    assert set(rows) == {r.name for r in resources.RESOURCES}
    for name in ("averaged_perceptron_tagger_eng", "stopwords", "opinion_lexicon",
                 "vader_lexicon", "words"):
        assert rows[name].installed, name
        assert rows[name].location.startswith(str(bundled_only)), rows[name].location
    assert not rows["maxent_ne_chunker_tab"].installed  # not shipped: NER falls back
    assert not rows["wordnet"].installed  # only for lemma=True, downloaded on request


def test_bundled_data_is_registered_last_without_nltk_data():
    resources.use_bundled_data()
    assert nltk.data.path[-1] == str(resources.BUNDLED_DATA)
    resources.use_bundled_data()  # idempotent
    assert nltk.data.path.count(str(resources.BUNDLED_DATA)) == 1


def test_every_family_works_from_the_bundled_data_alone(bundled_only):
    fm = extract_features(TEXTS, premises=PREMISES, features=list(FAMILIES), cache=False,
                          n_jobs=1)
    assert fm.unavailable == {}
    dense = fm.X.toarray()

    def rows_with(family: str, value: str) -> list[int]:
        col = np.flatnonzero((fm.feature_type == family) & (fm.feature == value))
        assert col.size == 1, (family, value)
        return np.flatnonzero(dense[:, col[0]]).tolist()

    assert rows_with("sentiment", "positive") == [2]  # "happy" (opinion lexicon)
    assert rows_with("tense", "future") == [1]  # "will run" (POS tagger)
    assert rows_with("ner", "proper_noun") == [1]  # "Paris"
    assert rows_with("negation", "negation") == [0]
    assert rows_with("overlap", "overlap") == [0, 1, 2]  # stopwords ignored, content shared
    assert "heuristic" in fm.methods["ner"]


def test_users_own_nltk_data_takes_precedence(bundled_only, tmp_path):
    own = tmp_path / "corpora" / "stopwords"
    own.mkdir(parents=True)
    (own / "english").write_text("the\na\n", encoding="utf-8")
    nltk.data.path[:] = [str(tmp_path), str(bundled_only)]
    assert resources.locate("stopwords") == str(own / "english")
    nltk.data.path[:] = [str(bundled_only)]
    assert resources.locate("stopwords").startswith(str(bundled_only))


def test_cli_resources_says_where_each_resource_was_found(bundled_only, capsys):
    assert cli.main(["resources", "--check"]) == 0
    out = capsys.readouterr().out
    assert "found: bundled with aflite_core" in out
    assert "found: not found" in out  # maxent_ne_chunker_tab, wordnet


def test_missing_resource_error_names_family_and_fix(empty_nltk_path):
    with pytest.raises(ResourceMissingError) as info:
        resources.require("tense", ["averaged_perceptron_tagger_eng"])
    err = info.value
    assert isinstance(err, LookupError)
    assert err.family == "tense" and err.missing == ("averaged_perceptron_tagger_eng",)
    message = str(err)
    assert message.startswith("tense features unavailable")
    assert DOWNLOAD_COMMAND in message
    assert "nltk.download('averaged_perceptron_tagger_eng')" in message
    with pytest.raises(ValueError, match="resource"):
        resources.get_resource("punkt_missing")


def test_families_report_unavailable_never_silently_empty(empty_nltk_path):
    fm = extract_features(TEXTS, PREMISES, features=FAMILIES, cache=False, n_jobs=1)
    assert set(fm.unavailable) == {"sentiment", "tense", "overlap", "ner", "typo"}
    for family, message in fm.unavailable.items():
        assert message.startswith(f"{family} features unavailable")
        assert DOWNLOAD_COMMAND in message and "nltk.download(" in message
    assert "stopwords" in fm.unavailable["overlap"]
    # families without NLTK data still work
    assert set(fm.feature_type) == {"word", "negation"}
    assert fm.column("negation", "negation").tolist() == [True, False, False]


def test_raise_mode_gives_the_documented_error_not_an_nltk_traceback(empty_nltk_path):
    for family in ("tense", "ner", "typo", "sentiment", "overlap"):
        with pytest.raises(ResourceMissingError, match="python -m aflite_core resources"):
            extract_features(TEXTS, PREMISES, features=[family], cache=False,
                             on_missing="raise")


def test_cue_table_attrs_carry_the_unavailable_families(empty_nltk_path):
    from aflite_core.cues.statistics import cue_statistics

    texts = TEXTS * 10
    labels = np.array(["a", "b", "c"] * 10)
    fm = extract_features(texts, features=["word", "tense"], cache=False, n_jobs=1)
    table = cue_statistics(fm, labels, resolve_split(None, labels), min_count=2)
    assert "tense" in table.attrs["unavailable"]
    assert set(table["feature_type"]) == {"word"}


def test_lemma_needs_wordnet_which_is_missing():
    assert not resources.is_installed("wordnet")
    fm = extract_features(TEXTS, features=["word"], lemma=True, cache=False)
    assert "nltk.download('wordnet')" in fm.unavailable["word"]
    assert fm.n_features == 0


def test_vader_lexicon_is_optional_but_checked(empty_nltk_path):
    fm = extract_features(TEXTS, features=["sentiment"], sentiment_lexicon="vader",
                          cache=False)
    assert "vader_lexicon" in fm.unavailable["sentiment"]


def test_cli_resources_lists_status_and_fix(capsys):
    assert cli.main(["resources", "--check"]) == 0  # required ones ship with the package
    out = capsys.readouterr().out
    assert "installed  averaged_perceptron_tagger_eng" in out
    assert "MISSING    maxent_ne_chunker_tab" in out
    assert DOWNLOAD_COMMAND in out


def test_cli_resources_check_fails_without_data(empty_nltk_path, capsys):
    assert cli.main(["resources", "--check"]) == 1
    out = capsys.readouterr().out
    assert "MISSING    stopwords" in out
    assert "nltk.download('stopwords')" in out
    assert cli.main(["resources", "--download", "--only", "nonsense"]) == 2
    assert "expected one of" in capsys.readouterr().err


def test_cli_cues_warns_about_unavailable_families(empty_nltk_path, snli_dir, capsys):
    rc = cli.main(["cues", str(snli_dir / "snli_dev.csv"), "--features", "word,tense",
                   "--top", "0", "--no-cache"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "warning: tense features unavailable" in err
    assert DOWNLOAD_COMMAND in err


def test_a_group_writable_install_is_named_with_its_fix(tmp_path, monkeypatch, capsys):
    """NLTK (>= 3.10) refuses data another account could write; a package installed with
    umask 002 has group-writable folders. The error and `resources` say so and give the fix,
    instead of suggesting a download that would not help."""
    import os
    import shutil
    import stat

    copy = tmp_path / "nltk_data"
    (copy / "corpora").mkdir(parents=True)
    shutil.copy(resources.BUNDLED_DATA / "corpora" / "opinion_lexicon.zip", copy / "corpora")
    for path in (copy, copy / "corpora", copy / "corpora" / "opinion_lexicon.zip"):
        os.chmod(path, os.stat(path).st_mode | stat.S_IWGRP)
    monkeypatch.setattr(resources, "BUNDLED_DATA", copy)
    resources.use_bundled_data()
    saved = list(nltk.data.path)
    nltk.data.path[:] = [str(copy)]
    try:
        refused = resources.refused_entries()
        assert refused[0] == str(copy) and len(refused) == 3
        assert resources.locate("opinion_lexicon") is None  # NLTK really refuses it
        with pytest.raises(ResourceMissingError) as info:
            resources.require("sentiment", ["opinion_lexicon"])
        assert f"chmod -R go-w {copy}" in str(info.value)
        assert "writable by another account" in str(info.value)
        cli.main(["resources"])
        assert "NLTK refuses the data bundled with aflite_core" in capsys.readouterr().out
        # the Cues page's warning gives the same fix, not the download
        advice = resources.unavailable_fix()
        assert f"`chmod -R go-w {copy}`" in advice and "--download" not in advice
        for path in refused:
            os.chmod(path, os.stat(path).st_mode & ~stat.S_IWGRP)
        assert resources.refused_entries() == []
        assert resources.locate("opinion_lexicon") is not None  # the fix works
        assert "--download" in resources.unavailable_fix()  # nothing refused: a download
    finally:
        nltk.data.path[:] = saved


_LEAN_IMPORT = """
import sys
{before}
from aflite_core.cues.resources import import_nltk_lean
import_nltk_lean()
loaded = "scipy.stats" in sys.modules
from nltk.metrics import association
from nltk.tag.perceptron import PerceptronTagger  # what a tagging child loads
import scipy.stats  # and scipy.stats itself, as ever
print(loaded, association.fisher_exact is scipy.stats.fisher_exact,
      callable(PerceptronTagger), scipy.stats.norm.cdf(0.0))
"""


def test_a_tagging_child_imports_nltk_without_scipy_stats():
    """NLTK's package loads scipy.stats (0.66 of its 1.09 s import) for fisher_exact alone;
    a tagging child's start skips it, and scipy.stats still imports afterwards. A process
    that has it already (the audit's: scikit-learn loads it) keeps NLTK's own import."""
    import subprocess
    import sys

    def run(before: str) -> list[str]:
        out = subprocess.run([sys.executable, "-c", _LEAN_IMPORT.format(before=before)],
                             capture_output=True, text=True, check=True)
        return out.stdout.split()

    assert run("") == ["False", "False", "True", "0.5"]
    assert run("import scipy.stats") == ["True", "True", "True", "0.5"]
