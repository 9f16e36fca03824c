"""Measured work of one kernel launch from its GPU hardware counters: FLOPs, tensor-pipe work, DRAM bytes.

Both counter readers (`profilers.ncu_csv` for Nsight Compute exports, `profilers.cupti_counters` for
the counters Kineto's CUPTI range profiler writes into a PyTorch trace) hand their metrics here, so
the arithmetic exists once. Metric names are the PerfWorks names both tools share; values are in
base units (counts, bytes).

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

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from tbd.analysis.counters_merge import MeasuredLaunch

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
    """The record `analysis.counters_merge` merges into kernel rows: one launch's name and measured work."""
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
