"""The load's compiled kernels give what they replace, to the bit.

:mod:`aflite_core.io._load_kernels` replaces, on columns of ``KERNEL_MIN_ROWS`` rows or more,
``pandas.util.hash_array`` over Python strings, Arrow's Unicode normalisation (lower case,
punctuation and symbols, whitespace runs, trimming) and scipy's connected components of the
premise-hypothesis graph. The load's duplicate counts and groups depend on them, so they must
not move: every ASCII character, Unicode text, empty texts, both Arrow string types, slices
and chunks are checked against the way they replace, random graphs (chains, stars, rows
without a premise) against scipy's, and a whole load with the kernels against one without.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import aflite_core.io._text_columns as text_columns
from aflite_core.data import SAMPLE
from aflite_core.io import load_dataset
from aflite_core.io._linked_groups import linked_components
from aflite_core.io._load_kernels import (
    arrow_hashes,
    linked_row_components,
    normalised_ascii_hashes,
)

TRIMS = {"both": pc.utf8_trim_whitespace, "left": pc.utf8_ltrim_whitespace,
         "right": pc.utf8_rtrim_whitespace}


def _texts() -> list[str]:
    """Every ASCII character alone, doubled, between letters and at either end; texts of
    printable ASCII and whitespace; texts with Unicode letters, spaces and symbols."""
    rng = np.random.default_rng(0)
    ascii_chars = [chr(i) for i in range(128)]
    out = ["", " ", "a", "A b", "  x  ", "!!", "a!b", "12345678", "123456789abcdefgh"]
    for c in ascii_chars:
        out += [c, c + c, f"a{c}b", f"{c}a", f"a{c}", f"A{c} {c}B"]
    printable = [chr(i) for i in range(32, 127)] + ["\t", "\n", "\r", "\x0c", " ", " "]
    unicode = ascii_chars + ["é", "ß", "İ", "\u2028", "\xa0", "€", "😀", "Σ", "\u3000"]
    for _ in range(5000):
        pool = printable if rng.random() < 0.7 else unicode
        out.append("".join(rng.choice(pool, int(rng.integers(0, 40)))))
    # past 255 bytes (SipHash keeps the length's low byte), whole words and a byte over
    out += ["x" * 255, "Y" * 256, "ab " * 100, " Z!" * 300, "word" * 64 + " ", "a  b" * 70]
    out += ["".join(rng.choice(printable, int(rng.integers(250, 600)))) for _ in range(50)]
    return out


def _pandas_hashes(texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return pd.util.hash_array(texts.to_numpy(zero_copy_only=False), categorize=False)


def _arrow_normalised(texts: pa.Array, trim: str) -> pa.Array:
    block = pc.utf8_lower(texts)
    block = pc.replace_substring_regex(block, pattern=r"[\pP\pS]+", replacement=" ")
    block = pc.replace_substring_regex(block, pattern=r"\s\s+|[^\S ]", replacement=" ")
    return TRIMS[trim](block)


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_the_hashes_are_pandas_hashes(kind):
    texts = pa.array(_texts(), type=kind)
    expected = _pandas_hashes(texts)
    np.testing.assert_array_equal(arrow_hashes(texts), expected)
    np.testing.assert_array_equal(arrow_hashes(texts.slice(7, 900)), expected[7:907])
    chunked = pa.chunked_array([texts.slice(0, 1000), texts.slice(1000, 0), texts.slice(1000)])
    np.testing.assert_array_equal(arrow_hashes(chunked), expected)
    assert len(set(expected.tolist())) > 0.9 * len(expected)  # not a constant


@pytest.mark.parametrize("trim", sorted(TRIMS))
@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_plain_ascii_texts_normalise_as_arrow_does(trim, kind):
    texts = pa.array(_texts(), type=kind)
    expected = _pandas_hashes(_arrow_normalised(texts, trim))
    hashes, slow = normalised_ascii_hashes(texts, trim)
    kept = ~slow
    np.testing.assert_array_equal(hashes[kept], expected[kept])
    values = texts.to_pylist()
    plain = np.array([all(32 <= ord(c) < 127 or c in "\t\n\x0c\r" for c in v) for v in values])
    np.testing.assert_array_equal(slow, ~plain)  # everything else is left to Arrow
    assert kept.mean() > 0.5
    sliced, sliced_slow = normalised_ascii_hashes(texts.slice(500, 300), trim)
    np.testing.assert_array_equal(sliced[~sliced_slow], hashes[500:800][~sliced_slow])


def test_a_normalised_text_hashes_equal_to_its_variants():
    hashes, slow = normalised_ascii_hashes(
        pa.array(["A man, sleeping.", "a man sleeping", "  A MAN -- sleeping!! ", "a mans"]),
        "both")
    assert not slow.any()
    assert hashes[0] == hashes[1] == hashes[2] != hashes[3]


@pytest.mark.parametrize("trim", sorted(TRIMS))
def test_the_column_hashes_are_the_same_with_and_without_the_kernels(trim, monkeypatch):
    texts = _texts()
    series = pd.Series(texts + [None, "x"], dtype=pd.StringDtype("pyarrow", na_value=np.nan))
    monkeypatch.setattr(text_columns, "_HASH_ROWS", 1000)  # several blocks, side by side
    monkeypatch.setattr(text_columns, "KERNEL_MIN_ROWS", 0)
    compiled = (text_columns.normalised_hashes(series, trim), text_columns.text_hashes(series),
                text_columns.text_hashes(series, missing_apart=True))
    monkeypatch.setattr(text_columns, "KERNEL_MIN_ROWS", 1 << 62)
    plain = (text_columns.normalised_hashes(series, trim), text_columns.text_hashes(series),
             text_columns.text_hashes(series, missing_apart=True))
    for got, expected in zip(compiled, plain, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_union_find_gives_scipys_components_in_the_same_numbers(monkeypatch):
    """Random graphs from a few texts (one big component) to many (mostly singletons), rows
    without a premise (-1) and a column without premises (None), and a long chain."""
    monkeypatch.setattr(text_columns, "KERNEL_MIN_ROWS", 1 << 62)  # scipy's way
    rng = np.random.default_rng(1)
    cases = []
    for n in (1, 2, 5, 40, 3000):
        for texts in (1, 3, n // 4 + 1, 2 * n):
            cases.append((rng.integers(-1, texts, n), rng.integers(0, texts, n)))
    rows = np.arange(2000)
    chain = (rows // 2, (rows + 1) // 2)  # row i shares a text with row i + 1: one component
    cases += [chain, (chain[0][::-1].copy(), chain[1][::-1].copy()), (rows, rows)]
    for premises, hypotheses in cases:
        for prem in (premises, None):
            expected = linked_components(prem, hypotheses)
            got = linked_row_components(prem, hypotheses)
            assert got.dtype == expected.dtype == np.int32
            np.testing.assert_array_equal(got, expected)
    assert linked_row_components(*chain).max() == 0
    assert linked_row_components(rows, rows).max() == 1999  # nothing shared
    assert len(linked_row_components(np.zeros(0), np.zeros(0))) == 0


def test_a_load_with_the_kernels_is_the_load_without(monkeypatch):
    """The bundled sample's load report, duplicate groups and linked groups."""
    monkeypatch.setattr(text_columns, "KERNEL_MIN_ROWS", 0)
    compiled = load_dataset(SAMPLE)
    monkeypatch.setattr(text_columns, "KERNEL_MIN_ROWS", 1 << 62)
    plain = load_dataset(SAMPLE)
    assert compiled.report == plain.report
    np.testing.assert_array_equal(compiled.group_codes(), plain.group_codes())
    pd.testing.assert_frame_equal(compiled.frame, plain.frame)


