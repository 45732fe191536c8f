"""How the default audit scales with the cores it is given (issue 63, item 1).

For each core count of ``--cores`` (default 1,2), runs the CLI's default audit
(``python -m aflite_core run DATA --out RUN --no-report``, the dashboard's defaults) in a fresh
process pinned to that many cores by CPU affinity (``os.sched_setaffinity`` before the
interpreter starts, as ``taskset -c 0-{k-1}`` would), on ``bench_cues.build(N)`` (SNLI-like
rows, the shared SNLI train sample lightly perturbed, seeded) or SNLI dev for
``--rows 9842`` and below. It prints, per stage, the seconds from ``summary.json`` at each core
count and the speed-up against the first count (one core by default), then the whole run's
wall time, its speed-up, its peak RSS (the child's ``VmHWM``; below it, with the processes
it started: the cue tagging's, which hold their own memory; then that tree's peak PSS, read
every second, where a page the processes share counts once: the tagging processes map the
tagger's weights and word list from one file) and the ETA's worst factor
(as ``bench_pipeline.py`` reads it from the progress lines).

It also checks what the audit's pools see: a child pinned to k cores reports
``aflite_core._validation.available_cores()``, the OpenBLAS / OpenMP thread counts
(``threadpoolctl``) and numba's thread count, which must all be k (none may follow
``os.cpu_count()``), and that the run folders' files, timings aside, are the same bytes at
every core count (the scores, and every Parquet file of the run).

With ``--data FILE`` the audit reads that CSV instead of building rows (a machine without
``../shared``: carry a file ``bench_cues.build`` wrote). With ``--keep DIR`` each core count's
stage seconds, progress lines and busy cores (the pinned CPUs' ``/proc/stat``, every 0.1 s)
go to ``DIR/cores_K.json``, and the benchmark prints, per stage (the last progress line's),
its wall seconds and the core-seconds the pinned CPUs sat idle: where the serial parts are.

With ``--in-turn`` every measure runs in turn (none beside the others): each stage's seconds
are its own, and its speed-up says how much of it divides among the cores (the progress
plan's ``PARALLEL_SHARE``, :mod:`aflite_core.progress_plan`). Each audit gets a cache folder
of its own, so the cue tagging is a first audit's (``ETA worst x`` included). numba's compiled
code is not a first audit's: every run reads one numba cache folder, filled first by an
unmeasured audit of :data:`WARM_ROWS` rows of the same file, as a user's audits after the
first one after installing read theirs (a cold folder compiles the load's and the map's
kernels, about 5 s of one core in every run, which said 1.48x at 100,000 rows where the same
runs warm say more; 2026-11-30). ``--numba-dir DIR`` keeps that folder between invocations:
filled once, the next benchmark skips its unmeasured audit. The audits learn no pace
(``AFLITE_PACE_FILE=off``, :mod:`aflite_core.progress_pace`): each ETA is a first audit's on
this machine. ``--pace-file FILE`` gives them that file instead, kept between invocations like
``--numba-dir``: every audit reads the pace the earlier ones left and adds its own, as a
user's later audits on one machine do.

With ``--emulate K`` one more audit runs on every core this process may use while the audit
believes it may use K (``os.sched_getaffinity`` answers K CPUs, numba and OpenBLAS start K
threads): every pool is sized as on a K-core machine, so its peak RSS is what K cores'
threads hold side by side (issue 63, item 5: at most +25 % over one core), though its wall
time is not K cores' (the threads share the real ones), and OpenBLAS starts no more threads
than the CPUs it finds (its per-thread buffers are left out). It prints that peak against
the first count's, and whether its run files are the same bytes.

With ``--quota Q`` one more audit runs with every core in its affinity (``--emulate``'s count
if given) inside a cgroup of its own whose CPU quota is Q CPUs (``docker run --cpus=Q``, a
pod's CPU limit: cgroup v2's ``cpu.max`` or v1's ``cpu.cfs_quota_us``; it needs root and a
cgroup file system it may write, else it says so and runs nothing). Its pools must follow the
quota (:mod:`aflite_core.cgroup_limits`): the probe must see ``ceil(Q)`` cores, and its wall
time and peaks are printed beside those of the audit pinned to ``ceil(Q)`` cores (when
``--cores`` has that count). ``--memory-limit SIZE`` limits that cgroup's memory too (a
container's ``--memory``; alone, without a quota): the tagging processes are then no more
than a quarter of SIZE holds (``cues._tagging_children.children_for_memory``).

Usage::

    python benchmarks/bench_cores.py --rows 100000 --cores 1,2
    python benchmarks/bench_cores.py --rows 100000 --cores 1,2 --in-turn
    python benchmarks/bench_cores.py --rows 100000 --cores 1,2 --emulate 16
    python benchmarks/bench_cores.py --rows 100000 --cores 1,2 --emulate 16 --quota 2  # root
    python benchmarks/bench_cores.py --rows 100000 --cores 2 --emulate 16 --memory-limit 4GB
    python benchmarks/bench_cores.py --rows 300000 --cores 1,2,4,8,16   # a 16-core host
    python benchmarks/bench_cores.py --data snli_300000.csv --cores 2,16 --keep cores300k \
        --numba-dir numba_cache
    python benchmarks/bench_cores.py --rows 100000 --cores 1,2 --pace-file pace.json  # twice
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_cues import build  # noqa: E402
from bench_pipeline import LAST_TREE_PEAK, LAST_TREE_PSS, _audit, eta_factor  # noqa: E402

from aflite_core.cgroup_limits import quota_cores, usable_memory  # noqa: E402
from aflite_core.commands._input import parse_bytes  # noqa: E402

#: Rows of the unmeasured audit that fills the runs' numba cache folder: more than the map
#: fits (``projection.SAMPLE_SIZE``, so the rows placed and polished compile too) and a file
#: over the load's compiled scan's 4 MB.
WARM_ROWS = 40_000

#: What a pinned child reports about its thread pools (after what the CLI's audit does first).
PROBE = """
import json, os
from aflite_core._validation import available_cores
from aflite_core.cgroup_limits import limit_native_threads
limit_native_threads()  # as the audit's process does: a CPU quota below the affinity
import numpy, numba
from threadpoolctl import threadpool_info
try:  # tagging processes at most, whatever the cores: as the memory holds (None: before)
    from aflite_core.cues._tagging_children import children_for_memory
    tagging_children = lambda: min(children_for_memory(), 99)
