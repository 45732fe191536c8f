"""Run names and file names inside a run: sanitised, checked, unique, hidden while written.

A run's name is its folder's name under the runs root, so it must be a safe single path
component on every common file system: NFC, no separators or control characters, at most
:data:`MAX_NAME_BYTES` bytes in UTF-8 with room for the hidden prefixes and suffixes the
atomic writer adds (:data:`TEMP_PREFIX`, :data:`OLD_PREFIX`, :data:`NEW_PREFIX`).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import secrets
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Prefix of the temporary folder a run is written into.
TEMP_PREFIX = ".tmp-"
#: Prefix of a replaced run while ``overwrite=True`` swaps in the new one.
OLD_PREFIX = ".old-"
#: Prefix of a complete run about to be swapped in over the one it replaces.
NEW_PREFIX = ".new-"
#: Temporary folders older than this (seconds) are treated as left by a killed process.
STALE_AGE_SECONDS = 24 * 3600

_MAX_NAME_LENGTH = 120
#: Longest file name most file systems accept (ext4, APFS, NTFS...), in UTF-8 bytes.
MAX_NAME_BYTES = 255
#: A file name a run may list: ASCII letters, digits, dot, underscore, hyphen.
SAFE_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# --------------------------------------------------------------------------- names


def _cut_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, never inside a character."""
    return text.encode("utf-8")[: max(limit, 0)].decode("utf-8", errors="ignore")


def sanitize_run_name(name: str) -> str:
    """Turn a user-supplied run name into a safe folder name.

    The policy is to *sanitise*, not refuse, unless nothing usable is left:

    * the name is normalised to Unicode NFC, so a decomposed ``café`` (``e`` + combining
      accent, as macOS file names and some keyboards produce) is the same name as the
      composed one;
    * every run of characters that are not a letter, a digit, ``.``, ``_`` or ``-`` (path
      separators ``/`` and ``\\``, ``:``, spaces, control characters, ...) becomes one
      ``_``; underscores typed by the user are kept (``my__run`` stays ``my__run``);
    * runs of dots collapse to one dot, so ``..`` can never appear;
    * leading ``.``, ``-`` and ``_`` and trailing ``.``, ``_`` and ``-`` are stripped (no
      hidden folders, nothing that looks like a command-line option);
    * the result is cut to 120 characters and to 255 UTF-8 bytes (the file-name limit of
      common file systems; 84 CJK characters are 252 bytes and fit).

    Parameters
    ----------
    name : str
        The name as typed by the user.

    Returns
    -------
    str
        The sanitised name; equal to ``name`` when it was already safe and NFC.

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    ValueError
        If nothing usable is left (e.g. ``"../"`` or ``""``).
    """
    if not isinstance(name, str):
        raise TypeError(f"run name: expected a string, got {type(name).__name__}")
    text = unicodedata.normalize("NFC", name)
    text = "".join(ch if (ch.isalnum() or ch in "._-") else "\0" for ch in text)
    text = re.sub("\0+", "_", text)
    text = re.sub(r"\.{2,}", ".", text)
    text = text.lstrip("._-").rstrip("._-")[:_MAX_NAME_LENGTH].rstrip("._-")
    text = _cut_bytes(text, MAX_NAME_BYTES).rstrip("._-")
    if not text:
        raise ValueError(
            f"run name: {name!r} has no usable characters; use letters, digits, '.', '_' or '-'"
        )
    return text


def _describe_char(ch: str) -> str:
    return f"{ch!r} (U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed character')})"


