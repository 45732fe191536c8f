"""The compiled tokeniser against the patterns it stands for, number for number."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from sklearn.feature_extraction.text import CountVectorizer

from aflite_core.represent import _term_counts as term_counts
from aflite_core.represent._token_kernels import compiled_word_ids
from aflite_core.text import word_tokens

_FINDALL = term_counts.DEFAULT_TOKEN_RE.findall
_TOKENS = term_counts._TOKEN_PATTERNS["tokens"].findall
PATTERNS = {"default": lambda text: _FINDALL(str(text).lower()), "words": word_tokens,
            # scikit-learn's token_pattern=TOKEN_PATTERN: punctuation and "_" are tokens
            "tokens": lambda text: _TOKENS(str(text).lower())}
#: Pieces the patterns treat apart: clitics, n't, numbers with separators, hyphens and
#: apostrophes inside words, underscores, capitals, and characters outside ASCII (a text
#: holding one is tokenised by the pattern itself).
PIECES = list("abnstdmlrevNTSD'-.,:_ 019\t!?\"()X") + [
    "n't", "N'T", "'s", "'re", "'ll", "'ve", "'d", "'m", "'t", "t-", "o'c", "10:30", "3.5",
    "1,000", "é", "\u2019", "İ", "ß", "日本", "\u00a0", "٣"]


def _python(texts, pattern):
    """``_word_ids`` the Python way."""
    numbers: dict[str, int] = {}
    flat, lengths = [], []
    for text in texts:
        ids = [numbers.setdefault(token, len(numbers)) for token in PATTERNS[pattern](text)]
        flat.extend(ids)
        lengths.append(len(ids))
    return (np.asarray(flat, dtype=np.int32), np.asarray(lengths, dtype=np.int64),
            list(numbers))


def _assert_same(texts, pattern) -> None:
    flat, lengths, words = compiled_word_ids(texts, pattern, PATTERNS[pattern])
    expected = _python(texts, pattern)
    assert flat.dtype == np.int32 and lengths.dtype == np.int64
    assert words == expected[2]
    assert np.array_equal(lengths, expected[1])
    assert np.array_equal(flat, expected[0])


@pytest.mark.parametrize("pattern", ["default", "words", "tokens"])
def test_random_texts_are_tokenised_as_the_pattern_does(pattern):
    rng = random.Random(7)
    texts = ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))
             for _ in range(20_000)]
    assert sum(not text.isascii() for text in texts) > 1000  # both paths, interleaved
    _assert_same(texts, pattern)


@pytest.mark.parametrize("pattern", ["default", "words", "tokens"])
def test_real_texts_and_hand_picked_cases(pattern, snli_dir):
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False)
    cases = ["don't", "Don't", "DON'T", "n't", "isn'tx", "don'tcha", "it's", "it'sx", "'s",
             "o'clock", "rock'n'roll", "dogs' bowl", "we'd've", "ma'am", "t-shirt", "well-",
             "--a--", "a-1", "1990s", "10:30pm", "3.", "3.5.", "1,000,000th", "12a.5",
             "abc123def", "a_b", "__", "can't.", "cannot", "n'tx", "x n't y", "you'll'", "",
             "   ", "\u2019s", "NAÏVE Café"]
    _assert_same(frame["premise"].tolist() + frame["hypothesis"].tolist() + cases, pattern)


def test_every_ascii_character_is_a_token_or_whitespace_as_the_pattern_says():
    """The "tokens" pattern's one-character tokens: every ASCII character that is not Python's
    ``\\s`` (28-31 are whitespace to it), alone and between words."""
    texts = [chr(c) for c in range(128)] + [f"a{chr(c)}b{chr(c)}{chr(c)}'s" for c in range(128)]
    _assert_same(texts * 20, "tokens")


def test_many_words_and_long_texts_grow_the_tables():
    """Past the first sizes of the word table, the words' arrays and their bytes: 60,000
    distinct words, and one text of more tokens than the first table holds."""
    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 12)))
             for _ in range(60_000)]
    texts = [" ".join(words[i:i + 7]) for i in range(0, len(words), 7)]
    texts.append(" ".join(rng.choice(words) + "x" for _ in range(10_000)))
    texts.append("q" * 100_000)
    for pattern in PATTERNS:
        _assert_same(texts, pattern)


def test_what_the_scanner_leaves_to_python():
    assert compiled_word_ids([], "words", word_tokens) is None
    assert compiled_word_ids(["a", 1.5], "words", word_tokens) is None  # not a str
    assert compiled_word_ids(["a", None], "words", word_tokens) is None
    assert compiled_word_ids(["a\ud800b"], "words", word_tokens) is None  # a lone surrogate
    assert compiled_word_ids(["a", b"ab"], "default", PATTERNS["default"]) is None  # bytes
    with pytest.raises(ValueError, match="pattern must be one of"):
        compiled_word_ids(["a"], "spaces", word_tokens)


def test_word_ids_compiled_or_not_and_its_empty_vocabulary(monkeypatch):
    texts = ["The dog doesn't run", "", "it's 5pm"] * 1000
    compiled = term_counts._word_ids(texts, word_tokens, "words")
    monkeypatch.setattr(term_counts, "COMPILED_MIN_TEXTS", 10**9)
    python = term_counts._word_ids(texts, word_tokens, "words")
    for ours, theirs in zip(compiled, python, strict=True):
        assert np.array_equal(ours, theirs) if isinstance(ours, np.ndarray) else ours == theirs
    monkeypatch.setattr(term_counts, "COMPILED_MIN_TEXTS", 1)
    with pytest.raises(ValueError, match="empty vocabulary"):
        term_counts._word_ids(["", "...", "!"] * 10, word_tokens, "words")


def test_word_sets_are_the_binary_vectoriser_over_a_fixed_vocabulary(snli_dir):
    frame = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False)
    premises = frame["premise"].drop_duplicates().tolist() + ["", "Zebras zebras' ZEBRAS"]
    words = np.asarray(sorted({w for text in frame["hypothesis"] for w in word_tokens(text)}),
                       dtype=object)
    expected = CountVectorizer(analyzer=word_tokens, binary=True, dtype=np.float64,
                               vocabulary={w: j for j, w in enumerate(words)}
                               ).transform(premises).tocsr()
    held, n_distinct = term_counts.word_sets(premises, words)
    assert held.shape == expected.shape and held.dtype == expected.dtype
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(held, part), getattr(expected, part)), part
    assert n_distinct.tolist() == [len(set(word_tokens(text))) for text in premises]
    nothing, none = term_counts.word_sets(["", "!"], words)
    assert nothing.nnz == 0 and nothing.shape == (2, len(words)) and none.tolist() == [0, 0]


def test_unique_inverse_is_numpys():
    """Sorted distinct keys and each key's place among them, through every growth of the
    table and of the distinct keys' array; negative keys and none at all too."""
    from aflite_core.represent._token_kernels import unique_inverse

    rng = np.random.default_rng(5)
    for keys in (np.zeros(0, dtype=np.int64), np.array([7, -3, 7, 7, 2**40, -3]),
                 rng.integers(-10**12, 10**12, 50_000),  # nearly all distinct
                 rng.integers(0, 300, 100_000) * 104_729):  # few, often repeated
        distinct, inverse = unique_inverse(keys)
        expected, expected_inverse = np.unique(keys, return_inverse=True)
        assert inverse.dtype == np.int32 and distinct.dtype == np.int64
        assert np.array_equal(distinct, expected)
        assert np.array_equal(inverse, expected_inverse.reshape(-1))


def test_ngram_counts_through_the_hash_table_are_numpys(monkeypatch, snli_dir):
    hypotheses = pd.read_csv(snli_dir / "snli_dev.csv", keep_default_na=False)["hypothesis"]
    texts = hypotheses.tolist() + ["", "a a a", "Don\u2019t stop"]
    monkeypatch.setattr(term_counts, "COMPILED_MIN_KEYS", 1)
    hashed = term_counts.ngram_counts(texts)
    monkeypatch.setattr(term_counts, "COMPILED_MIN_KEYS", 10**12)
    sorted_ = term_counts.ngram_counts(texts)
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(hashed.counts, part), getattr(sorted_.counts, part))
    assert hashed.counts.dtype == sorted_.counts.dtype
    assert np.array_equal(hashed.first, sorted_.first)
    assert np.array_equal(hashed.second, sorted_.second)
    assert hashed.words.tolist() == sorted_.words.tolist()
