"""Measured GPU hardware counters: the work of one kernel launch (FLOPs, tensor-pipe work, DRAM
bytes), and the launches merged into the kernel rows beside the analytic figures.

Merging. Pure. A measured launch is matched to a kernel group by name: exactly (a CUPTI range is
named by Kineto's demangler, as the trace's kernels are); else by `canonical_name`, which reads
ncu's demangler and Kineto's alike (ncu prints "void f<(int)4, (bool)0>(int, T2)" where Kineto
prints "void f<4, false>(int, float*)"); else by the bare function name (`kernel_function_name`,
what ncu prints with its "function" name base) when exactly one group has it. A launch that
matches no group, or only groups that cannot be told apart, is counted as unmatched, never
guessed. Measured work is per launch, so it is set against the group's analytic FLOPs and bytes
per call: a kernel's calls of one iteration do the same work when their shapes repeat, which is
what the comparison assumes, and what the difference shows when they do not.

Per launch and per op (`range_counters`). A trace of Kineto's CUPTI range profiler has no kernel
events, so nothing to merge into; its ranges are instead paired with the trace's kernel launch calls
(profilers.cupti_counters: the n-th range of a device with the n-th launch, as
HolisticTraceAnalysis's CuptiCounterAnalysis does) and, through the call, with the op behind it
(profilers.kineto.launch_ops). Measured FP32 FLOPs are summed per range, per kernel name and per op;
beside each op, the analytic count of its calls (each call once, however many kernels it launched),
null with the reason where its shapes do not allow one. Ranges paired with no launch still count in
the totals and per kernel, and are named.

Work. Both counter readers (`profilers.ncu_csv` for Nsight Compute exports,
`profilers.cupti_counters` for the counters Kineto's CUPTI range profiler writes into a PyTorch
trace) hand their metrics here, so the arithmetic exists once. Metric names are the PerfWorks
names both tools share; values are in base units (counts, bytes).

The formulas are the ones Nsight Compute's own roofline sections use for "achieved work" (the
.section files in ncu's sections/ folder, read in the ncu 2025 release):

- FP32 = fadd + fmul + 2 x ffma (SpeedOfLight_RooflineChart, "Single Precision Achieved Value":
  smsp__sass_thread_inst_executed_op_{fadd,fmul}_pred_on plus derived ..._ffma_pred_on_x2);
- FP64 = dadd + dmul + 2 x dfma (the same chart, "Double Precision Achieved Value");
- FP16 = 2 x hadd + 2 x hmul + 4 x hfma (SpeedOfLight_HierarchicalHalfRooflineChart: derived
  ..._hadd_pred_on_x2, ..._hmul_pred_on_x2, ..._hfma_pred_on_x4). A half-precision thread
  instruction is the packed HADD2/HMUL2/HFMA2, two lanes each. Older ncu releases (derived
  ..._hfma_pred_on_x2) and HTA's cupti_counter_analysis weigh it hadd + hmul + 2 x hfma, half
  of this for packed code; tbd follows current ncu.

The counts are per thread and predicated-on (a masked-off lane does no work). `smsp__` and `sm__`
names of the same counter hold the same sum (an SM's sum is its sub-partitions' sum); either is read.

Tensor cores: NVIDIA documents sm__ops_path_tensor_src_<types>[_sparsity_on|_off] as "# of math
ops executed in Tensor path" (Nsight Compute's --query-metrics, quoted on the NVIDIA developer
forum, "How many FLOPs does one tensor_op_hmma instruction do?"), and the tensor roofline
(SpeedOfLight_HierarchicalTensorRooflineChart) plots them as "OP/s" against their own peak.
They are reported as `tensor_ops`, never added to FLOPs: what one "op" is in FLOPs is not
documented. Which paths exist depends on the GPU (TU10x: src_fp16_bf16_tf32_dst_fp32; GA100 to
AD10x: src_{fp16,bf16,tf32}_dst_* with sparsity children; GH100: src_fp16, src_fp8_sparsity_*;
GB10x: fp4/fp6/fp8 paths), so every path present is summed once: a path's parent counter when
present, else its _sparsity_on + _sparsity_off children, and a path whose name extends another
present path ("fp16_dst_fp32" under "fp16") is left to the wider one. Tensor-pipe warp
instructions (sm__inst_executed_pipe_tensor.sum, what Kineto's own "kineto__tensor_core_insts"
alias collects) are reported as instructions: FLOPs per instruction depend on the instruction's
shape (HMMA.1688 vs HMMA.16816), which no counter names.

DRAM bytes = dram__bytes_read.sum + dram__bytes_write.sum.

A quantity whose counters are missing is None, never 0: a launch measured without DRAM counters
moved an unknown number of bytes, not none. A quantity needs all of its counters (FP32 without
fmul would undercount), and the FLOP total all three precisions.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from tbd.analysis.ncu import kernel_function_name
from tbd.core.counters import CounterKernel, CounterOp, CounterRange, MeasuredCounters
from tbd.core.profile_result import KernelRow, Profile
from tbd.core.records import NO_FORMULA, NO_LAUNCH_OP, SHAPES_NOT_RECORDED, SHAPES_UNREADABLE


@dataclass(frozen=True)
class MeasuredLaunch:
    """One profiled launch: its kernel name and what the counters say it did (None: not measured)."""

    name: str
    flops: float | None  # FP16 + FP32 + FP64 FLOPs from the SASS instruction counters
    flops_by_precision: dict[str, float]
    tensor_ops: float | None  # tensor-pipe work, where the counter gives it
    dram_bytes: float | None


# ncu's demangler (EDG style) against Kineto's (GCC's): integer literals cast, "(bool)0", lambdas.
_INT_CAST = re.compile(r"\((?:unsigned |signed )?(?:char|short|int|long long|long)\)(?=-?\d)")
_LITERAL_SUFFIX = re.compile(r"(?<![\w.])(-?\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
_NCU_LAMBDA = re.compile(r"\[lambda\(([^()\[\]]*)\) \(instance (\d+)\)\]")
_CONST_BEFORE = re.compile(r"\bconst ((?:\w+::)*\w+)")
_SPACE = re.compile(r"\s*([^\w\s])\s*")
_INNER_VOID = re.compile(r"(?<=[<,])void ")
_PARAM_LIST = re.compile(r"(?<=[\w>\])])\((?:[^()]|\(\))+\)")
# A bool template argument: ncu 2025 prints it as 1/0 where Kineto prints true/false (cuDNN 9's
# batch-norm kernels on an H200); the function's own namespaces, which ncu leaves out of those names.
_BOOL_ARGUMENT = re.compile(r"(?<=[<,])(true|false)(?=[,>])")
_LEADING_SCOPE = re.compile(r"^(?:\w+::)+(?=\w+[<(]|\w+$)")


def canonical_name(name: str) -> str:
    """`name` as both demanglers agree on it: no "void ", no parameter list (ncu prints the parameters
    as template placeholders: "(int, T2, T3)"), casts on integer literals and literal suffixes dropped
    ("(int)4", "4u" -> "4"), "(bool)0/1" as false/true, ncu's "[lambda(int) (instance 1)]" as
    "{lambda(int)#1}", "<unnamed>" and "(anonymous namespace)" alike, "const T" as "T const", spaces only
    between two words ("char *" and "char*", "> >" and ">>" alike), and the parameter lists of the
    functions named inside template arguments emptied ("gpu_kernel_impl<F>(at::TensorIteratorBase&,
    F const&)" and ncu's "void gpu_kernel_impl<F>(at::TensorIteratorBase &, const T1 &)" alike), bool
    template arguments as 1/0 and the function's own namespaces dropped (ncu 2025 prints cuDNN 9's
    "cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 32, true, 1, true>" as
    "bn_fw_tr_1C11_kernel_NCHW<float, float, int, 32, 1, 1, 1>"). Two kernels this makes one are
    matched by neither (`merge_measured` keeps only keys that name one row)."""
    text = " ".join(name.split()).removeprefix("void ")
    text = text.replace("<unnamed>", "{anonymous}").replace("(anonymous namespace)", "{anonymous}")
    text = text.replace("(bool)0", "false").replace("(bool)1", "true")
    text = _NCU_LAMBDA.sub(r"{lambda(\1)#\2}", text)
    text = _LITERAL_SUFFIX.sub(r"\1", _INT_CAST.sub("", text))
    text = _CONST_BEFORE.sub(r"\1 const", text)
    text = _INNER_VOID.sub("", _SPACE.sub(r"\1", text))
    while True:  # parameter lists emptied, innermost first: ncu prints them with placeholders ("const T1&")
        emptied = _PARAM_LIST.sub("()", text)
        if emptied == text:
            break
        text = emptied
    text = _LEADING_SCOPE.sub("", _BOOL_ARGUMENT.sub(lambda m: "1" if m.group(1) == "true" else "0", text))
    return text.removesuffix("()")


def merge_measured(rows: list[KernelRow], launches: list[MeasuredLaunch], source: str) -> tuple[list[KernelRow], int]:
    """`rows` with `measured` set where launches match (module docstring); and how many launches matched no row.

    `rows` must be every group a launch may belong to: a launch matched by its function name alone goes
    to the one row that has it, which a subset (a ranking) may hold where the whole table holds several.
    For a profile's lists use `merge_measured_lists`."""
    by_name = {r.name for r in rows}
    by_canonical = _unique((canonical_name(r.name), r.name) for r in rows)
    by_function = _unique((kernel_function_name(r.name), r.name) for r in rows)
    matched: dict[str, list[MeasuredLaunch]] = {}
    unmatched = 0
    for launch in launches:
        if launch.name in by_name:
            key = launch.name
        else:
            canonical = canonical_name(launch.name)
            key = by_canonical[canonical] if canonical in by_canonical \
                else by_function.get(kernel_function_name(launch.name))
        if key is None:
            unmatched += 1
            continue
        matched.setdefault(key, []).append(launch)
    return [replace(r, measured=_measured(r, matched[r.name], source)) if r.name in matched else r
            for r in rows], unmatched


