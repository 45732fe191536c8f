"""The count matrices of term_counts against scikit-learn's vectorisers, bit for bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from aflite_core.represent.term_counts import ngram_counts, tfidf_matrix, word_counts
from aflite_core.represent.text_models import NGRAM_RANGE
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


def test_ngram_counts_are_scikit_learns_bit_for_bit(snli):
    tricky = ["", "...", "Don\u2019t stop, don't STOP!", "a a a a", "naïve café café naïve",
              "t-shirt o'clock 10:30 5pm", "x"]
    for texts in (snli["hypothesis"].tolist() + tricky, ["one"], tricky):
        vectorizer = CountVectorizer(tokenizer=word_tokens, lowercase=False, token_pattern=None,
                                     ngram_range=NGRAM_RANGE, dtype=np.float64)
        expected = vectorizer.fit_transform(texts).tocsr()
        expected.sort_indices()
        counts, terms = ngram_counts(texts)
        assert counts.shape == expected.shape and counts.dtype == expected.dtype
        assert counts.has_sorted_indices
        for part in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(counts, part), getattr(expected, part)), part
        assert terms.tolist() == vectorizer.get_feature_names_out().tolist()
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


def test_word_counts_say_what_scikit_learn_says_on_no_words():
    with pytest.raises(ValueError, match="empty vocabulary"):
        word_counts(["", "?!", ""])
    with pytest.raises(ValueError, match="no terms remain"):
        word_counts(["one", "two"], min_df=2)
