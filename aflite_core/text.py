"""Text utilities every layer above uses: the tokeniser, the content hash of a list of texts,
and the user cache folder.

They sit below :mod:`aflite_core.represent` and :mod:`aflite_core.cues`, which both use them
(the TF-IDF word models and the cue families tokenise the same way; the annotation and
embedding caches share one folder and one content key).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["TOKEN_PATTERN", "WORD_RE", "default_cache_dir", "hash_texts", "tokenize", "word_tokens"]

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
#: The compiled pattern without the punctuation branch: word tokens only.
WORD_RE = re.compile(TOKEN_PATTERN.rsplit("|", 2)[0], re.IGNORECASE)


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
    return WORD_RE.findall(text.lower().replace("\u2019", "'"))


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
