"""Per-text annotations that need a part-of-speech tagger: tense, named entities, typos.

A fast averaged-perceptron tagger (NLTK's model, read once), the tense rule
(:func:`tense_of`, docs/cues.md), the NER heuristic or NLTK's ``ne_chunk``, and the typo
candidates pyspellchecker judges. Distinct texts are tagged once, in child processes above
``_PARALLEL_MIN`` of them (:mod:`~aflite_core.cues._tagging_children`).
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from spellchecker import SpellChecker
from spellchecker import __version__ as spell_version

from aflite_core.cues import resources
from aflite_core.cues._annotation_cache import (
    cache_key,
    cache_load,
    cache_save,
)
from aflite_core.cues._tagging_children import TAG_ARRAYS, answer_chunks, tag_in_children
from aflite_core.cues._word_list import WordList
from aflite_core.text import tokenize

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
CLITICS = frozenset({"n't", "'s", "'re", "'ve", "'ll", "'d", "'m"})

#: Inputs below this many distinct texts are tagged in the calling process.
_PARALLEL_MIN = 40_000
#: Distinct texts tagging ahead tags between two looks at whether it was asked to stop
#: (:func:`tag_into_cache`; about 0.3 s of tagging).
AHEAD_CHUNK = 4_096


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
            from nltk.tag.perceptron import PerceptronTagger  # lazy: +1866 ms to import

            tagger = PerceptronTagger(lang="eng")
        # Plain dicts and arrays only (:meth:`parts`): tagging children rebuild it from
        # them and tag without importing NLTK (a second and more).
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

    def parts(self) -> tuple[dict[str, str], list[str], list[str], np.ndarray]:
        """The model as plain parts: the tag dictionary, the classes (in scoring order), the
        features (in weight-row order) and the weights (one extra all-zero last row)."""
        return self.tagdict, self.classes, list(self._fid), self._weights

    @classmethod
    def from_parts(cls, tagdict: dict[str, str], classes: Sequence[str],
                   features: Sequence[str], weights: np.ndarray) -> FastPerceptronTagger:
        """The tagger :meth:`parts` describes, made without NLTK (a tagging child's)."""
        self = cls.__new__(cls)
        self.tagdict, self.classes = dict(tagdict), list(classes)
        self._fid = {feat: k for k, feat in enumerate(features)}
        self._zero = len(features)
        if weights.shape != (len(features) + 1, len(self.classes)):
            raise ValueError(f"weights of shape {(len(features) + 1, len(self.classes))} "
                             f"expected, got {weights.shape}")
        self._weights = weights
        self._bias = self._fid.get("bias", self._zero)
        self._reset_caches()
        return self

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
    common: frozenset[str] | WordList  # a WordList in a tagging child
    ner_method: str
    search_path: tuple[str, ...]


@functools.lru_cache(maxsize=2)
def _tagging_context(search_path: tuple[str, ...], ner_method: str) -> _TaggingContext:
    # Keyed by nltk.data.path so a changed search path loads afresh.
    tagger = FastPerceptronTagger()
    common = {w.lower() for w, t in tagger.tagdict.items() if t not in _PROPER}
    if resources.is_installed("words"):
        from nltk.corpus import words  # lazy: +1857 ms to import

        common.update(w for w in words.words("en") if w.islower())
    return _TaggingContext(tagger, frozenset(common), ner_method, search_path)


@functools.lru_cache(maxsize=2)
def _load_ne_chunker(search_path: tuple[str, ...]):
    import nltk  # lazy: +1683 ms to import
    from nltk.chunk import ne_chunker  # lazy: +1710 ms to import

    nltk.data.path[:] = list(search_path)
    return ne_chunker()


@functools.lru_cache(maxsize=1)
def _load_spellchecker():
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


def ner_heuristic(tokens: Sequence[str], tags: Sequence[str],
                  common: frozenset[str] | WordList) -> tuple[bool, bool]:
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


def tagged_annotations(
    texts: Sequence[str], *, ner_method: str, n_jobs: int, cache_dir: Path | None,
    texts_hash: str,
) -> dict[str, np.ndarray]:
    """Tense/NER/typo annotations of each text of a column (cached).

    Distinct texts are annotated once, then spread back to every example.
    """
    key = tagged_cache_key(texts_hash, ner_method, *tagger_versions())
    cached = cache_load(cache_dir, key)
    if cached is not None:
        return cached
    import pandas as pd  # lazy: a tagging child (this module's __main__) never needs it

    codes, uniques = pd.factorize(pd.Series(texts, dtype=object), sort=False)
    arrays = _tag_unique(list(uniques), ner_method=ner_method, n_jobs=n_jobs)
    arrays = {k: v[codes] for k, v in arrays.items()}
    cache_save(cache_dir, key, arrays)
    return arrays


def tag_into_cache(texts: Sequence[str], *, ner_method: str, cache_dir: Path,
                   texts_hash: str, stop: threading.Event, n_jobs: int = 1) -> bool:
    """:func:`tagged_annotations`' tagging done ahead of its reader: the annotations saved in
    ``cache_dir`` (True), unless the cache holds them already (True) or ``stop`` is set before
    the last chunk (nothing saved; False). For a process of its own
    (``linguistic.annotate_ahead``). In this process a chunk of :data:`AHEAD_CHUNK` distinct
    texts at a time; with ``n_jobs`` above 1 and ``_PARALLEL_MIN`` distinct texts or more, in
    that many tagging children (``tag_in_children``: the same arrays)."""
    key = tagged_cache_key(texts_hash, ner_method, *tagger_versions())
    if (cache_dir / f"{key}.npz").is_file():
        return True
    import pandas as pd  # lazy: a tagging child (this module's __main__) never needs it

    codes, uniques = pd.factorize(pd.Series(texts, dtype=object), sort=False)
    context = _loaded_context(ner_method)
    if n_jobs > 1 and len(uniques) >= _PARALLEL_MIN:
        with tempfile.TemporaryDirectory(prefix="aflite-tagging-") as folder:
            try:
                tagged = tag_in_children(list(uniques), n_jobs=n_jobs, stop=stop,
                                         args=[str(write_context(context, Path(folder)))])
            except InterruptedError:
                return False
        cache_save(cache_dir, key, {k: v[codes] for k, v in tagged.items()})
        return True
    parts = []
    for lo in range(0, len(uniques), AHEAD_CHUNK):
        if stop.is_set():
            return False
        parts.append(_annotate_tagged_chunk(list(uniques[lo:lo + AHEAD_CHUNK]), context))
    arrays = {name: np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dtype)
              for i, (name, dtype) in enumerate(TAG_ARRAYS)}
    cache_save(cache_dir, key, {k: v[codes] for k, v in arrays.items()})
    return True


