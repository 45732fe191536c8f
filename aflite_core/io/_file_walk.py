"""Folder walks and globs that stay inside their folder, visit nothing twice and stop.

``glob.glob(..., recursive=True)`` follows symbolic links to folders, so a folder holding a
link to itself made ``**`` run until the path grew too long (minutes of a busy core, no
output), and ``/proc/**/*.csv`` walks a tree without end. The walks here:

* never descend into a symbolic link to a folder (a link can only lead out or back);
* refuse a file reached through a symbolic link that resolves outside the walked folder, and a
  file reached twice (two links to one shard would read its rows twice), naming the entry;
* stop with a message on a folder met twice (a bind-mount cycle) and after
  :data:`MAX_WALK_ENTRIES` entries looked at.

Glob patterns follow :mod:`glob`'s rules: ``*``, ``?`` and ``[...]`` within one path part,
``**`` as a whole part for zero or more folders, and names starting with a dot matched only by
a part that starts with one.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from aflite_core.errors import DatasetFormatError

__all__ = ["GLOB_CHARS", "MAX_WALK_ENTRIES", "glob_files", "inside", "walk_files"]

#: Characters that make a path a glob pattern.
GLOB_CHARS = frozenset("*?[")
#: The most folder entries one walk or glob looks at before it stops with a message.
MAX_WALK_ENTRIES = 200_000


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` resolves to ``folder`` or below it (symbolic links followed)."""
    resolved, base = path.resolve(), folder.resolve()
    return resolved == base or base in resolved.parents


class _Walk:
    def __init__(self, base: Path, name: str, max_entries: int) -> None:
        self.base, self.name, self.max_entries = base, name, max_entries
        self.entries = 0
        self.folders: set[tuple[int, int]] = set()
        self.files: dict[tuple[int, int], Path] = {}
        self.listed: dict[str, list[os.DirEntry]] = {}

    def listing(self, folder: Path) -> list[os.DirEntry]:
        """The entries of ``folder``, by name; a folder listed again is not counted twice."""
        shown = str(folder)
        if shown in self.listed:
            return self.listed[shown]
        info = folder.stat()
        key = (info.st_dev, info.st_ino)
        if key in self.folders:
            raise DatasetFormatError(
                f"{self.name}: the walk met the folder {self._shown(folder)!r} twice (a cycle "
                "through a mount or a folder shared by two paths); pass the folder that holds "
                "the data itself")
        self.folders.add(key)
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            entries = []  # an unreadable folder: nothing of it is read
        self.entries += len(entries)
        if self.entries > self.max_entries:
            raise DatasetFormatError(
                f"{self.name}: more than {self.max_entries:,} entries looked at under "
                f"{self.base.name or str(self.base)!r} without finishing; the walk stopped. "
                "Narrow the folder or the pattern (e.g. 'data/train-*.parquet')")
        self.listed[shown] = entries
        return entries

    def take(self, entry: os.DirEntry) -> Path | None:
        """The file at ``entry`` when it is one (a link resolving inside, met once)."""
        path = Path(entry.path)
        try:
            if not entry.is_file():  # follows a link: a link to a file is a file
                return None
            info = path.stat()
        except OSError:
            return None
        if entry.is_symlink() and not inside(path, self.base):
            raise DatasetFormatError(
                f"{self.name}: {self._shown(path)!r} is a symbolic link to a file outside "
                f"{self.base.name or str(self.base)!r}; links out of the folder are not "
                "followed: copy the file in, or pass the folder it is in")
        key = (info.st_dev, info.st_ino)
        if key in self.files and self.files[key] != path:
            raise DatasetFormatError(
                f"{self.name}: {self._shown(path)!r} is the same file as "
                f"{self._shown(self.files[key])!r} (a link); a file is read once: remove one")
        self.files[key] = path
        return path

    def _shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.base))
        except ValueError:
            return path.name


def walk_files(folder: str | os.PathLike, *, name: str, recursive: bool = True,
               max_entries: int = MAX_WALK_ENTRIES) -> list[Path]:
    """Every file in ``folder`` (and, with ``recursive``, below it), in path order.

    Parameters
    ----------
    folder : path
        The folder walked.
    name : str
        How messages name what is read.
    recursive : bool
        Walk into subfolders (never into a symbolic link to a folder).
    max_entries : int
        Stop with a message after this many entries.

    Raises
    ------
    DatasetFormatError
        A link to a file outside ``folder``, a file reached twice, a folder met twice, or
        more than ``max_entries`` entries.
    """
    base = Path(folder)
    walk = _Walk(base, name, max_entries)
    found: list[Path] = []
    pending = [base]
    while pending:
        current = pending.pop()
        subfolders = []
        for entry in walk.listing(current):
            if entry.is_dir(follow_symlinks=False):
                subfolders.append(Path(entry.path))
            elif (path := walk.take(entry)) is not None:
                found.append(path)
        if recursive:
            pending.extend(reversed(subfolders))
    return sorted(found)


def _split_pattern(pattern: str) -> tuple[Path, list[str]]:
    """The folder before the first part holding a glob character, and the parts after it."""
    parts = Path(pattern).parts
    for i, part in enumerate(parts):
        if GLOB_CHARS & set(part):
            return Path(*parts[:i]) if i else Path("."), list(parts[i:])
    return Path(pattern).parent, [Path(pattern).name]


def _part_matches(name: str, part: str) -> bool:
    if name.startswith(".") and not part.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, part)


def glob_files(pattern: str, *, name: str, max_entries: int = MAX_WALK_ENTRIES
               ) -> list[Path]:
    """The files a glob pattern matches, in path order, walked as :func:`walk_files` walks
    (no link to a folder followed, no link out of the pattern's fixed folder, nothing twice,
    at most ``max_entries`` entries)."""
    base, parts = _split_pattern(pattern)
    if not base.is_dir():
        return []
    walk = _Walk(base, name, max_entries)
    found: list[Path] = []
    # (folder, index of the next pattern part): a depth-first walk of the pattern's states
    pending: list[tuple[Path, int]] = [(base, 0)]
    seen: set[tuple[str, int]] = set()
    while pending:
        folder, index = pending.pop()
        if (str(folder), index) in seen:
            continue
        seen.add((str(folder), index))
        part = parts[index]
        last = index == len(parts) - 1
        if part == "**":
            if last:  # a trailing ** matches every file below, as glob's does
                found += _files_below(walk, folder)
                continue
            pending.append((folder, index + 1))  # ** as zero folders
        for entry in walk.listing(folder):
            is_folder = entry.is_dir(follow_symlinks=False)
            if part == "**":
                if is_folder and not entry.name.startswith("."):
                    pending.append((Path(entry.path), index))
                continue
            if not _part_matches(entry.name, part):
                continue
            if last:
                if (path := walk.take(entry)) is not None:
                    found.append(path)
            elif is_folder:
                pending.append((Path(entry.path), index + 1))
    return sorted(set(found))


def _files_below(walk: _Walk, folder: Path) -> list[Path]:
    out: list[Path] = []
    pending = [folder]
    while pending:
        current = pending.pop()
        for entry in walk.listing(current):
            if entry.is_dir(follow_symlinks=False):
                if not entry.name.startswith("."):
                    pending.append(Path(entry.path))
            elif not entry.name.startswith(".") and (path := walk.take(entry)) is not None:
                out.append(path)
    return out
