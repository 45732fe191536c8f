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
premise three times); POS tagging runs in worker processes; the per-text annotations are
cached on disk (``.npz``, never pickle) keyed by a hash of the texts and
:data:`EXTRACTOR_VERSION`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import multiprocessing
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from aflite_core._validation import check_choice, check_int, resolve_n_jobs
from aflite_core.cues import resources
from aflite_core.cues.resources import ResourceMissingError

#: Feature families, in display order.
FAMILIES: tuple[str, ...] = ("word", "sentiment", "tense", "negation", "overlap", "ner", "typo")

#: Bump when any extraction rule changes: it is part of every cache key.
EXTRACTOR_VERSION = "1"

_LET = r"[^\W\d_]"  # a Unicode letter
#: The tokenizer: ``n't`` split off its stem, clitics ('s 're 've 'll 'd 'm) split off,
#: numbers (with . , : inside and a letter suffix: 1990s, 10:30, 5pm), words with inner
#: hyphens or apostrophes (t-shirt, o'clock), and any other non-space character alone.
TOKEN_PATTERN = (
    rf"{_LET}+(?=n't\b)|n't\b|'(?:s|re|ve|ll|d|m)\b"
    rf"|\d+(?:[.,:]\d+)*{_LET}*"
    rf"|{_LET}+(?:-{_LET}+|'(?!(?:s|re|ve|ll|d|m|t)\b){_LET}+)*"
    r"|[^\w\s]|_"
)
_TOKEN_RE = re.compile(TOKEN_PATTERN, re.IGNORECASE)
# The same pattern without the punctuation branch: word tokens only.
_WORD_RE = re.compile(TOKEN_PATTERN.rsplit("|", 2)[0], re.IGNORECASE)

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

#: Modals that make a clause future tense (``wo`` is the stem of "won't").
FUTURE_MODALS = frozenset({"will", "shall", "'ll", "wo"})
#: Present forms of "be" that start a "be going to + VB" future.
_BE_PRESENT = frozenset({"am", "is", "are", "'m", "'re", "'s"})
#: Values of the tense family; every example gets exactly one.
TENSES: tuple[str, ...] = ("none", "past", "present", "future")

_PROPER = frozenset({"NNP", "NNPS"})
#: NER features by method. ``entity`` is any of the others.
NER_COLUMNS = {
    "heuristic": ("entity", "proper_noun", "number"),
    "ne_chunk": (
        "entity", "person", "organization", "gpe", "location", "facility", "gsp", "number",
    ),
}
_NE_CHUNK_LABELS = {"PERSON", "ORGANIZATION", "GPE", "LOCATION", "FACILITY", "GSP"}
_CLITICS = frozenset({"n't", "'s", "'re", "'ve", "'ll", "'d", "'m"})

#: Inputs below this many distinct texts are tagged in the calling process.
_PARALLEL_MIN = 40_000


