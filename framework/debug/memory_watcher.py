"""``watch_memory``: a separate process that reports the memory of the training process and its children.

Run by the engine as ``python -m framework.debug.memory_watcher PID INTERVAL [LOGFILE ...]``; it
imports only psutil and safe_create's link-safe open, so it starts fast and costs the training process
nothing. Every INTERVAL seconds it reads RSS, PSS and USS of PID and of each of its children (DataLoader workers
included) and prints a line for each process that appeared, ended, or whose memory changed by
more than 5% or 16 MB since its last line. It ends when PID ends.
"""

from __future__ import annotations

import os
import sys
import time

import psutil

from framework.base.safe_create import open_kept

_MB = 1024.0**2


def _fmt(n: int) -> str:
    return f"{n / _MB:.1f}MB"


def _measure(proc: psutil.Process) -> dict[str, int]:
    try:
        info = proc.memory_full_info()  # PSS/USS read /proc/PID/smaps: slow, but not in the trainer
        return {"rss": info.rss, "pss": getattr(info, "pss", info.rss), "uss": info.uss}
    except psutil.AccessDenied:
        return {"rss": proc.memory_info().rss}


def _changed(old: dict[str, int], new: dict[str, int]) -> bool:
    return abs(new["rss"] - old["rss"]) > max(0.05 * old["rss"], 16 * _MB)


def watch(pid: int, interval: float, log_files: list[str]) -> None:
    """Report until process ``pid`` ends."""
    try:
        main = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    reported: dict[int, dict[str, int]] = {}
    while main.is_running() and main.status() != psutil.STATUS_ZOMBIE:
        try:
            children = {c.pid: c for c in main.children(recursive=True) if c.pid != os.getpid()}
            procs = {pid: main, **children}
            lines = []
            for child_pid, proc in procs.items():
                try:
                    now = _measure(proc)
                except psutil.NoSuchProcess:
                    continue
                label = "main" if child_pid == pid else f"child {child_pid}"
                if child_pid not in reported or _changed(reported[child_pid], now):
                    lines.append(f"{label}: " + " ".join(f"{k} {_fmt(v)}" for k, v in now.items()))
                    reported[child_pid] = now
            for gone in [p for p in reported if p not in procs]:
                lines.append(f"child {gone}: ended")
                del reported[gone]
        except psutil.NoSuchProcess:
            break
        if lines:
            text = "".join(f"watch_memory: {line}\n" for line in lines)
            sys.stdout.write(text)
            sys.stdout.flush()
            for path in log_files:
                # Opened each time, by name: never through a link planted there since the run checked its log.
                with os.fdopen(open_kept(path, "a log file", os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8") as f:
                    f.write(text)
        time.sleep(interval)


if __name__ == "__main__":
    watch(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:])
