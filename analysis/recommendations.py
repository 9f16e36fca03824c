"""Plain recommendations where the figures show them, each naming the figures it rests on (issue 28).

Pure: the kernel tables (groups, their roofline points, the won-back ranking) and the peaks in,
`Recommendation`s out. A recommendation is made only when its figures cross the thresholds below;
otherwise none is, and nothing is said. Each quotes its figures in its text and lists them, as
profile.json names them, in `figures`:

- `start_here`: the top of the won-back ranking (`ranking.by_recoverable_time`), its time, share of
  its roof and the time reaching the roof would win back.
- `faster_precision`: compute-bound FP32 groups holding at least `MIN_SHARE_PCT` of the kernel time
  on a device whose table gives a lower precision a peak at least `MIN_PEAK_RATIO` x the FP32 one
  (a V100 does 8x its FP32 peak in FP16 on its tensor cores): mixed precision moves them under the
  higher roof, while at 51-58 % of the FP32 peak they can win back less than half their time.
- `fewer_bytes`: memory-bound groups holding at least `MIN_MEMORY_SHARE_PCT` of the kernel time,
  on average above `NEAR_ROOF_PCT` of the bandwidth: near their roof, their time is won by moving
  fewer bytes (fusing the elementwise ops that read and write whole tensors), not by faster kernels.
"""

from __future__ import annotations

import math
import re

from tbd.analysis.roofline import COMPUTE, MEMORY, RooflinePoint
from tbd.core.profile_result import KernelRow, Recommendation

#: The least share of kernel time the FP32 compute-bound groups must hold for `faster_precision`.
MIN_SHARE_PCT = 10.0
#: The least ratio of a lower precision's peak to the FP32 peak worth a move (tensor cores: 4-16x).
MIN_PEAK_RATIO = 2.0
#: The least share of kernel time the memory-bound groups must hold for `fewer_bytes`.
MIN_MEMORY_SHARE_PCT = 20.0
#: Their time-weighted bandwidth share above which they count as near their roof.
NEAR_ROOF_PCT = 50.0
#: The faster precisions a model can move FP32 work to, and how.
_FASTER = {"fp16": "FP16", "bf16": "BF16", "tf32": "TF32"}
_NAMED = 3  # groups named in a recommendation's text; the figures list them all
_FUNCTOR = re.compile(r"(\w+(?:Functor|_kernel_impl|_functor))\b")


def base_name(name: str) -> str:
    """A kernel's function name without its namespaces, template arguments or parameters ("dgrad_engine"), and
    the functor an elementwise kernel applies where it names one ("vectorized_elementwise_kernel<AddFunctor>")."""
    cut = min((i for i in (name.find("<"), name.find("(")) if i > 0), default=len(name))
    head = name[:cut].strip().removeprefix("void ").strip().rsplit("::", 1)[-1] or name
    functor = _FUNCTOR.search(name[cut:])
    return f"{head}<{functor.group(1)}>" if functor else head


def _pct(value: float) -> str:
    return f"{value:.3g} %" if value < 100 else f"{value:.0f} %"


def _ms(seconds: float) -> str:
    """A duration in the unit that keeps it at 1 or above: "13.5 ms", "11.6 µs"."""
    for size, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def _flops(value: float) -> str:
    for size, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= size:
            return f"{value / size:.3g} {prefix}FLOP/s"
    return f"{value:.3g} FLOP/s"


def recommendations(rows: list[KernelRow], ranked: list[KernelRow], points: dict[str, RooflinePoint],
                    peaks_used: dict[str, float], bandwidth: float | None, noun: str = "kernel") -> list[Recommendation]:
    """The recommendations the figures show (module docstring), in the order above; [] when none does.

    Args:
        rows: the kernel groups listed (profile.json's `kernels`), longest first.
        ranked: the won-back ranking, most first (`KernelTables.recoverable`).
        points: each group's roofline point, by name.
        peaks_used: peak FLOP/s per precision of the device.
        bandwidth: its memory bandwidth in bytes/s, None unknown.
        noun: what a row is, "kernel" (a GPU) or "op" (the CPU).
    """
    out = []
    if ranked and (ranked[0].recoverable_s or 0) > 0:
        out.append(_start_here(ranked, noun))
    index = {r.name: i for i, r in enumerate(rows)}
    faster = _faster_precision(rows, index, points, peaks_used, noun)
    if faster is not None:
        out.append(faster)
    fewer = _fewer_bytes(rows, index, points, bandwidth, noun)
    if fewer is not None:
        out.append(fewer)
    return out


