"""GPU hardware counters that Kineto's CUPTI range profiler wrote into a PyTorch profiler trace.

Recorded (PyTorch 2.13 and earlier) with
`torch.profiler.profile(activities=[ProfilerActivity.CUDA], experimental_config=
torch.profiler._ExperimentalConfig(profiler_metrics=[...], profiler_measure_per_kernel=True))`.
PyTorch 2.14 deprecates both options: they "no longer enable CUPTI range profiling" and are
ignored (its profiler release notes, pytorch#187204), so a trace from 2.14 on has no counters and
Nsight Compute (analysis.ncu) is the way to measure them there.

The layout (libkineto/src/CuptiRangeProfiler.cpp, `addRangeEvents`; seen in a public A100 trace):
one "X" event per range with "cat": "cuda_profiler_range", "pid" the GPU's device id, "tid" 0, and
"args" holding one entry per metric, name -> number (GenericTraceActivity::addMetadata writes the
value unquoted). With profiler_measure_per_kernel (CUPTI auto-range) a range is one kernel and
its "name" is the kernel's demangled name (Kineto's demangler: the same names as the trace's
"kernel" events), or "__missing__" when Kineto tracked fewer names than ranges; with user ranges
it is the range's name. Kineto's alias "kineto__cuda_core_flops" expands to the nine
smsp__sass_thread_inst_executed_op_{f,h,d}{add,mul,fma}_pred_on.sum counters, and
"kineto__tensor_core_insts" to sm__inst_executed_pipe_tensor.sum.

"ts" and "dur" are not measured: Kineto splits the profiling session's span evenly between the
ranges ("the actual times do not really matter here"), so every range has the same duration and
they only give the ranges' order: the n-th range of a device is its n-th kernel launch (`index`).
The range profiler runs alone (Kineto refuses it beside kernel, memcpy or memset tracing), so its
trace has no "kernel" events, but it keeps the host side: cpu_ops and the runtime calls that
launched each kernel (cudaLaunchKernel, ...; `LAUNCH_CALLS`), with their correlation ids and no
device. `measured_ranges` pairs the n-th range of a device with the n-th launch call in time order,
as HolisticTraceAnalysis's CuptiCounterAnalysis does (hta/analyzers/cupti_counter_analysis.py), and
through the call finds the op behind it (profilers.kineto.launch_ops); `pairing` says when it cannot
(more ranges than launches, ranges on several devices with launch calls that name none, a CUDA
graph launch, which runs many kernels from one call), and those ranges stay unpaired, never guessed.
Where a trace does have kernel events, `measured_launches` merges ranges into kernel groups by name
(analysis.counters). In HTA's A100 test trace (tests/fixtures/README.md) a CUDA-core kernel's
counters also show HFMA2 instructions (the uniform_ kernel), so FP16 work is not zero there.

Refused with a one-line `TraceFormatError`: not JSON, no "traceEvents", no cuda_profiler_range
event (with how to record one), and a metric whose value is not a finite number. An "args" key
that is not a PerfWorks metric name (no "__") is not a counter and is ignored.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

import msgspec
import numpy as np

from tbd.analysis.counters import MeasuredLaunch, MeasuredRange, MeasuredWork, measured_launch, measured_work
from tbd.core.errors import TraceFormatError
from tbd.profilers.kineto.columns import KinetoTrace
from tbd.profilers.kineto.launch_ops import launch_ops
from tbd.profilers.traces.files import LIMIT_VARIABLE, read_trace_bytes
from tbd.profilers.traces.names import clean_name, quoted
from tbd.profilers.traces.times import us_text_to_ns

CATEGORY = "cuda_profiler_range"
#: Runtime and driver calls that launch one kernel each (a "_v<N>" API-version suffix is dropped first).
LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchKernelEx", "cudaLaunchCooperativeKernel",
    "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel"})
#: Calls that launch many kernels at once: a range cannot be paired with one of them.
GRAPH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "cudaLaunchCooperativeKernelMultiDevice",
                         "cuLaunchCooperativeKernelMultiDevice"})
_HOST_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime"})
_API_VERSION = re.compile(r"_v\d+$")
RECORD_HINT = ("record with PyTorch <= 2.13: torch.profiler.profile(activities=[ProfilerActivity.CUDA], "
               "experimental_config=torch.profiler._ExperimentalConfig(profiler_metrics=[...], "
               "profiler_measure_per_kernel=True)); from 2.14 on measure with Nsight Compute (ncu)")
# A PerfWorks metric name: unit__counter[.rollup[.submetric]] ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum").
_METRIC = re.compile(r"[A-Za-z0-9]+__[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*")


@dataclass(frozen=True, slots=True)
class CuptiRange:
    """One range of the CUPTI range profiler: a kernel launch when measured per kernel.

    Attributes:
        index: the range's position among its device's ranges (its launch's, per kernel).
        name: the kernel's demangled name (per kernel) or the range's name, bounded by
            `traces.names.clean_name`; "__missing__" where Kineto had no name.
        device: the GPU ("pid"), None where absent.
        ts_ns, dur_ns: the event's start and duration in integer ns, None where absent. Not measured
            times (module docstring): they only order the ranges.
        metrics: metric name -> value.
    """

    index: int
    name: str
    device: int | None
    ts_ns: int | None
    dur_ns: int | None
    metrics: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class KernelLaunch:
    """A runtime or driver call that launched kernels (`LAUNCH_CALLS`, `GRAPH_CALLS`).

    Attributes:
        name: the call ("cudaLaunchKernel"), its API-version suffix dropped.
        correlation: its correlation id (what ties it to its op); None where absent.
        ts_ns: its start in integer ns; None where unreadable.
        device: args "device" where the trace writes one (Kineto does not for runtime calls), else None.
    """

    name: str
    correlation: int | None
    ts_ns: int | None
    device: int | None


@dataclass(frozen=True, slots=True)
class CuptiCounters:
    """The counter ranges of one trace, ordered by device, then start (their launch order), and the
    trace's kernel launch calls in time order."""

    source: str
    ranges: tuple[CuptiRange, ...]
    launches: tuple[KernelLaunch, ...] = ()


class _Event(msgspec.Struct, gc=False):
    cat: Any = None
    name: msgspec.Raw = None
    pid: msgspec.Raw = None
    ts: msgspec.Raw = None
    dur: msgspec.Raw = None
    args: msgspec.Raw = None


class _Top(msgspec.Struct, gc=False):
    traceEvents: list[_Event] | None = None  # noqa: N815 - the trace's own key


_TOP = msgspec.json.Decoder(_Top | list[_Event])
_ANY = msgspec.json.Decoder()


def read_cupti_counters(path: str | os.PathLike, *, required: bool = True) -> CuptiCounters:
    """Read the counter ranges of a PyTorch profiler trace (.json or .json.gz; module docstring).

    Args:
        required: refuse a trace without ranges; False returns no ranges for it.
    Raises:
        TraceFormatError: unreadable or not such a trace, or (required) no ranges; one line with a hint.
    """
    name = os.fspath(path)
    return decode_cupti_counters(_read(name), name, required=required)


def measured_launches(path: str | os.PathLike) -> list[MeasuredLaunch]:
    """Each range of a trace as `analysis.counters` merges it: name and measured work; [] for a trace
    without ranges (most traces), which is not decoded at all when its text never names the category.

    Raises:
        TraceFormatError: as `read_cupti_counters`, except for having no ranges.
    """
    name = os.fspath(path)
    data = _read(name)
    if f'"{CATEGORY}"'.encode() not in data:
        return []
    counters = decode_cupti_counters(data, name, required=False)
    return [measured_launch(r.name, range_work(r)) for r in counters.ranges]


def decode_cupti_counters(data: bytes, source: str, *, required: bool = True) -> CuptiCounters:
    """The counter ranges of a trace's JSON text; `source` names it in errors (`required` as in
    `read_cupti_counters`)."""
    events = _events(data, source)
    found = [event for event in events if event.cat == CATEGORY]
    launches = _launches([event for event in events if event.cat in _HOST_CATEGORIES], source)
    if not found and required:
        raise TraceFormatError(f"{source}: no {CATEGORY} events (a trace without CUPTI range-profiler counters)",
                               hint=RECORD_HINT)
    ts_ns = _times([event.ts for event in found])
    dur_ns = _times([event.dur for event in found])
    rows = []
    for k, event in enumerate(found):
        name = _name(event.name, f"{source}: {CATEGORY} event {k}")
        where = f"{source}: {CATEGORY} event {k} ({quoted(name, 40)})"
        rows.append((_device(event.pid, where), ts_ns[k], k, name, dur_ns[k], _metrics(event.args, where)))
    rows.sort(key=lambda row: (row[0] is not None, row[0] or 0, row[1] is not None, row[1] or 0, row[2]))
    ranges, counts = [], {}
    for device, ts, _, name, dur, metrics in rows:
        index = counts.get(device, 0)
        counts[device] = index + 1
        ranges.append(CuptiRange(index=index, name=name, device=device, ts_ns=ts, dur_ns=dur, metrics=metrics))
    return CuptiCounters(source=source, ranges=tuple(ranges), launches=launches)


def pair_launches(counters: CuptiCounters) -> tuple[list[KernelLaunch | None], str]:
    """Per range (in `counters.ranges` order), the launch call it measured, None where it cannot be
    told; and the rule applied, or why not, in words (module docstring).

    The n-th range of a device goes with the n-th launch call on that device in time order. Launch
    calls that name no device are all on the one device the ranges were measured on; with ranges on
    several devices they cannot be split, and nothing is paired. With fewer ranges than launches (the
    range profiler stops at its maximum number of ranges) the first launches are paired.
    """
    ranges = counters.ranges
    graphs = [c for c in counters.launches if c.name in GRAPH_CALLS]
    single = [c for c in counters.launches if c.name not in GRAPH_CALLS]
    out: list[KernelLaunch | None] = [None] * len(ranges)
    if graphs:
        return out, (f"not paired: the trace has {len(graphs)} {graphs[0].name} calls, each launching many "
                     "kernels, so the n-th range is not the n-th launch call")
    devices = sorted({r.device for r in ranges}, key=lambda d: (d is None, d or 0))
    if single and all(c.device is None for c in single):
        if len(devices) > 1:
            return out, (f"not paired: ranges on {len(devices)} devices and the launch calls do not say their "
                         "device")
        per_device = {devices[0] if devices else None: single}
    else:
        per_device = {}
        for call in single:
            per_device.setdefault(call.device, []).append(call)
    said = []
    for device in devices:
        mine = [k for k, r in enumerate(ranges) if r.device == device]
        calls = per_device.get(device, [])
        where = f"device {device}" if device is not None else "an unnamed device"
        if len(mine) > len(calls):
            said.append(f"{where}: {len(mine)} ranges but {len(calls)} kernel launch calls, not paired (which "
                        "launch a range measured cannot be told)")
            continue
        for k, call in zip(mine, calls):
            out[k] = call
        extra = f", the last {len(calls) - len(mine)} launches measured by no range" if len(calls) > len(mine) else ""
        said.append(f"{where}: {len(mine)} ranges, {len(calls)} kernel launch calls{extra}")
    rule = "the n-th range of a device with its n-th kernel launch call in time order"
    return out, f"{rule}; {'; '.join(said)}" if said else rule


def measured_ranges(counters: CuptiCounters, trace: KinetoTrace, *, flops_of,
                    precision_of) -> tuple[list[MeasuredRange], str]:
    """Every range with its launch call (`pair_launches`) and the op behind the call
    (`profilers.kineto.launch_ops`: the launching op, the op the formula counts, its analytic FLOPs);
    and the pairing rule in words. `trace` is the same file read by the Kineto reader."""
    calls, pairing = pair_launches(counters)
    correlations = np.array([c.correlation if c is not None and c.correlation is not None else -1 for c in calls],
                            dtype=np.int64)
    ops = launch_ops(trace, correlations, flops_of=flops_of, precision_of=precision_of)
    out = []
    for k, r in enumerate(counters.ranges):
        work = range_work(r)
        if correlations[k] < 0:
            out.append(MeasuredRange(index=r.index, device=r.device, name=r.name, work=work))
            continue
        out.append(MeasuredRange(index=r.index, device=r.device, name=r.name, work=work,
                                 correlation=int(correlations[k]), launching_op=str(ops.launching_op[k]),
                                 op=str(ops.op[k]), op_call=int(ops.op_call[k]), op_flops=float(ops.op_flops[k]),
                                 op_flops_gap=str(ops.op_flops_gap[k])))
    return out, pairing


def range_work(counter_range: CuptiRange) -> MeasuredWork:
    """The FLOPs, tensor-pipe work and DRAM bytes a range's counters measure (`analysis.counters.measured_work`)."""
    return measured_work(counter_range.metrics)


def _read(name: str) -> bytes:
    try:
        return read_trace_bytes(name)
    except TraceFormatError as exc:  # the reader's hint is about traces in general; keep only the size one
        size_limit = exc.hint is not None and LIMIT_VARIABLE in exc.hint
        raise TraceFormatError(str(exc), hint=exc.hint if size_limit else RECORD_HINT) from None


def _events(data: bytes, source: str) -> list[_Event]:
    hint = "give a PyTorch profiler trace (.json or .json.gz) with CUPTI range-profiler counters"
    try:
        top = _TOP.decode(data)
    except msgspec.ValidationError as exc:
        raise TraceFormatError(f"{source}: not a PyTorch profiler trace ({str(exc)[:120]})", hint=hint) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"{source}: not JSON ({str(exc)[:120]})", hint=hint) from None
    events = top.traceEvents if isinstance(top, _Top) else top
    if events is None:
        raise TraceFormatError(f'{source}: no "traceEvents", not a PyTorch profiler trace', hint=hint)
    return events


