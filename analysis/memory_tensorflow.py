"""TensorFlow memory by category (DESIGN.md "memory by category"): pure, over the hook's records.

Input: raw/memory.json written by profilers.tensorflow (schema `RECORDS_SCHEMA`: per traced
iteration, exact bytes of what tbd can name). Categories (each the max over traced iterations):
- weights: Σ bytes of the model's trainable variables. Non-trainable variables (batch-norm moving
  statistics) are recorded as non_trainable_bytes and added to weights, as the paper counted every
  parameter buffer of the model; reasons["weights"] says how much of it they are.
- gradients: Σ bytes of dense gradients, one per trainable variable (same shape and dtype).
- dynamic: the optimizer's variables (slots, iteration counter, learning rate) + the input pool.
- feature_maps, workspace, allocator_peak, at_peak: null. TF 2.21's XPlane for a CPU run carries
  no allocator events (the memory profile needs the GPU BFC allocator's tracing), so live
  activations and operator scratch buffers are not measured.
"""

from __future__ import annotations

from tbd import rundir
from tbd.analysis.memory_snapshots import check_snapshot_records, dynamic_bytes, max_over_steps
from tbd.profile import MEMORY_CATEGORIES, Memory
from tbd.records import TraceRecords

RECORDS_SCHEMA = rundir.TENSORFLOW_MEMORY_SCHEMA  # written by profilers.tensorflow
_FIELDS = (("weights", "weights_bytes"), ("non_trainable", "non_trainable_bytes"), ("gradients", "gradients_bytes"),
           ("optimizer_state", "optimizer_state_bytes"), ("inputs", "input_bytes"))
_NO_ALLOCATOR = ("TensorFlow's trace of this run has no allocator events (TF records a memory profile only for "
                 "GPU BFC allocators), so feature maps and workspace cannot be measured")


def memory_breakdown(records: dict | None, trace: TraceRecords | None) -> Memory:
    """Memory by category in bytes (module docstring gives every rule); `trace` is unused but for its device."""
    reasons: dict[str, str] = {"feature_maps": _NO_ALLOCATOR, "workspace": _NO_ALLOCATOR,
                               "allocator_peak": _NO_ALLOCATOR, "at_peak": _NO_ALLOCATOR}
    at_peak: dict[str, int | None] = {c: None for c in (*MEMORY_CATEGORIES, "unattributed")}
    if records is None:
        why = "no memory records: the trace alone does not say which tensors are which"
        reasons.update(weights=why, gradients=why, dynamic=why)
        return Memory(None, None, None, None, None, None, at_peak, reasons)
    check_snapshot_records(records, RECORDS_SCHEMA, "TensorFlow", _FIELDS)
    parts = max_over_steps(records, _FIELDS, reasons)
    weights = parts["weights"]
    if weights is not None and parts["non_trainable"]:
        weights += parts["non_trainable"]
        reasons["weights"] = f"includes {parts['non_trainable']} B of non-trainable variables"
    if parts["gradients"] is not None and records["reasons"].get("gradients"):
        reasons["gradients"] = records["reasons"]["gradients"]
    dynamic = dynamic_bytes(parts, reasons, "optimizer variables + inputs only: other in-iteration allocations "
                                            "are not measured", "no optimizer or input records")
    reasons.pop("non_trainable", None)
    return Memory(weights, parts["gradients"], None, None, dynamic, None, at_peak, reasons)
