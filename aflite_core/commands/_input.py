"""What every command that reads a dataset file shares: the column and input options, the
size ceiling, and loading with errors phrased as CLI options."""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Default ``--max-bytes``: the largest input (after gzip decompression) read without
#: being asked, the same ceiling as the dashboard's uploads. A gzip file expanding past
#: it stops being read at the ceiling.
DEFAULT_MAX_BYTES = 1 << 30
#: Default ``--max-line-bytes`` (the readers' own default).
MAX_LINE_BYTES = 64 << 20

FORMATS = ("csv", "tsv", "jsonl", "json", "parquet")

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

#: Keyword arguments of ``load_dataset`` named in its messages, and their CLI options.
_API_OPTIONS = {
    "premise": "--premise", "hypothesis": "--hypothesis", "label": "--label",
    "split": "--split", "id": "--id", "encoding": "--encoding", "format": "--format",
    "max_bytes": "--max-bytes", "max_line_bytes": "--max-line-bytes", "group": "--group",
    "choices": "--choices", "answer_base": "--answer-base", "answer": "--answer",
    "question": "--question",
}  # fmt: skip
_API_OPTION_RE = re.compile(r"(?<![\w\-'\"])(" + "|".join(_API_OPTIONS) + r")=")


def parse_bytes(text: str) -> int | None:
    """``"500M"`` -> 524288000, ``"2G"``, ``"1048576"``; ``"none"`` or ``"0"`` -> no limit."""
    raw = text.strip().lower()
    if raw in ("none", "0", "unlimited"):
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", raw)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a size such as 500M, 2G or 1048576 (bytes), or none, got {text!r}"
        )
    return max(1, int(float(match.group(1)) * _UNITS[match.group(2)]))


def cli_hint(message: str) -> str:
    """Rewrite the loader's Python hints (``pass label='x'``) as CLI options (``--label 'x'``)."""

    def option(match: re.Match) -> str:
        following = message[match.end() : match.end() + 1]
        flag = _API_OPTIONS[match.group(1)]
        return flag if following in ("", ")", " ", ",", ";") else flag + " "

    return _API_OPTION_RE.sub(option, message)


def _columns(text: str) -> list[str]:
    """``A,B,C`` -> ``["A", "B", "C"]`` (at least two columns)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if len(names) < 2:
        raise argparse.ArgumentTypeError(
            f"expected two or more comma-separated columns, got {text!r}")
    return names


def add_input_arguments(parser: argparse.ArgumentParser, roles: tuple[str, ...], *,
                        title: str, id_help: str = "column of unique row ids") -> None:
    """Add the column-role options (``--premise`` ...), ``--id``, ``--format``,
    ``--encoding`` and ``--max-bytes`` as one argument group."""
    group = parser.add_argument_group(title)
    for role in roles:
        none = " ('' for none: not guessed)" if role in ("premise", "split") else ""
        group.add_argument(f"--{role}", metavar="COL", help=f"{role} column{none}")
    group.add_argument("--group", metavar="COL",
                       help="rows with equal values stay on one side of every train/test "
                            "split (default: the question for multiple choice, the premise "
                            "when premises repeat; '' for none)")
    group.add_argument("--id", metavar="COL", help=id_help)
    mc = parser.add_argument_group(
        "multiple choice (a question is kept or removed whole; see docs/measures.md)")
    mc.add_argument("--choices", type=_columns, metavar="COL,COL[,...]",
                    help="wide files: the columns holding a question's choices (one row per "
                         "question); needs --answer")
    mc.add_argument("--answer", metavar="COL",
                    help="wide files: the column naming the right choice, by its text or "
                         "its number")
    mc.add_argument("--answer-base", type=int, choices=(0, 1), default=None,
                    help="wide files: whether --answer counts choices from 0 or 1 (default: "
                         "inferred)")
    mc.add_argument("--question", metavar="COL",
                    help="per-choice files (one row per choice): the question column; the "
                         "label says correct/incorrect, 1/0 or true/false (default: detected "
                         "when a column groups the rows with exactly one correct choice "
                         "each; '' for never)")
    group.add_argument("--format", choices=FORMATS,
                       help="input format (default: from the suffix, else sniffed)")
    group.add_argument("--encoding", metavar="ENC",
                       help="text encoding, e.g. latin-1 (default: UTF-8, or UTF-16/32 by BOM)")
    group.add_argument("--max-bytes", type=parse_bytes, default=DEFAULT_MAX_BYTES,
                       metavar="SIZE",
                       help="refuse inputs larger than this after gzip decompression, e.g. "
                            "500M or 4G; none for no limit (default 1G)")
    group.add_argument("--max-line-bytes", type=parse_bytes, default=MAX_LINE_BYTES,
                       metavar="SIZE",
                       help="refuse a text table with a longer line or CSV cell, where it is "
                            "met, before reading it whole, e.g. 256M; none for no limit "
                            "(default 64M)")


class ShardsOnCluster:
    """``load_dataset``'s ``map_shards`` with ``--scheduler``: one task per shard on the
    client's workers (:func:`aflite_core.represent.map_folds`), tables back in shard
    order; a shard's own error (a bad line, other columns) is raised as it is."""

    engine = "dask"

    def __init__(self, client: Any) -> None:
        self.client = client

    def __call__(self, read: Any, paths: Any) -> list:
        from aflite_core.represent import map_folds, on_dask  # lazy: +190 ms to import

        with on_dask(self.client):
            return map_folds(read, list(paths))

    def stream(self, read: Any, paths: Any, *, ahead: int = 0) -> Iterator[Any]:
        """The tables one at a time, in shard order (the streamed load,
        :func:`aflite_core.io.load_to_disk`): ``ahead`` shards (default: two
        per worker) are read on the workers while this process takes the next, and each is
        let go once taken; closing the iterator cancels the reads left
        (:func:`aflite_core.represent.stream_ordered`). A shard's error
        (FileNotFoundError when the workers do not see the files) is raised as it is."""
        from aflite_core.represent import stream_ordered  # lazy: +190 ms to import

        return stream_ordered(self.client, read, list(paths), ahead=ahead)


