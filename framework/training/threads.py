"""How many CPU threads torch uses: ``torch_num_threads``, by default fitted to the machine.

torch's default is the host's core count. On a shared or containerized machine that is wrong
twice: the process may be allowed fewer cores (CPU affinity, a cgroup CPU quota), and cores
that other processes keep busy make every parallel region wait for a descheduled thread (on 2
cores with one busy process, 2 threads ran the MNIST demo ~100x slower than 1). "auto" takes
the cores this process may use, less those other processes kept busy in a short sample at
startup, and honours ``OMP_NUM_THREADS`` when the user set it.
"""

from __future__ import annotations

import math
import os
import time

import psutil

from framework.base.errors import ConfigError
from framework.base.options import register

register(
    "torch_num_threads",
    "int | str",
    "auto",
    "torch's CPU threads: a number, or 'auto' (OMP_NUM_THREADS if set, else the cores that CPU affinity and the "
    "cgroup quota allow, less those other processes keep busy at startup).",
    __name__,
)

_SAMPLE_SEC = 0.1  # long enough to see a busy core, short enough not to delay startup noticeably


def allowed_cpus() -> tuple[int, str]:
    """The cores this process may run on (CPU affinity, cgroup quota) and how that was found."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_cpu_quota()
    if quota is not None and quota < affinity:
        return max(1, math.ceil(quota)), f"cgroup quota {quota:g} CPUs"
    return affinity, f"{affinity} CPUs in affinity"


def cgroup_cpu_quota() -> float | None:
    """The cgroup's CPU limit in cores (v2 ``cpu.max`` or v1 ``cfs_quota_us``); None if unlimited."""
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", encoding="ascii") as f:
            quota_us = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us", encoding="ascii") as f:
            period_us = int(f.read())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def cores_busy_with_others(cpus: set[int] | None = None) -> float:
    """How many of ``cpus`` (default: this process's) other processes kept busy over a short sample."""
    if cpus is None:
        cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    me = psutil.Process()
    before, mine_before, start = psutil.cpu_times(percpu=True), sum(me.cpu_times()[:2]), time.monotonic()
    time.sleep(_SAMPLE_SEC)
    after, mine_after, elapsed = psutil.cpu_times(percpu=True), sum(me.cpu_times()[:2]), time.monotonic() - start
    busy = 0.0
    for cpu in cpus:
        if cpu >= len(after):
            continue
        total = sum(after[cpu]) - sum(before[cpu])
        idle = (after[cpu].idle + getattr(after[cpu], "iowait", 0)) - (
            before[cpu].idle + getattr(before[cpu], "iowait", 0)
        )
        busy += (total - idle) / total if total > 0 else 0.0
    return max(0.0, busy - (mine_after - mine_before) / elapsed)


def choose_num_threads(setting: int | str) -> tuple[int, str]:
    """The thread count for ``torch_num_threads`` and a short reason for the startup line."""
    if setting != "auto":
        if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
            raise ConfigError(f"torch_num_threads = {setting!r}: give a number of threads (1, 2, ...) or 'auto'.")
        return setting, "torch_num_threads"
    if os.environ.get("OMP_NUM_THREADS", "").isdigit() and int(os.environ["OMP_NUM_THREADS"]) > 0:
        return int(os.environ["OMP_NUM_THREADS"]), "OMP_NUM_THREADS"
    allowed, why = allowed_cpus()
    if allowed == 1:
        return 1, why
    busy = round(cores_busy_with_others())
    threads = max(1, allowed - busy)
    return threads, f"{why}, {busy} busy with other processes" if busy else why


def set_num_threads(setting: int | str) -> str:
    """Set torch's intra-op threads (before the first op); returns e.g. ``1 thread (auto: 2 CPUs in affinity, 1 busy ...)``."""
    import torch

    threads, why = choose_num_threads(setting)
    torch.set_num_threads(threads)
    return f"{threads} thread{'s' if threads != 1 else ''} ({why})"
