"""The audit hands the heap memory a stage freed back to the system (glibc's malloc_trim)."""

from __future__ import annotations

import sys

import numpy as np
import psutil
import pytest

from aflite_core.heap_trim import release_free_heap


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_freed_heap_memory_goes_back_to_the_system():
    process = psutil.Process()
    # 96 KB arrays: below glibc's mmap threshold, so they live on the heap, and freeing them
    # leaves the pages mapped to the process
    arrays = [np.ones(12_000) for _ in range(3_000)]
    kept = arrays[-1].copy()
    del arrays
    held = process.memory_info().rss
    assert release_free_heap() is True
    assert process.memory_info().rss < held - 150e6  # 288 MB were freed
    assert kept.sum() == 12_000  # live memory is untouched



def test_arrow_pool_hands_back_what_its_buffers_freed():
    """Arrow's pool (mimalloc here) keeps the pages of freed buffers, as the run folder's
    writers and the readers leave them (0.19 GB after the row CSVs of 1M rows)."""
    pa = pytest.importorskip("pyarrow")
    pc = pytest.importorskip("pyarrow.compute")
    process = psutil.Process()
    arrays = [pc.add(pa.array([1.0] * 12_000), 1.0) for _ in range(3_000)]  # 96 KB each
    kept = arrays[-1]
    del arrays
    held = process.memory_info().rss
    release_free_heap()
    assert process.memory_info().rss < held - 150e6  # 288 MB were freed
    assert pc.sum(kept).as_py() == 24_000


_FRAGMENTS = """
import sys
import numpy as np
import psutil
from aflite_core.heap_trim import map_large_allocations
if sys.argv[1] == "on":
    assert map_large_allocations() is True
process = psutil.Process()
big = np.ones(1 << 20)  # 8 MB, mapped: freeing it raises glibc's own threshold past 2 MB
del big
arrays, pins = [], []
for _ in range(100):
    arrays.append(np.ones(1 << 18))  # 2 MB each
    pins.append(np.ones(64))  # small, outliving the arrays, between them in the heap
held = process.memory_info().rss
del arrays
print((held - process.memory_info().rss) / 1e6)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_large_allocations_get_pages_of_their_own_that_go_back_when_freed():
    """With glibc's dynamic threshold, 2 MB arrays freed between small live objects keep
    their pages (the premise); with map_large_allocations their 200 MB go back at once."""
    import os
    import subprocess

    # glibc's own settings left out: any MALLOC_*_ variable (Dask's nannies export
    # MALLOC_TRIM_THRESHOLD_ into this process's environment once a local cluster has run)
    # turns the dynamic threshold off, and then the premise does not hold
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}

    def freed(mode: str) -> float:
        out = subprocess.run([sys.executable, "-c", _FRAGMENTS, mode], capture_output=True,
                             text=True, check=True, env=env)
        return float(out.stdout.strip())

    assert freed("off") < 50
    assert freed("on") > 180


_TEMPORARIES = """
import ctypes, sys
import numpy as np
from aflite_core.heap_trim import HEAP_THRESHOLD, MMAP_THRESHOLD, map_large_allocations

class Info(ctypes.Structure):  # glibc's struct mallinfo2: ten size_t counters
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
if not hasattr(libc, "mallinfo2"):
    print("unknown")
    raise SystemExit
