"""A container's CPU quota and memory limit (Linux cgroups, v1 and v2) bound the cores and
the memory the audit sizes itself for (``aflite_core/cgroup_limits.py``), on cgroup file
systems planted in a temporary folder as the kernel lays them out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aflite_core import cgroup_limits
from aflite_core._validation import available_cores
from aflite_core.cgroup_limits import cgroup_cpu_limit, cgroup_memory_limit

REPO = Path(__file__).resolve().parent.parent
V1_UNLIMITED = "9223372036854771712"  # what cgroup v1 writes for "no memory limit"


def _files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="ascii")


def _proc(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proc_self_cgroup"
    path.write_text(text, encoding="ascii")
    return path


def test_v2_the_tightest_quota_of_the_cgroup_and_those_above_it(tmp_path):
    root = tmp_path / "fs"
    _files(root, {"cgroup.controllers": "cpu memory", "cpu.max": "max 100000",
                  "kubepods/cpu.max": "300000 100000",  # the node's share: 3 CPUs
                  "kubepods/pod1/cpu.max": "150000 100000",  # the pod's limit: 1.5 CPUs
                  "kubepods/pod1/ctr/cpu.max": "max 100000"})
    proc = _proc(tmp_path, "0::/kubepods/pod1/ctr\n")
    assert cgroup_cpu_limit(root, proc) == 1.5
    # a container whose cgroup namespace makes its own cgroup the root ("0::/")
    assert cgroup_cpu_limit(root, _proc(tmp_path, "0::/\n")) is None
    _files(root, {"cpu.max": "200000 100000"})
    assert cgroup_cpu_limit(root, _proc(tmp_path, "0::/\n")) == 2.0


def test_v1_a_container_sees_its_own_cgroup_at_the_mount(tmp_path):
    """Docker on cgroup v1: /proc/self/cgroup names the host's path, which does not exist
    inside the container; the container's own cgroup is the mount's root."""
    root = tmp_path / "fs"
    mount = "cpu,cpuacct"
    _files(root, {f"{mount}/cgroup.procs": "", f"{mount}/cpu.cfs_quota_us": "-1",
                  f"{mount}/cpu.cfs_period_us": "100000"})
    proc = _proc(tmp_path, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n")
    assert cgroup_cpu_limit(root, proc) is None  # -1: no quota
    _files(root, {f"{mount}/cpu.cfs_quota_us": "250000"})
    assert cgroup_cpu_limit(root, proc) == 2.5
    # a service's own cgroup below the mount (systemd's CPUQuota=50%) is found too
    _files(root, {f"{mount}/system.slice/job.service/cpu.cfs_quota_us": "50000",
                  f"{mount}/system.slice/job.service/cpu.cfs_period_us": "100000"})
    proc = _proc(tmp_path, "4:cpu,cpuacct:/system.slice/job.service\n")
    assert cgroup_cpu_limit(root, proc) == 0.5


@pytest.mark.parametrize("text", ["", "garbage", "max", "100000", "x 100000",
                                  "200000 0", "-5 100000"])
def test_a_cpu_max_that_does_not_read_as_a_quota_is_no_quota(tmp_path, text):
    root = tmp_path / "fs"
    _files(root, {"cgroup.controllers": "cpu", "cpu.max": text})
    assert cgroup_cpu_limit(root, _proc(tmp_path, "0::/\n")) is None


def test_no_cgroup_file_system_no_limit(tmp_path):
    assert cgroup_cpu_limit(tmp_path / "none", tmp_path / "no_proc_file") is None
    assert cgroup_memory_limit(tmp_path / "none", tmp_path / "no_proc_file") is None
    # a cpu.max that is a folder, a path of ".." in /proc/self/cgroup: read as nothing
    root = tmp_path / "fs"
    (root / "cpu.max").mkdir(parents=True)
    _files(root, {"cgroup.controllers": "cpu"})
    assert cgroup_cpu_limit(root, _proc(tmp_path, "0::/../../etc\n")) is None


def test_memory_limits_v2_and_v1(tmp_path):
    v2 = tmp_path / "v2"
    _files(v2, {"cgroup.controllers": "memory", "memory.max": "max",
                "user.slice/memory.max": str(8 << 30), "user.slice/a/memory.max": "max"})
    assert cgroup_memory_limit(v2, _proc(tmp_path, "0::/user.slice/a\n")) == 8 << 30
    v1 = tmp_path / "v1"
    _files(v1, {"memory/cgroup.procs": "", "memory/memory.limit_in_bytes": V1_UNLIMITED})
    proc = _proc(tmp_path, "9:memory:/docker/abc\n")
    assert cgroup_memory_limit(v1, proc) == int(V1_UNLIMITED)  # the caller takes the min
    _files(v1, {"memory/memory.limit_in_bytes": str(2 << 30)})
    assert cgroup_memory_limit(v1, proc) == 2 << 30


def test_usable_memory_is_the_machines_or_the_cgroups_if_lower(monkeypatch):
    machine = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    monkeypatch.setattr(cgroup_limits, "cgroup_memory_limit", lambda: int(V1_UNLIMITED))
    assert cgroup_limits.usable_memory() == machine
    monkeypatch.setattr(cgroup_limits, "cgroup_memory_limit", lambda: 1 << 30)
    assert cgroup_limits.usable_memory() == min(machine, 1 << 30)


def test_available_cores_is_the_affinity_bounded_by_the_quota(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setattr(cgroup_limits, "quota_cores", lambda: 2)
    assert available_cores() == 2  # a 16-core host, --cpus=2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert available_cores() == 1  # pinned to one core below the quota
    monkeypatch.setattr(cgroup_limits, "quota_cores", lambda: None)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert available_cores() == 16


@pytest.mark.parametrize(("limit", "cores"), [(0.2, 1), (1.0, 1), (1.5, 2), (2.0, 2),
                                              (15.9, 16), (None, None)])
def test_quota_cores_rounds_the_quota_up(monkeypatch, limit, cores):
    monkeypatch.setattr(cgroup_limits, "cgroup_cpu_limit", lambda: limit)
    monkeypatch.setattr(cgroup_limits.sys, "platform", "linux")
    cgroup_limits.quota_cores.cache_clear()
    try:
        assert cgroup_limits.quota_cores() == cores
    finally:
        cgroup_limits.quota_cores.cache_clear()


#: A process on 2 cores under a quota of 1 CPU (both patched before anything reads them).
_UNDER_QUOTA = """
import json, os, sys
if sys.argv[1] == "numpy first":  # its BLAS started: held through threadpoolctl
    import numpy