def merge_measured_lists(row_lists: list[list[KernelRow]], launches: list[MeasuredLaunch],
                         source: str) -> tuple[list[list[KernelRow]], int]:
    """`merge_measured` over several lists of one profile's rows (every group, the rankings) at once: a
    launch is matched among all their groups, so a row merges the same launches in every list (a
    ranking alone may hold one instance of a function name where the whole table holds several)."""
    union = list({r.name: r for rows in row_lists for r in rows}.values())
    merged, unmatched = merge_measured(union, launches, source)
    measured = {r.name: r.measured for r in merged if r.measured is not None}
    return [[replace(r, measured=measured[r.name]) if r.name in measured else r for r in rows]
            for rows in row_lists], unmatched


def merged_profile(profile: Profile, launches: list[MeasuredLaunch], source: str) -> tuple[Profile, int]:
    """`profile` with `launches` merged into every row list (`merge_measured_lists`); and how many
    launches matched no row."""
    (kernels, low, low_bw, won), unmatched = merge_measured_lists(
        [profile.kernels, profile.low_util_kernels, profile.low_bandwidth_kernels, profile.recoverable_kernels],
        launches, source)
    return replace(profile, kernels=kernels, low_util_kernels=low, low_bandwidth_kernels=low_bw,
                   recoverable_kernels=won), unmatched


