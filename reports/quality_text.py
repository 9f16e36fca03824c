"""The words for the measurement-quality record and the timing windows, shared by the terminal
report and the HTML page (each passes its own number formatting)."""

from __future__ import annotations

from typing import Callable

from tbd.core.profile_result import Quality, Throughput

Format = Callable[[float], str]


def throughput_detail(tp: Throughput, also: str, rate: Format, pct: Format) -> str:
    """Where the throughput comes from: one timing window, or the median of several with their range,
    spread and 95 % interval; then the other units ("also ...")."""
    where = "timing window"
    if len(tp.repeats) > 1:
        spread = f", spread {pct(tp.spread_pct)}" if tp.spread_pct is not None else ""
        spread += f", ±{pct(tp.interval_pct)} at 95 %" if tp.interval_pct is not None else ""
        where = f"median of {len(tp.repeats)} timing windows ({rate(min(tp.repeats))}–{rate(max(tp.repeats))}{spread})"
    if not also:
        return where
    # "also" alone on a single window: the terminal's detail column is ~35 cells at 80 columns.
    return f"{where}; also {also}" if len(tp.repeats) > 1 else f"also {also}"


def machine_parts(q: Quality, flops: Format) -> list[str]:
    """The machine during the windows, as short phrases: other load, the two GEMM ceilings, the clock,
    and whether the figures are reliable (the warnings that say why are among the notes)."""
    parts = []
    if q.other_load_cores is not None:
        parts.append(f"other load {q.other_load_cores:.2f}" + (f" of {q.cores} cores" if q.cores else " cores"))
    before, after = q.gemm_ceiling_flops.get("before"), q.gemm_ceiling_flops.get("after")
    if before and after:
        first, second = flops(before), flops(after)  # before and after the windows
        same_unit = first.split()[-1] == second.split()[-1]
        parts.append(f"GEMM ceiling {first.split()[0] if same_unit else first} → {second}")
    start, end = q.clock_mhz.get("start"), q.clock_mhz.get("end")
    if start and end:
        parts.append(f"clock {start:.0f}–{end:.0f} MHz" if abs(end - start) >= 1 else f"clock {start:.0f} MHz")
    parts.append("figures reliable" if q.reliable else "UNRELIABLE (notes say why)")
    return parts
