"""Exact per-step byte counts a hook records itself (MXNet, TensorFlow): validation and maxima.

The MXNet and TensorFlow hooks write raw/memory.json as {"schema", "device_index", "iterations":
[{"step", "<part>_bytes": int | null, ...}], "reasons": {part: why}}: one snapshot per traced
step of the bytes tbd can name exactly (parameters, gradients, optimizer state, inputs). Each
category's figure is its maximum over the traced steps, the paper's "peak of each category".
Pure: dicts in, numbers and reasons out.
"""

from __future__ import annotations

from tbd.core.errors import ResultFormatError


def check_snapshot_records(records: object, schema: str, framework: str, fields: tuple[tuple[str, str], ...]) -> None:
    """Raise ResultFormatError unless `records` is a snapshot record of `schema` with byte counts.

    Args:
        records: the loaded raw/memory.json.
        schema: the schema string it must carry (tbd.core.rundir.*_MEMORY_SCHEMA).
        framework: its name in messages ("MXNet").
        fields: (category, key) pairs; each key's value must be a non-negative int or null.
    """
    if not isinstance(records, dict) or records.get("schema") != schema:
        raise ResultFormatError(f"{framework} memory records are not of schema {schema!r}")
    if not isinstance(records.get("iterations"), list) or not isinstance(records.get("reasons"), dict):
        raise ResultFormatError(f"{framework} memory records need an 'iterations' list and a 'reasons' object")
    for i, it in enumerate(records["iterations"]):
        if not isinstance(it, dict):
            raise ResultFormatError(f"{framework} memory records iteration {i} is not an object")
        for _, key in fields:
            v = it.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise ResultFormatError(f"{framework} memory records iteration {i}: {key} is not a byte count")


def max_over_steps(records: dict, fields: tuple[tuple[str, str], ...], reasons: dict[str, str]) -> dict[str, int | None]:
    """Each category's maximum over the traced steps, in bytes; None where a step lacks it.

    A None gets its reason in `reasons`: the hook's own (records["reasons"][category]), else what
    was missing.
    """
    parts: dict[str, int | None] = {}
    for cat, key in fields:
        values = [it.get(key) for it in records["iterations"]]
        parts[cat] = None if not values or any(v is None for v in values) else int(max(values))
        if parts[cat] is None:
            reasons[cat] = records["reasons"].get(cat) or (
                "no traced iterations were recorded" if not values else f"{key} was not recorded")
    return parts


def dynamic_bytes(parts: dict[str, int | None], reasons: dict[str, str], covers: str, no_parts: str) -> int | None:
    """The dynamic category: optimizer state + inputs (either may be missing), with its reason.

    Args:
        parts: max_over_steps' result (keys "optimizer_state" and "inputs").
        reasons: filled with reasons["dynamic"]; the parts' own reasons are folded into it and removed.
        covers: what the figure holds and leaves out, e.g. "optimizer variables + inputs only: ...".
        no_parts: the reason when neither part was recorded and the optimizer gave none.
    """
    dynamic = None
    if parts["optimizer_state"] is not None or parts["inputs"] is not None:
        dynamic = (parts["optimizer_state"] or 0) + (parts["inputs"] or 0)
        left_out = [k for k in ("optimizer_state", "inputs") if parts[k] is None]
        reasons["dynamic"] = covers + "".join(f"; leaves out {k}: {reasons[k]}" for k in left_out)
    else:
        reasons["dynamic"] = reasons.get("optimizer_state") or no_parts
    for k in ("optimizer_state", "inputs"):
        reasons.pop(k, None)
    return dynamic
