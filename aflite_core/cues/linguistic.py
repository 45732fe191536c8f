"""Boolean linguistic features per example, as a sparse example-by-feature matrix.

Seven feature families (``FAMILIES``), each read from the hypothesis by default (option:
premise or both; overlap always reads both):

``word``       presence of a lower-cased token (option: WordNet lemma), vocabulary
               restricted to tokens in at least ``min_count`` examples;
``sentiment``  sign of the summed word polarities (Hu & Liu opinion lexicon, or VADER):
               ``positive`` / ``negative`` / ``neutral``;
``tense``      ``past`` / ``present`` / ``future`` / ``none`` from the POS tag of the first
               finite verb (rule in :func:`tense_of` and docs/cues.md);
``negation``   a negation word or contraction (:data:`NEGATION_WORDS`);
``overlap``    ``overlap`` / ``no_overlap``: a non-stopword token shared by premise and
               hypothesis;
``ner``        a named entity: NLTK ``ne_chunk`` where its model is installed, otherwise a
               proper-noun/number heuristic; ``FeatureMatrix.methods['ner']`` says which;
``typo``       a token pyspellchecker does not know, among alphabetic, non-proper-noun,
               non-acronym tokens that are not the stem of a contraction.

Tokenisation is one regular expression (:data:`TOKEN_PATTERN`, Penn-Treebank-like: "don't"
-> "do", "n't"; "man's" -> "man", "'s"), far faster than punkt and good enough for the
one-sentence texts of NLI data. Texts are deduplicated before annotation (SNLI repeats each
premise three times); POS tagging runs in child processes; the per-text annotations are
cached on disk (``.npz``, never pickle) keyed by a hash of the texts and
:data:`EXTRACTOR_VERSION`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd
import scipy.sparse as sp
from spellchecker import __version__ as spell_version

from aflite_core._validation import check_choice, check_int, resolve_n_jobs
from aflite_core.cues import resources
from aflite_core.cues._annotation_cache import (
    EXTRACTOR_VERSION,  # noqa: F401 - re-exported
    cache_key,
    cache_load,
    cache_save,
    decode_strings,
    encode_strings,
)
from aflite_core.cues._tagging import (  # noqa: F401 - the taggers' public names: re-exported
    CLITICS,
    FUTURE_MODALS,
    NER_COLUMNS,
    TENSES,
    FastPerceptronTagger,
    ner_heuristic,
    ner_method,
    tagged_annotations,
    tagged_cache_key,
    tense_of,
    typo_candidates,
)
from aflite_core.text import (  # noqa: F401 - re-exported: used by the cue families' callers
    TOKEN_PATTERN,
    WORD_RE,
    default_cache_dir,
    hash_texts,
    tokenize,
    word_tokens,
)

#: Feature families, in display order.
FAMILIES: tuple[str, ...] = ("word", "sentiment", "tense", "negation", "overlap", "ner", "typo")

#: Negation words and contractions (lower-cased tokens). "n't" covers every contraction
#: the tokenizer splits (don't, isn't, can't, won't, ...); the apostrophe-less spellings
#: common in crowd-written text are listed too.
NEGATION_WORDS = frozenset(
    {
        "no", "not", "n't", "never", "nobody", "nothing", "none", "nowhere", "neither",
        "nor", "cannot", "noone", "no-one", "nope", "nah",
        "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "cant", "couldnt",
        "wouldnt", "shouldnt", "wont", "havent", "hasnt", "hadnt", "aint",
    }
)


# --------------------------------------------------------------------------------------
# result type
# --------------------------------------------------------------------------------------


@dataclass
class FeatureMatrix:
    """Boolean features per example.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix
        ``(n_examples, n_features)`` indicator matrix, dtype int8 (0/1).
    feature_type : np.ndarray of str
        Family of each column (one of :data:`FAMILIES`).
    feature : np.ndarray of str
        Value of each column within its family (a word, ``past``, ``negation``, ...).
    text : str
        Which text the features were read from: ``hypothesis``, ``premise`` or ``both``.
    methods : dict
        Family -> how it was computed (for NER: ``ne_chunk`` or the heuristic).
    unavailable : dict
        Family -> why it could not be computed, with the command that fixes it.
    """

    X: sp.csr_matrix
    feature_type: np.ndarray
    feature: np.ndarray
    text: str = "hypothesis"
    methods: dict[str, str] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)

    @property
    def n_examples(self) -> int:
        """Number of rows (examples)."""
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of columns (features)."""
        return int(self.X.shape[1])

    def rows(self, index: np.ndarray) -> FeatureMatrix:
        """Return the features of a subset of examples (boolean mask or positions)."""
        return FeatureMatrix(
            self.X[np.asarray(index)], self.feature_type, self.feature, self.text,
            dict(self.methods), dict(self.unavailable),
        )

    def column(self, feature_type: str, feature: str) -> np.ndarray:
        """Return the dense boolean indicator of one feature over the examples.

        Raises
        ------
        KeyError
            If the feature is not in the matrix.
        """
        hits = np.flatnonzero((self.feature_type == feature_type) & (self.feature == feature))
        if hits.size == 0:
            raise KeyError(f"feature {feature_type}:{feature} not in the feature matrix")
        return self.X[:, int(hits[0])].toarray().ravel().astype(bool)


