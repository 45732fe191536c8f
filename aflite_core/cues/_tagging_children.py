"""A large extraction's distinct texts tagged by child processes (:func:`tag_in_children`),
and how the cue package starts a child of its own (:func:`start_child`).

Each child is ``python -m aflite_core.cues._tagging FOLDER``: it reads the tagging context
the caller wrote into ``FOLDER`` (without importing NLTK), then (:func:`answer_chunks`) reads
chunks of texts from its standard input as ASCII JSON lines (``[texts...]``, then ``null``)
and answers each with one line ``[tense, ner, typo]`` (lists of integers). No pickle crosses
the pipe, and the child is a plain interpreter, not a ``multiprocessing`` one: a spawned
child first runs the caller's main script again, so a user's script without an
``if __name__ == "__main__"`` guard that extracted 40,000 distinct texts or more would have
started itself once per child (and hung).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import numpy as np

from aflite_core.cgroup_limits import usable_memory

__all__ = ["CHILD_BYTES", "CHILDREN_MEMORY_SHARE", "TAG_ARRAYS", "TAG_CHUNK", "answer_chunks",
           "children_for_memory", "start_child", "tag_in_children"]

#: The most distinct texts sent to a child at a time (about 0.3 s of its tagging): small
#: enough that the children finish together, large enough that the pipe costs nothing.
TAG_CHUNK = 4_096
#: What a tagging child may hold: the interpreter, numpy, the tagger's weights and word
#: lists, the spelling checker, and its memo of tag decisions, which grows with the texts it
#: tags up to ``FastPerceptronTagger._MEMO_LIMIT`` (peaks of 165-169 MB after 50,000
#: distinct SNLI texts each, 234-235 MB after 300,000; 2026-11-30). Resident, that is: the
#: weights (26 MB) and the common words are the context files' pages, mapped by every child
#: and held once (2026-12-01: a child's private memory after 8,000 texts 119 -> 62 MB, its
#: resident size 136-139 -> 109-110 MB; after 50,000 texts 195 -> 171 MB resident).
CHILD_BYTES = 256 << 20
#: The share of the memory this process may use (:func:`~aflite_core.cgroup_limits.
#: usable_memory`: the machine's, or its container's limit) that the tagging children hold
#: at most together: a 16 GB machine allows 16 of them, a container of 8 GB on a host of
#: 64 cores 8 (not 62: 15 GB).
CHILDREN_MEMORY_SHARE = 0.25
#: What a tagging child runs (its ``__main__``: the tagging's own module).
CHILD_MODULE = "aflite_core.cues._tagging"
#: The tagging's arrays (name, dtype), in the order a child answers them.
TAG_ARRAYS = (("tense", np.int8), ("ner", np.uint16), ("typo", np.bool_))


def start_child(module: str, args: Sequence[str], *, stdout: int | IO[bytes],
                stderr: int | IO[bytes]) -> subprocess.Popen:
    """``python -m MODULE ARGS...`` with a pipe to its standard input, finding this package
    where the caller found it (its root put first on ``PYTHONPATH``).

    Parameters
    ----------
    module : str
        The module the child runs, e.g. :data:`CHILD_MODULE`.
    args : sequence of str
        Its arguments.
    stdout, stderr : int or binary file
        As :class:`subprocess.Popen` takes them (``subprocess.PIPE``, ``DEVNULL``, a file).

    Returns
    -------
    subprocess.Popen
        The started child.
    """
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
    return subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.PIPE,
                            stdout=stdout, stderr=stderr, env=env)


def children_for_memory(memory: int | None = None) -> int:
    """Tagging children the memory allows (``memory``: default what this process may use):
    :data:`CHILDREN_MEMORY_SHARE` of it at :data:`CHILD_BYTES` each, at least one.

    Examples
    --------
    >>> children_for_memory(16 << 30), children_for_memory(8 << 30), children_for_memory(1 << 30)
    (16, 8, 1)
    """
    memory = usable_memory() if memory is None else memory
    if memory is None:  # not known: as many as asked
        return sys.maxsize
    return max(1, int(memory * CHILDREN_MEMORY_SHARE) // CHILD_BYTES)


def tag_in_children(texts: Sequence[str], *, args: Sequence[str], n_jobs: int,
                    stop: threading.Event | None = None) -> dict[str, np.ndarray]:
    """Tense code, NER bit mask and typo flag of each text, tagged by ``n_jobs`` child
    processes (``python -m`` :data:`CHILD_MODULE` ``ARGS``): the same arrays as tagging them
    all in this process.

    The texts go out in chunks of at most :data:`TAG_CHUNK` (at least four per child), each
    to the next child that is free, and come back in their places.

    Parameters
    ----------
    texts : sequence of str
        The distinct texts.
    args : sequence of str
        The children's arguments: the folder of their tagging context
        (``_tagging.write_context``).
    n_jobs : int
        How many children, at least 1; no more than the memory allows
        (:func:`children_for_memory`).
    stop : threading.Event, optional
        Set it to stop: no chunk goes out after it, and the children finish the one they hold.

    Returns
    -------
    dict
        ``tense`` (int8), ``ner`` (uint16) and ``typo`` (bool), one entry per text.

    Raises
    ------
    RuntimeError
        A child failed; the message holds the end of what it wrote to its standard error.
    InterruptedError
        ``stop`` was set before every chunk was tagged.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from aflite_core.cues import _tagging
    >>> folder = _tagging.write_context(_tagging._loaded_context("heuristic"),
    ...                                 Path(tempfile.mkdtemp()))
    >>> tags = tag_in_children(["He walked home.", "She will go."], args=[str(folder)],
    ...                        n_jobs=2)
    >>> tags["tense"].tolist()  # past, future
    [1, 3]
    """
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be at least 1, got {n_jobs}")
    n_jobs = min(n_jobs, children_for_memory())  # each child holds up to CHILD_BYTES
    size = max(1, min(TAG_CHUNK, -(-len(texts) // (4 * n_jobs))))
    starts = list(range(0, len(texts), size))
    parts: list[list[np.ndarray] | None] = [None] * len(starts)
    taken = iter(range(len(starts)))
    lock, failed = threading.Lock(), threading.Event()

    def serve(child: subprocess.Popen, errors: IO[bytes]) -> None:
        assert child.stdin is not None and child.stdout is not None
        while not failed.is_set():
            with lock:
                index = None if stop is not None and stop.is_set() else next(taken, None)
            if index is None:
                child.stdin.write(b"null\n")
                child.stdin.close()
                return
            chunk = list(texts[starts[index]:starts[index] + size])
            try:
                child.stdin.write(json.dumps(chunk).encode("ascii") + b"\n")
                child.stdin.flush()
                answer = child.stdout.readline()
            except (BrokenPipeError, OSError):
                answer = b""
            if not answer:
                failed.set()
                child.wait()
                errors.seek(0)
                said = errors.read().decode("utf-8", "replace").strip()[-2000:]
                raise RuntimeError(f"a tagging process stopped (exit {child.returncode}): "
                                   f"{said or 'it wrote nothing'}")
            parts[index] = [np.asarray(values, dtype=dtype)
                            for values, (_, dtype) in zip(json.loads(answer), TAG_ARRAYS,
                                                          strict=True)]

    count = min(n_jobs, len(starts))
    with contextlib.ExitStack() as stack:
        errors = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(count)]
        children: list[subprocess.Popen] = []
        try:
            for stream in errors:
                children.append(start_child(CHILD_MODULE, args, stdout=subprocess.PIPE,
                                            stderr=stream))
            with ThreadPoolExecutor(max(count, 1)) as pool:
                try:
                    for done in [pool.submit(serve, child, stream)
                                 for child, stream in zip(children, errors, strict=False)]:
                        done.result()
                except BaseException:  # a child failed, or Ctrl-C: the others stop too
                    failed.set()
                    raise
        finally:
            for child in children:
                if child.poll() is None and child.stdin is not None and not child.stdin.closed:
                    child.kill()  # a failure elsewhere: nothing more to ask of it
                child.wait()
                for stream in (child.stdin, child.stdout):
                    if stream is not None:
                        stream.close()
    if any(part is None for part in parts):
        raise InterruptedError("asked to stop before every text was tagged")
    return {name: (np.concatenate([p[i] for p in parts if p is not None]) if starts
                   else np.zeros(0, dtype))
            for i, (name, dtype) in enumerate(TAG_ARRAYS)}


def answer_chunks(tag: Callable[[list[str]], Sequence[np.ndarray]]) -> int:
    """A tagging child's loop: each chunk of texts on standard input answered on standard
    output with ``tag(chunk)``'s three arrays; returns the child's exit status (0 after
    ``null``, 1 when the caller stopped sending first). Anything else printed meanwhile goes
    to standard error, not into the answers."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    for line in sys.stdin.buffer:  # ASCII JSON (escapes keep every str as it was)
        chunk = json.loads(line)
        if chunk is None:
            return 0
        answers.write(json.dumps([a.tolist() for a in tag(chunk)]).encode("ascii") + b"\n")
        answers.flush()
    return 1  # the caller is gone or failed
