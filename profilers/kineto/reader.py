"""PyTorch profiler (Kineto) Chrome-trace reader: a trace becomes `TraceRecords`.

Times. Kineto writes "ts"/"dur" in microseconds, as fractional decimals since ~2023 (e.g.
1712195495505582.988) and as integers before. A float64 cannot hold such a value to the
nanosecond, and rounding each kernel's ends to microseconds opens false gaps between back-to-back
kernels (under-counting busy time), so the decimal text itself becomes exact integer nanoseconds
(`profilers.traces.times`). Times stay on the trace's own "ts" origin (`baseTimeNanoseconds` is not
applied); only differences matter downstream.

Steps and window. Host spans named `ProfilerStep#N` (cat "user_annotation" in recent torch,
"cpu_op" in older) are the iterations. A step ends at max(host end, end of the last kernel whose
launching runtime call lies inside the host span). The window runs from the first step's start
to the latest step end; without step spans the whole trace (first to last timed event) is the
window and a note says so. Rows, ops and busy intervals are those that start inside the window.

GPU (the trace has "kernel" events). One row per kernel. Its launching op is found through the
runtime/driver call with the same `correlation` (cudaLaunchKernel, cudaLaunchKernelExC,
cuLaunchKernel, ...; the first such call in the file when several share an id): the innermost
"cpu_op" on that call's thread enclosing the call's start. FLOP attribution: walk up from the
launching op to the OUTERMOST enclosing op that has a formula (`flops_of(shapes) is not None`);
that op's FLOPs are split among ALL kernels launched beneath it in proportion to their durations,
and those rows carry its name as `op`, source "analytic" and its precision (`precision_of(input
types, dims)`, then refined by the kernel's own name through the caller's `kernel_precisions`: TF32
or tensor-core math that the op's types cannot show). Kernels with no formula op get
NaN FLOPs, `op` = launching op name ("" if none), source "" and precision "". A formula op whose
shapes are missing (`flops_of` returns NaN) leaves its rows at NaN FLOPs with source "". The step
of a kernel is the step containing its launching call. Busy intervals are the kernel intervals;
memcpy/memset ("gpu_memcpy", "gpu_memset") are not kernels (a note counts them); their spans, and those
of the runtime's synchronisation calls, are kept as `TraceRecords.copies` and `syncs` for GPU idle time.

CUPTI range profiler (no kernel events, "cuda_profiler_range" counter ranges and deviceProperties:
`range_profiled`). The work ran on the GPU: device kind "cuda", no kernel rows and no busy intervals
(the trace has no kernel times); its ops stay in `TraceRecords.ops`.

CPU (no kernel events otherwise). Every "cpu_op" is a row covering its SELF time (duration minus its direct
children's, per thread's op tree built by time nesting), stream = thread id, device -1. The
outermost op with a formula has its FLOPs split among itself and all its descendants in
proportion to their self times. Busy intervals are the roots of each thread's op tree. Markers
(ProfilerStep, other user annotations) and the profiler's "[memory]" instant events are not ops.

Memory. "[memory]" instant events become `MemoryEvents` in time order, all of them (not only the
window's), because pairing an allocation with its free needs the allocations made before it.

Broken or hostile input. A negative "dur" (a CUPTI clock fault, or a corrupt trace) is CLAMPED to
0 ns, not rejected: one bad event must not hide the rest of a trace, and a zero-length event adds
no busy time, FLOP share or self time; a note gives how many there were. Times outside
[-2^60, 2^62) ns and durations of 2^61 ns or more are malformed (`traces.events.TIME_MAX_NS`), so
no end or window length wraps around int64. Names are capped at 4,096 characters and lone
surrogates replaced, once per distinct name (`profilers.traces.names`). Shape arguments longer than
1 MiB or nested deeper than 8 levels, and a FLOP count from the formula that is negative or not
finite, leave that op's FLOPs unknown with flop gap "shapes_unreadable" (JSON nested deeper than
msgspec can decode, Python's recursion limit less the caller's stack, ~900 levels, is refused
whole with a one-line TraceFormatError). Text that is not valid
UTF-8 is read with U+FFFD for the bad bytes, with a note. The file itself is read through
`profilers.traces.files` (regular files only, size and gzip-expansion limits).

Layout: decoding the file into columns lives in `profilers.kineto.decode`, the op tree, self
times and FLOP splitting in `profilers.kineto.tree`; this module assembles the records, all
vectorised. The caller passes the FLOP formulas in (`flops_of`, `precision_of`): readers turn a
trace into records and count nothing themselves. Each formula runs once per distinct op call
signature (name, shapes, types, scalar values), not once per call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import msgspec
import numpy as np

from tbd.core.errors import TraceFormatError
from tbd.core.records import ANALYTIC, KernelTable, MemoryEvents, OpTable, StepSpan, TraceRecords
from tbd.profilers.kineto.batches import TRACE_HINT
from tbd.profilers.kineto.columns import KinetoTrace
from tbd.profilers.kineto.completion import Completion, complete_shapes
from tbd.profilers.kineto.decode import decode_trace, read_trace_file
from tbd.profilers.kineto.signatures import SignatureFlops, flop_gaps, signature_flops
from tbd.profilers.kineto.stacks import python_stacks
from tbd.profilers.kineto.tree import OpTree, enclosing_ops, formula_roots, op_tree, self_times, split_flops
from tbd.profilers.traces.events import NO_STEPS_NOTE
from tbd.profilers.traces.names import clean_name

__all__ = ["KinetoTrace", "read_trace_file", "trace_records", "range_profiled", "RANGE_PROFILER_CATEGORY"]

_ENCODER = msgspec.json.Encoder(decimal_format="number")


def trace_records(trace: KinetoTrace | dict, source: str, *, flops_of, precision_of,
                  kernel_precisions=None, recorded_by_tbd: bool = False, bytes_of=None,
                  does_arithmetic=None) -> TraceRecords:
    """Build the records of one Kineto trace (pure: no I/O).

    Args:
        trace: what `read_trace_file` returned, or the trace as a JSON-like dict (its numbers are
            read from their JSON text: Decimals exactly, floats as their shortest repr).
        source: the trace's name, for notes and errors.
        flops_of: callable(OpShapes) -> FLOPs, None (no formula) or NaN (formula, shapes missing),
            e.g. `analysis.flops.ops.op_flops`.
        precision_of: callable(input types tuple, input dims tuple) -> "fp32", "fp16", ..., e.g.
            `analysis.flops.ops.precision_of`.
        kernel_precisions: callable(kernel names, their ops' precisions, compute capability or None)
            -> each kernel's precision, e.g. `analysis.precision.kernel_precisions` (the kernel's
            name tells TF32 or tensor-core math the op's types cannot); None: the op's precision.
        bytes_of: callable(OpShapes) -> bytes the op reads and writes (NaN unknown), e.g.
            `analysis.op_bytes.ops.op_bytes`; None: rows carry no byte estimate.
        does_arithmetic: callable(kernel names) -> bool per kernel, False for a layout or set-up kernel that
            gets no share of its op's FLOPs while another kernel of the op can carry them, e.g.
            `analysis.data_movement.does_arithmetic`; None: every kernel shares by its time. A CPU trace's
            rows are ops: it is asked of their names, and an op it says does no arithmetic gets no share of its
            root's FLOPs and bytes where another can carry them, and 0 of its own without a root.
        recorded_by_tbd: tbd's hook recorded the trace with CPU activities on, so a trace without
            ops is a step that ran no operator (records with no rows and a note), not a foreign file.
    Returns:
        TraceRecords with integer-ns times; device_kind "cuda" if the trace has kernels or is a CUPTI
        range-profiler trace (`range_profiled`: no kernel rows then), else "cpu".
    Raises:
        TraceFormatError: not a trace, malformed events, or no ops and no kernels.
    """
    if isinstance(trace, dict):
        trace = decode_trace(_encoded(trace, source), source)
    empty = len(trace.ops.start_ns) == 0 and len(trace.kernels.start_ns) == 0
    if empty and not recorded_by_tbd:
        listed = ", ".join(clean_name(c[:40]) for c in trace.categories[:8]) + (
            ", ..." if len(trace.categories) > 8 else "") or "none"
        raise TraceFormatError(f"no ops or kernels in {source}: not a PyTorch profiler trace, or one recorded without "
                               f"CPU and CUDA activities (its event categories: {listed})",
                               hint="tbd analyze reads torch.profiler (Kineto) traces from PyTorch 1.8 on, a folder "
                                    "of them, and tbd run directories of every framework")
    tree = op_tree(trace.ops)
    completion = complete_shapes(trace, tree)
    tree = replace(tree, signature=completion.signature)
    sig = signature_flops(completion.signatures, flops_of, precision_of, bytes_of)
    if len(trace.kernels.start_ns) or range_profiled(trace):
        records = _gpu_records(trace, tree, sig, source, kernel_precisions, does_arithmetic)
    else:
        records = _cpu_records(trace, tree, sig, source, does_arithmetic)
    if empty:
        records = replace(records, notes=records.notes + (
            "the trace window recorded no operator: the step ran no framework op that the profiler sees",))
    return replace(records, notes=records.notes + _reading_notes(trace) + _completion_notes(completion))


#: The event category of Kineto's CUPTI range profiler (`profilers.cupti_counters` reads its counters).
RANGE_PROFILER_CATEGORY = "cuda_profiler_range"


def range_profiled(trace: KinetoTrace) -> bool:
    """Whether the trace comes from Kineto's CUPTI range profiler on a GPU: "cuda_profiler_range" events
    and deviceProperties, and no kernel events (the range profiler refuses to run beside kernel tracing).

    Its work ran on the GPU, so its device kind is "cuda"; it has no kernel rows, there being no kernel
    times (Kineto spreads its ranges evenly over the session), and its host ops are not rows either: their
    times include the profiler replaying every kernel (`profilers.cupti_counters`).
    """
    props = trace.metadata.get("deviceProperties")
    return (not len(trace.kernels.start_ns) and RANGE_PROFILER_CATEGORY in trace.categories
            and isinstance(props, list) and bool(props))


def _completion_notes(completion: Completion) -> tuple[str, ...]:
    """What other records of the same calls told (profilers.kineto.completion)."""
    found = []
    if completion.sizes_filled:
        found.append(f"{completion.sizes_filled} convolution backward ops' size argument from their parent op")
    if completion.outputs_found:
        found.append(f"{completion.outputs_found} forward convolutions' output shape from their autograd node")
    return (f"shapes this trace did not record, recovered: {'; '.join(found)}",) if found else ()


def _reading_notes(trace: KinetoTrace) -> tuple[str, ...]:
    """What was repaired or clamped while reading the trace."""
    notes = trace.decode_notes
    if trace.negative_durations:
        notes += (f"{trace.negative_durations} events have a negative duration (a clock fault or a corrupt trace): "
                  "each counted as 0 ns",)
    return notes


def _encoded(trace: dict, source: str) -> bytes:
    """A JSON-like dict as JSON text; strings that are not valid text (lone surrogates) are an error."""
    try:
        return _ENCODER.encode(trace)
    except (UnicodeEncodeError, TypeError, OverflowError, RecursionError) as exc:
        raise TraceFormatError(f"{source}: not a JSON trace ({type(exc).__name__})", hint=TRACE_HINT) from None


# ---------------------------------------------------------------------------------------------
# Steps and window


@dataclass(frozen=True)
class _Steps:
    number: np.ndarray
    start_ns: np.ndarray
    host_end_ns: np.ndarray


def _host_steps(trace: KinetoTrace) -> _Steps:
    """The ProfilerStep spans, sorted by start."""
    s = trace.steps
    order = np.argsort(s.start_ns, kind="stable")
    return _Steps(s.number[order], s.start_ns[order], (s.start_ns + s.dur_ns)[order])


def _step_of(t_ns: np.ndarray, steps: _Steps) -> np.ndarray:
    """Index into `steps` of the host span containing each time, -1 outside every span."""
    i = np.searchsorted(steps.start_ns, t_ns, side="right") - 1
    if not len(steps.start_ns):
        return np.full(len(t_ns), -1, dtype=np.int64)
    ok = (i >= 0) & (t_ns < steps.host_end_ns[np.maximum(i, 0)])
    return np.where(ok, i, -1)


def _spans(steps: _Steps, device_end_ns: np.ndarray, device_step: np.ndarray) -> tuple[StepSpan, ...]:
    """StepSpans; a step ends at the later of its host end and its last launched kernel's end."""
    last = steps.host_end_ns.copy()
    has = device_step >= 0
    np.maximum.at(last, device_step[has], device_end_ns[has])
    return tuple(StepSpan(int(n), int(s), int(h), int(e))
                 for n, s, h, e in zip(steps.number, steps.start_ns, steps.host_end_ns, last))


def _window(trace: KinetoTrace, spans: tuple[StepSpan, ...]) -> tuple[int, int, tuple[str, ...]]:
    if spans:
        return spans[0].start_ns, max(s.end_ns for s in spans), ()
    # The profiler's own session span and global instants ("Record Window End") are not activity.
    return trace.timed_start_ns, trace.timed_end_ns, (NO_STEPS_NOTE,)


def _memory(trace: KinetoTrace) -> MemoryEvents | None:
    m = trace.memory
    if not len(m.ts_ns):
        return None
    order = np.argsort(m.ts_ns, kind="stable")
    return MemoryEvents(ts_ns=m.ts_ns[order], addr=m.addr[order], bytes=m.bytes[order],
                        total_allocated=m.total_allocated[order], device=m.device[order])


def _in_window(start_ns: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return (start_ns >= lo) & (start_ns <= hi)


def _overlaps_window(start_ns: np.ndarray, dur_ns: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Kernels with time inside [lo, hi], or an instant kernel at a point of it."""
    return ((start_ns < hi) & (start_ns + dur_ns > lo)) | _in_window(start_ns, lo, hi)


def _cut_to_window(rows: KernelTable, lo: int, hi: int) -> tuple[KernelTable, tuple[int, int]]:
    """Rows cut to [lo, hi]: a kernel that began before the window (launched in an earlier, untraced step) or
    runs past its end counts for its time inside it, and its FLOPs and bytes in the same share (they are
    split by time, as among an op's kernels). Returns the rows and (kernels cut, ns cut away)."""
    end = rows.start_ns + rows.dur_ns
    start = np.maximum(rows.start_ns, lo)
    dur = np.maximum(np.minimum(end, hi) - start, 0)
    cut = dur < rows.dur_ns
    if not cut.any():
        return rows, (0, 0)
    share = np.where(rows.dur_ns > 0, dur / np.maximum(rows.dur_ns, 1), 1.0)
    scaled = {"start_ns": start, "dur_ns": dur, "flops": rows.flops * share}
    if rows.bytes is not None:
        scaled["bytes"] = rows.bytes * share
    return replace(rows, **scaled), (int(cut.sum()), int((rows.dur_ns - dur).sum()))


def _op_table(trace: KinetoTrace, tree: OpTree, keep: np.ndarray) -> OpTable:
    return OpTable(name=trace.names[tree.name[keep]], start_ns=tree.start_ns[keep], end_ns=tree.end_ns[keep],
                   tid=tree.tid[keep])


# ---------------------------------------------------------------------------------------------
# GPU and CPU records


def _gpu_records(trace: KinetoTrace, tree: OpTree, sig: SignatureFlops, source: str,
                 kernel_precisions, does_arithmetic=None) -> TraceRecords:
    k = trace.kernels
    names = trace.names
    launch_ts, launch_op = _launches(trace, tree)
    steps = _host_steps(trace)
    step_idx = _step_of(launch_ts, steps)
    step_idx[launch_op == _NO_CALL] = -1
    spans = _spans(steps, k.start_ns + k.dur_ns, step_idx)
    lo, hi, notes = _window(trace, spans)
    launched = launch_op >= 0
    root = formula_roots(tree, sig.has_formula[tree.signature])
    kroot = np.where(launched, root[np.maximum(launch_op, 0)], -1) if len(tree) else np.full(len(launch_op), -1)
    # Asked once per distinct name (the trace's name table), then taken per kernel by its name's code.
    carries = does_arithmetic(names)[k.name] if does_arithmetic is not None and len(k.name) else None
    flops = split_flops(sig.flops[tree.signature], kroot, k.dur_ns, carries)
    rooted = kroot >= 0
    # The row's op: its formula root, else the launching op, else none.
    op_code = np.full(len(kroot), -1, dtype=np.int64)
    op_code[launched] = tree.name[launch_op[launched]]
    op_code[rooted] = tree.name[kroot[rooted]]
    op_name = np.full(len(kroot), "", dtype=object)
    op_name[op_code >= 0] = names[op_code[op_code >= 0]]
    precision = _kernel_precision(trace, tree, sig, kroot, kernel_precisions)
    number = np.array([s.number for s in spans] + [-1], dtype=np.int64)
    # The op whose shapes a row shows: the one it takes its FLOPs from, else its launching op.
    shown_op = np.where(rooted, kroot, np.where(launched, launch_op, -1))
    table = KernelTable(names[k.name], k.start_ns, k.dur_ns, k.device, k.stream, op_name, flops,
                        np.where(np.isfinite(flops), ANALYTIC, "").astype(object), precision, number[step_idx],
                        flop_gaps(flops, kroot, launch_op, tree, sig), grid=k.grid, block=k.block,
                        registers=k.registers, shared_memory=k.shared_memory, occupancy=k.occupancy,
                        op_shapes=_shapes_of(sig, tree, shown_op), op_stack=python_stacks(trace, tree, shown_op),
                        bytes=split_flops(sig.bytes[tree.signature], kroot, k.dur_ns), launch_ns=launch_ts)
    keep = _overlaps_window(k.start_ns, k.dur_ns, lo, hi)
    order = np.flatnonzero(keep)[np.argsort(k.start_ns[keep], kind="stable")]
    rows, cut = _cut_to_window(table.select(order), lo, hi)
    notes += _gpu_notes(trace, launch_op, keep, cut)
    return TraceRecords(source, "cuda", rows, rows.start_ns, rows.start_ns + rows.dur_ns, spans, lo, hi,
                        _op_table(trace, tree, _in_window(tree.start_ns, lo, hi)), _memory(trace), notes,
                        copies=_spans_of(trace.copy_spans), syncs=_spans_of(trace.sync_spans))


def _spans_of(columns) -> tuple[np.ndarray, np.ndarray] | None:
    """A SpanColumns as (start_ns, end_ns), None for a trace decoded before the field."""
    return None if columns is None else (columns.start_ns, columns.end_ns)


def _shapes_of(sig: SignatureFlops, tree: OpTree, op: np.ndarray) -> np.ndarray:
    """Per row, the shapes text of op index `op` ("" where -1)."""
    out = np.full(len(op), "", dtype=object)
    has = op >= 0
    out[has] = sig.shapes_text[tree.signature[op[has]]]
    return out


_NO_CALL = -2  # launch_op for a kernel whose correlation matches no runtime call (-1: a call, no op)


def _launches(trace: KinetoTrace, tree: OpTree) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel: start of its launching runtime call, and its launching op (-1: none, _NO_CALL: no call)."""
    k, calls = trace.kernels, trace.launches
    # The first call wins: a runtime call and the driver call inside it may share an id.
    order = np.argsort(calls.correlation, kind="stable")
    ids, first = np.unique(calls.correlation[order], return_index=True)
    first = order[first]
    pos = np.minimum(np.searchsorted(ids, k.correlation), max(len(ids) - 1, 0))
    found = (k.correlation >= 0) & (len(ids) > 0) & (ids[pos] == k.correlation) if len(ids) else \
        np.zeros(len(k.correlation), dtype=bool)
    call = first[pos[found]]
    ts = np.full(len(k.correlation), -1, dtype=np.int64)
    op = np.full(len(k.correlation), _NO_CALL, dtype=np.int64)
    ts[found] = calls.start_ns[call]
    op[found] = enclosing_ops(tree, calls.thread[call], ts[found])
    return ts, op


def _kernel_precision(trace: KinetoTrace, tree: OpTree, sig: SignatureFlops, kroot: np.ndarray,
                      kernel_precisions) -> np.ndarray:
    """Each kernel's precision: its formula root op's, refined by the kernel's name when given how."""
    rooted = kroot >= 0
    op = np.full(len(kroot), "", dtype=object)
    op[rooted] = sig.precision[tree.signature[kroot[rooted]]]
    if kernel_precisions is None:
        return op
    return kernel_precisions(trace.names[trace.kernels.name], op, _compute_capability(trace.metadata))


def _compute_capability(metadata: dict) -> tuple[int, int] | None:
    """The first device's CUDA compute capability from deviceProperties; None for ROCm (a warp of 64 lanes
    and a CUDA-style number that is not the chip's), when not recorded, or when not two small integers."""
    props = metadata.get("deviceProperties")
    if not isinstance(props, list) or not props or not isinstance(props[0], dict):
        return None
    p = props[0]
    if p.get("warpSize") == 64 or "amd" in str(p.get("name", ""))[:200].lower() or "computeMajor" not in p:
        return None
    major, minor = p["computeMajor"], p.get("computeMinor", 0)
    if not all(type(v) is int and 0 <= v < 100 for v in (major, minor)):
        return None
    return major, minor


def _gpu_notes(trace: KinetoTrace, launch_op: np.ndarray, keep: np.ndarray,
               cut: tuple[int, int] = (0, 0)) -> tuple[str, ...]:
    notes = []
    if trace.copies:
        notes.append(f"{trace.copies} memcpy/memset events not counted as kernels or busy time")
    orphans = int(((launch_op == _NO_CALL) & keep).sum())
    if orphans:
        notes.append(f"{orphans} kernels have no launching runtime call in the trace (no op, no step)")
    outside = int((~keep).sum())
    if outside:
        notes.append(f"{outside} kernels run wholly outside the window and are left out")
    if cut[0]:
        notes.append(f"{cut[0]} kernels cross the window's edge: counted for their time inside it "
                     f"({cut[1] / 1e3:.1f} µs outside left out)")
    return tuple(notes)


def _cpu_records(trace: KinetoTrace, tree: OpTree, sig: SignatureFlops, source: str,
                 does_arithmetic=None) -> TraceRecords:
    n = len(tree)
    names = trace.names
    child = tree.parent >= 0
    self_ns = self_times(tree)
    steps = _host_steps(trace)
    spans = _spans(steps, np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    lo, hi, notes = _window(trace, spans)
    root = formula_roots(tree, sig.has_formula[tree.signature])
    # An op that does no arithmetic (an allocation, a view, autograd's bookkeeping) takes no share of its root's
    # FLOPs or bytes while another op under the root can carry them, and does none of its own.
    carries = does_arithmetic(names)[tree.name] if does_arithmetic is not None and n else None
    flops = split_flops(sig.flops[tree.signature], root, self_ns, carries)
    nbytes = split_flops(sig.bytes[tree.signature], root, self_ns, carries)
    if carries is not None:
        flops[(root < 0) & ~carries] = 0.0
        nbytes[(root < 0) & ~carries] = 0.0
    op_name = names[np.where(root >= 0, tree.name[np.maximum(root, 0)], tree.name)]
    precision = np.full(n, "", dtype=object)
    precision[root >= 0] = sig.precision[tree.signature[root[root >= 0]]]
    number = np.array([s.number for s in spans] + [-1], dtype=np.int64)
    shown_op = np.where(root >= 0, root, np.arange(n))
    table = KernelTable(names[tree.name], tree.start_ns, self_ns, np.full(n, -1, dtype=np.int64), tree.tid, op_name,
                        flops, np.where(np.isfinite(flops), ANALYTIC, "").astype(object), precision,
                        number[_step_of(tree.start_ns, steps)], flop_gaps(flops, root, np.arange(n), tree, sig),
                        op_shapes=_shapes_of(sig, tree, shown_op), op_stack=python_stacks(trace, tree, shown_op),
                        bytes=nbytes)
    keep = _in_window(tree.start_ns, lo, hi)
    order = np.flatnonzero(keep)[np.argsort(tree.start_ns[keep], kind="stable")]
    roots = keep & ~child
    return TraceRecords(source, "cpu", table.select(order), tree.start_ns[roots], tree.end_ns[roots], spans, lo, hi,
                        _op_table(trace, tree, keep), _memory(trace), notes)