# --------------------------------------------------------------------------------------
# lexical annotation: token counts per distinct text
# --------------------------------------------------------------------------------------


@dataclass
class _Lexicon:
    """Token counts of the distinct texts of one text column."""

    counts: sp.csr_matrix  # (n_unique, n_vocab) int32
    vocab: list[str]
    codes: np.ndarray  # example -> row of counts
    texts_hash: str


def _count_tokens(texts: Sequence[str]) -> tuple[sp.csr_matrix, list[str]]:
    vocab: dict[str, int] = {}
    indices: list[int] = []
    indptr = np.zeros(len(texts) + 1, dtype=np.int64)
    findall = WORD_RE.findall
    setdefault = vocab.setdefault
    for i, text in enumerate(texts):
        indices.extend([setdefault(tok, len(vocab)) for tok in
                        findall(text.lower().replace("\u2019", "'"))])
        indptr[i + 1] = len(indices)
    idx = np.asarray(indices, dtype=np.int32)
    counts = sp.csr_matrix(
        (np.ones(idx.size, dtype=np.int32), idx, indptr), shape=(len(texts), len(vocab))
    )
    counts.sum_duplicates()
    return counts, list(vocab)


def _lexicon(texts: Sequence[str], cache_dir: Path | None) -> _Lexicon:
    texts_hash = hash_texts(texts)
    key = cache_key("tokens", texts_hash)
    cached = cache_load(cache_dir, key)
    if cached is not None:
        counts = sp.csr_matrix(
            (cached["data"], cached["indices"], cached["indptr"]),
            shape=tuple(cached["shape"]),
        )
        return _Lexicon(counts, decode_strings(cached["vocab"]), cached["codes"], texts_hash)
    codes, uniques = pd.factorize(pd.Series(texts, dtype=object), sort=False)
    counts, vocab = _count_tokens(list(uniques))
    codes = codes.astype(np.int32)
    cache_save(cache_dir, key, {
        "data": counts.data, "indices": counts.indices, "indptr": counts.indptr,
        "shape": np.asarray(counts.shape, dtype=np.int64), "vocab": encode_strings(vocab),
        "codes": codes,
    })
    return _Lexicon(counts, vocab, codes, texts_hash)


def count_tokens_cached(texts: Sequence[str], cache_dir: Path | None) -> str:
    """Make (or find) in ``cache_dir`` the token counts of ``texts`` that the word, negation
    and overlap families read, and return the texts' hash (the cache entries' key part).

    Examples
    --------
    >>> import tempfile
    >>> len(count_tokens_cached(["a dog runs", "a cat"], Path(tempfile.mkdtemp())))
    64
    """
    return _lexicon(texts, cache_dir).texts_hash


# --------------------------------------------------------------------------------------
# families
# --------------------------------------------------------------------------------------


