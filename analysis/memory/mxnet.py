"""MXNet memory by category (docs/architecture.md, "memory by category"): pure, over the hook's records and the dump.

Inputs: raw/memory.json written by profilers.mxnet.hook (schema `RECORDS_SCHEMA`: per traced iteration,
exact bytes of the arrays tbd can name) and the trace window's `MemoryEvents` from
profilers.mxnet.trace (MXNet's "Device Storage" counters: live bytes allocated through MXNet's
storage since the profiler started, per device; no addresses, no operator tags).

Categories, as the paper's memory profiler summed them (each the max over traced iterations):
- weights: Σ bytes of every parameter's data arrays (block.collect_params()).
- gradients: Σ bytes of the gradient arrays of parameters with grad_req != 'null'.
- dynamic: optimizer state (Σ bytes of the trainer's updater states) + the input pool.
- feature_maps: analytic, not measured: Σ bytes of the forward outputs MXNet's gradient graph
  reads, from the hybridized blocks' graphs and their shape inference (the hook's
  feature_maps_bytes; profilers/mxnet/memory.py gives the rule), plus the fused RNN operator's
  reserve space, which the graph does not show (analysis/memory/mxnet_rnn.py sizes it). The hook's
  records["reasons"]["feature_maps"] says what it covers or why it is null; records written
  before it have no feature_maps_bytes: null with that reason.
- workspace: null. MXNet 1.9's dump gives only per-device storage totals, so operators'
  transient buffers cannot be told apart from the other allocations.
The storage counter's rise (feature maps as allocated, workspace, activation gradients, the
loss) is measured and shown as at_peak["unattributed"]; the analytic feature-map figure is not
split out of it (at_peak holds only what was measured, so its parts still add up to
allocator_peak). `sources` labels each figure "measured" (live arrays, the storage counter) or
"analytic".

Allocator peak: the arrays above exist before tracing starts, so MXNet's counter never sees them;
they are a constant baseline (exact bytes). allocator_peak = baseline + the counter's highest
rise in the window over its level at the window start. at_peak = the baseline's categories plus
`unattributed` = that rise, so the parts add up to allocator_peak exactly. Live bytes allocated
before the window by other tensors (the counter's level at the window start) are not counted,
and `reasons["at_peak"]` says how many there were. A hybridized block with static_alloc=True
allocates its activations and workspace once, at its first call, before tracing: the hook says
so in records["reasons"]["at_peak"], passed on as reasons["at_peak"] and ["allocator_peak"].
"""

from __future__ import annotations

import numpy as np

from tbd.analysis.memory.snapshots import check_snapshot_records, dynamic_bytes, max_over_steps
from tbd.core import rundir
from tbd.core.profile_result import MEMORY_CATEGORIES, Memory
from tbd.core.records import MemoryEvents, TraceRecords

RECORDS_SCHEMA = rundir.MXNET_MEMORY_SCHEMA  # written by profilers.mxnet.hook
_FIELDS = (("weights", "weights_bytes"), ("gradients", "gradients_bytes"),
           ("optimizer_state", "optimizer_state_bytes"), ("inputs", "input_bytes"))
_FEATURE_MAPS = (("feature_maps", "feature_maps_bytes"),)  # optional: absent in records before 2026-11
_UNSPLIT = ("MXNet 1.9's profiler records per-device storage totals without addresses or operator tags, "
            "so tensors kept for backward, operators' transient buffers and other temporaries cannot be "
            "told apart; their sum is in at_peak['unattributed']")
_WORKSPACE = ("MXNet 1.9's profiler records per-device storage totals without addresses or operator tags, so "
              "operators' transient buffers (workspace) cannot be told apart from other allocations; what the "
              "counter sees of them is in at_peak['unattributed']")
_NOT_AT_PEAK = ("feature_maps is analytic (graph shapes), not an allocation seen at the peak, so it is not split "
                "out of at_peak (what the counter saw of it is inside unattributed) and the parts still add up "
                "to allocator_peak")


