"""Feature extractors on crafted sentences, the fast tagger, dedup, cache and workers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aflite_core.cues import _tagging as tagging
from aflite_core.cues import linguistic
from aflite_core.cues.linguistic import (
    FAMILIES,
    FastPerceptronTagger,
    extract_features,
    tense_of,
    tokenize,
    word_tokens,
)


def features_of(texts, premises=None, **kwargs):
    kwargs.setdefault("cache", False)
    kwargs.setdefault("n_jobs", 1)
    return extract_features(texts, premises, **kwargs)


def present(fm, family, value):
    return fm.column(family, value).tolist()


# ------------------------------------------------------------------ tokens


def test_tokenizer_splits_clitics_and_keeps_compounds():
    assert tokenize("The dog doesn't run, it's 5pm.") == [
        "The", "dog", "does", "n't", "run", ",", "it", "'s", "5pm", "."]
    assert tokenize("I can\u2019t; won't") == ["I", "ca", "n't", ";", "wo", "n't"]
    assert tokenize("a t-shirt at 10:30 o'clock") == ["a", "t-shirt", "at", "10:30", "o'clock"]
    assert word_tokens("The Man's DOG!") == ["the", "man", "'s", "dog"]


# ------------------------------------------------------------------ tense


@pytest.mark.parametrize("sentence,tense", [
    ("The man will go home.", "future"),
    ("The man went home.", "past"),
    ("The man is going home.", "present"),
    ("The man is going to swim.", "future"),
    ("The man is not going to swim.", "future"),
    ("She won't eat the cake.", "future"),
    ("They can swim.", "present"),
    ("A dog running in the snow.", "none"),
    ("Two men were playing chess.", "past"),
])
def test_tense_of_crafted_sentences(sentence, tense):
    fm = features_of([sentence], features=["tense"])
    assert fm.column("tense", tense).tolist() == [True]
    assert fm.X.sum() == 1  # exactly one tense value per example


def test_tense_rule_on_given_tags():
    assert tense_of(["He", "will", "go"], ["PRP", "MD", "VB"]) == "future"
    assert tense_of(["He", "went"], ["PRP", "VBD"]) == "past"
    assert tense_of(["He", "is", "going"], ["PRP", "VBZ", "VBG"]) == "present"
    assert tense_of(["He", "was", "going", "to", "go"], ["PRP", "VBD", "VBG", "TO", "VB"]) == "past"
    assert tense_of(["Running"], ["VBG"]) == "none"


# ------------------------------------------------------------------ negation


def test_negation_words_and_contractions():
    texts = ["The man doesn't sleep.", "Nobody is here.", "The man sleeps.", "He never runs.",
             "There is no dog.", "The cat isnt here."]
    fm = features_of(texts, features=["negation"])
    assert present(fm, "negation", "negation") == [True, True, False, True, True, True]


# ------------------------------------------------------------------ typo


def test_typo_but_not_acronym_contraction_or_proper_noun():
    texts = [
        "The man is runing fast.",           # misspelled
        "The man from the USA is here.",     # acronym
        "The man can't swim and isn't happy.",  # contractions (stems 'ca', 'is')
        "Maria is dancing with Johann.",     # proper nouns
        "A woman is walking.",               # clean
        "Two NBA players and their TVs.",    # acronyms, plural
    ]
    fm = features_of(texts, features=["typo"])
    assert present(fm, "typo", "typo") == [True, False, False, False, False, False]
    assert "pyspellchecker" in fm.methods["typo"]


def test_typo_candidates_rule():
    tokens = ["The", "USA", "ca", "n't", "Bob", "smiel", "x-ray", "TVs"]
    tags = ["DT", "NNP", "MD", "RB", "NNP", "NN", "NN", "NNS"]
    assert linguistic.typo_candidates(tokens, tags) == ["the", "smiel"]


# ------------------------------------------------------------------ overlap


def test_overlap_ignores_stopwords():
    premises = ["The cat sat on the mat.", "The cat sleeps.", "A man is here."]
    hypotheses = ["It is on a table.", "A cat runs.", "The MAN left."]
    fm = features_of(hypotheses, premises, features=["overlap"])
    assert present(fm, "overlap", "overlap") == [False, True, True]
    assert present(fm, "overlap", "no_overlap") == [True, False, False]


def test_overlap_without_premises_is_reported_unavailable():
    fm = features_of(["A cat."], features=["word", "overlap"])
    assert "overlap" in fm.unavailable and "premise" in fm.unavailable["overlap"]
    assert set(fm.feature_type) == {"word"}
    with pytest.raises(ValueError, match="premise"):
        features_of(["A cat."], features=["overlap"], on_missing="raise")


# ------------------------------------------------------------------ sentiment, NER, words


def test_sentiment_sign_of_summed_polarities():
    texts = ["A happy, wonderful day.", "A terrible, awful crash.", "A man walks.",
             "A good day with a bad ending and a great party."]
    for lexicon in ("opinion", "vader"):
        fm = features_of(texts, features=["sentiment"], sentiment_lexicon=lexicon)
        assert present(fm, "sentiment", "positive") == [True, False, False, True], lexicon
        assert present(fm, "sentiment", "negative") == [False, True, False, False], lexicon
        assert present(fm, "sentiment", "neutral") == [False, False, True, False], lexicon


def test_ner_heuristic_when_chunker_model_missing():
    texts = ["Barack Obama visits Paris.", "Two dogs play.", "A dog plays.",
             "Man sleeping on a bench."]
    fm = features_of(texts, features=["ner"])
    assert linguistic.ner_method() == "heuristic"  # maxent_ne_chunker_tab not shipped
    assert "heuristic" in fm.methods["ner"]
    assert present(fm, "ner", "proper_noun") == [True, False, False, False]
    assert present(fm, "ner", "number") == [False, True, False, False]
    assert present(fm, "ner", "entity") == [True, True, False, False]


def test_word_features_min_count_and_text_sides():
    hyps = ["a red ball", "a red cup", "a blue cup"]
    prems = ["green ball", "green", "green"]
    fm = features_of(hyps, prems, features=["word"], min_count=2)
    assert sorted(fm.feature) == ["a", "cup", "red"]
    both = features_of(hyps, prems, features=["word"], min_count=2, text="both")
    # a feature is present when either text has it; 'ball' (row 0 only) stays rare
    assert sorted(both.feature) == ["a", "cup", "green", "red"]
    assert both.column("word", "green").tolist() == [True, True, True]
    prem_only = features_of(hyps, prems, features=["word"], min_count=3, text="premise")
    assert list(prem_only.feature) == ["green"]


def test_repeated_texts_get_identical_rows():
    texts = ["A man will sleep.", "Dogs run.", "A man will sleep.", "Nobody sang."]
    fm = features_of(texts)
    X = fm.X.toarray()
    assert np.array_equal(X[0], X[2])
    assert not np.array_equal(X[0], X[1])
    assert set(fm.feature_type) == set(FAMILIES) - {"overlap"}


def test_argument_validation():
    with pytest.raises(ValueError, match="features"):
        features_of(["a"], features=["words"])
    with pytest.raises(ValueError, match="text"):
        features_of(["a"], text="premise")
    with pytest.raises(ValueError, match="premises"):
        features_of(["a", "b"], ["only one"])
    with pytest.raises(TypeError, match="hypotheses"):
        features_of(["a", None])
    with pytest.raises(ValueError, match="n_jobs"):
        features_of(["a"], n_jobs=0)
    with pytest.raises(TypeError, match="n_jobs"):
        features_of(["a"], n_jobs="2")
    with pytest.raises(ValueError, match="min_count: expected an int >= 1, got 0"):
        features_of(["a"], min_count=0)
    with pytest.raises(ValueError, match="sentiment_lexicon"):
        features_of(["a"], sentiment_lexicon="afinn")


# ------------------------------------------------------------------ tagger, cache, workers


def test_fast_tagger_gives_nltks_tags(snli_dir):
    from nltk.tag.perceptron import PerceptronTagger

    texts = pd.read_csv(snli_dir / "snli_dev.csv")["hypothesis"].tolist()[:400]
    reference = PerceptronTagger(lang="eng")
    fast = FastPerceptronTagger(reference)
    for text in texts:
        tokens = tokenize(text)
        assert fast.tag(tokens) == [t for _, t in reference.tag(tokens)]


def test_cache_is_reused_and_never_pickled(tmp_path, monkeypatch, snli_dir):
    frame = pd.read_csv(snli_dir / "snli_dev.csv").head(300)
    args = dict(features=list(FAMILIES), cache_dir=tmp_path, n_jobs=1)
    first = extract_features(frame["hypothesis"].tolist(), frame["premise"].tolist(), **args)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files and all(name.endswith(".npz") for name in files)
    for path in tmp_path.iterdir():
        with np.load(path, allow_pickle=False) as data:  # raises if an object array is inside
            assert data.files

    def boom(*_a, **_k):
        raise AssertionError("annotation recomputed despite the cache")

    monkeypatch.setattr(linguistic, "_count_tokens", boom)
    monkeypatch.setattr(tagging, "_tag_unique", boom)
    second = extract_features(frame["hypothesis"].tolist(), frame["premise"].tolist(), **args)
    assert (first.X != second.X).nnz == 0
    assert list(first.feature) == list(second.feature)
    # other texts miss the cache
    with pytest.raises(AssertionError, match="recomputed"):
        extract_features(frame["hypothesis"].tolist()[:10], **args)


@pytest.mark.slow
def test_worker_processes_give_the_serial_result(monkeypatch, snli_dir):
    texts = pd.read_csv(snli_dir / "snli_dev.csv")["hypothesis"].tolist()[:240]
    monkeypatch.setattr(tagging, "_PARALLEL_MIN", 50)
    kwargs = dict(features=["tense", "ner", "typo"], cache=False)
    serial = extract_features(texts, n_jobs=1, **kwargs)
    parallel = extract_features(texts, n_jobs=2, **kwargs)
    assert (serial.X != parallel.X).nnz == 0


def test_preload_reads_nltk_and_the_families_lists_once_a_process():
    """What the work ahead loads while its child tags, so that the cue stage does not."""
    import sys

    linguistic._stopwords.cache_clear()
    linguistic._polarity_lexicon.cache_clear()
    linguistic.preload(["word"])  # neither list is read by these families
    assert linguistic._stopwords.cache_info().currsize == 0
    assert linguistic._polarity_lexicon.cache_info().currsize == 0
    linguistic.preload(["overlap", "sentiment"])
    assert "nltk" in sys.modules
    assert linguistic._stopwords.cache_info().currsize == 1
    assert linguistic._polarity_lexicon.cache_info().currsize == 1
    assert "the" in linguistic._stopwords() and "'s" in linguistic._stopwords()
    polarity = linguistic._polarity_lexicon("opinion")
    assert polarity["good"] == 1.0 and polarity["bad"] == -1.0
    with pytest.raises(TypeError):  # one copy a process: nobody may change it
        polarity["good"] = 0.0  # type: ignore[index]
    assert linguistic._stopwords.cache_info().hits >= 2
    # the sentiment family reads it: the same cue, read once
    fm = features_of(["a good dog", "a bad dog", "a dog"], features=["sentiment"])
    assert fm.X.shape[0] == 3 and linguistic._polarity_lexicon.cache_info().hits >= 2