def load_input(path: str, args: argparse.Namespace, *, what: str = "DATA",
               map_shards: Any = None, texts_to: Any = None) -> Any:
    """Load ``path`` with the column and input options of ``args`` (a folder or glob of
    shards read by ``map_shards`` when given, e.g. :class:`ShardsOnCluster`). ``texts_to``:
    a Parquet file the texts go to (:func:`aflite_core.io.load_to_disk`: a
    folder or glob of shards a shard at a time, never every row's text in this process).

    Raises
    ------
    FileNotFoundError
        If ``path`` is neither a file, a folder nor a glob matching files (the message names
        ``what``, e.g. ``DATA``). A folder or glob is read as shards, or as a Hugging Face
        ``datasets`` folder (:mod:`aflite_core.io.shards`).
    DatasetError
        If ``path`` is a FIFO, a device or a socket (named as such), never opened.
    DatasetError
        With the loader's hints rephrased as CLI options (``--label 'x'``).
    """
    # lazy: +948 ms to import
    from aflite_core.io import DatasetError, load_dataset, looks_like_glob, special_file_kind

    sharded = Path(path).is_dir() or looks_like_glob(path)
    if not sharded and not Path(path).is_file():
        try:
            mode = Path(path).stat().st_mode  # never opened: a FIFO would block
        except OSError:
            raise FileNotFoundError(f"{what}: no such file: {path}") from None
        kind = special_file_kind(mode) or "a special file"
        raise DatasetError(
            f"{what}: {path} is {kind}, not a regular file; refused (reading it could block "
            "or never end): save the data to a file and pass that file"
        )
    roles = {role: getattr(args, role, None)
             for role in ("premise", "hypothesis", "label", "split")}
    load: Any = load_dataset
    if texts_to is not None:
        from aflite_core.io import load_to_disk  # lazy: +606 ms to import

        load = functools.partial(load_to_disk, path=texts_to)
    try:
        return load(path, **roles, id=args.id, format=args.format,
                    encoding=args.encoding, max_bytes=args.max_bytes,
                    max_line_bytes=getattr(args, "max_line_bytes", MAX_LINE_BYTES),
                    group=getattr(args, "group", None),
                    choices=getattr(args, "choices", None),
                    answer=getattr(args, "answer", None),
                    answer_base=getattr(args, "answer_base", None),
                    question=getattr(args, "question", None),
                    map_shards=map_shards)
    except DatasetError as exc:
        text = cli_hint(str(exc))
        if text != str(exc):
            exc.args = (text,)
        raise
