"""The terminal section of a profile's measured counters (`Profile.counters`: a trace's CUPTI ranges).

Measured FP32 FLOPs in total, per launching op beside the op's analytic count, and per kernel name,
as analysis/counters.py summed them; every figure is labelled measured or analytic. Formats only.
"""

from __future__ import annotations

from typing import Callable

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tbd.core.counters import MeasuredCounters
from tbd.reports.console import NA, fit_names, legend_grid, plain_table
from tbd.reports.kernels.short_names import short_kernel_name
from tbd.reports.numbers import fmt_count, fmt_pct
from tbd.reports.printable import printable

_SOURCES = {"cupti_range": "CUPTI range profiler"}


def counters_section(console: Console, counters: MeasuredCounters | None, top: int,
                     fmt_flops: Callable[..., str]) -> list[RenderableType]:
    """The measured-counters section (empty without counters): totals, the `top` ops and kernels.

    `fmt_flops(value, suffix)` formats a FLOP count ("79.7 GFLOP"), as the report's other figures."""
    if counters is None:
        return []
    source = _SOURCES.get(counters.source, printable(counters.source))
    title = Text(f"Measured counters ({source}: {counters.ranges} ranges, one per kernel launch)", style="bold")
    precisions = ", ".join(f"{p.upper()} {fmt_flops(v, 'FLOP')}" for p, v in counters.flops_by_precision.items()
                           if p != "fp32")
    total = Text(f"FP32 FLOPs measured: {fmt_flops(counters.fp32_flops, 'FLOP')} (fadd + fmul + 2 x ffma, summed "
                 f"over the ranges)" + (f"; also {precisions}" if precisions else ""))
    paired = Text(printable(f"{counters.paired} of {counters.ranges} ranges paired with their kernel launch: "
                            f"{counters.pairing}"))
    parts: list[RenderableType] = [title, *(Padding(line, (0, 0, 0, 2)) for line in (total, paired))]
    ops = counters.ops[:top]
    if ops:
        def build_ops(names: list[str]) -> Table:
            table = plain_table(collapse_padding=True)
            for header in ("Launches", "Calls", "FP32 measured", "Analytic", "Diff %"):
                table.add_column(header, justify="right")
            table.add_column("Op", no_wrap=True, overflow="ellipsis")
            for op, name in zip(ops, names):
                analytic = fmt_flops(op.analytic_flops, "FLOP") if op.analytic_flops is not None else NA
                table.add_row(fmt_count(op.launches), fmt_count(op.calls), fmt_flops(op.fp32_flops, "FLOP"),
                              analytic, fmt_pct(op.fp32_difference_pct, suffix=""), Text(name))
            return table

        parts += [None, Text(f"By op ({len(ops)} of {len(counters.ops)})", style="bold"),
                  fit_names(console, build_ops, [printable(o.name) for o in ops])]
        reasons = sorted({(o.analytic_reason or "") for o in ops if o.analytic_flops is None} - {""})
        if reasons:
            parts.append(Padding(Text(printable("analytic n/a: " + "; ".join(reasons)), style="dim"), (0, 0, 0, 2)))
    kernels = counters.kernels[:top]
    if kernels:
        def build_kernels(names: list[str]) -> Table:
            table = plain_table(collapse_padding=True)
            for header in ("Launches", "FP32 measured"):
                table.add_column(header, justify="right")
            table.add_column("Kernel", no_wrap=True, overflow="ellipsis")
            for kernel, name in zip(kernels, names):
                table.add_row(fmt_count(kernel.launches), fmt_flops(kernel.fp32_flops, "FLOP"), Text(name))
            return table

        parts += [None, Text(f"By kernel ({len(kernels)} of {len(counters.kernels)})", style="bold"),
                  fit_names(console, build_kernels, [printable(k.name) for k in kernels], short_kernel_name)]
    parts.append(legend_grid((
        ("FP32 measured", "fadd + fmul + 2 x ffma thread instructions, predicated on (CUDA cores; tensor-core "
                          "work is not in them)"),
        ("Analytic", "the op's FLOP formula over its recorded shapes, each call once"),
        ("Diff %", "(measured - analytic) / analytic"))))
    return parts