libc.mallinfo2.restype = Info
assert map_large_allocations(HEAP_THRESHOLD if sys.argv[1] == "heap" else MMAP_THRESHOLD)
before = libc.mallinfo2().hblkhd  # bytes in blocks of their own (mapped)
temporary = np.ones(1 << 19)  # 4 MB, as k-means' distance chunks are
print(libc.mallinfo2().hblkhd - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_below_the_heap_threshold_temporaries_stay_in_the_heap():
    """At MMAP_THRESHOLD a 4 MB temporary is a mapping of its own, made and unmapped each
    time, its pages faulted in anew (the driver of a small cluster audit spent 0.4 s of its
    slices stage so); at HEAP_THRESHOLD it is served from the heap and its pages reused."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}

    def mapped(mode: str) -> str:
        out = subprocess.run([sys.executable, "-c", _TEMPORARIES, mode], capture_output=True,
                             text=True, check=True, env=env)
        return out.stdout.strip()

    at_mmap = mapped("mapped")
    if at_mmap == "unknown":
        pytest.skip("this glibc has no mallinfo2 (before 2.33)")
    assert int(at_mmap) >= 4 << 20
    assert int(mapped("heap")) == 0


_THREADS_ALLOCATE = """
import ctypes, sys, threading
import numpy as np
from aflite_core.heap_trim import limit_arenas

if sys.argv[1] == "limited":
    assert limit_arenas(2)
barrier, held = threading.Barrier(8), []

def work():
    held.append(np.ones(8_000))  # 64 KB: from this thread's arena, not a mapping of its own
    barrier.wait()  # all eight alive at once: none hands its arena on to the next

threads = [threading.Thread(target=work) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL("libc.so.6").malloc_stats()  # one "Arena N:" block per arena, on stderr
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_threads_share_the_arenas_limit_arenas_allows():
    """Eight threads allocating at once get an arena each (glibc allows eight per core), and
    what each frees stays in its own: the peak grew with the cores (issue 63, item 5). With
    ``limit_arenas(2)`` they share two."""
    import os
    import re
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}

    def arenas(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", _THREADS_ALLOCATE, mode],
                             capture_output=True, text=True, check=True, env=env)
        return len(re.findall(r"^Arena \d+:", out.stderr, flags=re.MULTILINE))

    assert arenas("default") >= 5
    assert 1 <= arenas("limited") <= 2


_ARROW_THREADS = """
import sys
from concurrent.futures import ThreadPoolExecutor
import pyarrow as pa, pyarrow.compute as pc
from aflite_core.heap_trim import arrow_on_c_heap, release_free_heap

if sys.argv[1] == "c-heap":
    assert arrow_on_c_heap()
texts = pa.array([f"Row {i} of a Text" for i in range(200_000)])
def lower(_):  # each of 8 threads allocates (and frees) its own 5 MB results
    return pc.utf8_lower(texts)[7].as_py()
with ThreadPoolExecutor(8) as pool:
    assert set(pool.map(lower, range(8))) == {"row 7 of a text"}
release_free_heap()
print(pa.default_memory_pool().backend_name)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_arrow_allocates_from_the_c_heap_once_asked():
    """Arrow's own pool (mimalloc) keeps a heap per thread, whose freed pages stay until that
    thread allocates again: the peak grew with Arrow's threads, so with the cores (issue 63,
    item 5). After ``arrow_on_c_heap`` Arrow's kernels allocate from glibc's heap (bounded
    by ``limit_arenas``, emptied by ``release_free_heap``) and compute the same."""
    import subprocess

    def backend(mode: str) -> str:
        out = subprocess.run([sys.executable, "-c", _ARROW_THREADS, mode],
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()

    assert backend("default") in {"mimalloc", "jemalloc"}
    assert backend("c-heap") == "system"


def test_no_arenas_is_refused():
    from aflite_core.heap_trim import limit_arenas

    with pytest.raises(ValueError, match="at least 1 arena, got 0"):
        limit_arenas(0)


def test_the_command_line_maps_large_allocations_while_it_loads_then_reuses_the_heap(
        tmp_path, monkeypatch):
    """`run` gives the load's large arrays pages of their own (a first load of 1M rows
    peaked at 541-553 MB instead of 580-601, and held 75 MB less after it), hands the heap's
    free pages back after it, and the local audit's temporaries then reuse the heap (mapped
    through the whole audit, 1M rows took 188 s instead of 141-158)."""
    import csv

    import aflite_core.commands.run as run_command
    from aflite_core.cli import main
    from aflite_core.heap_trim import HEAP_THRESHOLD, MMAP_THRESHOLD

    calls: list = []

    def record(*what):
        calls.append(what)
        return True

    # recorded, not set: this test's process keeps glibc's own settings
    monkeypatch.setattr(run_command, "limit_arenas", lambda: record("arenas"))
    monkeypatch.setattr(run_command, "numpy_small_pages", lambda: record("pages"))
    monkeypatch.setattr(run_command, "arrow_on_c_heap", lambda: record("arrow"))
    monkeypatch.setattr(run_command, "limit_native_threads", lambda: record("threads"))
    monkeypatch.setattr(run_command, "map_large_allocations",
                        lambda threshold=MMAP_THRESHOLD: record("map", threshold))
    monkeypatch.setattr(run_command, "release_free_heap", lambda: record("release"))
    load = run_command.load_input

    def loaded(*args, **kwargs):
        record("load")
        return load(*args, **kwargs)

    monkeypatch.setattr(run_command, "load_input", loaded)
    data = tmp_path / "tiny.csv"
    with open(data, "w", encoding="utf-8", newline="") as handle:
        rows = csv.writer(handle)
        rows.writerow(["premise", "hypothesis", "label"])
        for i in range(60):
            rows.writerows([[f"premise {i}", f"a cat sleeps {i}", "yes"],
                            [f"premise {i}", f"the dog runs far {i}", "no"]])
    assert main(["run", str(data), "--out", str(tmp_path / "run"), "--measures", "none",
                 "--no-report", "-q"]) == 0
    assert calls == [("arenas",), ("pages",), ("arrow",), ("threads",), ("map", MMAP_THRESHOLD),
                     ("load",), ("release",), ("map", HEAP_THRESHOLD)]


_PAGES = """
import os, subprocess, sys
import numpy as np
from aflite_core.heap_trim import numpy_small_pages
changed = numpy_small_pages() if sys.argv[1] == "small" else None
array = np.empty(64 << 20, dtype=np.uint8)
array.fill(1)  # every page touched
with open("/proc/self/smaps_rollup") as handle:
    huge = next(int(line.split()[1]) for line in handle if line.startswith("AnonHugePages:"))