def _launches(events: list[_Event], source: str) -> tuple[KernelLaunch, ...]:
    """The kernel launch calls among the host calls, in time order (file order among equal times)."""
    found = []
    for event in events:
        name = _json(event.name, "name", f"{source}: a runtime call")
        name = _API_VERSION.sub("", name) if isinstance(name, str) else ""
        if name in LAUNCH_CALLS or name in GRAPH_CALLS:
            found.append((name, event))
    ts_ns = _times([event.ts for _, event in found])
    out = []
    for (name, event), ts in zip(found, ts_ns):
        args = _json(event.args, "args", f"{source}: {name} call")
        args = args if isinstance(args, dict) else {}
        out.append(KernelLaunch(name=name, correlation=_id(args.get("correlation")), ts_ns=ts,
                                device=_id(args.get("device"))))
    order = sorted(range(len(out)), key=lambda k: (out[k].ts_ns is None, out[k].ts_ns or 0, k))
    return tuple(out[k] for k in order)


def _id(value: Any) -> int | None:
    """A non-negative integer id, else None."""
    return value if type(value) is int and value >= 0 else None


def _times(texts: list) -> list[int | None]:
    present = [k for k, text in enumerate(texts) if text is not None]
    out: list[int | None] = [None] * len(texts)
    if present:
        ns, ok = us_text_to_ns([texts[k] for k in present])
        for k, value, good in zip(present, ns.tolist(), ok.tolist()):
            out[k] = value if good else None
    return out