def _unique(pairs) -> dict[str, str | None]:
    """key -> the one row name with it; None for a key that several rows share."""
    out: dict[str, str | None] = {}
    for key, name in pairs:
        out[key] = name if out.get(key, name) == name else None
    return out


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None and math.isfinite(v)]
    return sum(known) / len(known) if known and len(known) == len(values) else None


def _difference_pct(measured: float | None, analytic: float | None) -> float | None:
    if measured is None or analytic is None or analytic <= 0:
        return None
    return 100.0 * (measured - analytic) / analytic


def _measured(row: KernelRow, launches: list[MeasuredLaunch], source: str) -> dict:
    flops = _mean([x.flops for x in launches])
    dram = _mean([x.dram_bytes for x in launches])
    analytic_flops = row.flops / row.calls if row.flops is not None and row.calls else None
    analytic_bytes = row.bytes / row.calls if row.bytes is not None and row.calls else None
    precisions = sorted({p for x in launches for p in x.flops_by_precision})
    return {"source": source, "launches": len(launches), "flops": flops,
            "flops_by_precision": {p: _mean([x.flops_by_precision.get(p) for x in launches]) for p in precisions},
            "tensor_ops": _mean([x.tensor_ops for x in launches]), "dram_bytes": dram,
            "analytic_flops": analytic_flops, "analytic_bytes": analytic_bytes,
            "flops_difference_pct": _difference_pct(flops, analytic_flops),
            "bytes_difference_pct": _difference_pct(dram, analytic_bytes),
            "intensity": flops / dram if flops is not None and dram else None}