child = subprocess.run([sys.executable, "-c",
                        "import os; print(os.environ.get('NUMPY_MADVISE_HUGEPAGE'))"],
                       capture_output=True, text=True, check=True).stdout.strip()
print(changed, huge // 1024, child)
"""


def _huge_pages_on_advice() -> bool:
    """The kernel gives transparent huge pages where a process asks for them (``madvise``)."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled", encoding="ascii") as handle:
            return "[madvise]" in handle.read()
    except OSError:
        return False


@pytest.mark.skipif(not _huge_pages_on_advice(),
                    reason="the kernel gives huge pages always or never, not on NumPy's advice")
def test_numpy_arrays_take_ordinary_pages_once_asked_and_so_do_its_children():
    """NumPy advises huge pages for its large arrays (the premise: a 64 MB array touched
    whole is mostly huge pages); after ``numpy_small_pages`` it has none, the processes it
    starts inherit the setting, and a user's own ``NUMPY_MADVISE_HUGEPAGE`` stands."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}

    def pages(mode: str, **extra: str) -> list[str]:
        out = subprocess.run([sys.executable, "-c", _PAGES, mode], capture_output=True,
                             text=True, check=True, env={**env, **extra})
        return out.stdout.split()

    changed, huge_mb, child = pages("default")
    assert int(huge_mb) >= 32 and child == "None"  # NumPy's own default: huge pages
    changed, huge_mb, child = pages("small")
    assert changed == "True" and int(huge_mb) == 0 and child == "0"
    changed, huge_mb, child = pages("small", NUMPY_MADVISE_HUGEPAGE="1")
    assert changed == "False" and int(huge_mb) >= 32 and child == "1"


def test_load_hands_back_the_reads_freed_pages_before_the_checks(monkeypatch, tmp_path):
    """The read's freed buffers go back before the checks allocate: under the CLI's malloc
    settings their arrays of 1 MB or more take pages of their own and would not reuse them
    (1M rows: the load's peak -17 MB; a second load in the process -100 MB)."""
    from aflite_core.io import datasets

    calls: list[str] = []
    read, prepare = datasets.read_table, datasets.prepare_dataset
    monkeypatch.setattr(datasets, "read_table",
                        lambda *a, **k: (calls.append("read"), read(*a, **k))[1])
    monkeypatch.setattr(datasets, "release_free_heap", lambda: calls.append("release"))
    monkeypatch.setattr(datasets, "prepare_dataset",
                        lambda *a, **k: (calls.append("prepare"), prepare(*a, **k))[1])
    data = tmp_path / "tiny.csv"
    data.write_text("premise,hypothesis,label\n" + "".join(
        f"premise {i},a cat sleeps {i},{'yes' if i % 2 else 'no'}\n" for i in range(40)),
        encoding="utf-8")
    dataset = datasets.load_dataset(data)
    assert calls == ["read", "release", "prepare"]
    assert len(dataset.frame) == 40 and dataset.report.n_included == 40