def tagger_versions() -> tuple[str, str]:
    """The versions of NLTK and pyspellchecker: part of the tagging annotations' cache key."""
    import nltk  # lazy: +1683 ms to import

    return nltk.__version__, spell_version


def tagged_cache_key(texts_hash: str, ner_method: str, nltk_version: str,
                     spell_version: str) -> str:
    """The annotation-cache key of a text column's tagging annotations."""
    return cache_key("tagged", texts_hash, ner_method, nltk_version, spell_version)


def _loaded_context(ner_method: str) -> _TaggingContext:
    """The tagging context on NLTK's search path, the bundled data on it."""
    import nltk  # lazy: +1683 ms to import

    resources.use_bundled_data()
    return _tagging_context(tuple(str(p) for p in nltk.data.path), ner_method)


def _tag_unique(texts: list[str], *, ner_method: str, n_jobs: int) -> dict[str, np.ndarray]:
    context = _loaded_context(ner_method)
    if n_jobs > 1 and len(texts) >= _PARALLEL_MIN:
        with tempfile.TemporaryDirectory(prefix="aflite-tagging-") as folder:
            return tag_in_children(texts, args=[str(write_context(context, Path(folder)))],
                                   n_jobs=n_jobs)
    tense, ner, typo = _annotate_tagged_chunk(texts, context)
    return {"tense": tense, "ner": ner, "typo": typo}


#: The files of a tagging context written for tagging children (:func:`write_context`).
CONTEXT_FILES = ("tagging_context.json", "tagger_weights.npy", "common_words.npy")


def write_context(context: _TaggingContext, folder: Path) -> Path:
    """Write a tagging context into ``folder`` (:data:`CONTEXT_FILES`) as a tagging child
    reads it without importing NLTK (a second and more): the tagger's weights and the
    common words (:class:`~aflite_core.cues._word_list.WordList`) as ``.npy``, its strings,
    the NER method and NLTK's search path as JSON. No pickle.

    Returns
    -------
    Path
        ``folder``.
    """
    tagdict, classes, features, weights = context.tagger.parts()
    odd = WordList.of(context.common).save(folder / CONTEXT_FILES[2])
    strings = {"tagdict": tagdict, "classes": classes, "features": features,
               "common_odd": odd, "ner_method": context.ner_method,
               "search_path": list(context.search_path)}
    (folder / CONTEXT_FILES[0]).write_text(json.dumps(strings), encoding="utf-8")
    np.save(folder / CONTEXT_FILES[1], weights, allow_pickle=False)
    return folder


def _read_context(folder: Path) -> _TaggingContext:
    """The tagging context :func:`write_context` wrote into ``folder``."""
    strings = json.loads((folder / CONTEXT_FILES[0]).read_text(encoding="utf-8"))
    # mapped, read-only: the children of one tagging share the file's pages (26 MB) instead
    # of holding a copy each (the caller removes the folder after they have ended)
    weights = np.asarray(np.load(folder / CONTEXT_FILES[1], allow_pickle=False, mmap_mode="r"))
    tagger = FastPerceptronTagger.from_parts(strings["tagdict"], strings["classes"],
                                             strings["features"], weights)
    # the common words mapped too (a frozenset of them was 20 MB in each child)
    common = WordList.load(folder / CONTEXT_FILES[2], strings["common_odd"])
    return _TaggingContext(tagger, common, strings["ner_method"],
                           tuple(strings["search_path"]))


# --------------------------------------------------------------------------------------
# public entry point
# --------------------------------------------------------------------------------------


def ner_method() -> str:
    """Return ``ne_chunk`` when NLTK's NE chunker model is installed, else ``heuristic``."""
    installed = resources.missing(["maxent_ne_chunker_tab", "words"]) == []
    return "ne_chunk" if installed else "heuristic"


def preload_tagging() -> None:
    """Load NLTK, the tagger, its word lists and the spelling checker now (each kept)."""
    _loaded_context(ner_method())
    tagger_versions()
    _load_spellchecker()


def _child(argv: Sequence[str]) -> int:
    """A tagging child of :func:`~aflite_core.cues._tagging_children.tag_in_children`: its
    argument the folder :func:`write_context` wrote; texts on standard input."""
    context = _read_context(Path(argv[0]))  # read without NLTK; only the NE chunker needs it
    if context.ner_method == "ne_chunk":
        resources.import_nltk_lean()  # this process's start: no other thread yet
    return answer_chunks(lambda chunk: _annotate_tagged_chunk(chunk, context))


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
