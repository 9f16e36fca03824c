"""TensorFlow memory by category (docs/architecture.md, "memory by category"): pure, over the hook's records.

Input: raw/memory.json written by profilers.tensorflow.hook (schema `RECORDS_SCHEMA`: per traced
iteration, exact bytes of what tbd can name). Categories (each the max over traced iterations):
- weights: Σ bytes of the model's trainable variables. Non-trainable variables (batch-norm moving
  statistics) are recorded as non_trainable_bytes and added to weights, as the paper counted every
  parameter buffer of the model; reasons["weights"] says how much of it they are.
- gradients: Σ bytes of dense gradients, one per trainable variable (same shape and dtype).
- dynamic: the optimizer's variables (slots, iteration counter, learning rate) + the input pool.
- feature_maps: analytic, not measured: Σ bytes of the forward tensors the step's gradient ops
  read in its traced tf.function graph, by their static shapes (the hook's feature_maps_bytes;
  profilers/tensorflow/memory.py gives the rule; records["reasons"]["feature_maps"] says what it
  covers or why it is null). Records written before it have none: null with that reason.
- workspace, allocator_peak, at_peak: null. TF 2.21's XPlane for a CPU run carries no allocator
  events (the memory profile needs the GPU BFC allocator's tracing), so live activations and
  operator scratch buffers are not measured, and an analytic figure is not put in at_peak.
`sources` labels each figure: "measured" (the live variables and tensors) or "analytic"
(gradients: the variables' shapes, as the tape's tensors are not reachable; feature maps).
"""

from __future__ import annotations

from tbd.analysis.memory.snapshots import check_snapshot_records, dynamic_bytes, max_over_steps
from tbd.core import rundir
from tbd.core.profile_result import MEMORY_CATEGORIES, Memory
from tbd.core.records import TraceRecords

RECORDS_SCHEMA = rundir.TENSORFLOW_MEMORY_SCHEMA  # written by profilers.tensorflow.hook
_FIELDS = (("weights", "weights_bytes"), ("non_trainable", "non_trainable_bytes"), ("gradients", "gradients_bytes"),
           ("optimizer_state", "optimizer_state_bytes"), ("inputs", "input_bytes"))
_FEATURE_MAPS = (("feature_maps", "feature_maps_bytes"),)  # optional: absent in records before 2026-11
_NO_ALLOCATOR = ("TensorFlow's trace of this run has no allocator events (TF records a memory profile only for "
                 "GPU BFC allocators), so feature maps and workspace cannot be measured")
_NO_WORKSPACE = ("TensorFlow's trace of this run has no allocator events (TF records a memory profile only for "
                 "GPU BFC allocators) and its graph does not size operators' scratch buffers: workspace is unknown")
_NO_PEAK = ("TensorFlow's trace of this run has no allocator events (TF records a memory profile only for GPU BFC "
            "allocators): no peak is measured, and the analytic feature maps are not an allocation seen at one")


def memory_breakdown(records: dict | None, trace: TraceRecords | None) -> Memory:
    """Memory by category in bytes (module docstring gives every rule); `trace` is unused but for its device."""
    reasons: dict[str, str] = {"feature_maps": _NO_ALLOCATOR, "workspace": _NO_WORKSPACE,
                               "allocator_peak": _NO_PEAK, "at_peak": _NO_PEAK}
    at_peak: dict[str, int | None] = {c: None for c in (*MEMORY_CATEGORIES, "unattributed")}
    if records is None:
        why = "no memory records: the trace alone does not say which tensors are which"
        reasons.update(weights=why, gradients=why, dynamic=why)
        return Memory(None, None, None, None, None, None, at_peak, reasons)
    check_snapshot_records(records, RECORDS_SCHEMA, "TensorFlow", _FIELDS + _FEATURE_MAPS)
    parts = max_over_steps(records, _FIELDS, reasons)
    feature_maps = None
    if any("feature_maps_bytes" in it for it in records["iterations"]):
        feature_maps = max_over_steps(records, _FEATURE_MAPS, reasons)["feature_maps"]
        reasons["feature_maps"] = records["reasons"].get("feature_maps") or reasons["feature_maps"]
    else:
        reasons["feature_maps"] = "the memory records predate feature-map records: " + _NO_ALLOCATOR
    weights = parts["weights"]
    if weights is not None and parts["non_trainable"]:
        weights += parts["non_trainable"]
        reasons["weights"] = f"includes {parts['non_trainable']} B of non-trainable variables"
    if parts["gradients"] is not None and records["reasons"].get("gradients"):
        reasons["gradients"] = records["reasons"]["gradients"]
    dynamic = dynamic_bytes(parts, reasons, "optimizer variables + inputs only: other in-iteration allocations "
                                            "are not measured", "no optimizer or input records")
    reasons.pop("non_trainable", None)
    sources = {k: src for k, v, src in (("weights", weights, "measured"), ("gradients", parts["gradients"], "analytic"),
                                        ("dynamic", dynamic, "measured"), ("feature_maps", feature_maps, "analytic"))
               if v is not None}
    return Memory(weights, parts["gradients"], feature_maps, None, dynamic, None, at_peak, reasons, sources=sources)