_SASS = "sass_thread_inst_executed_op_{}_pred_on.sum"
#: (precision, {op: FLOPs per thread instruction}), per the module docstring.
_FLOP_WEIGHTS = (
    ("fp32", {"fadd": 1, "fmul": 1, "ffma": 2}),
    ("fp16", {"hadd": 2, "hmul": 2, "hfma": 4}),
    ("fp64", {"dadd": 1, "dmul": 1, "dfma": 2}),
)
#: Every FLOP counter, smsp__ spelling (what tbd's ncu command asks for and Kineto's alias expands to).
FLOP_METRICS = tuple(f"smsp__{_SASS.format(op)}" for _, weights in _FLOP_WEIGHTS for op in weights)
DRAM_READ, DRAM_WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"
TENSOR_INSTRUCTIONS = "sm__inst_executed_pipe_tensor.sum"

_TENSOR_PATH = re.compile(r"sm__ops_path_tensor_src_([a-z0-9_]+?)(_sparsity_(?:on|off))?\.sum")
# Per-opcode tensor instruction counters (HMMA, IMMA, DMMA, GMMA...): distinct opcodes, so they add up.
_TENSOR_OPCODE = re.compile(r"sm__inst_executed_pipe_tensor_(op|subpipe)_([a-z]+?)(_v2)?\.sum")
_WORK_PREFIXES = ("smsp__sass_thread_inst_executed_op_", "sm__sass_thread_inst_executed_op_",
                  "sm__ops_path_tensor_", "sm__inst_executed_pipe_tensor", "smsp__inst_executed_pipe_tensor",
                  "dram__bytes_")


@dataclass(frozen=True, slots=True)
class MeasuredWork:
    """What one launch (or range) did, from counters; None where its counters were not collected.

    Attributes:
        fp32_flops, fp16_flops, fp64_flops: FLOPs on the FMA/FP16/FP64 pipes (module docstring).
        tensor_ops: math ops on the tensor path, summed over the paths present (not FLOPs).
        tensor_ops_by_path: the same per path, keyed by what follows "src_" ("fp16_dst_fp32").
        tensor_instructions: tensor-pipe warp instructions (not FLOPs).
        dram_read_bytes, dram_write_bytes, dram_bytes: DRAM traffic; the total needs both.
    """

    fp32_flops: float | None = None
    fp16_flops: float | None = None
    fp64_flops: float | None = None
    tensor_ops: float | None = None
    tensor_ops_by_path: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    tensor_instructions: float | None = None
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    dram_bytes: float | None = None


def measured_work(metrics: Mapping[str, float]) -> MeasuredWork:
    """The work a launch's counters measure (module docstring); `metrics` maps name -> value in base units."""
    flops = {name: _flops(metrics, weights) for name, weights in _FLOP_WEIGHTS}
    by_path = tensor_ops_by_path(metrics)
    read, write = metrics.get(DRAM_READ), metrics.get(DRAM_WRITE)
    return MeasuredWork(
        fp32_flops=flops["fp32"], fp16_flops=flops["fp16"], fp64_flops=flops["fp64"],
        tensor_ops=sum(by_path.values()) if by_path else None,
        tensor_ops_by_path=MappingProxyType(by_path),
        tensor_instructions=tensor_instructions(metrics),
        dram_read_bytes=read, dram_write_bytes=write,
        dram_bytes=read + write if read is not None and write is not None else None)


def total_flops(work: MeasuredWork) -> float | None:
    """FP32 + FP16 + FP64 FLOPs (tensor-path ops not included), None unless all three were measured."""
    parts = (work.fp32_flops, work.fp16_flops, work.fp64_flops)
    return None if any(p is None for p in parts) else sum(parts)