@pytest.mark.parametrize("trim", sorted(TRIMS))
def test_one_pass_makes_the_four_facts_each_function_makes(trim, monkeypatch):
    """Blank rows (Python's whitespace, Unicode's too), characters, hashes and normalised
    hashes of one compiled pass, Arrow's kernels for the rows it leaves, equal each
    function's own; missing cells as ``""``."""
    from aflite_core.io._text_facts import TextFacts

    texts = _texts() + ["\x0b", " \x1c ", "\u3000\xa0", "\t\r\n\x0c ", "!!", " ", "", "é"]
    series = pd.Series(texts + [None, "x", None],
                       dtype=pd.StringDtype("pyarrow", na_value=np.nan))
    monkeypatch.setattr(text_columns, "_HASH_ROWS", 1000)  # several blocks, side by side
    monkeypatch.setattr(text_columns, "KERNEL_MIN_ROWS", 0)
    one = text_columns.facts_in_one_pass(series, trim)
    each = {"blank": text_columns.blank_mask(series),
            "lengths": text_columns.text_lengths(series),
            "hashes": text_columns.text_hashes(series),
            "normalised": text_columns.normalised_hashes(series, trim)}
    assert sorted(one) == sorted(each)
    for name, values in each.items():
        assert one[name].dtype == values.dtype, name
        np.testing.assert_array_equal(one[name], values, err_msg=name)
    python_blank = np.array([not (t or "").strip() for t in texts + [None, "x", None]])
    np.testing.assert_array_equal(one["blank"], python_blank)
    assert 0 < one["blank"].sum() < len(texts) / 2  # blank rows of every kind, not most
    facts = TextFacts.of(series, trim=trim)  # the first fact asked for makes the four
    np.testing.assert_array_equal(facts.lengths, each["lengths"])
    assert sorted(facts._arrays) == sorted(each)
    monkeypatch.setattr(text_columns, "KERNEL_MIN_ROWS", 1 << 62)
    assert text_columns.facts_in_one_pass(series, trim) is None  # small: each function
    assert text_columns.facts_in_one_pass(series.astype(object), trim) is None  # not Arrow
