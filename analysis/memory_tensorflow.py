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

from tbd.errors import ResultFormatError
from tbd.profile import MEMORY_CATEGORIES, Memory
from tbd.records import TraceRecords

RECORDS_SCHEMA = "tbd.tensorflow_memory_records/1"  # written by profilers.tensorflow
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
    _check(records)
    parts: dict[str, int | None] = {}
    for cat, key in _FIELDS:
        values = [it.get(key) for it in records["iterations"]]
        parts[cat] = None if not values or any(v is None for v in values) else int(max(values))
        if parts[cat] is None:
            reasons[cat] = records["reasons"].get(cat) or (
                "no traced iterations were recorded" if not values else f"{key} was not recorded")
    weights = parts["weights"]
    if weights is not None and parts["non_trainable"]:
        weights += parts["non_trainable"]
        reasons["weights"] = f"includes {parts['non_trainable']} B of non-trainable variables"
    if parts["gradients"] is not None and records["reasons"].get("gradients"):
        reasons["gradients"] = records["reasons"]["gradients"]
    dynamic = None
    if parts["optimizer_state"] is not None or parts["inputs"] is not None:
        dynamic = (parts["optimizer_state"] or 0) + (parts["inputs"] or 0)
        left_out = [k for k in ("optimizer_state", "inputs") if parts[k] is None]
        reasons["dynamic"] = ("optimizer variables + inputs only: other in-iteration allocations are not measured"
                              + "".join(f"; leaves out {k}: {reasons[k]}" for k in left_out))
    else:
        reasons["dynamic"] = reasons.get("optimizer_state") or "no optimizer or input records"
    for k in ("optimizer_state", "inputs", "non_trainable"):
        reasons.pop(k, None)
    return Memory(weights, parts["gradients"], None, None, dynamic, None, at_peak, reasons)


def _check(records) -> None:
    if not isinstance(records, dict) or records.get("schema") != RECORDS_SCHEMA:
        raise ResultFormatError(f"TensorFlow memory records are not of schema {RECORDS_SCHEMA!r}")
    if not isinstance(records.get("iterations"), list) or not isinstance(records.get("reasons"), dict):
        raise ResultFormatError("TensorFlow memory records need an 'iterations' list and a 'reasons' object")
    for i, it in enumerate(records["iterations"]):
        if not isinstance(it, dict):
            raise ResultFormatError(f"TensorFlow memory records iteration {i} is not an object")
        for _, key in _FIELDS:
            v = it.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ResultFormatError(f"TensorFlow memory records iteration {i}: {key} is not a byte count")
