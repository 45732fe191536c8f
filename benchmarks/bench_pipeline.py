"""The whole default audit, stage by stage, against each stage's floor (issue: audit speed).

For each size (default 10k = SNLI dev, and 100k / 550k built from the shared SNLI train
sample with light, seeded perturbation as ``bench_cues.py`` does), runs the CLI's default
audit (``python -m aflite_core run DATA --out ...``, the same defaults as the dashboard) in a
fresh process and prints, per stage, its seconds from ``summary.json``, and the floor
measured in this run on the same data: the cheapest operation the stage cannot avoid, with
the ratio stage / floor. The whole-run wall time and peak RSS come from the child process
(its ``VmHWM``, see ``watch_peak``).

Floors:
- representation: TF-IDF of premise + hypothesis (fit_transform) plus one pass of a rank-k
  sketch of it (``M @ Ω`` and ``M.T @ (M @ Ω)``, k = Φ's width + 10): the least any rank-k
  reduction of M reads (the randomized SVD does this once per power iteration, plus QRs);
- aflite: what AFLite's numbers cannot be had without, each in the cheapest way measured.
  Once, the covariance of the first round's set (X^T X; AFLite's models share it and update
  it as rows leave). Per round, over that round's set S (sizes and train sizes t from the
  run's history): the randomness of the partitions' draws (m x min(t, |S| - t) random
  integers, not the draw itself); one Cholesky factor and solve for the m x C class means
  (what makes class sums linear discriminants); the class sums of each partition's training
  rows (an (m x |S|) @ (|S| x d) product); one prediction pass of the m models; and the
  element-wise work that turns scores into the stage's numbers: whether each model's
  prediction is the row's label (C - 1 maxima and one comparison per row and model, summed
  over models), the only way to a predictability, and the gold label's softmax probability
  that the data map averages (C - 1 exponentials, their sum and a reciprocal per row and
  model, summed over models). When the run scored rows AFLite did not filter (the
  ``train_only`` policy: dev/test scored by models trained on the retained rows, part of the
  stage), the same once more for the retained rows and the scored ones. The products run as
  AFLite runs them, one BLAS thread a core on cache-sized chunks (two BLAS threads on whole
  arrays were slower once the element-wise work came after them);
- cues: a binary bag of words of the hypotheses;
- knn: the similarity products of one exact nearest-neighbour pass of the queried held-out
  rows (at most ``knn.MAX_QUERIES``) over the training rows;
- projection (the UMAP map, the default): the similarity products of its neighbour searches,
  every row against the fitted sample (at most 20,000 rows) on the 64-dimensional reduction
  (the layout's epochs come on top: an algorithm's choice, not a floor);
- baselines: one fit of the hypothesis-only model on all rows plus one fit of the linear
  probe (logistic regression on standardised Φ-sized features);
- pvi: one fit of the hypothesis-only model on all rows;
- slices: a binary bag of words of the hypotheses (the cue features it slices on) and the
  least its Φ clusters need, every row's nearest of the k centres (an (n x d) @ (d x k)
  product and an argmax);
- write: one Parquet write of the frame plus one CSV write of its rows (the run folder holds
  the input as Parquet and the retained/removed rows as CSV, which together hold every row).

**A stage's own time.** Up to ``BESIDE_MAX_ROWS`` audited rows (250,000) the map runs on a
thread of its own beside the other measures, which makes the audit shorter, but then the wall
time of the map, and of every measure that ran meanwhile, counts the time the others held the
cores. For such sizes the audit is run a second time with every measure in turn
(``measure_runs.BESIDE_MAX_ROWS = 0``, the same results) and each stage is judged by its time
there (column "in turn"), the only run where a stage has the machine to itself; the whole-run
time, peak and ETA are the default run's, and both columns are printed. Above that size every
measure runs in turn in the default run already. ``--no-in-turn`` skips the second run.
``--no-floors`` skips the floors (at 5M rows they take about as long as the audit: the
whole-run wall time, peak and ETA are the audit's alone and are printed all the same).

It also checks the ETA: the CLI prints the overall fraction at every stage change; at each
line with fraction f >= 10 % (the ETA is judged from the first tenth of the run on) after
t seconds (counted from the first progress line, as the
dashboard counts from the start of the audit), the estimate ``t (1 - f) / f`` is
compared with the time that really remained, and the worst factor (max of estimate/actual
and actual/estimate, lines with at least 2 s left) is printed.

``--repo`` measures another checkout (e.g. ``git worktree add /tmp/before <commit>``) on the
same data, for before/after tables.

    .venv/bin/python benchmarks/bench_pipeline.py [--sizes 9842,100000,550000] [--repo DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import linalg
from threadpoolctl import ThreadpoolController

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_cues import build  # noqa: E402 - the 550k builder shared with bench_cues


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def projection_products(X: np.ndarray) -> None:
    """Every row of a 64-dimensional reduction of Φ against the fitted sample, in blocks."""
    Z = np.ascontiguousarray(X[:, :64])
    fitted = Z[:20_000]
    for start in range(0, len(Z), 4096):
        Z[start:start + 4096] @ fitted.T


def floors(frame: pd.DataFrame, summary: dict) -> dict[str, float]:
    """Each stage's floor on this data (see the module docstring)."""
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

    from aflite_core.represent._text_models import pair_texts, single_blas_thread, text_model

    hyps = frame["hypothesis"].astype(str).tolist()
    prems = frame["premise"].astype(str).tolist()
    labels = frame["label"].astype(str).to_numpy()
    n, d = len(frame), int(summary["representation"]["n_features"])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)).astype(np.float32)
    m = int(summary["parameters"]["n_partitions"])
    held = max(1, min(n // 10, 10_000))
    # each AFLite round's set size and train size
    rounds = [(int(r["size"]), int(r.get("train_size") or 0))
              for r in summary.get("history") or []] or [(n, n // 2)]

    def representation() -> None:
        M = TfidfVectorizer().fit_transform([p + " " + h for p, h in
                                             zip(prems, hyps, strict=True)])
        omega = rng.normal(size=(M.shape[1], d + 10)).astype(np.float32)
        M.T @ (M @ omega)

    member = (rng.random((m, n)) < 0.5).astype(np.float32)  # partition membership

    sizes_row = summary.get("sizes") or {}
    scored, retained = int(sizes_row.get("unfiltered", 0)), int(sizes_row.get("retained", 0))

    n_classes = len(set(labels))
    # the models as margins against class 0 ((C - 1) x m columns, class-major), scaled so that
    # scores stay in exp's range like real ones
    margins_w = rng.normal(size=(d, (n_classes - 1) * m)).astype(np.float32) * 0.01
    pool = ThreadPoolExecutor(os.cpu_count() or 1)
    blas = ThreadpoolController()

    def predict_chunk(lo: int, rows: int) -> None:
        """Margins of a cache-sized chunk (row-major, as one GEMM), then per row and model:
        is the gold label (class 0 here) the prediction, and its softmax probability."""
        chunk = X[lo:min(rows, lo + 4096)] @ margins_w
        others = [chunk[:, c * m:(c + 1) * m] for c in range(n_classes - 1)]
        top = others[0].copy()
        for other in others[1:]:
            np.maximum(top, other, out=top)
        np.less(top, 0).sum(axis=1)  # class 0 wins when every margin is negative
        denom = np.ones_like(top)
        for other in others:
            denom += np.exp(other)
        np.reciprocal(denom, out=denom).sum(axis=1)

    def predict(rows: int) -> None:
        """One prediction pass over ``rows`` rows with its correct counts and gold
        probabilities, in 4,096-row chunks (the scores of a chunk stay in cache for the
        element-wise work)."""
        list(pool.map(lambda lo: predict_chunk(lo, rows), range(0, rows, 4096)))

    def covariance(rows: int) -> None:
        """X^T X over ``rows`` rows, 8,192-row chunks summed."""
        sum(pool.map(lambda lo: X[lo:min(rows, lo + 8192)].T @ X[lo:min(rows, lo + 8192)],
                     range(0, rows, 8192)))

    def class_sums(rows: int) -> None:
        """The partitions' class sums over ``rows`` rows, 8,192-row chunks summed."""
        sum(pool.map(lambda lo: member[:, lo:min(rows, lo + 8192)] @ X[lo:min(rows, lo + 8192)],
                     range(0, rows, 8192)))

    draws = np.random.default_rng(1)
    rhs = rng.normal(size=(d, m * n_classes))

    def fit_models(size: int, train: int) -> None:
        """The least that turns class sums into m linear discriminants: the partitions'
        random training rows (m x t random draws among ``size``: the randomness itself), and
        one Cholesky factor of the shared covariance with a solve for the m x C class means.
        """
        draws.integers(0, size, size=(m, max(1, min(train, size - train))))  # the smaller side
        cov = np.cov(X[:512].T) + np.eye(d)  # a d x d SPD stand-in (its cost is the solve's)
        linalg.cho_solve(linalg.cho_factor(cov), rhs)

    def aflite() -> None:
        # every product on one BLAS thread a core, as AFLite runs them: a multi-threaded BLAS
        # call between the pool's tasks left its threads spinning on the cores the tasks need
        # (the prediction passes took 0.75 s instead of 0.40 s at 100k rows)
        with blas.limit(limits=1, user_api="blas"):  # the controller's scan is done once
            covariance(rounds[0][0])  # of the first round's S, once
            for size, train in rounds:
                fit_models(size, train)
                class_sums(size)
                predict(size)
            if scored and retained:  # the rows AFLite did not filter, scored after the rounds
                covariance(retained)
                fit_models(retained, rounds[-1][1])
                class_sums(retained)
                predict(scored)

    def write() -> None:
        folder = Path(tempfile.mkdtemp())
        frame.to_parquet(folder / "f.parquet")
        frame.to_csv(folder / "f.csv", index=False)

    representation_seconds = _timed(representation)  # first, as before the pool existed
    with pool:
        aflite_seconds = _timed(aflite)
    out = {
        "representation": representation_seconds,
        "aflite": aflite_seconds,
        "cues": _timed(lambda: CountVectorizer(binary=True).fit_transform(hyps)),
        "projection": _timed(lambda: projection_products(X)),
        "write": _timed(write),
    }

    def knn_pass() -> None:  # the similarity products alone (the top-k is extra work)
        train, query = X[held:], X[:held]
        for start in range(0, held, 2048):
            query[start:start + 2048] @ train.T

    out["knn"] = _timed(knn_pass)
    model = text_model("hypothesis_only")
    with single_blas_thread():
        hyp_fit = _timed(lambda: model.fit(pair_texts(None, hyps), labels))
        probe_fit = _timed(lambda: text_model("probe").fit(X, labels))
    out["baselines"] = hyp_fit + probe_fit
    out["pvi"] = hyp_fit
    k = int(((summary["parameters"].get("measure_params") or {}).get("slices") or {})
            .get("n_clusters", 50))
    centres = rng.normal(size=(d, k)).astype(np.float32)
    out["slices"] = out["cues"] + _timed(lambda: (X @ centres).argmax(axis=1))
    return out


#: ``python -m aflite_core`` as a ``-c`` program (after a prelude).
PLAIN = ("import runpy, sys; sys.argv[0] = 'aflite_core'; "
         "runpy.run_module('aflite_core', run_name='__main__')")
#: ``python -c`` program: the CLI's ``run`` with every measure in turn (none beside).
IN_TURN = "import aflite_core.measure_runs as m; m.BESIDE_MAX_ROWS = 0; " + PLAIN


def _audit(repo: Path, data: Path, out: Path, timeout: float, extra: list[str] | None = None,
           in_turn: bool = False, *, preexec_fn=None, env: dict | None = None,
           prelude: str = "") -> tuple[int, float, float, list[tuple[float, float, str]], str]:
    """Run the CLI audit (with ``in_turn``, every measure in turn); return its exit code,
    wall seconds, peak RSS (MB), the (seconds, fraction) of each progress line, and the tail
    of stderr. ``preexec_fn`` and ``env`` go to the child (``bench_cores.py`` pins it);
    ``prelude``, Python run in the child before the audit (``bench_cores.py --emulate``)."""
    start = time.perf_counter()
    command = (["-c", prelude + (IN_TURN if in_turn else PLAIN)] if in_turn or prelude
               else ["-m", "aflite_core"])
    proc = subprocess.Popen([sys.executable, *command, "run", str(data), "--out",
                             str(out), *(extra or [])], cwd=repo, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn,
                            env=env)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        for line in proc.stderr:
            lines.append((time.perf_counter() - start, line.rstrip()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    hwm = [0.0]
    watcher = threading.Thread(target=watch_peak, args=(proc.pid, hwm), daemon=True)
    watcher.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(5)
    watcher.join(5)
    progress = [(t, int(m.group(1)) / 100, line) for t, line in lines
                if (m := re.match(r"\[\s*(\d+)%\]", line))]
    tail = "\n".join(line for _, line in lines[-5:])
    return proc.returncode, wall, hwm[0] or usage.ru_maxrss / 1024, progress, tail


#: The process tree's peak RSS (MB) of the last :func:`_audit`: the audit's process and its
#: children (the cue tagging's processes) summed, sampled every 0.1 s by :func:`watch_peak`.
LAST_TREE_PEAK = [0.0]
#: The same tree's peak proportional set size (MB), sampled every second: a page shared by
#: several processes (the tagging processes map the tagger's weights and word list from one
#: file) counts once in all, where the summed RSS counts it in each.
LAST_TREE_PSS = [0.0]
#: Readings of the RSS between two of the PSS (the kernel walks every page table for it).
PSS_EVERY = 10


def tree_pss(processes) -> float:
    """The summed ``Pss`` (MB) of ``processes`` (psutil processes) from
    ``/proc/PID/smaps_rollup``; a process gone meanwhile counts 0."""
    total = 0
    for process in processes:
        with contextlib.suppress(OSError):
            text = Path(f"/proc/{process.pid}/smaps_rollup").read_text()
            found = re.search(r"^Pss:\s+(\d+) kB", text, re.MULTILINE)
            total += int(found.group(1)) if found else 0
    return total / 1024


def watch_peak(pid: int, peak: list[float]) -> None:
    """The child's own peak RSS (MB): its ``VmHWM``, read every 0.1 s until it exits; and its
    process tree's (the RSS of it and of every process it started, summed at each reading)
    in :data:`LAST_TREE_PEAK`: the tagging processes hold their own memory; and every
    :data:`PSS_EVERY` readings the tree's summed PSS in :data:`LAST_TREE_PSS`.

    Not ``ru_maxrss``: Linux counts in a child's maximum the resident size of the process
    it was forked from (exec records the old memory map's peak), so after a large size this
    benchmark's own memory showed as the audit's (a 1M-row audit that peaked at 3.3 GB was
    reported at 5.4 GB after the 550k size had run in the same benchmark process).
    """
    import psutil  # lazy: the other benchmarks importing this module do not need it

    status = Path(f"/proc/{pid}/status")
    LAST_TREE_PEAK[0] = LAST_TREE_PSS[0] = 0.0
    readings = 0
    while True:
        try:
            text = status.read_text()
        except OSError:
            return
        found = re.search(r"^VmHWM:\s+(\d+) kB", text, re.MULTILINE)
        if found is None:  # a zombie: the child has exited
            return
        peak[0] = max(peak[0], int(found.group(1)) / 1024)
        with contextlib.suppress(psutil.Error):  # a process that left meanwhile
            tree = psutil.Process(pid)
            processes = [tree, *tree.children(recursive=True)]
            rss = sum(p.memory_info().rss for p in processes)
            LAST_TREE_PEAK[0] = max(LAST_TREE_PEAK[0], rss / 2**20)
            if readings % PSS_EVERY == 0:
                LAST_TREE_PSS[0] = max(LAST_TREE_PSS[0], tree_pss(processes))
        readings += 1
        time.sleep(0.1)


def eta_factor(progress: list[tuple[float, float, str]], wall: float
               ) -> tuple[float | None, str]:
    """Worst factor between the ETA the dashboard would show and the time really left, and a
    description of the progress line where it happened."""
    worst, where = None, ""
    if not progress:
        return None, where
    start = progress[0][0]  # the dashboard's clock starts with the audit, after loading
    for t, f, line in progress:
        left = wall - t
        t -= start
        if f < 0.10 or f >= 1.0 or left < 2.0:
            continue
        eta = t * (1 - f) / f
        factor = max(eta / left, left / eta) if eta > 0 else float("inf")
        if worst is None or factor > worst:
            worst = factor
            where = f"at {line[:60]!r}: ETA {eta:.1f} s, really {left:.1f} s"
    return worst, where


def _beside(repo: Path, n: int) -> list[str]:
    """The stages that ran beside the others in an audit of ``n`` rows by ``repo``'s code."""
    program = ("import json; from aflite_core.measures import registry; "
               "from aflite_core.measure_runs import BESIDE_MAX_ROWS as top; "
               f"print(json.dumps([m.name for m in registry.measures() if m.beside] "
               f"if {n} <= top else []))")
    done = subprocess.run([sys.executable, "-c", program], cwd=repo, capture_output=True,
                          text=True, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else []


def one_size(n: int, shared: Path, work: Path, repo: Path, timeout: float,
             extra: list[str] | None = None, in_turn: bool = True,
             with_floors: bool = True) -> None:
    if n <= 9_842:
        frame = pd.read_csv(shared / "snli" / "snli_dev.csv", keep_default_na=False).iloc[:n]
    else:
        frame = build(n)
    data = work / f"snli_{n}.csv"
    frame.to_csv(data, index=False)
    out = work / f"run_{n}"
    code, wall, peak, progress, tail = _audit(repo, data, out, timeout, extra)
    tree = LAST_TREE_PEAK[0]  # before an audit in turn replaces it
    if code != 0:
        print(f"\n{n:,} rows: the audit did not finish (exit {code}, {wall:.0f} s, timeout "
              f"{timeout:.0f} s): {tail[-400:]}")
        return
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    timings = summary["timings"]
    beside = [stage for stage in _beside(repo, n) if stage in timings] if in_turn else []
    turn: dict[str, float] = {}
    if beside:
        code_t, wall_t, _, _, tail_t = _audit(repo, data, work / f"turn_{n}", timeout, extra,
                                              in_turn=True)
        if code_t == 0:
            turn = json.loads((work / f"turn_{n}" / "summary.json").read_text(
                encoding="utf-8"))["timings"]
            turn["wall"] = wall_t
        else:
            print(f"  (the audit in turn did not finish: {tail_t[-300:]})")
    floor = floors(frame, summary) if with_floors else {}
    eta, eta_where = eta_factor(progress, wall)
    print(f"\n{n:,} rows ({repo.name}): wall {wall:.1f} s, peak RSS {peak:.0f} MB (with the "
          f"processes it started {tree:.0f} MB); stop "
          f"{summary['aflite']['stop_reason']} after {summary['aflite']['n_rounds']} rounds; "
          f"policy {summary['aflite'].get('split_policy')}; worst ETA factor "
          f"{'-' if eta is None else f'{eta:.2f}'} over {len(progress)} progress lines")
    if eta_where:
        print(f"  worst ETA {eta_where}")
    if turn:
        print(f"  beside the others: {', '.join(beside)}; the audit with every measure in "
              f"turn took {turn['wall']:.1f} s (the ratios: in turn)")
    print(f"  {'stage':16s} {'seconds':>9s} {'in turn':>9s} {'floor s':>9s} {'ratio':>7s}")
    for stage, seconds in timings.items():
        if stage == "total":
            continue
        f = floor.get(stage)
        judged = turn.get(stage, seconds)
        ratio = f"{judged / f:7.1f}" if f else "      -"
        in_turn_s = f"{turn[stage]:9.2f}" if stage in turn else " " * 9
        print(f"  {stage:16s} {seconds:9.2f} {in_turn_s} "
              f"{f if f is not None else float('nan'):9.2f} {ratio}")
    print(f"  {'total':16s} {timings['total']:9.2f}")


def main() -> int:
    # every ETA a first audit's on this machine: no pace learned by earlier audits
    # (aflite_core.progress_pace), unless AFLITE_PACE_FILE names a file to use
    os.environ.setdefault("AFLITE_PACE_FILE", "off")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="9842,100000,550000")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout to measure")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per size")
    parser.add_argument("--no-in-turn", action="store_true", help="skip the second audit "
                        "with every measure in turn (see the module docstring)")
    parser.add_argument("--no-floors", action="store_true", help="skip each stage's floor "
                        "(the audit's own figures are printed all the same)")
    parser.add_argument("--extra", default="", help="more run flags, e.g. "
                        "'--projection-method umap' (one string, split on spaces)")
    args = parser.parse_args()
    extra = args.extra.split()
    if extra:
        print(f"run flags: {' '.join(extra)}")
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            one_size(n, args.shared, Path(tmp), args.repo.resolve(), args.timeout, extra,
                     in_turn=not args.no_in_turn, with_floors=not args.no_floors)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