def run_name_problems(name: str) -> list[str]:
    """Say precisely why ``name`` is not usable as a run folder name as typed.

    The name is compared after NFC normalisation, so a decomposed ``café`` has no
    problem. Returns an empty list when :func:`sanitize_run_name` keeps the name (up to
    normalisation); otherwise one sentence per problem: the offending characters with
    their code points, a leading or trailing character, ``..``, the length in characters
    or UTF-8 bytes.
    """
    if not isinstance(name, str):
        return [f"expected a string, got {type(name).__name__}"]
    text = unicodedata.normalize("NFC", name)
    problems: list[str] = []
    bad = []
    for ch in text:
        if not (ch.isalnum() or ch in "._-") and ch not in bad:
            bad.append(ch)
    if bad:
        shown = ", ".join(_describe_char(ch) for ch in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        problems.append(f"contains {shown}{more}; only letters, digits, '.', '_' and '-' "
                        "are allowed")
    if ".." in text:
        problems.append("contains '..'")
    why = {".": "a hidden folder", "-": "looks like a command-line option",
           "_": "stripped from the start"}
    if text[:1] in why:
        problems.append(f"starts with {text[:1]!r} ({why[text[:1]]})")
    if text[-1:] in (".", "-", "_") and len(text) > 1:
        problems.append(f"ends with {text[-1:]!r}")
    if len(text) > _MAX_NAME_LENGTH:
        problems.append(f"is {len(text)} characters long; at most {_MAX_NAME_LENGTH} are kept")
    n_bytes = len(text.encode("utf-8", errors="surrogatepass"))
    if n_bytes > MAX_NAME_BYTES:
        problems.append(f"is {n_bytes} bytes long in UTF-8; file names hold at most "
                        f"{MAX_NAME_BYTES}")
    if not problems and not text:
        problems.append("is empty")
    return problems


def check_run_name(name: str, *, what: str = "run name") -> str:
    """Return ``name`` in NFC if it is a safe run folder name as typed, else raise.

    Unlike :func:`sanitize_run_name` nothing is changed silently (for a path given on the
    command line): the ``ValueError`` lists what is wrong (see :func:`run_name_problems`)
    and suggests the sanitised name when there is one.
    """
    problems = run_name_problems(name)
    if not problems:
        return unicodedata.normalize("NFC", name)
    try:
        hint = f"; for example {sanitize_run_name(name)!r}"
    except (TypeError, ValueError):
        hint = ""
    raise ValueError(f"{what}: {name!r} is not a safe run folder name: "
                     f"{'; '.join(problems)}{hint}")


def hidden_name(prefix: str, name: str, token: str | None = None) -> str:
    """``<prefix><name>-<token>`` cut (in the name, never the token) to fit in
    :data:`MAX_NAME_BYTES` UTF-8 bytes; the final name is never shortened."""
    token = token or secrets.token_hex(4)
    room = MAX_NAME_BYTES - len(prefix.encode("utf-8")) - 1 - len(token.encode("utf-8"))
    return f"{prefix}{_cut_bytes(name, room)}-{token}"


def _format_param(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def default_run_name(
    data_name: str,
    parameters: Mapping[str, Any] | None = None,
    *,
    created: _dt.datetime | None = None,
) -> str:
    """Derive a run name from the data name, the key parameters and the UTC time.

    Parameters
    ----------
    data_name : str
        Name of the dataset (usually the file name).
    parameters : mapping, optional
        AFLite/representation parameters; the keys ``representation``, ``strategy``,
        ``n_partitions``, ``target_size`` and ``random_state`` are used when present.
    created : datetime, optional
        Creation time (default: now, UTC).

    Returns
    -------
    str
        For example ``snli_dev-tfidf_svd-greedy_slicing-m64-target0.5-seed0-20250101T120000Z``.
    """
    created = created or _dt.datetime.now(_dt.timezone.utc)
    stem = Path(str(data_name)).name
    if any(c in stem for c in "*?["):  # a glob of shards: named by their folder
        stem = Path(str(data_name)).parent.name
    for suffix in (".gz", ".csv", ".tsv", ".jsonl", ".json", ".parquet", ".txt"):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    params = dict(parameters or {})
    parts = [stem or "data"]
    if params.get("filter") == "z":  # a Z-filter run: no AFLite strategy or partitions
        params = {**params, "strategy": "zfilter", "n_partitions": None}
    for key, prefix in (
        ("representation", ""),
        ("strategy", ""),
        ("n_partitions", "m"),
        ("target_size", "target"),
        ("random_state", "seed"),
    ):
        if params.get(key) is not None:
            parts.append(prefix + _format_param(params[key]))
    parts.append(created.astimezone(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    return sanitize_run_name("-".join(parts))


def resolve_run_path(root: str | os.PathLike, name: str) -> Path:
    """Return ``root/<sanitised name>``, guaranteed to lie directly inside ``root``.

    Raises
    ------
    ValueError
        If the name is unusable or would resolve outside ``root`` (e.g. through a
        symbolic link).
    """
    root_path = Path(root).resolve()
    safe = sanitize_run_name(name)
    path = (root_path / safe).resolve()
    if path.parent != root_path:
        raise ValueError(f"run name {name!r} resolves to {path}, outside the runs root {root_path}")
    return root_path / safe


def unique_run_name(root: str | os.PathLike, name: str) -> str:
    """Return ``name`` or ``name-2``, ``name-3``, ... so that no run of that name exists."""
    root_path = Path(root)
    candidate, k = name, 1
    while (root_path / candidate).exists():
        k += 1
        candidate = suffixed_name(name, k)
    return candidate


def suffixed_name(name: str, k: int) -> str:
    """``name-k``, the name cut (in bytes) so that the whole still fits a file name."""
    suffix = f"-{k}"
    return _cut_bytes(name, MAX_NAME_BYTES - len(suffix)).rstrip("._-") + suffix


def check_file_name(filename: str) -> str:
    if not isinstance(filename, str) or not SAFE_FILE_NAME.match(filename) or ".." in filename:
        raise ValueError(f"run file name: expected a plain file name, got {filename!r}")
    return filename