def flops_by_precision(work: MeasuredWork) -> dict[str, float]:
    """{"fp32": ..., "fp16": ..., "fp64": ...}, the precisions measured only."""
    parts = {"fp32": work.fp32_flops, "fp16": work.fp16_flops, "fp64": work.fp64_flops}
    return {name: value for name, value in parts.items() if value is not None}


def measured_launch(name: str, work: MeasuredWork) -> MeasuredLaunch:
    """The record `analysis.counters` merges into kernel rows: one launch's name and measured work."""
    return MeasuredLaunch(name=name, flops=total_flops(work), flops_by_precision=flops_by_precision(work),
                          tensor_ops=work.tensor_ops, dram_bytes=work.dram_bytes)


def is_work_metric(name: str) -> bool:
    """Whether `measured_work` may read this metric (a reader must then know its unit for sure)."""
    return name.startswith(_WORK_PREFIXES)


def tensor_ops_by_path(metrics: Mapping[str, float]) -> dict[str, float]:
    """Tensor-path math ops per path present, each counted once (module docstring)."""
    parents: dict[str, float] = {}
    children: dict[str, float] = {}
    for name, value in metrics.items():
        match = _TENSOR_PATH.fullmatch(name)
        if match:
            path, sparsity = match.groups()
            target = children if sparsity else parents
            target[path] = target.get(path, 0.0) + value
    paths = {**children, **parents}  # a parent replaces its children's sum
    return {path: value for path, value in sorted(paths.items())
            if not any(path.startswith(other + "_") for other in paths if other != path)}


def tensor_instructions(metrics: Mapping[str, float]) -> float | None:
    """Tensor-pipe warp instructions: the pipe's total, else the sum over opcodes (HMMA, IMMA, ...)."""
    for name in (TENSOR_INSTRUCTIONS, "smsp__inst_executed_pipe_tensor.sum"):
        if name in metrics:
            return metrics[name]
    per_opcode: dict[str, tuple[int, float]] = {}
    for name, value in metrics.items():
        match = _TENSOR_OPCODE.fullmatch(name)
        if match:
            kind, opcode, v2 = match.groups()
            # ncu's ComputeWorkloadAnalysis section uses op_<x>, or op_<x>_v2 on CC 8.9 and subpipe_<x> on
            # CC 10.0+, for the same opcode: keep one per opcode (op_v2 over op over subpipe).
            rank = 2 if v2 else (1 if kind == "op" else 0)
            if opcode not in per_opcode or rank > per_opcode[opcode][0]:
                per_opcode[opcode] = (rank, value)
    return sum(value for _, value in per_opcode.values()) if per_opcode else None


def _flops(metrics: Mapping[str, float], weights: dict[str, int]) -> float | None:
    total = 0.0
    for op, weight in weights.items():
        count = _count(metrics, op)
        if count is None:
            return None
        total += weight * count
    return total


def _count(metrics: Mapping[str, float], op: str) -> float | None:
    name = _SASS.format(op)
    value = metrics.get("smsp__" + name)
    return metrics.get("sm__" + name) if value is None else value


#: The op name of paired launches that no op encloses (as `op_groups` names kernels without one).
NO_OP = "(no launching op)"
_ANALYTIC_REASONS = {NO_LAUNCH_OP: "no op encloses its launches", NO_FORMULA: "no FLOP formula for the op",
                     SHAPES_NOT_RECORDED: "shapes not recorded: record with torch.profiler.profile(record_shapes=True)",
                     SHAPES_UNREADABLE: "its recorded arguments do not fit the op's formula"}


@dataclass(frozen=True)
class MeasuredRange:
    """One counter range (one kernel launch) with the launch and op it was paired with (module docstring).

    Attributes:
        index, device, name: the range's position on its device, the device, the kernel's name.
        work: what its counters measured.
        correlation: the paired launch call's correlation id; None: paired with no launch.
        launching_op: the innermost op enclosing that call ("" none).
        op: the op its FLOPs are compared with: the outermost enclosing op with a formula, else the
            launching op ("" none).
        op_call: identifies the call of `op` (ranges from one call share it); -1 none.
        op_flops: that call's analytic FLOPs, NaN where unknown.
        op_flops_gap: why unknown: a `core.records` flop gap ("" known).
    """

    index: int
    device: int | None
    name: str
    work: MeasuredWork
    correlation: int | None = None
    launching_op: str = ""
    op: str = ""
    op_call: int = -1
    op_flops: float = math.nan
    op_flops_gap: str = NO_LAUNCH_OP


