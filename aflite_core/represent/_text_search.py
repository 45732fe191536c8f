"""A typed sentence placed in Φ, for the run's search by meaning.

The default Φ is a TF-IDF of the hypotheses and of the premises (two blocks of columns), reduced
by an SVD: ``Φ = M @ components``. The audit keeps, beside the compact Φ
(:mod:`aflite_core.represent._compact`), what places a new text the same way
(``phi_text_model.npz``): the hypotheses' vocabulary and idf, and their rows of the components
(int8, a scale per word). :func:`place_text` makes the text's TF-IDF row as a hypothesis,
exactly as the audit's TF-IDF does (lower case, scikit-learn's default token pattern,
sublinear tf, idf, L2-normalised), and multiplies it by the components. Only Φ built by
``tfidf_svd`` on this machine has such a model (an encoder's run places a text with its
encoder; Φ built on a cluster has none).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from aflite_core.represent._term_counts import DEFAULT_TOKEN_RE

__all__ = ["MAX_QUERY_CHARS", "TEXT_MODEL_FILE", "load_text_model", "place_text",
           "save_text_model"]

#: The run file of the text model.
TEXT_MODEL_FILE = "phi_text_model.npz"
#: Longest text a search takes (characters).
MAX_QUERY_CHARS = 10_000


def save_text_model(model: dict, path: str | Path) -> None:
    """Write what places a text as a hypothesis (``Representation.text_model``'s first block
    and its rows of the components) as a NumPy archive without pickles: the words joined by
    newlines as UTF-8 bytes (a token never holds one), the idf, and the components as int8
    with a float32 scale per word (``components_int8``, ``components_scale``: half the bytes
    of float16, within 0.4 % of a word's largest value; on SNLI dev the 10 rows a sentence
    finds are those of float16 components for 0.97 of them, equal scores swapping places).
    The premises' block is left out: a query is read as a hypothesis, and it would double the
    file."""
    first = model["blocks"][0]
    components = np.asarray(model["components"][:len(first["idf"])], dtype=np.float32)
    scale = np.abs(components).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    arrays = {"components_int8": np.rint(components / scale[:, None]).astype(np.int8),
              "components_scale": scale.astype(np.float32)}
    for i, block in enumerate(model["blocks"][:1]):
        arrays[f"vocabulary_{i}"] = np.frombuffer(
            "\n".join(block["vocabulary"]).encode("utf-8"), dtype=np.uint8)
        arrays[f"idf_{i}"] = np.asarray(block["idf"], dtype=np.float32)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def load_text_model(path: str | Path) -> dict:
    """The model :func:`save_text_model` wrote (vocabularies as word -> column dicts).

    Raises
    ------
    ValueError
        A damaged file (not an archive of the expected arrays).
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            blocks, i = [], 0
            while f"vocabulary_{i}" in data:
                words = bytes(data[f"vocabulary_{i}"]).decode("utf-8").split("\n")
                idf = np.asarray(data[f"idf_{i}"], dtype=np.float32)
                if len(words) != len(idf):
                    raise ValueError(f"block {i}: {len(words)} words, {len(idf)} idf values")
                blocks.append({"vocabulary": {w: j for j, w in enumerate(words)}, "idf": idf})
                i += 1
            if "components_int8" in data:
                components = (data["components_int8"].astype(np.float32)
                              * np.asarray(data["components_scale"], dtype=np.float32)[:, None])
            else:  # runs of 2026-11-29 before int8: float16
                components = np.asarray(data["components"], dtype=np.float32)
    except (OSError, KeyError, ValueError, EOFError) as exc:
        raise ValueError(f"{Path(path).name} is damaged ({exc})") from None
    if sum(len(b["idf"]) for b in blocks) != len(components):
        raise ValueError(f"{Path(path).name} is damaged (its blocks and components disagree)")
    return {"blocks": blocks, "components": components}


def place_text(text: str, model: dict) -> tuple[np.ndarray, int]:
    """``text``'s vector in Φ and how many of its words the vocabulary knows (0: the vector
    is zero, nothing to search for).

    The text is read as a hypothesis: its TF-IDF row in the hypotheses' block (the first
    block of ``model``; a later one only when the first knows none of its words). Placed in
    the premises' block too, its common words there ("a", "with") took half the query's
    weight and ranked rows by those words."""
    counts = Counter(DEFAULT_TOKEN_RE.findall(str(text).lower()))
    offset = 0
    for block in model["blocks"]:
        columns, values = [], []
        for word, count in counts.items():
            j = block["vocabulary"].get(word)
            if j is not None:
                columns.append(j)
                values.append((1.0 + np.log(count)) * float(block["idf"][j]))
        if columns:
            values = np.asarray(values)
            values /= np.linalg.norm(values)
            vector = values @ model["components"][offset + np.asarray(columns)]
            return vector.astype(np.float32), len(columns)
        offset += len(block["idf"])
    return np.zeros(model["components"].shape[1], dtype=np.float32), 0