except ImportError:
    tagging_children = lambda: None
pools = sorted({(p["internal_api"], p["num_threads"]) for p in threadpool_info()})
print(json.dumps({"affinity": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(),
                  "available_cores": available_cores(), "pools": pools,
                  "numba": numba.get_num_threads(), "tagging": tagging_children()}))
"""


#: What ``--emulate K`` runs in the child first: K CPUs for whatever asks the affinity.
EMULATE = ("import os; _k = int(os.environ['BENCH_EMULATED_CORES']); "
           "os.sched_getaffinity = lambda pid: set(range(_k)); ")


def _emulating(cores: int, *, libraries: bool = True) -> dict:
    """The environment of a child made to believe it may use ``cores`` CPUs (see
    :data:`EMULATE`): with ``libraries``, numba's and OpenBLAS' threads started for that many
    (not in a cgroup with a CPU quota: there the audit sets them, as it would on such a
    host, where they would follow the affinity)."""
    env = {"BENCH_EMULATED_CORES": str(cores)}
    if libraries:
        env.update({"NUMBA_NUM_THREADS": str(cores), "OPENBLAS_NUM_THREADS": str(cores)})
    return env


def _pin(cores: int):
    """A ``preexec_fn`` that pins the child to the first ``cores`` CPUs it may use."""
    allowed = sorted(os.sched_getaffinity(0))[:cores]

    def pin() -> None:
        os.sched_setaffinity(0, allowed)

    return pin


def _pin_into(cores: int, cgroup: list[Path] | None):
    """:func:`_pin`, and with ``cgroup`` the child joins those cgroups too."""
    pin = _pin(cores)
    if not cgroup:
        return pin

    def pin_and_join() -> None:
        pin()
        for folder in cgroup:
            (folder / "cgroup.procs").write_text(str(os.getpid()), encoding="ascii")

    return pin_and_join


@contextlib.contextmanager
def limited_cgroup(cpus: float | None, memory: int | None):
    """A new cgroup with a CPU quota of ``cpus`` CPUs and/or a memory limit of ``memory``
    bytes (cgroup v2; else v1's ``cpu`` and ``memory`` hierarchies), removed on leaving;
    yields the folders a child joins. Raises OSError (with why) where none can be made."""
    root = Path("/sys/fs/cgroup")
    period = 100_000
    quota = None if cpus is None else max(1000, int(round(cpus * period)))
    name = f"bench-cores-{os.getpid()}"
    made: list[Path] = []
    try:
        if (root / "cgroup.controllers").is_file():
            control = root / "cgroup.subtree_control"
            for controller, value in (("cpu", quota), ("memory", memory)):
                if value is not None and controller not in control.read_text().split():
                    control.write_text(f"+{controller}")
            folder = root / name
            folder.mkdir()
            made.append(folder)
            if quota is not None:
                (folder / "cpu.max").write_text(f"{quota} {period}")
            if memory is not None:
                (folder / "memory.max").write_text(str(memory))
        else:
            if quota is not None:
                folder = root / "cpu" / name
                folder.mkdir()
                made.append(folder)
                (folder / "cpu.cfs_period_us").write_text(str(period))
                (folder / "cpu.cfs_quota_us").write_text(str(quota))
            if memory is not None:
                folder = root / "memory" / name
                folder.mkdir()
                made.append(folder)
                (folder / "memory.limit_in_bytes").write_text(str(memory))
        yield made
    finally:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()


def probe(cores: int, emulate: int | None = None, cgroup: list[Path] | None = None) -> dict:
    """What a child pinned to ``cores`` CPUs sees (see :data:`PROBE`); with ``emulate``, one
    made to believe it may use that many; with ``cgroup``, one in that cgroup."""
    env = None if emulate is None else {**os.environ,
                                        **_emulating(emulate, libraries=cgroup is None)}
    done = subprocess.run([sys.executable, "-c", (EMULATE if emulate else "") + PROBE],
                          cwd=REPO, capture_output=True, text=True,
                          preexec_fn=_pin_into(cores, cgroup), check=False, env=env)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-300:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def audit(data: Path, out: Path, cores: int, timeout: float, *, in_turn: bool = False,
          numba_dir: Path | None = None, emulate: int | None = None,
          cgroup: list[Path] | None = None, pace: Path | None = None
          ) -> tuple[int, float, float, list, str]:
    """The default audit pinned to ``cores`` CPUs (``bench_pipeline``'s runner): exit code,
    wall s, peak RSS MB, the progress lines (seconds, fraction, line) and stderr's tail.
    ``in_turn``: every measure in turn (none beside the others), so that each stage's seconds
    are its own and its speed-up says how much of it divides among the cores. ``emulate``:
    the child believes it may use that many cores (:data:`EMULATE`); ``cgroup``: it runs in
    those cgroups (:func:`limited_cgroup`); ``pace``: the machine's pace file (None: off)."""
    # a cache folder of its own: no run reads the cue tags an earlier one wrote
    env = {**os.environ, "AFLITE_CACHE_DIR": str(out.parent / f"cache_{out.name}"),
           "AFLITE_PACE_FILE": str(pace) if pace is not None else "off"}
    if numba_dir is not None:  # compiled code as a user's later audits find it
        env["NUMBA_CACHE_DIR"] = str(numba_dir)
    if emulate is not None:
        env.update(_emulating(emulate, libraries=cgroup is None))
    return _audit(REPO, data, out, timeout, ["--no-report"], in_turn,
                  preexec_fn=_pin_into(cores, cgroup),
                  prelude=EMULATE if emulate is not None else "",
                  env=env)


class BusyCores:
    """How many of ``cpus`` were busy, sampled from ``/proc/stat`` every ``every`` seconds
    while the ``with`` block runs: ``samples_`` holds (seconds since the start, busy cores)."""

    def __init__(self, cpus: list[int], every: float = 0.1) -> None:
        self.cpus, self.every = {f"cpu{c}" for c in cpus}, every
        self.samples_: list[tuple[float, float]] = []
        self._stop = threading.Event()

    def _read(self) -> tuple[int, int]:
        busy = total = 0
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                name, *values = line.split()
                if name in self.cpus:  # user nice system idle iowait irq softirq steal
                    ticks = [int(v) for v in values[:8]]
                    total += sum(ticks)
                    busy += sum(ticks) - ticks[3] - ticks[4]
        return busy, total

    def _sample(self) -> None:
        before, start = self._read(), time.perf_counter()
        while not self._stop.wait(self.every):
            now = self._read()
            ticks = max(1, now[1] - before[1])
            self.samples_.append((time.perf_counter() - start,
                                  len(self.cpus) * (now[0] - before[0]) / ticks))
            before = now

    def __enter__(self) -> BusyCores:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def idle_by_stage(samples: list[tuple[float, float]], progress: list, cores: int,
                  every: float = 0.1) -> dict[str, tuple[float, float]]:
    """Per stage (the last progress line's, ``load`` before the first): wall seconds and the
    core-seconds the ``cores`` pinned CPUs sat idle, in the order the stages first came."""
    stages: dict[str, tuple[float, float]] = {}
    at = 0
    for t, busy in samples:
        while at < len(progress) and progress[at][0] <= t:
            at += 1
        line = progress[at - 1][2] if at else "[  0%] load:"
        found = re.match(r"\[\s*\d+%\]\s*([A-Za-z_]+)", line)
        stage = found.group(1).strip().lower() if found else "other"
        wall, idle = stages.get(stage, (0.0, 0.0))
        stages[stage] = (wall + every, idle + max(0.0, cores - busy) * every)
    return stages


def files_digest(run: Path) -> str:
    """One digest of the run folder's Parquet files (the results; timings live in
    ``summary.json``, which is left out)."""
    digest = hashlib.sha256()
    for path in sorted(run.glob("*.parquet")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def keep(folder: Path, cores: int, result: dict, progress: list, samples: list) -> None:
    """Write one core count's figures to ``folder/cores_K.json`` and print where its pinned
    CPUs sat idle, stage by stage."""
    folder.mkdir(parents=True, exist_ok=True)
    stages = idle_by_stage(samples, progress, cores)
    (folder / f"cores_{cores}.json").write_text(json.dumps(
        {**result, "cores": cores, "progress": progress, "busy": samples,
         "idle_by_stage": stages}, indent=1), encoding="utf-8")
    print(f"\n{cores} cores: wall s and idle core-s per stage (the last progress line's)")
    for stage, (wall, idle) in stages.items():
        print(f"  {stage:28s} {wall:7.1f} {idle:8.1f}")
    print(f"  {'whole run':28s} {sum(w for w, _ in stages.values()):7.1f} "
          f"{sum(i for _, i in stages.values()):8.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--cores", default="1,2", help="comma-separated core counts")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per audit")
    parser.add_argument("--in-turn", action="store_true",
                        help="run every measure in turn (none beside the others): each "
                             "stage's own speed-up (the progress plan's parallel shares)")
    parser.add_argument("--data", type=Path,
                        help="a CSV to audit instead of building --rows rows")
    parser.add_argument("--numba-dir", type=Path,
                        help="numba's cache folder, kept between runs (the unmeasured audit "
                             "that fills it runs only while it is empty)")
    parser.add_argument("--pace-file", type=Path,
                        help="the machine's pace file (AFLITE_PACE_FILE), kept between runs: "
                             "each audit reads what the earlier ones learned and adds to it "
                             "(default: none, every ETA a first audit's)")
    parser.add_argument("--keep", type=Path,
                        help="folder for each core count's timings, progress and busy cores")
    parser.add_argument("--emulate", type=int, metavar="K",
                        help="one more audit on this machine's cores, its pools sized for K "
                             "cores: the peak RSS K cores' threads hold (not their speed)")
    parser.add_argument("--quota", type=float, metavar="Q",
                        help="one more audit on every core, inside a cgroup whose CPU quota "
                             "is Q CPUs (root): its pools must follow the quota")
    parser.add_argument("--memory-limit", type=parse_bytes, metavar="SIZE",
                        help="that audit's cgroup limits its memory to SIZE (e.g. 4GB; "
                             "alone: the cgroup has no CPU quota)")
    args = parser.parse_args()
    if args.quota is not None and not 0 < args.quota <= 4096:
        print(f"error: --quota expects CPUs > 0, got {args.quota}", file=sys.stderr)
        return 2
    if args.emulate is not None and args.emulate < 1:
        print(f"error: --emulate expects a core count >= 1, got {args.emulate}",
              file=sys.stderr)
        return 2
    if args.data is not None and not args.data.is_file():
        print(f"error: --data {args.data}: no such file", file=sys.stderr)
        return 2
    counts = [int(c) for c in args.cores.split(",")]
    have = len(os.sched_getaffinity(0))
    quota = quota_cores()  # a container's CPU quota: pinned counts above it only share it
    if max(counts) > min(have, quota or have):
        print(f"error: --cores asks for {max(counts)} cores; this process may use "
              f"{min(have, quota or have)}"
              f"{' (its CPU quota)' if quota is not None and quota < have else ''}",
              file=sys.stderr)
        return 2
    if args.data is not None:
        args.rows = len(pd.read_csv(args.data, keep_default_na=False, usecols=[0]))
    memory = usable_memory()
    print(f"{args.rows:,} rows, the default audit (--no-report"
          f"{', every measure in turn' if args.in_turn else ''}), pinned by CPU affinity; "
          f"this machine lets the benchmark use {have} cores (CPU quota: "
          f"{quota if quota is not None else 'none'}; memory "
          f"{'unknown' if memory is None else f'{memory / 2**30:.1f} GB'})")
    for k in counts:
        seen = probe(k)
        ok = (seen.get("available_cores") == k and seen.get("numba") == k
              and all(n == k for _, n in seen.get("pools", [])))
        print(f"  pinned to {k}: {json.dumps(seen)}  {'ok' if ok else 'MISMATCH'}")
    if args.emulate is not None:
        seen = probe(have, emulate=args.emulate)
        # OpenBLAS starts no more threads than the CPUs it finds, whatever it is asked: its
        # per-thread buffers are the one part of K cores' memory this cannot show
        ok = seen.get("available_cores") == args.emulate and seen.get("numba") == args.emulate
        print(f"  on {have}, made to see {args.emulate}: {json.dumps(seen)}  "
              f"{'ok (OpenBLAS: as many threads as real CPUs)' if ok else 'MISMATCH'}")
    with tempfile.TemporaryDirectory(prefix="bench-cores-") as tmp:
        tmp = Path(tmp)
        data = args.data or tmp / f"snli_{args.rows}.csv"
        if args.data is None and args.rows <= 9_842:
            shared = REPO.parent / "shared" / "data" / "snli" / "snli_dev.csv"
            pd.read_csv(shared, keep_default_na=False).iloc[:args.rows].to_csv(data,
                                                                                index=False)
        elif args.data is None:
            build(args.rows).to_csv(data, index=False)
        numba_dir = args.numba_dir or tmp / "numba"
        if numba_dir.is_dir() and any(numba_dir.iterdir()):
            print(f"  numba's cache folder {numba_dir} is filled already")
        else:
            warm = tmp / "warm.csv"
            pd.read_csv(data, keep_default_na=False, nrows=WARM_ROWS).to_csv(warm, index=False)
            code, wall, *_ = audit(warm, tmp / "run_warm", max(counts), args.timeout,
                                   in_turn=args.in_turn, numba_dir=numba_dir,
                                   pace=args.pace_file)
            print(f"  numba's cache folder filled by an unmeasured audit of "
                  f"{min(WARM_ROWS, args.rows):,} rows ({wall:.1f} s, exit {code})")
        results = {}
        for k in counts:
            out = tmp / f"run_{k}"
            with BusyCores(sorted(os.sched_getaffinity(0))[:k]) as busy:
                code, wall, peak, progress, tail = audit(data, out, k, args.timeout,
                                                       in_turn=args.in_turn,
                                                       numba_dir=numba_dir,
                                                       pace=args.pace_file)
            if code != 0:
                print(f"\n{k} cores: the audit did not finish (exit {code}, {wall:.0f} s): "
                      f"{tail[-400:]}")
                continue
            summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
            eta, where = eta_factor(progress, wall)
            results[k] = {"timings": summary["timings"], "wall": wall, "peak": peak,
                          "tree": LAST_TREE_PEAK[0], "tree_pss": LAST_TREE_PSS[0],
                          "eta": eta, "eta_where": where, "digest": files_digest(out)}
            if args.keep is not None:
                keep(args.keep, k, results[k], progress, busy.samples_)
        if args.emulate is not None:
            out = tmp / "run_emulated"
            code, wall, peak, _, tail = audit(data, out, have, args.timeout,
                                              in_turn=args.in_turn, numba_dir=numba_dir,
                                              emulate=args.emulate, pace=args.pace_file)
            emulated = ({"peak": peak, "tree": LAST_TREE_PEAK[0],
                         "tree_pss": LAST_TREE_PSS[0], "wall": wall,
                         "digest": files_digest(out)}
                        if code == 0 else {"error": f"exit {code}: {tail[-400:]}"})
        quota = (None if args.quota is None and args.memory_limit is None
                 else quota_audit(args, data, tmp, have, numba_dir))
    if not results:
        return 1
    base = counts[0] if counts[0] in results else min(results)
    stages = [s for s in results[base]["timings"] if s != "total"]
    print(f"\n{'stage':16s}" + "".join(f" {k:>3d} cores s" for k in results)
          + "".join(f"  x{k}/{base}" for k in results if k != base))
    for stage in stages:
        secs = [results[k]["timings"].get(stage) for k in results]
        line = f"{stage:16s}" + "".join(f" {s:11.2f}" if s is not None else f" {'-':>11s}"
                                         for s in secs)
        first = results[base]["timings"].get(stage) or 0.0
        for k in results:
            if k != base:
                s = results[k]["timings"].get(stage)
                line += f"  {first / s:6.2f}" if s else f"  {'-':>6s}"
        print(line)
    print(f"{'whole run (wall)':16s}" + "".join(f" {results[k]['wall']:11.2f}" for k in results)
          + "".join(f"  {results[base]['wall'] / results[k]['wall']:6.2f}"
                    for k in results if k != base))
    print(f"{'peak RSS MB':16s}" + "".join(f" {results[k]['peak']:11.0f}" for k in results))
    print(f"{'  with children':16s}" + "".join(f" {results[k]['tree']:11.0f}" for k in results))
    print(f"{'  their PSS':16s}" + "".join(f" {results[k]['tree_pss']:11.0f}" for k in results))
    print(f"{'ETA worst x':16s}" + "".join(
        f" {results[k]['eta']:11.2f}" if results[k]["eta"] else f" {'-':>11s}"
        for k in results))
    for k in results:  # where each worst ETA was: the stage the plan misjudged
        if results[k]["eta"]:
            print(f"  {k} cores: worst ETA {results[k]['eta_where']}")
    digests = {k: results[k]["digest"] for k in results}
    same = len(set(digests.values())) == 1
    listed = ", ".join(f"{k}: {d}" for k, d in digests.items())
    print(f"run files (Parquet, timings aside): "
          f"{'the same bytes at every core count' if same else 'DIFFER'} ({listed})")
    if args.emulate is not None:
        if "error" in emulated:
            print(f"emulated {args.emulate} cores: the audit did not finish ({emulated['error']})")
            return 1
        first = results[base]["peak"]
        print(f"emulated {args.emulate} cores (pools sized for {args.emulate}, run on {have}): "
              f"peak RSS {emulated['peak']:.0f} MB, {emulated['peak'] / first - 1:+.0%} "
              f"against {base} core{'s' if base > 1 else ''} ({first:.0f} MB); with the "
              f"processes it started {emulated['tree']:.0f} MB against "
              f"{results[base]['tree']:.0f} (PSS, a shared page once: "
              f"{emulated['tree_pss']:.0f} against {results[base]['tree_pss']:.0f}); run files "
              f"{'the same bytes' if emulated['digest'] == digests[base] else 'DIFFER'} "
              f"({emulated['digest']}); wall {emulated['wall']:.1f} s (not {args.emulate} "
              "cores' speed)")
    if quota is not None:
        print_quota(args, quota, results, digests[base])
    return 0


def quota_audit(args: argparse.Namespace, data: Path, tmp: Path, have: int,
                numba_dir: Path) -> dict:
    """The ``--quota`` / ``--memory-limit`` audit: every core in its affinity (``--emulate``'s
    count if given), in a cgroup of ``args.quota`` CPUs and ``args.memory_limit`` bytes; what
    its probe saw, its wall, peaks and digest."""
    try:
        with limited_cgroup(args.quota, args.memory_limit) as cgroup:
            seen = probe(have, emulate=args.emulate, cgroup=cgroup)
            out = tmp / "run_quota"
            code, wall, peak, _, tail = audit(data, out, have, args.timeout,
                                              in_turn=args.in_turn, numba_dir=numba_dir,
                                              emulate=args.emulate, cgroup=cgroup,
                                              pace=args.pace_file)
    except OSError as exc:
        return {"error": f"no cgroup with these limits could be made ({exc}); run as root "
                         "on a machine whose cgroup file system is writable"}
    if code != 0:
        return {"error": f"the audit did not finish: exit {code}: {tail[-400:]}",
                "seen": seen}
    return {"seen": seen, "wall": wall, "peak": peak, "tree": LAST_TREE_PEAK[0],
            "digest": files_digest(out)}


def print_quota(args: argparse.Namespace, quota: dict, results: dict, digest: str) -> None:
    """The lines of the audit in a cgroup: what it saw and did, beside the audit pinned to as
    many cores as its quota allows (to the first count without a quota)."""
    cpus = args.quota
    cores = max(1, math.ceil(cpus - 1e-9)) if cpus is not None else min(results or [1])
    seen = quota.get("seen", {})
    limits = [f"a CPU quota of {cpus:g} CPUs" if cpus is not None else "",
              f"a memory limit of {args.memory_limit / 2**30:.2f} GiB"
              if args.memory_limit is not None else ""]
    print(f"in a cgroup of {' and '.join(x for x in limits if x)}, every core in the affinity"
          f"{' (made to see ' + str(seen.get('affinity')) + ')' if seen else ''}: "
          f"{json.dumps(seen)}  "
          f"{'ok' if cpus is None or seen.get('available_cores') == cores else 'MISMATCH'}")
    if "error" in quota:
        print(f"  {quota['error']}")
        return
    pinned = results.get(cores)
    beside = (f" ({cores} pinned: {pinned['wall']:.1f} s, {pinned['peak']:.0f} MB, with "
              f"children {pinned['tree']:.0f} MB)" if pinned else "")
    print(f"  wall {quota['wall']:.1f} s, peak RSS {quota['peak']:.0f} MB, with children "
          f"{quota['tree']:.0f} MB{beside}; run files "
          f"{'the same bytes' if quota['digest'] == digest else 'DIFFER'} ({quota['digest']})")


if __name__ == "__main__":
    raise SystemExit(main())