# --------------------------------------------------------------------------------------
# tokens
# --------------------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Split ``text`` into tokens with :data:`TOKEN_PATTERN`, keeping case and punctuation.

    Curly apostrophes are read as straight ones.

    Examples
    --------
    >>> tokenize("The dog doesn't run, it's 5pm.")
    ['The', 'dog', 'does', "n't", 'run', ',', 'it', "'s", '5pm', '.']
    """
    return _TOKEN_RE.findall(text.replace("\u2019", "'"))


def word_tokens(text: str) -> list[str]:
    """Return the lower-cased word tokens of ``text`` (punctuation dropped)."""
    return _WORD_RE.findall(text.lower().replace("\u2019", "'"))


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
# on-disk cache (npz, no pickle)
# --------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """Return the annotation cache folder.

    ``$AFLITE_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/aflite-audit``, else
    ``~/.cache/aflite-audit``.
    """
    if os.environ.get("AFLITE_CACHE_DIR"):
        return Path(os.environ["AFLITE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aflite-audit"


def hash_texts(texts: Sequence[str]) -> str:
    """SHA-256 of a list of texts (NUL-separated, chunked, with the count): the content key of
    the annotation and embedding caches."""
    digest = hashlib.sha256()
    for start in range(0, len(texts), 50_000):
        digest.update("\x00".join(texts[start : start + 50_000]).encode("utf-8", "replace"))
        digest.update(b"\x01")
    digest.update(str(len(texts)).encode())
    return digest.hexdigest()


def _cache_key(kind: str, texts_hash: str, *parts: str) -> str:
    raw = "|".join((EXTRACTOR_VERSION, kind, texts_hash, *parts))
    return f"{kind}-{hashlib.sha256(raw.encode()).hexdigest()[:40]}"


def _cache_load(cache_dir: Path | None, key: str) -> dict[str, np.ndarray] | None:
    if cache_dir is None:
        return None
    path = cache_dir / f"{key}.npz"
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, KeyError):
        return None  # unreadable or truncated entry: recompute (and overwrite)


def _cache_save(cache_dir: Path | None, key: str, arrays: dict[str, np.ndarray]) -> None:
    if cache_dir is None:
        return
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=f".{key}-", suffix=".npz")
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **arrays)
        os.replace(tmp, cache_dir / f"{key}.npz")
    except OSError:
        # A read-only or full cache folder must not stop the analysis; it only costs time.
        return


def _encode_strings(values: Sequence[str]) -> np.ndarray:
    return np.frombuffer("\n".join(values).encode("utf-8"), dtype=np.uint8)


def _decode_strings(buffer: np.ndarray) -> list[str]:
    text = buffer.tobytes().decode("utf-8")
    return text.split("\n") if text else []


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
    findall = _WORD_RE.findall
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
    key = _cache_key("tokens", texts_hash)
    cached = _cache_load(cache_dir, key)
    if cached is not None:
        counts = sp.csr_matrix(
            (cached["data"], cached["indices"], cached["indptr"]),
            shape=tuple(cached["shape"]),
        )
        return _Lexicon(counts, _decode_strings(cached["vocab"]), cached["codes"], texts_hash)
    codes, uniques = pd.factorize(pd.Series(texts, dtype=object), sort=False)
    counts, vocab = _count_tokens(list(uniques))
    codes = codes.astype(np.int32)
    _cache_save(cache_dir, key, {
        "data": counts.data, "indices": counts.indices, "indptr": counts.indptr,
        "shape": np.asarray(counts.shape, dtype=np.int64), "vocab": _encode_strings(vocab),
        "codes": codes,
    })
    return _Lexicon(counts, vocab, codes, texts_hash)


# --------------------------------------------------------------------------------------
# POS tagging (NLTK averaged perceptron, scored with numpy)
# --------------------------------------------------------------------------------------


class FastPerceptronTagger:
    """NLTK's averaged-perceptron POS tagger with vectorised scoring and memoisation.

    Gives the same tags as ``nltk.tag.perceptron.PerceptronTagger.tag`` (same model,
    features, tag dictionary and tie-break: the highest score, ties to the alphabetically
    last tag), about four times faster: the weights are one dense ``(n_features,
    n_tags)`` array summed in NLTK's feature order, and tag decisions are memoised by
    their full feature context.

    Parameters
    ----------
    tagger : nltk.tag.perceptron.PerceptronTagger, optional
        A loaded tagger; default: the English tagger from ``nltk.data.path``.
    """

    _MEMO_LIMIT = 300_000

    def __init__(self, tagger=None):
        if tagger is None:
            from nltk.tag.perceptron import PerceptronTagger

            tagger = PerceptronTagger(lang="eng")
        # Plain dicts and arrays only: the object is sent to worker processes, which then
        # tag without importing NLTK (a multi-second import).
        self.tagdict = dict(tagger.tagdict)
        weights = tagger.model.weights
        self.classes = sorted(tagger.classes, reverse=True)
        column = {c: j for j, c in enumerate(self.classes)}
        self._fid = {feat: k for k, feat in enumerate(weights)}
        # One extra all-zero row stands for features the model never saw: adding 0.0
        # leaves every sum exactly as NLTK's, which skips them.
        self._zero = len(weights)
        self._weights = np.zeros((len(weights) + 1, len(self.classes)), dtype=np.float64)
        for k, per_class in enumerate(weights.values()):
            for label, value in per_class.items():
                self._weights[k, column[label]] = value
        self._bias = self._fid.get("bias", self._zero)
        self._reset_caches()

    def _reset_caches(self) -> None:
        self._memo: dict[tuple[str, ...], str] = {}
        self._word_ids: dict[str, tuple[int, int, int]] = {}
        self._ctx_ids: dict[str, tuple[int, int, int, int, int, int]] = {}
        self._tag_ids: dict[tuple[str, str], tuple[int, int, int]] = {}
        self._tagword_ids: dict[tuple[str, str], int] = {}

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for name in ("_memo", "_word_ids", "_ctx_ids", "_tag_ids", "_tagword_ids"):
            state[name] = {}  # caches are rebuilt where the tagger runs
        return state

    def _feature_ids(self, word: str, ctx: list[str], j: int, prev: str, prev2: str
                     ) -> list[int]:
        """Row ids of NLTK's 14 features, in NLTK's order (see ``_get_features``)."""
        fid, zero = self._fid, self._zero
        w = self._word_ids.get(word)
        if w is None:
            w = self._word_ids[word] = (fid.get("i suffix " + word[-3:], zero),
                                        fid.get("i pref1 " + word[:1], zero),
                                        fid.get("i word " + ctx[j], zero))
        c = []
        for token in (ctx[j - 1], ctx[j - 2], ctx[j + 1], ctx[j + 2]):
            ids = self._ctx_ids.get(token)
            if ids is None:
                ids = self._ctx_ids[token] = (
                    fid.get("i-1 word " + token, zero), fid.get("i-1 suffix " + token[-3:], zero),
                    fid.get("i-2 word " + token, zero), fid.get("i+1 word " + token, zero),
                    fid.get("i+1 suffix " + token[-3:], zero),
                    fid.get("i+2 word " + token, zero),
                )
            c.append(ids)
        t = self._tag_ids.get((prev, prev2))
        if t is None:
            t = self._tag_ids[(prev, prev2)] = (fid.get("i-1 tag " + prev, zero),
                                                fid.get("i-2 tag " + prev2, zero),
                                                fid.get("i tag+i-2 tag " + prev + " " + prev2,
                                                        zero))
        tw = self._tagword_ids.get((prev, ctx[j]))
        if tw is None:
            tw = self._tagword_ids[(prev, ctx[j])] = fid.get(
                "i-1 tag+i word " + prev + " " + ctx[j], zero)
        return [self._bias, w[0], w[1], t[0], t[1], t[2], w[2], tw, c[0][0], c[0][1],
                c[1][2], c[2][3], c[2][4], c[3][5]]

    def tag(self, tokens: Sequence[str]) -> list[str]:
        """Return the POS tag of each token."""
        prev, prev2 = "-START-", "-START2-"
        ctx = ["-START-", "-START2-", *(_normalize(w) for w in tokens), "-END-", "-END2-"]
        tags: list[str] = []
        memo, tagdict, weights = self._memo, self.tagdict, self._weights
        for i, word in enumerate(tokens):
            tag = tagdict.get(word)
            if not tag:
                j = i + 2
                key = (word, ctx[j - 2], ctx[j - 1], ctx[j + 1], ctx[j + 2], prev, prev2)
                tag = memo.get(key)
                if tag is None:
                    scores = weights[self._feature_ids(word, ctx, j, prev, prev2)].sum(axis=0)
                    tag = self.classes[int(scores.argmax())]
                    if len(memo) >= self._MEMO_LIMIT:
                        self._reset_caches()
                        memo = self._memo
                    memo[key] = tag
            tags.append(tag)
            prev2, prev = prev, tag
        return tags


def _normalize(word: str) -> str:
    """NLTK's ``PerceptronTagger.normalize``: the word form the tagger's features use."""
    if "-" in word and word[0] != "-":
        return "!HYPHEN"
    if word.isdigit() and len(word) == 4:
        return "!YEAR"
    if word and word[0].isdigit():
        return "!DIGITS"
    return word.lower()


@dataclass(frozen=True)
class _TaggingContext:
    """Everything a tagging worker needs; built once in the calling process."""

    tagger: FastPerceptronTagger
    common: frozenset[str]
    ner_method: str
    search_path: tuple[str, ...]


@functools.lru_cache(maxsize=2)
def _tagging_context(search_path: tuple[str, ...], ner_method: str) -> _TaggingContext:
    # Keyed by nltk.data.path so a changed search path loads afresh.
    tagger = FastPerceptronTagger()
    common = {w.lower() for w, t in tagger.tagdict.items() if t not in _PROPER}
    if resources.is_installed("words"):
        from nltk.corpus import words

        common.update(w for w in words.words("en") if w.islower())
    return _TaggingContext(tagger, frozenset(common), ner_method, search_path)


@functools.lru_cache(maxsize=2)
def _load_ne_chunker(search_path: tuple[str, ...]):
    import nltk
    from nltk.chunk import ne_chunker

    nltk.data.path[:] = list(search_path)
    return ne_chunker()


@functools.lru_cache(maxsize=1)
def _load_spellchecker():
    from spellchecker import SpellChecker

    return SpellChecker(language="en")


def tense_of(tokens: Sequence[str], tags: Sequence[str]) -> str:
    """Return ``past``, ``present``, ``future`` or ``none`` for one tagged sentence.

    The rule (first finite verb decides):

    1. Scan tokens left to right for the first finite verb: a tag ``MD``, ``VBD``, ``VBZ``
       or ``VBP``.
    2. ``MD`` in :data:`FUTURE_MODALS` (will, shall, 'll, wo[n't]) -> ``future``; any other
       modal (can, may, must, could, would, might, should, 'd) -> ``present``.
    3. A present form of "be" followed (after at most two ``RB`` tokens, e.g. "not") by
       "going" "to" and a ``VB`` -> ``future`` ("is going to swim").
    4. ``VBD`` -> ``past``; ``VBZ``/``VBP`` -> ``present`` (so "is going" is present).
    5. No finite verb (fragments such as "A dog running.") -> ``none``.
    """
    for i, (tok, tag) in enumerate(zip(tokens, tags, strict=True)):
        if tag == "MD":
            return "future" if tok.lower() in FUTURE_MODALS else "present"
        if tag in ("VBD", "VBZ", "VBP"):
            if tok.lower() in _BE_PRESENT and _going_to(tokens, tags, i + 1):
                return "future"
            return "past" if tag == "VBD" else "present"
    return "none"


def _going_to(tokens: Sequence[str], tags: Sequence[str], start: int) -> bool:
    j = start
    while j < len(tokens) and j < start + 2 and tags[j] == "RB":
        j += 1
    return (
        j + 2 < len(tokens)
        and tokens[j].lower() == "going"
        and tokens[j + 1].lower() == "to"
        and tags[j + 2] == "VB"
    )


def ner_heuristic(tokens: Sequence[str], tags: Sequence[str], common: frozenset[str]
                  ) -> tuple[bool, bool]:
    """Return ``(proper_noun, number)`` for one tagged sentence.

    A proper noun is a token tagged ``NNP``/``NNPS`` that starts with an upper-case letter,
    except the first word of the sentence when its lower-case form is a common word
    (``common``: words the tagger's dictionary tags as something other than a proper noun,
    and the lower-case entries of NLTK's ``words`` list when installed).
    A number is a token tagged ``CD`` (digits or number words: "two", "1990s").
    """
    proper = number = False
    first = next((i for i, t in enumerate(tokens) if t[:1].isalpha()), -1)
    for i, (tok, tag) in enumerate(zip(tokens, tags, strict=True)):
        if tag in _PROPER and tok[:1].isupper():
            if not (i == first and tok.lower() in common):
                proper = True
        elif tag == "CD":
            number = True
    return proper, number


def typo_candidates(tokens: Sequence[str], tags: Sequence[str]) -> list[str]:
    """Return the lower-cased tokens that the typo check looks at.

    Only alphabetic tokens; skipped: proper nouns (``NNP``/``NNPS``), acronyms (two or more
    capitals, optional plural ``s``: "USA", "TVs"), and the stem before "n't" ("ca" in
    "can't"). Contractions never reach the check: the tokenizer splits them into a stem and
    a clitic, and clitics are not alphabetic.
    """
    out = []
    last = len(tokens) - 1
    for i, (tok, tag) in enumerate(zip(tokens, tags, strict=True)):
        if not tok.isalpha() or tag in _PROPER or _is_acronym(tok):
            continue
        if i < last and tokens[i + 1].lower() == "n't":
            continue
        out.append(tok.lower())
    return out


def _is_acronym(token: str) -> bool:
    """Two or more capitals, optionally with a plural ``s`` ("USA", "TVs")."""
    if token[-1:] == "s":
        token = token[:-1]
    return len(token) >= 2 and token.isupper()


def _annotate_tagged_chunk(texts: Sequence[str], context: _TaggingContext
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tense code, NER bit mask and typo flag for each text."""
    tagger, common, ner_method = context.tagger, context.common, context.ner_method
    spell = _load_spellchecker()
    chunker = _load_ne_chunker(context.search_path) if ner_method == "ne_chunk" else None
    columns = NER_COLUMNS[ner_method]
    number_bit = 1 << columns.index("number")
    known: dict[str, bool] = {}
    tense = np.zeros(len(texts), dtype=np.int8)
    ner = np.zeros(len(texts), dtype=np.uint16)
    typo = np.zeros(len(texts), dtype=bool)
    for k, text in enumerate(texts):
        tokens = tokenize(text)
        if not tokens:
            continue
        letters = [t for t in tokens if t[:1].isalpha()]
        # All-capital text (shouting) is tagged in lower case: capitals carry no signal.
        shouting = len(letters) >= 3 and all(t.isupper() for t in letters)
        tags = tagger.tag([t.lower() for t in tokens] if shouting else tokens)
        tense[k] = TENSES.index(tense_of(tokens, tags))
        mask = 0
        if chunker is not None:
            for node in chunker.parse(list(zip(tokens, tags, strict=True))):
                label = node.label() if hasattr(node, "label") else None
                if label in _NE_CHUNK_LABELS:
                    mask |= 1 << columns.index(label.lower())
            if any(t == "CD" for t in tags):
                mask |= number_bit
        else:
            proper, number = ner_heuristic(tokens, tags, common)
            mask = (proper << 1) | (number << 2)
        ner[k] = mask | (1 if mask else 0)  # bit 0: any entity
        for word in typo_candidates(tokens, tags):
            is_known = known.get(word)
            if is_known is None:
                is_known = known[word] = word in spell
            if not is_known:
                typo[k] = True
                break
    return tense, ner, typo


#: The tagging context of a worker process (set once by its initializer; each worker has
#: its own copy, nothing is shared between processes).
_WORKER_CONTEXT: _TaggingContext | None = None


def _worker_init(context: _TaggingContext) -> None:
    global _WORKER_CONTEXT
    _WORKER_CONTEXT = context


def _annotate_in_worker(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    assert _WORKER_CONTEXT is not None, "worker started without its tagging context"
    return _annotate_tagged_chunk(texts, _WORKER_CONTEXT)


def _tagged_annotations(
    texts: Sequence[str], *, ner_method: str, n_jobs: int, cache_dir: Path | None,
    texts_hash: str,
) -> dict[str, np.ndarray]:
    """Tense/NER/typo annotations of each text of a column (cached).

    Distinct texts are annotated once, then spread back to every example.
    """
    import nltk
    from spellchecker import __version__ as spell_version

    key = _cache_key("tagged", texts_hash, ner_method, nltk.__version__, spell_version)
    cached = _cache_load(cache_dir, key)
    if cached is not None:
        return cached
    codes, uniques = pd.factorize(pd.Series(texts, dtype=object), sort=False)
    arrays = _tag_unique(list(uniques), ner_method=ner_method, n_jobs=n_jobs)
    arrays = {k: v[codes] for k, v in arrays.items()}
    _cache_save(cache_dir, key, arrays)
    return arrays


def _tag_unique(texts: list[str], *, ner_method: str, n_jobs: int) -> dict[str, np.ndarray]:
    import nltk

    resources.use_bundled_data()
    context = _tagging_context(tuple(str(p) for p in nltk.data.path), ner_method)
    if n_jobs <= 1 or len(texts) < _PARALLEL_MIN:
        tense, ner, typo = _annotate_tagged_chunk(texts, context)
    else:
        n_chunks = n_jobs * 4
        bounds = np.linspace(0, len(texts), n_chunks + 1).astype(int)
        chunks = [list(texts[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)
                  if b > a]
        # spawn: safe under threads (Streamlit) and keeps workers free of parent state.
        context_mp = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=n_jobs, mp_context=context_mp, initializer=_worker_init,
            initargs=(context,),
        ) as pool:
            parts = list(pool.map(_annotate_in_worker, chunks))
        tense, ner, typo = (np.concatenate([p[i] for p in parts]) for i in range(3))
    return {"tense": tense, "ner": ner, "typo": typo}


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
    from nltk.stem import WordNetLemmatizer

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


def _polarity_lexicon(name: str) -> dict[str, float]:
    if name == "opinion":
        from nltk.corpus import opinion_lexicon

        polarity = {w.lower(): 1.0 for w in opinion_lexicon.positive()}
        polarity.update({w.lower(): -1.0 for w in opinion_lexicon.negative()})
        return polarity
    from nltk.sentiment.vader import SentimentIntensityAnalyzer

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


def _stopwords() -> frozenset[str]:
    from nltk.corpus import stopwords

    return frozenset(w.lower() for w in stopwords.words("english")) | _CLITICS


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


# --------------------------------------------------------------------------------------
# public entry point
# --------------------------------------------------------------------------------------


def ner_method() -> str:
    """Return ``ne_chunk`` when NLTK's NE chunker model is installed, else ``heuristic``."""
    installed = resources.missing(["maxent_ne_chunker_tab", "words"]) == []
    return "ne_chunk" if installed else "heuristic"


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
        Worker processes for POS tagging; default: every CPU core.
    on_missing : {'report', 'raise'}
        When a family cannot run (missing NLTK resource, no premise for overlap):
        ``report`` records the reason in ``FeatureMatrix.unavailable`` and goes on;
        ``raise`` raises :class:`~aflite_core.cues.resources.ResourceMissingError` (or
        ``ValueError``).

    Returns
    -------
    FeatureMatrix
        One row per example, in input order.
    """
    hyps = _check_texts("hypotheses", hypotheses, None)
    assert hyps is not None
    prems = _check_texts("premises", premises, len(hyps))
    families = _check_families(features)
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
        cache_dir=_cache_folder(cache, cache_dir),
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
    )


def _cache_folder(cache: bool, cache_dir: str | os.PathLike | None) -> Path | None:
    """The annotation cache folder, or None when caching is off."""
    if not cache:
        return None
    return Path(cache_dir) if cache_dir is not None else default_cache_dir()


def _family_problem(family: str, options: _FamilyOptions, *, has_premises: bool
                    ) -> Exception | None:
    """Why ``family`` cannot run (a missing NLTK resource, no premise for overlap), or None.

    The error is raised with ``on_missing='raise'``; its text is reported otherwise.
    """
    needed = _family_resources(family, lemma=options.lemma,
                               sentiment_lexicon=options.sentiment_lexicon)
    gaps = resources.missing(needed)
    if gaps:
        return ResourceMissingError(family, gaps)
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
        self.ner_method = ner_method()
        self._lexicons: dict[str, _Lexicon] = {}
        self._tagged: dict[str, dict[str, np.ndarray]] = {}

    def lexicon(self, side: str) -> _Lexicon:
        """Token counts of one side's texts."""
        if side not in self._lexicons:
            self._lexicons[side] = _lexicon(self.texts[side], self.cache_dir)  # type: ignore[arg-type]
        return self._lexicons[side]

    def lexicons(self) -> list[_Lexicon]:
        """Token counts of the sides the families read."""
        return [self.lexicon(side) for side in self.sides]

    def tagged(self, key: str) -> list[np.ndarray]:
        """One tagging annotation (``tense``, ``ner`` or ``typo``) of each side read."""
        return [self._tagged_side(side)[key] for side in self.sides]

    def _tagged_side(self, side: str) -> dict[str, np.ndarray]:
        if side not in self._tagged:
            self._tagged[side] = _tagged_annotations(
                self.texts[side], ner_method=self.ner_method,  # type: ignore[arg-type]
                n_jobs=self.n_jobs, cache_dir=self.cache_dir,
                texts_hash=self.lexicon(side).texts_hash,
            )
        return self._tagged[side]


_FamilyBlock = tuple[sp.csr_matrix, list[str], str]


def _word_block(annotations: _Annotations, options: _FamilyOptions) -> _FamilyBlock:
    block, values = _word_family(annotations.lexicons(), min_count=options.min_count,
                                 lemma=options.lemma)
    method = (
        f"lower-cased regex tokens{' -> WordNet lemma' if options.lemma else ''}, present in "
        f">= {options.min_count} examples"
    )
    return block, values, method


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
    from spellchecker import __version__ as spell_version

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


def _check_families(features: Iterable[str]) -> list[str]:
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
