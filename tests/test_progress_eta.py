"""The ETA follows the CPU the audit gets (aflite_core.progress_eta).

Planted runs: an audit whose work is spread evenly over its bar, fed to the clock second by
second with the CPU counts a machine would give it -- alone, under a steady load, and with a
load that starts or stops mid-run. The ETA must be the plain estimate where that is right
and follow the load where it is not. And the counts themselves, on a real process that
burns CPU.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from aflite_core.progress_eta import CpuShare, EtaClock


def _simulate(shares, *, threads: int = 2, cores: int = 2, work: float = 100.0):
    """Run ``work`` full-speed seconds on a machine that gives the audit ``shares(t)`` of
    what it asks; return ``[(t, fraction, eta, really_left)]`` once a second.

    The audit runs ``threads`` threads; with share s it runs ``min(threads, cores) * s``
    core-seconds a second and waits for the rest of what its threads ask."""
    clock = EtaClock(cores=cores)
    t, done, ran, waited = 0.0, 0.0, 0.0, 0.0
    trace = []
    clock.update(0.0, 0.0, (0.0, 0.0))
    while done < work:
        share = shares(t)
        done += share  # one second at this share does `share` full-speed seconds
        got = min(threads, cores) * share
        ran += got
        waited += threads - got  # every thread asks for a core all the time
        t += 1.0
        clock.update(t, min(done / work, 1.0), (ran, waited))
        trace.append((t, done / work, clock.eta()))
    total = t
    return [(t, f, eta, total - t) for t, f, eta in trace]  # (a second at a time: 1 s off)


def _worst(trace, since: float = 0.1):
    return max(max(eta / left, left / eta) for t, f, eta, left in trace
               if since <= f < 0.99 and left >= 15 and eta is not None)


def test_alone_it_is_the_plain_estimate():
    """Share 1 all along: elapsed * (1 - f) / f exactly, whatever the threads."""
    for threads in (1, 2, 3):
        for t, f, eta, _left in _simulate(lambda t: 1.0, threads=threads):
            if 0.02 <= f < 1:
                assert eta == pytest.approx(t * (1 - f) / f)


def test_a_steady_load_cancels():
    """Share 0.25 all along: the audit takes 4x as long and the ETA says so from the start."""
    trace = _simulate(lambda t: 0.25)
    assert _worst(trace) < 1.05


def test_a_load_that_starts_is_followed_within_the_window():
    """A job takes 90 % of the CPU from 30 s on: the plain estimate (elapsed-weighted) is
    off by up to 8x; the clock's is right again once its window has passed."""
    trace = _simulate(lambda t: 1.0 if t < 30 else 0.1)
    after = [row for row in trace if row[0] >= 30 + 16]
    assert _worst(after, since=0.0) < 1.1
    plain = max(max(t * (1 - f) / f / left, left / (t * (1 - f) / f))
                for t, f, eta, left in after if 0 < f < 0.99 and left >= 15)
    assert plain > 3  # the plain estimate was far off there


def test_a_load_that_stops_is_followed():
    trace = _simulate(lambda t: 0.2 if t < 60 else 1.0)
    after = [row for row in trace if row[0] >= 60 + 16]
    assert _worst(after, since=0.0) < 1.1


def test_its_own_threads_beyond_the_cores_are_not_a_load():
    """Three threads on two cores wait for each other, not for another job: share 1."""
    trace = _simulate(lambda t: 1.0, threads=3, cores=2)
    assert _worst(trace) < 1.01


def test_a_share_just_below_one_on_a_machine_it_has_to_itself_counts_as_all_of_it():
    """Readings of 0.5 s mix a core idle (one thread running) with threads waiting for each
    other (three on two cores): a quiet machine reads 0.81-0.95. From FULL_SHARE up that is
    all of the CPU, so the estimate is the plain one; a real load's share (below half of it)
    is taken as read."""
    from aflite_core.progress_eta import FULL_SHARE, _share

    assert _share(FULL_SHARE, 1 - FULL_SHARE, 0.5, 2) == 1.0  # ran / wanted = FULL_SHARE
    assert _share(0.1, 0.9, 1.0, 2) == pytest.approx(0.1)
    clock = EtaClock(cores=2)
    ran = waited = 0.0
    clock.update(0.0, 0.0, (ran, waited))
    for k in range(1, 41):  # a quiet audit: 10 s of stages reading 0.86, then 10 s of 1.0
        share = 0.86 if k <= 20 else 1.0
        ran, waited = ran + share, waited + 1 - share  # two cores asked for, 0.5 s
        clock.update(k / 2, k / 80, (ran, waited))
    assert clock.eta() == pytest.approx(20 * 0.5 / 0.5)  # the plain estimate (18.6 s before)


def test_no_counts_is_the_plain_estimate():
    clock = EtaClock(cores=2)
    for t in range(0, 11):
        clock.update(float(t), t / 20)
    assert clock.eta() == pytest.approx(10 * 0.5 / 0.5)
    clock.update(11.0, 1.0)
    assert clock.eta() is None  # done


def test_cpu_counts_of_a_real_process():
    """A child that burns a core for a second: its CPU time is counted, through /proc."""
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nt=time.process_time()\n"
                              "while time.process_time() - t < 1.0: pass"])
    share = CpuShare(child.pid)
    if not share.available:
        child.kill()
        pytest.skip("no /proc schedstat on this system (the ETA is the plain one there)")
    deadline = time.monotonic() + 30
    ran = 0.0
    while child.poll() is None and time.monotonic() < deadline:
        ran, waited = share.sample()
        time.sleep(0.05)
    assert child.wait(timeout=30) == 0
    assert 0.5 <= ran <= 1.5
    assert waited >= 0.0


def test_a_still_bar_counts_down():
    """A stage without reports of its own (the bar stands at 40 % from 40 s to 60 s): the
    ETA counts down through it instead of rising, and stays within the plain estimate's
    error."""
    clock = EtaClock(cores=1)
    etas, plain = [], []
    for t in range(0, 101):
        f = t / 100 if t < 40 or t >= 60 else 0.4
        clock.update(float(t), f, (float(t), 0.0))
        if 40 <= t < 60:
            etas.append(clock.eta())
            plain.append(t * (1 - f) / f)
    assert all(b < a for a, b in zip(etas, etas[1:], strict=False))  # down, every second
    assert plain[-1] > plain[0]  # the plain one rose
    worst = max(max(e / (100 - t), (100 - t) / e) for e, t in zip(etas, range(40, 60),
                                                                    strict=True))
    worst_plain = max(max(e / (100 - t), (100 - t) / e)
                      for e, t in zip(plain, range(40, 60), strict=True))
    assert worst < worst_plain


def test_a_stall_longer_than_planned_holds_at_half():
    """The bar stands at 40 % from 40 s to 100 s, where the plan had the stage end by 60 s
    (a stage overrunning its plan, as every stage does on a loaded machine): the ETA counts
    down, then holds at half of what it was (30 s) until the bar moves, not at a tenth (6 s,
    while 60-120 s remained: 10x off)."""
    clock = EtaClock(cores=1)
    etas = []
    for t in range(0, 161):
        f = t / 100 if t < 40 else (0.4 if t < 100 else 0.4 + (t - 100) / 100)
        clock.update(float(t), f, (float(t), 0.0))
        if 40 <= t < 100:
            etas.append((clock.eta(), 160 - t))
    assert min(eta for eta, _ in etas) == pytest.approx(30.0)
    assert etas[10][0] == pytest.approx(50.0)  # counting down meanwhile
    assert max(max(eta / left, left / eta) for eta, left in etas) <= 4.0 + 1e-9
