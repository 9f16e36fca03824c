"""Who else used the machine during a window: records for the measurement-quality check.

The CPU utilization of formula (3) comes from machine-wide per-core counters (profilers/cpu.py),
and on a shared machine every figure of a run (throughput, the GEMM ceiling) moves with the
other jobs. This module reads, at both ends of a window, the CPU time of this workload's process
tree (the runner child and every descendant: A3C's workers, data loaders), of the tbd parent that
shows the progress, and of every other process on the machine, so the analysis can say how many
cores the others took and name them. It also reads the cores' clock where the kernel shows it.

Records only; analysis/quality.py turns them into figures and warnings. psutil reads /proc (or the
platform's equivalent); a process that ends between two readings simply drops out of the census,
and one that cannot be read (another user's, on a hardened /proc) counts as unreadable, not idle.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import psutil

#: How many other processes a window record names: the heaviest, by CPU time in the window.
OTHER_PROCESSES_KEPT = 5


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return [root]


def _census() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of every readable process, by pid, with its name."""
    out: dict[int, tuple[str, float]] = {}
    for p in psutil.process_iter(["name", "cpu_times"]):
        times = p.info.get("cpu_times")
        if times is None:
            continue
        out[p.pid] = (str(p.info.get("name") or "?"), float(times.user + times.system))
    return out


def _command(pid: int, limit: int = 80) -> str | None:
    """The process's command line, shortened (a name like "python" alone does not say which job)."""
    try:
        words = psutil.Process(pid).cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    text = " ".join(os.path.basename(words[0]) if i == 0 else w for i, w in enumerate(words)) if words else ""
    return (text[: limit - 1] + "…" if len(text) > limit else text) or None


def _reaped_children_seconds() -> float:
    """CPU seconds of this process's children that have exited and been waited for."""
    t = os.times()
    return float(t.children_user + t.children_system)


def clock_mhz() -> dict[str, Any]:
    """Current per-core clock in MHz as the kernel reports it (cpufreq, else /proc/cpuinfo), or a reason."""
    try:
        freqs = psutil.cpu_freq(percpu=True)
    except (AttributeError, NotImplementedError, OSError):
        freqs = []
    current = [float(f.current) for f in freqs or [] if f.current]
    if not current:
        return {"mhz": None, "reason": "the kernel reports no CPU clock (no cpufreq, no 'cpu MHz' in /proc/cpuinfo)"}
    limits = [(float(f.min), float(f.max)) for f in freqs if f.max]
    return {"mhz": current, "min_mhz": min(lo for lo, _ in limits) if limits else None,
            "max_mhz": max(hi for _, hi in limits) if limits else None}


def workload_processes() -> dict[str, int]:
    """LoadWindow's roots for this process: itself and the tbd parent; a rank under torchrun (which
    sets TORCHELASTIC_RUN_ID) counts torchrun's agent and so every rank of its machine as the
    workload, and the agent's parent as tbd's, so the other ranks are not "another load"."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return {}
    agent = psutil.Process(os.getppid())
    try:
        return {"root_pid": agent.pid, "parent_pid": agent.ppid()}
    except psutil.Error:
        return {}


class LoadWindow:
    """Reads the census at start() and stop(); stop() returns the window's record (JSON-ready)."""

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns, parent_pid: int | None = None,
                 root_pid: int | None = None):
        """`root_pid`: the workload's process (this one by default); its tree is the workload."""
        self._clock = clock
        self._me = psutil.Process(root_pid)
        self._parent_pid = os.getppid() if parent_pid is None else parent_pid
        self._start: dict[str, Any] | None = None

    def _reading(self) -> dict[str, Any]:
        census = _census()
        tree = {p.pid for p in _tree(self._me)}
        return {"t_ns": int(self._clock()), "census": census, "tree": tree,
                "reaped_s": _reaped_children_seconds(), "clock": clock_mhz(),
                "loadavg": list(psutil.getloadavg()) if hasattr(psutil, "getloadavg") else None}

    def start(self) -> None:
        self._start = self._reading()

    def stop(self) -> dict[str, Any]:
        """The window's record: wall time, this tree's / tbd parent's / each other process's CPU seconds."""
        if self._start is None:
            raise RuntimeError("LoadWindow.stop() called before start()")
        a, b = self._start, self._reading()
        self._start = None
        tree = a["tree"] | b["tree"]
        before, after = a["census"], b["census"]
        # A descendant that ended inside the window leaves the census; a child of ours that we waited
        # for adds its whole life to reaped_s, so what it had used before the window comes off again.
        own_s = (sum(after[p][1] - before[p][1] for p in tree if p in before and p in after)
                 + sum(after[p][1] for p in tree if p in after and p not in before)
                 + (b["reaped_s"] - a["reaped_s"])
                 - sum(before[p][1] for p in tree if p in before and p not in after))
        others: list[dict[str, Any]] = []
        parent_s = None
        for pid, (name, after) in b["census"].items():
            if pid in tree:
                continue
            before = a["census"].get(pid, (name, 0.0))[1]  # started inside the window: all its time is in it
            used = max(0.0, after - before)
            if pid == self._parent_pid:
                parent_s = used
            elif used > 0.0:
                others.append({"pid": pid, "name": name, "cpu_s": used})
        others.sort(key=lambda o: -o["cpu_s"])
        for o in others[:OTHER_PROCESSES_KEPT]:
            o["command"] = _command(o["pid"])
        return {
            "wall_s": (b["t_ns"] - a["t_ns"]) / 1e9,
            "workload_cpu_s": max(0.0, own_s),
            "workload_pids": sorted(tree),  # the processes counted as the workload (several ranks: all of them)
            "tbd_parent_cpu_s": parent_s,
            "others_cpu_s": sum(o["cpu_s"] for o in others),
            "others_top": others[:OTHER_PROCESSES_KEPT],
            "processes_read": len(b["census"]),
            "loadavg_before": a["loadavg"], "loadavg_after": b["loadavg"],
            "clock_before": a["clock"], "clock_after": b["clock"],
        }
