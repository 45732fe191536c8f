"""The count matrices of term_counts against scikit-learn's vectorisers, bit for bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from aflite_core.represent._term_counts import ngram_counts, tfidf_matrix, word_counts
from aflite_core.represent._text_models import NGRAM_RANGE
from aflite_core.text import word_tokens

TRICKY = ["", "...", "Don\u2019t stop, don't STOP!", "a a a a", "naïve café café naïve",
          "t-shirt o'clock 10:30 5pm", "x", "ÉCOLE école", "a a a a", "x"]


@pytest.fixture(scope="module")
def snli(snli_dir) -> pd.DataFrame:
    return pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False).iloc[:3000]


def _same(ours, theirs) -> None:
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    for part in ("indptr", "indices", "data"):  # the entries' order too: it sets float sums
        assert np.array_equal(getattr(ours, part), getattr(theirs, part)), part


def test_ngram_counts_are_scikit_learns_bit_for_bit(snli, monkeypatch):
    """Also when the assembly runs in several chunks, one of them holding only empty texts,
    and with words that are prefixes of others (the order a space gives: "a", "a b", "ab")."""
    from aflite_core.represent import _term_counts as term_counts

    monkeypatch.setattr(term_counts, "CHUNK_TEXTS", 3)
    prefixes = ["a b", "ab", "a", "ab a", "a ab", "a-b a", "a'b"]
    for texts in (snli["hypothesis"].tolist() + TRICKY, ["one"], TRICKY, prefixes,
                  ["x y", "", "", "", "y x"]):
        vectorizer = CountVectorizer(tokenizer=word_tokens, lowercase=False, token_pattern=None,
                                     ngram_range=NGRAM_RANGE, dtype=np.float64)
        expected = vectorizer.fit_transform(texts).tocsr()
        expected.sort_indices()
        ngrams = ngram_counts(texts)
        _same(ngrams.counts, expected)
        assert ngrams.counts.has_sorted_indices
        assert ngrams.terms() == vectorizer.get_feature_names_out().tolist()
        words = ngrams.second < 0
        assert ngrams.words.tolist() == sorted(ngrams.words.tolist())
        assert ngrams.first[words].tolist() == list(range(len(ngrams.words)))
    with pytest.raises(ValueError, match="empty vocabulary"):
        ngram_counts(["", "?!"])


@pytest.mark.parametrize(("min_df", "max_features"), [(1, None), (2, None), (2, 500), (1, 7)])
def test_word_counts_and_tfidf_are_scikit_learns_bit_for_bit(snli, min_df, max_features):
    """Premises repeat (about three hypotheses each): counted once, the same matrix. A small
    max_features cuts through ties of total frequency, broken as scikit-learn breaks them."""
    for texts in (snli["premise"].tolist() + TRICKY, snli["hypothesis"].tolist(), TRICKY):
        options = dict(lowercase=True, token_pattern=r"(?u)\b\w+\b", min_df=min_df,
                       max_features=max_features, dtype=np.float32)
        _same(word_counts(texts, min_df=min_df, max_features=max_features),
              CountVectorizer(**options).fit_transform(texts).tocsr())
        _same(tfidf_matrix(texts, min_df=min_df, max_features=max_features),
              TfidfVectorizer(sublinear_tf=True, **options).fit_transform(texts).tocsr())


@pytest.mark.parametrize("binary", [False, True])
def test_the_maps_token_counts_with_stop_words_are_scikit_learns(snli, binary):
    """The map's region words: ``token_pattern=TOKEN_PATTERN`` (punctuation and "_" are
    tokens, no curly apostrophe replaced), English stop words dropped, min_df 3, counts or
    binary, int64: the matrix and the words as scikit-learn's, compiled (more than
    COMPILED_MIN_TEXTS texts) and not."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from aflite_core.text import TOKEN_PATTERN

    odd = ["The_end of THE line", "don\u2019t don't DON'T", "it's 10:30pm!!", "Ünïcode ünïcode",
           "a-b a_b a'b", "\x1c\x1fx\x7f", "they would've"] * 3
    for texts in (snli["hypothesis"].tolist() + odd, odd):
        vocabulary: list[str] = []
        ours = word_counts(texts, min_df=3, dtype=np.int64, vocabulary=vocabulary,
                           pattern="tokens", stop_words=ENGLISH_STOP_WORDS, binary=binary)
        vectorizer = CountVectorizer(token_pattern=TOKEN_PATTERN, lowercase=True, min_df=3,
                                     stop_words="english", binary=binary)
        _same(ours, vectorizer.fit_transform(texts).tocsr())
        assert vocabulary == vectorizer.get_feature_names_out().tolist()
        assert "_" in vocabulary and "!" in vocabulary and "the" not in vocabulary
    with pytest.raises(ValueError, match="empty vocabulary"):
        word_counts(["the a an", "of the"], pattern="tokens", stop_words=ENGLISH_STOP_WORDS)
    with pytest.raises(ValueError, match="pattern must be one of"):
        word_counts(["a"], pattern="words")


def test_word_counts_say_what_scikit_learn_says_on_no_words():
    with pytest.raises(ValueError, match="empty vocabulary"):
        word_counts(["", "?!", ""])
    with pytest.raises(ValueError, match="no terms remain"):
        word_counts(["one", "two"], min_df=2)
