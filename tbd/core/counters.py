"""The measured-counters section of a profile.json: what a trace's hardware counters measured.

Written as profile.json's "counters" for a trace that holds Kineto's CUPTI range-profiler counters
(one range per kernel launch), and read back with the same validation as the rest of the profile:
each field's annotation is its rule (tbd/core/field_checks.py). analysis/counters.py computes them
(`range_counters`); docs/profile-json.md ("counters") is the contract. Every FLOP figure here is
measured (instruction counters); the `analytic_*` fields beside them are the formula counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tbd.core.field_checks import Amount, Count, Delta


@dataclass(frozen=True)
class CounterRange:
    """One counter range (one kernel launch) and the launch and op it was paired with."""

    index: Count  # its position among its device's ranges: the n-th kernel launch on that device
    device: Count | None  # the GPU the range was measured on; null: not recorded
    name: str  # the kernel's name as the range names it ("__missing__" where Kineto had none)
    fp32_flops: Amount | None  # measured: fadd + fmul + 2 x ffma; null: a counter missing
    flops_by_precision: dict[str, Amount]  # measured, the precisions whose counters are all there
    correlation: Count | None  # the launch call's correlation id; null: not paired with a launch
    launching_op: str | None  # innermost op enclosing the launch call; null: none (or not paired)
    op: str | None  # the op its FLOPs are compared with: outermost with a formula, else the launching op


@dataclass(frozen=True)
class CounterKernel:
    """The ranges of one kernel name, summed."""

    name: str
    launches: Count
    fp32_flops: Amount | None  # measured, summed; null when a range's is unknown


@dataclass(frozen=True)
class CounterOp:
    """The ranges paired with launches under one op, summed, beside the op's analytic FLOPs."""

    name: str  # the op (CounterRange.op); "(no launching op)" for launches no op encloses
    launches: Count  # ranges paired with its launches
    calls: Count  # distinct calls of the op those launches come from
    fp32_flops: Amount | None  # measured, summed over its ranges
    flops_by_precision: dict[str, Amount]  # measured, summed, the precisions every range has
    analytic_flops: Amount | None  # the formula's count, summed over its calls; null: `analytic_reason`
    analytic_reason: str | None
    fp32_difference_pct: Delta | None  # 100 x (measured FP32 - analytic) / analytic


@dataclass(frozen=True)
class MeasuredCounters:
    """Counters measured per kernel launch, summed per kernel and per op (analysis/counters.py)."""

    source: str  # "cupti_range": Kineto's CUPTI range profiler
    ranges: Count  # counter ranges in the trace
    paired: Count  # ranges paired with a kernel launch call (the n-th range with the n-th launch)
    pairing: str  # how ranges were paired with launches, or why they were not, in words
    fp32_flops: Amount | None  # measured, summed over every range; null when a range's is unknown
    flops_by_precision: dict[str, Amount]  # the same per precision (those every range measured)
    kernels: list[CounterKernel]  # by kernel name, most FP32 FLOPs first
    ops: list[CounterOp]  # by op, most FP32 FLOPs first
    per_range: list[CounterRange]  # every range, in launch order per device
    unpaired: list[str] = field(default_factory=list)  # names of the ranges paired with no launch