def _start_here(ranked: list[KernelRow], noun: str) -> Recommendation:
    top = ranked[0]
    key = f"recoverable_kernels[0] ({base_name(top.name)})"
    text = (f"Start with {base_name(top.name)}: {_ms(top.time_s)} ({_pct(top.time_share_pct or 0.0)} of the {noun} "
            f"time) at {_pct(top.roofline_pct or 0.0)} of its roof ({top.bound}-bound); reaching the roof would win "
            f"back {_ms(top.recoverable_s or 0.0)}, {_pct(top.recoverable_pct or 0.0)} of the {noun} time.")
    figures = [f"{key}.time_s: {top.time_s:.6g}", f"{key}.roofline_pct: {top.roofline_pct:.4g}",
               f"{key}.bound: {top.bound}", f"{key}.recoverable_s: {top.recoverable_s:.6g}"]
    return Recommendation("start_here", text, figures)


def _faster_precision(rows: list[KernelRow], index: dict[str, int], points: dict[str, RooflinePoint],
                      peaks_used: dict[str, float], noun: str) -> Recommendation | None:
    fp32 = peaks_used.get("fp32")
    if not fp32:
        return None
    group = [r for r in rows if r.precision == "fp32" and points.get(r.name) is not None
             and points[r.name].bound == COMPUTE and r.util_pct is not None and r.util_pct <= 100.0]
    share = sum(r.time_share_pct or 0.0 for r in group)
    faster = [(peaks_used[p] / fp32, p) for p in _FASTER if peaks_used.get(p)]
    if share < MIN_SHARE_PCT or not faster:
        return None
    ratio, precision = max(faster)
    if ratio < MIN_PEAK_RATIO:
        return None
    group.sort(key=lambda r: -r.time_s)
    time = sum(r.time_s for r in group)
    average = sum(r.util_pct * r.time_s for r in group) / time if time > 0 else 0.0
    low, high = min(r.util_pct for r in group), max(r.util_pct for r in group)
    named = ", ".join(f"{base_name(r.name)} {_pct(r.util_pct)}" for r in group[:_NAMED])
    more = f" and {len(group) - _NAMED} more" if len(group) > _NAMED else ""
    span = _pct(low) if math.isclose(low, high, rel_tol=5e-3) else f"{low:.3g}-{_pct(high)}"
    text = (f"{len(group)} compute-bound FP32 {noun} groups take {_pct(share)} of the {noun} time at {_pct(average)} "
            f"of the FP32 peak, time-weighted ({span}: {named}{more}), on a device that does {ratio:.3g}x that peak "
            f"in {_FASTER[precision]} ({_flops(peaks_used[precision])} against {_flops(fp32)}): mixed precision "
            f"(torch.autocast) moves them under the higher roof.")
    figures = [f"kernels[{index[r.name]}] ({base_name(r.name)}).util_pct: {r.util_pct:.4g}" for r in group]
    figures += [f"metrics.flop_util_pct.peaks_by_precision.fp32: {fp32:.4g}",
                f"metrics.flop_util_pct.peaks_by_precision.{precision}: {peaks_used[precision]:.4g}"]
    return Recommendation("faster_precision", text, figures)


def _fewer_bytes(rows: list[KernelRow], index: dict[str, int], points: dict[str, RooflinePoint],
                 bandwidth: float | None, noun: str) -> Recommendation | None:
    if not bandwidth:
        return None
    group = [r for r in rows if points.get(r.name) is not None and points[r.name].bound == MEMORY
             and r.bandwidth_util_pct is not None and r.bandwidth_util_pct <= 100.0]
    share = sum(r.time_share_pct or 0.0 for r in group)
    time = sum(r.time_s for r in group)
    if share < MIN_MEMORY_SHARE_PCT or time <= 0:
        return None
    average = sum((r.bandwidth_util_pct or 0.0) * r.time_s for r in group) / time
    if average < NEAR_ROOF_PCT:
        return None
    group.sort(key=lambda r: -r.time_s)
    named = ", ".join(f"{base_name(r.name)} {_pct(r.bandwidth_util_pct or 0.0)}" for r in group[:_NAMED])
    text = (f"Memory-bound {noun}s take {_pct(share)} of the {noun} time at {_pct(average)} of the memory bandwidth "
            f"on average, time-weighted ({named}): near their roof, their time is won by moving fewer bytes "
            f"(fusing the elementwise ops around them, e.g. torch.compile), not by faster kernels.")
    figures = [f"kernels[{index[r.name]}] ({base_name(r.name)}).bandwidth_util_pct: {r.bandwidth_util_pct:.4g}"
               for r in group]
    figures.append(f"metrics.memory_bandwidth.value: {bandwidth:.4g}")
    return Recommendation("fewer_bytes", text, figures)
