"""How far a run's figures can be trusted on the machine it ran on: the measurement-quality record.

Pure: raw/quality.json's records (profilers/stages.py, profilers/machine_load.py) in, a `Quality`
out. A shared machine moves every figure of a run: other jobs take cores from the workload (its
throughput drops; the machine-wide CPU utilization of formula (3) counts their work as busy), and
the GEMM ceiling that is a CPU's FLOP-utilization denominator is measured on the same busy cores.
So the record keeps what the run can see of that, and says in plain words when it matters:

- other load: CPU seconds of every process outside this workload's tree and the tbd parent over
  the timing windows' wall time, in cores, with the heaviest ones named;
- the timing window's repeats: each one's throughput, their median (the headline figure), their
  spread, (max - min) / median, and the 95 % confidence interval of their mean (`interval_pct`):
  two runs agree when their intervals overlap;
- the GEMM ceiling measured before and after the windows, and how far apart they are;
- the clock at the start and the end, where the kernel shows it.

Thresholds (each a warning, and the run is then not `reliable`), against what the 2-core development
machine measured on 2026-11-25: quiet, `make profile` saw the others take 0.01 cores, its three
timing windows agree within 1 % and the two ceilings within 1 % (203 and 205 GFLOP/s); beside a busy
loop the others took 0.8-1.0 cores, the windows spread 6-52 % and the ceilings 25-50 % apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tbd.core.profile_result import Quality

OTHER_LOAD_CORES = 0.25  # other processes' CPU above this many cores: a warning
SPREAD_PCT = 10.0  # repeats' throughput, or the two GEMM ceilings, further apart than this: a warning
CLOCK_DRIFT_PCT = 5.0  # the mean clock moved more than this between start and end: a warning
#: A multi-threaded workload that got less than this share of the cores its threads need, beside
#: another load, is starved: OpenMP threads spin at each barrier waiting for one that is not running.
#: Measured here (2 cores, a busy loop in another session, Linux autogroup scheduling): full-size
#: ResNet-50 at batch 4 ran 9 s per iteration with 2 threads, 1.4 s with 1 thread or with
#: OMP_WAIT_POLICY=PASSIVE (0.8 s quiet).
STARVED_SHARE = 0.75


@dataclass(frozen=True)
class RepeatFigures:
    """One timing window's figures (the whole run's are summed over the windows, not averaged from these)."""

    iterations: int
    wall_s: float
    throughput: float | None
    cpu_util_pct: float | None
    other_load_cores: float | None


def _repeat(rec: dict[str, Any], samples_per_step: float | None) -> RepeatFigures:
    iterations = int(rec["last"]) - int(rec["first"]) + 1
    wall_s = float(rec["wall_ns"]) / 1e9
    samples = rec.get("samples")
    if samples is None and samples_per_step is not None:
        samples = samples_per_step * iterations
    throughput = samples / wall_s if samples is not None and wall_s > 0 else None
    cpu = rec.get("cpu") or {}
    busy, total = np.asarray(cpu.get("busy_s") or [], float), np.asarray(cpu.get("total_s") or [], float)
    cpu_pct = float(busy.sum() / total.sum() * 100.0) if total.size and total.sum() > 0 else None
    load = rec.get("load") or {}
    load_wall = float(load.get("wall_s") or 0.0)
    other = float(load["others_cpu_s"]) / load_wall if load_wall > 0 and "others_cpu_s" in load else None
    return RepeatFigures(iterations, wall_s, throughput, cpu_pct, other)


def _per_wall(cpu_s: list[float | None], wall_s: float) -> float | None:
    """CPU seconds over all windows / their wall time: cores; None if a window lacks the figure."""
    if not cpu_s or any(s is None for s in cpu_s) or wall_s <= 0:
        return None
    return sum(float(s) for s in cpu_s) / wall_s


def _named(others: list[dict[str, Any]], wall_s: float) -> list[dict[str, Any]]:
    """The other processes over all repeats, heaviest first: name, pid, cores (CPU seconds / wall time)."""
    by_pid: dict[tuple[int, str], float] = {}
    commands: dict[int, str] = {}
    for o in others:
        key = (int(o["pid"]), str(o["name"]))
        by_pid[key] = by_pid.get(key, 0.0) + float(o["cpu_s"])
        if o.get("command"):
            commands[key[0]] = str(o["command"])
    rows = [{"name": name, "pid": pid, "command": commands.get(pid), "cores": s / wall_s}
            for (pid, name), s in by_pid.items()] if wall_s else []
    return sorted(rows, key=lambda r: -r["cores"])[:5]


def _mean_mhz(clock: dict[str, Any] | None) -> float | None:
    mhz = (clock or {}).get("mhz")
    return float(np.mean(mhz)) if mhz else None


#: Student's t, 97.5 % quantile, by degrees of freedom (any statistics table); beyond 30, the normal's.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def interval_pct(values: list[float]) -> float | None:
    """Half-width of the 95 % confidence interval of the windows' mean throughput, in % of their median:
    t(n-1) x sd / sqrt(n). The windows' range alone understates how far another run's figure may
    land: three windows of a steady run agreed within 0.4 % while the next run's median was 0.6 %
    off (bench/noisy_machine.py, 2026-11-25); the interval widens with fewer windows as it should."""
    if len(values) < 2:
        return None
    mid = float(np.median(values))
    if mid <= 0:
        return None
    df = len(values) - 1
    t = _T975[df - 1] if df <= len(_T975) else 1.960
    return t * float(np.std(values, ddof=1)) / np.sqrt(len(values)) / mid * 100.0


def _spread_pct(values: list[float]) -> float | None:
    if len(values) < 2:
        return None
    mid = float(np.median(values))
    return (max(values) - min(values)) / mid * 100.0 if mid > 0 else None


def best_ceiling(after: dict | None, quality: dict | None) -> dict | None:
    """The higher of the GEMM ceilings measured after and before the windows: a ceiling is the best a
    matmul reaches, and on a shared machine the lower one measured the other jobs as well."""
    before = quality.get("gemm_before") if isinstance(quality, dict) else None
    candidates = [g for g in (after, before) if isinstance(g, dict) and isinstance(g.get("flops_per_s"), (int, float))]
    return max(candidates, key=lambda g: g["flops_per_s"]) if candidates else after


def measurement_quality(records: dict[str, Any] | None, gemm_after: dict[str, Any] | None,
                        samples_per_step: float | None, cores: int | None, threads: int | None = None) -> Quality | None:
    """The quality record of a run (module docstring); None when the run wrote no quality records
    (a run by an older tbd, or one stopped before its first timing window)."""
    if not records or not records.get("repeats"):
        return None
    repeats = [_repeat(r, samples_per_step) for r in records["repeats"]]
    wall = sum(r.wall_s for r in repeats)
    load_wall = sum(float((r.get("load") or {}).get("wall_s") or 0.0) for r in records["repeats"])
    loads = [rec.get("load") or {} for rec in records["repeats"]]
    other = _per_wall([load.get("others_cpu_s") for load in loads], load_wall)
    own = _per_wall([load.get("workload_cpu_s") for load in loads], load_wall)
    parent = _per_wall([load.get("tbd_parent_cpu_s") for load in loads], load_wall)
    named = _named([o for rec in records["repeats"] for o in (rec.get("load") or {}).get("others_top") or []],
                   load_wall)
    rates = [r.throughput for r in repeats if r.throughput is not None]
    cpu = [r.cpu_util_pct for r in repeats if r.cpu_util_pct is not None]
    median = float(np.median(rates)) if rates else None
    spread = _spread_pct(rates)
    before = (records.get("gemm_before") or {}).get("flops_per_s")
    after = (gemm_after or {}).get("flops_per_s")
    ceilings = [c for c in (before, after) if c]
    gemm_spread = (max(ceilings) - min(ceilings)) / max(ceilings) * 100.0 if len(ceilings) == 2 else None
    start, end = _mean_mhz(records.get("clock_start")), _mean_mhz(records.get("clock_end"))
    reasons: dict[str, str] = {}
    if start is None:
        reasons["clock_mhz"] = (records.get("clock_start") or {}).get("reason") or "the clock was not read"
    if gemm_spread is None:
        reasons["gemm_spread_pct"] = ("the GEMM ceiling was measured only once (the other measurement ran out of "
                                      "memory or was not made)")
    if spread is None:
        reasons["throughput_spread_pct"] = "one timing window (--repeat 1): no spread to give"
    warnings = _warnings(other, named, cores, spread, len(rates), gemm_spread, before, after, start, end)
    if threads and threads > 1 and own is not None and other is not None and other >= OTHER_LOAD_CORES \
            and own < STARVED_SHARE * min(threads, cores or threads):
        warnings.append(
            f"the workload's {threads} threads got {own:.2f} cores beside the other load: they wait for each other "
            "at every parallel region, which slows it far more than its share of the CPU; --threads "
            f"{max(1, int((cores or threads) - other))} or OMP_WAIT_POLICY=PASSIVE avoids that")
    return Quality(
        reliable=not warnings, warnings=warnings, cores=cores, wall_s=wall,
        workload_cores=own, other_load_cores=other, tbd_parent_cores=parent, other_processes=named,
        gemm_ceiling_flops={"before": before, "after": after}, gemm_spread_pct=gemm_spread,
        clock_mhz={"start": start, "end": end}, throughput_median=median, throughput_spread_pct=spread,
        throughput_interval_pct=interval_pct(rates),
        cpu_util_median_pct=float(np.median(cpu)) if cpu else None,
        cpu_util_range_pct=[min(cpu), max(cpu)] if cpu else None,
        repeats=[{"iterations": r.iterations, "wall_s": r.wall_s, "throughput": r.throughput,
                  "cpu_util_pct": r.cpu_util_pct, "other_load_cores": r.other_load_cores} for r in repeats],
        reasons=reasons)


def _warnings(other: float | None, named: list[dict[str, Any]], cores: int | None, spread: float | None,
              windows: int, gemm_spread: float | None, before: float | None, after: float | None,
              start: float | None, end: float | None) -> list[str]:
    out = []
    if other is not None and other >= OTHER_LOAD_CORES:
        of = f" of {cores}" if cores else ""
        who = "; ".join(f"{o['cores']:.2f} {o.get('command') or o['name']} (pid {o['pid']})" for o in named[:3]
                        if o["cores"] >= 0.01) or "none named: processes tbd could not read"
        out.append(f"another load used {other:.2f} cores{of} during the timing windows ({who}): the throughput and "
                   "the machine-wide CPU utilization are not this workload's alone")
    if spread is not None and spread > SPREAD_PCT:
        out.append(f"the throughput of the {windows} timing windows varied by {spread:.0f} % of their median: "
                   "compare runs by their spread, not their median alone")
    if gemm_spread is not None and gemm_spread > SPREAD_PCT:
        out.append(f"the GEMM ceiling moved {gemm_spread:.0f} % between before the windows ({before / 1e9:.1f} "
                   f"GFLOP/s) and after ({after / 1e9:.1f} GFLOP/s): FLOP utilization against it is uncertain by "
                   "that much (--peak-flops fixes the denominator)")
    if start and end and abs(end - start) / start * 100.0 > CLOCK_DRIFT_PCT:
        out.append(f"the CPU clock moved from {start:.0f} MHz to {end:.0f} MHz during the run")
    return out