os.sched_getaffinity = lambda pid: {0, 1}
import aflite_core.cgroup_limits as limits
limits.quota_cores = lambda: 1
held = limits.limit_native_threads()
from threadpoolctl import threadpool_info
import numba
print(json.dumps({"held": held, "env": {k: os.environ.get(k)
                  for k in limits.NATIVE_THREAD_VARIABLES},
                  "blas": sorted({p["num_threads"] for p in threadpool_info()
                                  if p["user_api"] == "blas"}),
                  "numba": numba.get_num_threads()}))
"""


@pytest.mark.parametrize("order", ["numpy first", "numpy after"])
def test_limit_native_threads_holds_blas_numba_and_the_children_to_the_quota(order):
    env = {k: v for k, v in os.environ.items()
           if k not in cgroup_limits.NATIVE_THREAD_VARIABLES}
    env["MKL_NUM_THREADS"] = "2"  # one the user set is left as it is
    done = subprocess.run([sys.executable, "-c", _UNDER_QUOTA, order], cwd=REPO, env=env,
                          capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["held"] == 1
    assert seen["env"] == {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                           "MKL_NUM_THREADS": "2", "NUMBA_NUM_THREADS": "1"}
    assert seen["blas"] == [1] and seen["numba"] == 1


def test_limit_native_threads_changes_nothing_without_a_quota_below_the_affinity(
        monkeypatch):
    for name in cgroup_limits.NATIVE_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    for quota in (None, 2, 8):
        monkeypatch.setattr(cgroup_limits, "quota_cores", lambda quota=quota: quota)
        assert cgroup_limits.limit_native_threads() is None
    assert not any(name in os.environ for name in cgroup_limits.NATIVE_THREAD_VARIABLES)