def range_counters(ranges: list[MeasuredRange], source: str, pairing: str) -> MeasuredCounters:
    """The measured counters of a trace's ranges: per range, per kernel name and per op (module docstring).

    Args:
        ranges: every range of the trace, in launch order per device.
        source: where the counters come from ("cupti_range").
        pairing: how the ranges were paired with launches, or why not, in words.
    """
    per_range = [CounterRange(index=r.index, device=r.device, name=r.name, fp32_flops=r.work.fp32_flops,
                              flops_by_precision=flops_by_precision(r.work), correlation=r.correlation,
                              launching_op=(r.launching_op or None) if r.correlation is not None else None,
                              op=(r.op or NO_OP) if r.correlation is not None else None) for r in ranges]
    by_kernel: dict[str, list[MeasuredRange]] = {}
    by_op: dict[str, list[MeasuredRange]] = {}
    for r in ranges:
        by_kernel.setdefault(r.name, []).append(r)
        if r.correlation is not None:
            by_op.setdefault(r.op or NO_OP, []).append(r)
    kernels = [CounterKernel(name=name, launches=len(rs), fp32_flops=_sum([r.work.fp32_flops for r in rs]))
               for name, rs in by_kernel.items()]
    ops = [_op(name, rs) for name, rs in by_op.items()]
    return MeasuredCounters(
        source=source, ranges=len(ranges), paired=sum(r.correlation is not None for r in ranges), pairing=pairing,
        fp32_flops=_sum([r.work.fp32_flops for r in ranges]), flops_by_precision=_precisions(ranges),
        kernels=sorted(kernels, key=lambda k: (-(k.fp32_flops or 0.0), -k.launches, k.name)),
        ops=sorted(ops, key=lambda o: (-(o.fp32_flops or 0.0), -o.launches, o.name)),
        per_range=per_range, unpaired=[r.name for r in ranges if r.correlation is None])


def _op(name: str, ranges: list[MeasuredRange]) -> CounterOp:
    """One op's ranges summed, beside the analytic FLOPs of its calls (each call once)."""
    calls: dict[int, MeasuredRange] = {}
    for r in ranges:
        if r.op_call >= 0:
            calls.setdefault(r.op_call, r)
    gaps = [c.op_flops_gap or ("" if math.isfinite(c.op_flops) else NO_FORMULA) for c in calls.values()]
    gaps += [NO_LAUNCH_OP] * any(r.op_call < 0 for r in ranges)
    unknown = [g for g in gaps if g]
    analytic = None if unknown else math.fsum(c.op_flops for c in calls.values())
    measured = _sum([r.work.fp32_flops for r in ranges])
    difference = _difference_pct(measured, analytic)
    reason = None
    if unknown:
        reason = _ANALYTIC_REASONS.get(unknown[0], unknown[0])
        if len(unknown) < len(gaps):
            reason = f"{len(unknown)} of its {len(gaps)} calls: {reason}"
    return CounterOp(name=name, launches=len(ranges), calls=len(calls), fp32_flops=measured,
                     flops_by_precision=_precisions(ranges), analytic_flops=analytic, analytic_reason=reason,
                     fp32_difference_pct=difference)


def _sum(values: list[float | None]) -> float | None:
    """The sum, None when any value is unknown (a missing counter is not zero work)."""
    return None if any(v is None for v in values) else math.fsum(values)


def _precisions(ranges: list[MeasuredRange]) -> dict[str, float]:
    """Per precision, the sum over the ranges, for the precisions every range measured."""
    each = [flops_by_precision(r.work) for r in ranges]
    common = set(each[0]).intersection(*each[1:]) if each else set()
    return {p: math.fsum(e[p] for e in each) for p in ("fp32", "fp16", "fp64") if p in common}