def _indicator(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    data = np.ones(len(rows), dtype=np.int8)
    mat = sp.csr_matrix((data, (rows, cols)), shape=shape)
    mat.sum_duplicates()
    mat.data[:] = 1
    return mat


def _one_hot(codes: np.ndarray, n_values: int) -> sp.csr_matrix:
    n = len(codes)
    return sp.csr_matrix(
        (np.ones(n, dtype=np.int8), codes.astype(np.int32), np.arange(n + 1)),
        shape=(n, n_values),
    )


def _bool_columns(flags: np.ndarray) -> sp.csr_matrix:
    """Boolean ``(n, k)`` dense array -> int8 CSR."""
    rows, cols = np.nonzero(flags)
    return _indicator(rows, cols, flags.shape)


def _binary_words(lexicons: list[_Lexicon]) -> tuple[sp.csr_matrix, list[str]]:
    """Example-level binary word matrix over the union of the sides' vocabularies."""
    if len(lexicons) == 1:
        lex = lexicons[0]
        unique_bin = lex.counts.astype(np.int8)
        unique_bin.data[:] = 1
        return unique_bin[lex.codes].tocsr(), list(lex.vocab)
    merged: dict[str, int] = {}
    for lex in lexicons:
        for word in lex.vocab:
            merged.setdefault(word, len(merged))
    total = None
    for lex in lexicons:
        remap = np.fromiter((merged[w] for w in lex.vocab), dtype=np.int32,
                            count=len(lex.vocab))
        counts = lex.counts
        unique_bin = sp.csr_matrix(
            (np.ones(counts.nnz, dtype=np.int32), remap[counts.indices], counts.indptr),
            shape=(counts.shape[0], len(merged)),
        )
        per_example = unique_bin[lex.codes]
        total = per_example if total is None else total + per_example
    assert total is not None
    total = total.tocsr()
    total.data[:] = 1
    return total.astype(np.int8), list(merged)


def _word_family(lexicons: list[_Lexicon], *, min_count: int, lemma: bool
                 ) -> tuple[sp.csr_matrix, list[str]]:
    if len(lexicons) == 1 and not lemma:
        # Drop rare words before expanding to examples: far fewer non-zeros to copy.
        lex = lexicons[0]
        unique_bin = lex.counts.astype(np.int8)
        unique_bin.data[:] = 1
        weights = np.bincount(lex.codes, minlength=unique_bin.shape[0])
        keep = np.flatnonzero(unique_bin.T @ weights >= min_count)
        X = unique_bin[:, keep].tocsr()[lex.codes]
        return X.tocsr(), [lex.vocab[k] for k in keep]
    X, vocab = _binary_words(lexicons)
    if lemma:
        X, vocab = _lemmatise(X, vocab)
    keep = np.flatnonzero(X.getnnz(axis=0) >= min_count)
    return X[:, keep].tocsr().astype(np.int8), [vocab[k] for k in keep]


def _lemmatise(X: sp.csr_matrix, vocab: list[str]) -> tuple[sp.csr_matrix, list[str]]:
    """Merge word columns by WordNet lemma (verb lemma if it differs, else noun lemma)."""
    from nltk.stem import WordNetLemmatizer  # lazy: +1912 ms to import

    lemmatizer = WordNetLemmatizer()
    lemmas = []
    for word in vocab:
        verb = lemmatizer.lemmatize(word, "v")
        lemmas.append(verb if verb != word else lemmatizer.lemmatize(word, "n"))
    codes, uniques = pd.factorize(pd.Series(lemmas, dtype=object), sort=True)
    mapping = _one_hot(codes, len(uniques)).astype(np.int32)
    merged = (X.astype(np.int32) @ mapping).tocsr()
    merged.data[:] = 1
    return merged.astype(np.int8), [str(u) for u in uniques]


@functools.lru_cache(maxsize=2)
def _polarity_lexicon(name: str) -> Mapping[str, float]:
    """The sentiment lexicon's polarity of each word, read once a process (0.06 s a read;
    read-only)."""
    return MappingProxyType(_read_polarity_lexicon(name))


def _read_polarity_lexicon(name: str) -> dict[str, float]:
    if name == "opinion":
        from nltk.corpus import opinion_lexicon  # lazy: +1660 ms to import

        polarity = {w.lower(): 1.0 for w in opinion_lexicon.positive()}
        polarity.update({w.lower(): -1.0 for w in opinion_lexicon.negative()})
        return polarity
    from nltk.sentiment.vader import SentimentIntensityAnalyzer  # lazy: +2312 ms to import

    return {w.lower(): float(v) for w, v in SentimentIntensityAnalyzer().lexicon.items()}


def _sentiment_family(lexicons: list[_Lexicon], lexicon_name: str) -> sp.csr_matrix:
    polarity = _polarity_lexicon(lexicon_name)
    score = None
    for lex in lexicons:
        values = np.fromiter((polarity.get(w, 0.0) for w in lex.vocab), dtype=np.float64,
                             count=len(lex.vocab))
        side = (lex.counts @ values)[lex.codes]
        score = side if score is None else score + side
    assert score is not None
    sign = np.sign(np.round(score, 9)).astype(np.int64)  # -1, 0, 1
    codes = np.select([sign > 0, sign < 0], [0, 1], default=2)
    return _one_hot(codes, 3)


def _negation_family(lexicons: list[_Lexicon]) -> sp.csr_matrix:
    has = None
    for lex in lexicons:
        cols = [k for k, w in enumerate(lex.vocab) if w in NEGATION_WORDS]
        side = (lex.counts[:, cols].getnnz(axis=1) > 0)[lex.codes]
        has = side if has is None else has | side
    assert has is not None
    return _bool_columns(has[:, None])


@functools.lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    """NLTK's English stop words and the clitics, read once a process (0.04 s a read)."""
    from nltk.corpus import stopwords  # lazy: +1660 ms to import

    return frozenset(w.lower() for w in stopwords.words("english")) | CLITICS


def _overlap_family(premise: _Lexicon, hypothesis: _Lexicon) -> sp.csr_matrix:
    stop = _stopwords()
    hyp_index = {w: k for k, w in enumerate(hypothesis.vocab) if w not in stop}
    prem_cols = [k for k, w in enumerate(premise.vocab) if w in hyp_index]
    remap = np.asarray([hyp_index[premise.vocab[k]] for k in prem_cols], dtype=np.int32)
    prem = premise.counts[:, prem_cols].tocsr()
    prem.data[:] = 1
    prem = sp.csr_matrix((prem.data, remap[prem.indices], prem.indptr),
                         shape=(prem.shape[0], len(hypothesis.vocab)))
    content = np.zeros(len(hypothesis.vocab), dtype=bool)
    content[list(hyp_index.values())] = True
    hyp = hypothesis.counts.copy()
    hyp.data = content[hyp.indices].astype(np.int32)
    shared = prem[premise.codes].multiply(hyp[hypothesis.codes])
    has = np.asarray(shared.sum(axis=1)).ravel() > 0
    return _bool_columns(np.column_stack([has, ~has]))


def _check_texts(name: str, texts: Sequence[str] | None, n: int | None) -> list[str] | None:
    if texts is None:
        return None
    texts = list(texts)
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(
            f"{name}: expected a sequence of str, got {type(texts[bad]).__name__} at position "
            f"{bad}"
        )
    if n is not None and len(texts) != n:
        raise ValueError(f"{name}: expected {n} texts (one per hypothesis), got {len(texts)}")
    return texts


def _family_resources(family: str, *, lemma: bool, sentiment_lexicon: str) -> list[str]:
    if family == "word":
        return ["wordnet"] if lemma else []
    if family == "sentiment":
        return ["opinion_lexicon" if sentiment_lexicon == "opinion" else "vader_lexicon"]
    if family in ("tense", "ner", "typo"):
        return ["averaged_perceptron_tagger_eng"]
    if family == "overlap":
        return ["stopwords"]
    return []


def extract_features(
    hypotheses: Sequence[str],
    premises: Sequence[str] | None = None,
    *,
    features: Iterable[str] = FAMILIES,
    text: str = "hypothesis",
    min_count: int = 1,
    lemma: bool = False,
    sentiment_lexicon: str = "opinion",
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    n_jobs: int | None = None,
    on_missing: str = "report",
) -> FeatureMatrix:
    """Compute boolean linguistic features for each example.

    Parameters
    ----------
    hypotheses : sequence of str
        The hypothesis of each example (the single text of single-text data).
    premises : sequence of str, optional
        The premise of each example; needed for ``overlap`` and ``text='premise'|'both'``.
    features : iterable of str
        Families to compute, from :data:`FAMILIES`.
    text : {'hypothesis', 'premise', 'both'}
        Text the families other than ``overlap`` read. ``both``: a feature is present when
        it is present in either text; sentiment sums the polarities of both texts.
    min_count : int
        Keep words present in at least this many examples.
    lemma : bool
        Word features on WordNet lemmas instead of surface forms (needs ``wordnet``).
    sentiment_lexicon : {'opinion', 'vader'}
        Polarity lexicon: Hu & Liu (+1/-1 per word) or VADER (valence per word).
    cache : bool
        Read and write per-text annotations in ``cache_dir``.
    cache_dir : path, optional
        Cache folder; default :func:`default_cache_dir`.
    n_jobs : int, optional
        Child processes for POS tagging; default: every CPU core.
    on_missing : {'report', 'raise'}
        When a family cannot run (missing NLTK resource, no premise for overlap):
        ``report`` records the reason in ``FeatureMatrix.unavailable`` and goes on;
        ``raise`` raises :class:`~aflite_core.cues.resources.ResourceMissingError` (or
        ``ValueError``).

    Returns
    -------
    FeatureMatrix
        One row per example, in input order.

    Notes
    -----
    One extraction at a time per process (:data:`EXTRACT_LOCK`): NLTK's corpus readers are
    not thread-safe (two threads reading the bundled opinion lexicon's zip at once end in
    ``AttributeError: 'NoneType' object has no attribute 'close'`` inside ``nltk.data``), as
    when the cue map-reduce's chunks run on the threads of one Dask worker. The extraction is
    pure Python (the GIL), so threads would not run it side by side anyway.
    """
    return extract_with_annotations(
        hypotheses, premises, features=features, text=text, min_count=min_count, lemma=lemma,
        sentiment_lexicon=sentiment_lexicon, cache=cache, cache_dir=cache_dir, n_jobs=n_jobs,
        on_missing=on_missing)[0]


def extract_with_annotations(hypotheses: Sequence[str], premises: Sequence[str] | None,
                              **options) -> tuple[FeatureMatrix, dict[str, dict]]:
    """:func:`extract_features`, and the tagging annotations it made, per side
    (``{side: {"tense": ..., "ner": ..., "typo": ...}}``, one value per example; empty when
    no tagged family ran)."""
    with EXTRACT_LOCK:
        return _extract_features(hypotheses, premises, **options)


#: Held by :func:`extract_features` (see its notes).
EXTRACT_LOCK = threading.Lock()


def _extract_features(hypotheses: Sequence[str], premises: Sequence[str] | None, *,
                      features: Iterable[str], text: str, min_count: int, lemma: bool,
                      sentiment_lexicon: str, cache: bool,
                      cache_dir: str | os.PathLike | None, n_jobs: int | None,
                      on_missing: str) -> tuple[FeatureMatrix, dict[str, dict]]:
    hyps = _check_texts("hypotheses", hypotheses, None)
    assert hyps is not None
    prems = _check_texts("premises", premises, len(hyps))
    families = check_families(features)
    check_choice("text", text, ("hypothesis", "premise", "both"))
    if text != "hypothesis" and prems is None:
        raise ValueError(f"text={text!r} needs premises, but none were given")
    options = _FamilyOptions(
        sentiment_lexicon=check_choice("sentiment_lexicon", sentiment_lexicon,
                                       ("opinion", "vader")),
        min_count=check_int("min_count", min_count, minimum=1),
        lemma=lemma,
    )
    check_choice("on_missing", on_missing, ("report", "raise"))
    annotations = _Annotations(
        {"hypothesis": hyps, "premise": prems},
        sides=["hypothesis", "premise"] if text == "both" else [text],
        cache_dir=cache_folder(cache, cache_dir),
        n_jobs=_resolve_n_jobs(n_jobs),
    )

    blocks: list[sp.csr_matrix] = []
    types: list[np.ndarray] = []
    names: list[np.ndarray] = []
    methods: dict[str, str] = {}
    unavailable: dict[str, str] = {}
    for family in families:
        problem = _family_problem(family, options, has_premises=prems is not None)
        if problem is not None:
            if on_missing == "raise":
                raise problem
            unavailable[family] = str(problem)
            continue
        block, values, methods[family] = _FAMILY_BUILDERS[family](annotations, options)
        blocks.append(block.astype(np.int8))
        types.append(np.full(len(values), family, dtype=object))
        names.append(np.asarray(values, dtype=object))

    X = sp.hstack(blocks, format="csr", dtype=np.int8) if blocks else \
        sp.csr_matrix((len(hyps), 0), dtype=np.int8)
    return FeatureMatrix(
        X=X,
        feature_type=np.concatenate(types) if types else np.empty(0, dtype=object),
        feature=np.concatenate(names) if names else np.empty(0, dtype=object),
        text=text,
        methods=methods,
        unavailable=unavailable,
    ), dict(annotations.tagged_sides)


def preload(families: Iterable[str]) -> None:
    """Load in this process what an extraction of ``families`` reads before the texts' own
    annotations: NLTK (0.48 s, serial at the audit's cue stage when it was first imported
    there: cProfile of the CLI audit at 300,000 rows), the stop words and the default
    sentiment lexicon (each kept a process). Called by the work ahead while its child tags;
    whatever fails here the extraction meets again and reports."""
    families = set(families)
    with contextlib.suppress(Exception):
        resources.use_bundled_data()  # imports NLTK
        if "overlap" in families and not resources.missing(["stopwords"]):
            _stopwords()
        if "sentiment" in families and not resources.missing(["opinion_lexicon"]):
            _polarity_lexicon("opinion")


def cache_folder(cache: bool, cache_dir: str | os.PathLike | None) -> Path | None:
    """The annotation cache folder, or None when caching is off."""
    if not cache:
        return None
    return Path(cache_dir) if cache_dir is not None else default_cache_dir()


#: The families that read the part-of-speech / named-entity / spelling annotations: the
#: costly part of a first extraction (cached on disk per text column, :func:`tags_cached`).
TAGGED_FAMILIES: tuple[str, ...] = ("tense", "ner", "typo")


def tags_cached(hypotheses: Sequence[str], premises: Sequence[str] | None, *,
                features: Iterable[str] = FAMILIES, text: str = "hypothesis",
                cache: bool = True, cache_dir: str | os.PathLike | None = None) -> bool:
    """Whether :func:`extract_features` with these arguments would find its tagging
    annotations in the on-disk cache (True when none of :data:`TAGGED_FAMILIES` is asked for).

    Tagging is most of a first extraction's time (100,000 rows: about 10 s on two cores
    against 1 s once cached), so the audit's progress plan asks this before it shares out the
    bar. It neither imports NLTK (0.9 s) nor tags anything: it hashes the texts of each side
    read and looks for the cache entry, NLTK's version read from its package metadata and an
    entry of either named-entity method counting (which one is installed is NLTK's to say).

    Examples
    --------
    >>> import tempfile
    >>> tags_cached(["a dog runs"], None, cache_dir=tempfile.mkdtemp())
    False
    >>> tags_cached(["a dog runs"], None, features=["word"], cache_dir=tempfile.mkdtemp())
    True
    """
    from importlib import metadata  # lazy: only the progress plan asks

    if not set(check_families(features)) & set(TAGGED_FAMILIES):
        return True
    folder = cache_folder(cache, cache_dir)
    if folder is None:
        return False
    sides = {"hypothesis": hypotheses, "premise": premises}
    try:
        version = metadata.version("nltk")
    except metadata.PackageNotFoundError:
        return False
    for side in (["hypothesis", "premise"] if text == "both" else [text]):
        texts = sides[side]
        if texts is None:
            return False
        digest = hash_texts(texts)  # a slice at a time: a lazy sequence stays lazy
        if not any((folder / f"{tagged_cache_key(digest, method, version, spell_version)}"
                              ".npz").is_file() for method in NER_COLUMNS):
            return False
    return True


def _family_problem(family: str, options: _FamilyOptions, *, has_premises: bool
                    ) -> Exception | None:
    """Why ``family`` cannot run (a missing NLTK resource, no premise for overlap), or None.

    The error is raised with ``on_missing='raise'``; its text is reported otherwise.
    """
    needed = _family_resources(family, lemma=options.lemma,
                               sentiment_lexicon=options.sentiment_lexicon)
    gaps = resources.missing(needed)
    if gaps:
        return resources.missing_error(family, gaps)
    if family == "overlap" and not has_premises:
        return ValueError(
            "overlap features unavailable: they need a premise column and this dataset has a "
            "single text column"
        )
    return None


# --------------------------------------------------------------------------------------
# one builder per family: (columns, their values, how they were computed)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FamilyOptions:
    """The options of :func:`extract_features` the family builders read."""

    min_count: int
    lemma: bool
    sentiment_lexicon: str


class _Annotations:
    """Token counts and POS-tag annotations of each text side, computed on first use.

    ``sides`` are the sides the families read (``hypothesis``, ``premise`` or both);
    overlap reads both whatever ``sides`` says.
    """

    def __init__(self, texts: dict[str, list[str] | None], *, sides: list[str],
                 cache_dir: Path | None, n_jobs: int):
        self.texts = texts
        self.sides = sides
        self.cache_dir = cache_dir
        self.n_jobs = n_jobs
        self._ner_method: str | None = None
        self._lexicons: dict[str, _Lexicon] = {}
        self._tagged: dict[str, dict[str, np.ndarray]] = {}

    @property
    def ner_method(self) -> str:
        """How named entities are found (:func:`ner_method`), asked on first use: it imports
        NLTK (0.3 s), which the word, negation and overlap families do not need."""
        if self._ner_method is None:
            self._ner_method = ner_method()
        return self._ner_method

    def lexicon(self, side: str) -> _Lexicon:
        """Token counts of one side's texts."""
        if side not in self._lexicons:
            self._lexicons[side] = _lexicon(self.texts[side], self.cache_dir)  # type: ignore[arg-type]
        return self._lexicons[side]

    def lexicons(self) -> list[_Lexicon]:
        """Token counts of the sides the families read."""
        return [self.lexicon(side) for side in self.sides]

    @property
    def tagged_sides(self) -> dict[str, dict[str, np.ndarray]]:
        """The tagging annotations made so far, per side."""
        return self._tagged

    def tagged(self, key: str) -> list[np.ndarray]:
        """One tagging annotation (``tense``, ``ner`` or ``typo``) of each side read."""
        return [self._tagged_side(side)[key] for side in self.sides]

    def _tagged_side(self, side: str) -> dict[str, np.ndarray]:
        if side not in self._tagged:
            self._tagged[side] = tagged_annotations(
                self.texts[side], ner_method=self.ner_method,  # type: ignore[arg-type]
                n_jobs=self.n_jobs, cache_dir=self.cache_dir,
                texts_hash=self.lexicon(side).texts_hash,
            )
        return self._tagged[side]


_FamilyBlock = tuple[sp.csr_matrix, list[str], str]


def _word_block(annotations: _Annotations, options: _FamilyOptions) -> _FamilyBlock:
    block, values = _word_family(annotations.lexicons(), min_count=options.min_count,
                                 lemma=options.lemma)
    return block, values, word_method(min_count=options.min_count, lemma=options.lemma)


def word_method(*, min_count: int, lemma: bool) -> str:
    """How the ``word`` family is computed (``FeatureMatrix.methods['word']``)."""
    return (f"lower-cased regex tokens{' -> WordNet lemma' if lemma else ''}, present in "
            f">= {min_count} examples")


def _sentiment_block(annotations: _Annotations, options: _FamilyOptions) -> _FamilyBlock:
    block = _sentiment_family(annotations.lexicons(), options.sentiment_lexicon)
    source = "Hu & Liu opinion lexicon" if options.sentiment_lexicon == "opinion" else "VADER"
    method = f"sign of summed word polarities ({source})"
    return block, ["positive", "negative", "neutral"], method


def _negation_block(annotations: _Annotations, options: _FamilyOptions) -> _FamilyBlock:
    method = "negation word or n't contraction (NEGATION_WORDS)"
    return _negation_family(annotations.lexicons()), ["negation"], method


def _overlap_block(annotations: _Annotations, options: _FamilyOptions) -> _FamilyBlock:
    block = _overlap_family(annotations.lexicon("premise"), annotations.lexicon("hypothesis"))
    method = "shared token of premise and hypothesis, NLTK stopwords ignored"
    return block, ["overlap", "no_overlap"], method


def _tense_block(annotations: _Annotations, options: _FamilyOptions) -> _FamilyBlock:
    block = _or_sides(annotations.tagged("tense"), len(TENSES))
    return block, list(TENSES), "first finite verb by NLTK perceptron POS tags (tense_of)"


def _ner_block(annotations: _Annotations, options: _FamilyOptions) -> _FamilyBlock:
    columns = NER_COLUMNS[annotations.ner_method]
    bits = np.bitwise_or.reduce(annotations.tagged("ner"))
    flags = (bits[:, None] >> np.arange(len(columns))) & 1
    method = (
        "NLTK ne_chunk (maxent) + CD numbers" if annotations.ner_method == "ne_chunk" else
        "proper-noun/number heuristic (NNP/NNPS and CD tags; ne_chunk model "
        "'maxent_ne_chunker_tab' not installed)"
    )
    return _bool_columns(flags.astype(bool)), list(columns), method


def _typo_block(annotations: _Annotations, options: _FamilyOptions) -> _FamilyBlock:
    flags = np.logical_or.reduce(annotations.tagged("typo"))
    method = (
        f"pyspellchecker {spell_version} (en) on alphabetic, non-proper-noun, "
        "non-acronym tokens"
    )
    return _bool_columns(flags[:, None]), ["typo"], method


#: Family -> its builder; every family of :data:`FAMILIES` has one.
_FAMILY_BUILDERS: dict[str, Callable[[_Annotations, _FamilyOptions], _FamilyBlock]] = {
    "word": _word_block,
    "sentiment": _sentiment_block,
    "tense": _tense_block,
    "negation": _negation_block,
    "overlap": _overlap_block,
    "ner": _ner_block,
    "typo": _typo_block,
}


def _or_sides(codes: list[np.ndarray], n_values: int) -> sp.csr_matrix:
    """One-hot of per-side value codes, OR-ed over the sides."""
    total = _one_hot(codes[0].astype(np.int64), n_values)
    for extra in codes[1:]:
        total = total + _one_hot(extra.astype(np.int64), n_values)
    total = total.tocsr()
    total.data[:] = 1
    return total


def check_families(features: Iterable[str]) -> list[str]:
    if isinstance(features, str):
        features = [f.strip() for f in features.split(",") if f.strip()]
    chosen = list(dict.fromkeys(features))
    unknown = [f for f in chosen if f not in FAMILIES]
    if unknown or not chosen:
        raise ValueError(
            f"features: expected a non-empty subset of {list(FAMILIES)}, got {chosen!r}"
        )
    return [f for f in FAMILIES if f in chosen]


def _resolve_n_jobs(n_jobs: int | None) -> int:
    """POS-tagging workers: None means every core here (the shared helper's None means 1)."""
    return resolve_n_jobs(-1 if n_jobs is None else n_jobs)