def memory_breakdown(records: dict | None, trace: TraceRecords | None) -> Memory:
    """Memory by category in bytes (module docstring gives every rule).

    records: the hook's raw/memory.json dict, or None (a dump analysed on its own).
    trace: the trace window's records (for the storage counters), or None.
    """
    reasons: dict[str, str] = {"feature_maps": _UNSPLIT, "workspace": _WORKSPACE}
    parts = _exact_parts(records, reasons)
    weights, gradients = parts["weights"], parts["gradients"]
    feature_maps = _feature_maps(records, reasons)
    dynamic = dynamic_bytes(parts, reasons, "optimizer state + inputs only: other in-iteration allocations are in "
                                            "at_peak['unattributed']", "no memory records")
    sources = {k: "measured" for k, v in (("weights", weights), ("gradients", gradients), ("dynamic", dynamic))
               if v is not None}
    if feature_maps is not None:
        sources["feature_maps"] = "analytic"
    at_peak: dict[str, int | None] = {c: None for c in (*MEMORY_CATEGORIES, "unattributed")}
    rise, before, why = _counter_rise(records, trace)
    if rise is None or records is None:
        reasons["allocator_peak"] = reasons["at_peak"] = why if rise is None else "no memory records: no baseline"
        return Memory(weights, gradients, feature_maps, None, dynamic, None, at_peak, reasons, sources=sources)
    at_peak.update(weights=weights, gradients=gradients, dynamic=dynamic)
    baseline = sum(v for v in (weights, gradients, dynamic) if v is not None)
    allocator_peak = baseline + rise
    at_peak["unattributed"] = rise
    reasons["at_peak"] = ("weights, gradients, optimizer state and inputs are held from before tracing (exact "
                          f"array sizes, {baseline} B) and added to allocator_peak; unattributed = the storage "
                          "counter's peak rise in the window (feature maps, workspace, temporaries)")
    if before:
        reasons["at_peak"] += f"; {before} B allocated since tracing began and live at the window start are not counted"
    if records["reasons"].get("at_peak"):
        # The hook's own caveat (static_alloc buffers made before tracing) applies to the peak too.
        reasons["at_peak"] += "; " + records["reasons"]["at_peak"]
        reasons["allocator_peak"] = records["reasons"]["at_peak"]
    if feature_maps is not None:
        reasons["at_peak"] += "; " + _NOT_AT_PEAK
    sources.update(allocator_peak="measured", at_peak="measured")
    return Memory(weights, gradients, feature_maps, None, dynamic, allocator_peak, at_peak, reasons, sources=sources)


def _exact_parts(records: dict | None, reasons: dict) -> dict[str, int | None]:
    """Max over iterations of each exact field; None with a reason where not recorded."""
    if records is None:
        for cat, _ in _FIELDS:
            reasons[cat] = "no memory records: the dump alone does not say which arrays are which"
        return {cat: None for cat, _ in _FIELDS}
    check_snapshot_records(records, RECORDS_SCHEMA, "MXNet", _FIELDS + _FEATURE_MAPS)
    out = max_over_steps(records, _FIELDS, reasons)
    for cat in ("weights", "gradients"):
        if out[cat] is not None:
            reasons.pop(cat, None)
    return out


def _feature_maps(records: dict | None, reasons: dict) -> int | None:
    """The analytic feature maps (max over steps), the hook's note on them in reasons["feature_maps"]."""
    if records is None:
        reasons["feature_maps"] = "no memory records: " + _UNSPLIT
        return None
    if not any("feature_maps_bytes" in it for it in records["iterations"]):
        reasons["feature_maps"] = "the memory records predate feature-map records: " + _UNSPLIT
        return None
    figure = max_over_steps(records, _FEATURE_MAPS, reasons)["feature_maps"]
    if records["reasons"].get("feature_maps"):
        reasons["feature_maps"] = records["reasons"]["feature_maps"]
    return figure


def _counter_rise(records: dict | None, trace: TraceRecords | None) -> tuple[int | None, int, str]:
    """(highest rise of the device's storage counter in the window over its start level, that start
    level, reason when unmeasured)."""
    if trace is None:
        return None, 0, "no trace"
    device = int(records.get("device_index", -1)) if records is not None else (
        -1 if trace.device_kind == "cpu" else None)
    mem: MemoryEvents | None = trace.memory
    if mem is None or len(mem) == 0:
        return None, 0, "the dump has no storage counters (record with profile_memory=True)"
    dev = np.asarray(mem.device)
    if device is None:
        gpu = dev[dev >= 0]
        if len(gpu):  # the GPU with most counter events (np.unique: an ordinal may be any size)
            values, counts = np.unique(gpu, return_counts=True)
            device = int(values[np.argmax(counts)])
        else:
            device = -1
    keep = np.flatnonzero(dev == device)
    ts, total = np.asarray(mem.ts_ns)[keep], np.asarray(mem.total_allocated)[keep]
    order = np.argsort(ts, kind="stable")
    ts, total = ts[order], total[order]
    inside = (ts >= trace.window_start_ns) & (ts <= trace.window_end_ns)
    if not inside.any():
        return None, 0, f"no storage counter events for device {device} in the trace window"
    if (total < 0).any():
        return None, 0, f"the storage counter goes negative ({int(total.min())} B): counter events are inconsistent"
    earlier = total[ts < trace.window_start_ns]
    before = int(earlier[-1]) if len(earlier) else 0
    return max(int(total[inside].max()) - before, 0), before, ""