def _json(raw: msgspec.Raw | None, what: str, where: str) -> Any:
    """One field's value (raw text slices are only decoded, and so checked, for the ranges)."""
    if raw is None:
        return None
    try:
        return _ANY.decode(raw)
    except UnicodeDecodeError:  # a name with bytes that are not UTF-8: each becomes U+FFFD
        try:
            return _ANY.decode(bytes(raw).decode("utf-8", errors="replace").encode())
        except msgspec.DecodeError as exc:
            raise TraceFormatError(f"{where}: {what} is not JSON ({str(exc)[:80]})", hint=RECORD_HINT) from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{where}: {what} is not JSON ({str(exc)[:80]})", hint=RECORD_HINT) from None


def _name(raw: msgspec.Raw | None, where: str) -> str:
    value = _json(raw, "name", where)
    return clean_name(value) if isinstance(value, str) else ""


def _device(raw: msgspec.Raw | None, where: str) -> int | None:
    value = _json(raw, "pid", where)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceFormatError(f"{where}: pid {quoted(value, 30)} is not a device number", hint=RECORD_HINT)
    return value


def _metrics(raw: msgspec.Raw | None, where: str) -> Mapping[str, float]:
    args = _json(raw, "args", where) if raw is not None else {}
    if not isinstance(args, dict):
        raise TraceFormatError(f"{where}: args is not an object", hint=RECORD_HINT)
    metrics = {}
    for key, value in args.items():
        if not _METRIC.fullmatch(key):
            continue
        number = _finite(value)
        if number is None:
            raise TraceFormatError(f"{where}: {key} is {quoted(value, 30)}, not a number", hint=RECORD_HINT)
        metrics[key] = number
    return MappingProxyType(metrics)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past float's range
        return None
    return number if math.isfinite(number) else None
