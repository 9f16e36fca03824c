"""Feature maps of a TensorFlow training step, derived from its traced graph (analytic, not measured).

Feature maps are the forward tensors kept for the backward pass. A tf.function that takes a
GradientTape's gradient holds forward and backward in one graph, so the kept set is read off the
graph itself, not guessed from layer types:

- backward ops: the ops TF's tape created (name scope "gradient_tape/") and every op that reads
  their results (the gradient sums TF places outside that scope, the optimizer update);
- forward ops: all the others (the model, the loss, BatchNorm's moving-statistics updates);
- kept: each forward tensor that a backward op reads as data, counted once. Not counted:
  * reads of a tensor's shape only (Shape, ShapeN, Size, Rank, ZerosLike, OnesLike,
    BroadcastGradientArgs): TF's gradients call them for sizes, no buffer is held for them;
  * views (Identity, Reshape, Squeeze, ExpandDims, StopGradient, Snapshot, EnsureShape): they
    share their input's buffer, so the tensor they view is counted, once (a Flatten before a
    Dense is the activation it flattens);
  * graph inputs (Placeholder: the batch, counted as inputs under dynamic), constants and
    variable reads (ReadVariableOp: the weights);
  * tensors computed from parameters and constants alone, not from the batch: they are not
    feature maps (e.g. an L2 weight decay's wd * w, added to the gradient after the tape).
A step that differentiates a gradient (WGAN-GP's gradient penalty: a tape inside a tape, ops under
"gradient_tape/gradient_tape/") has its inner gradient classed as backward, so the inner
gradient's own tensors that the outer backward reads are not counted; `second_order` says so.
Bytes = elements x dtype size of each kept tensor's static shape in the traced graph. A kept tensor
whose shape is not fully known, or whose dtype has no fixed size (the TensorList accumulators of a
while loop keep an RNN's per-step tensors), makes the figure null with that reason: a partial sum
would read as the whole.

This is what the traced graph asks TF to keep; grappler may fuse ops at run time (e.g. oneDNN's
fused BatchNorm) and keep less. Runs in the runner child (needs tensorflow); pure over the graph.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

#: Ops that read only their input's shape: the buffer need not be kept for them.
SHAPE_ONLY = frozenset({"Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike", "BroadcastGradientArgs",
                        "BroadcastArgs"})
#: Ops whose output is their input's buffer (first input): the viewed tensor is what is kept.
VIEWS = frozenset({"Identity", "Reshape", "Squeeze", "ExpandDims", "StopGradient", "Snapshot", "EnsureShape",
                   "PreventGradient"})
#: Producers that are not feature maps: the batch (inputs), constants, parameters (weights).
NOT_FEATURE_MAPS = frozenset({"Placeholder", "Const", "ReadVariableOp", "VarHandleOp", "VariableV2"})
GRADIENT_SCOPE = "gradient_tape/"


def step_function(step: Any) -> Any | None:
    """The step's tf.function: Workload.step itself or its `.train_step` (models/tensorflow/*.py)."""
    fn = step if hasattr(step, "get_concrete_function") else getattr(step, "train_step", None)
    return fn if fn is not None and hasattr(fn, "get_concrete_function") else None


def step_feature_maps(step: Any) -> dict:
    """Feature maps of every graph the step's tf.function traced: {"bytes", "by_op", "tensors", "graphs", "reason"}.

    bytes: the largest over the traced graphs (one per input signature; every batch of a pool has
    the same shape, so usually one), null with `reason` when a graph cannot give it. by_op: bytes
    per producing op type of that graph; tensors: how many kept tensors it has; second_order: the
    graph differentiates a gradient (module docstring).
    """
    fn = step_function(step)
    if fn is None:
        return _null("Workload.step is not a tf.function and has no .train_step tf.function: no graph to "
                     "read the kept forward tensors from")
    try:
        lister = getattr(fn, "_list_all_concrete_functions", None)  # private in 2.21, guarded
        graphs = [c.graph for c in (list(lister()) if lister is not None else [])] or [fn.get_concrete_function().graph]
    except Exception as exc:  # noqa: BLE001 - a tf.function with arguments has no argument-free concrete function
        return _null(f"could not get the step's concrete functions ({exc})")
    best: dict | None = None
    for g in graphs:
        got = graph_feature_maps(g.get_operations())
        if got["bytes"] is None:
            return {**got, "graphs": len(graphs)}
        if best is None or got["bytes"] > best["bytes"]:
            best = got
    return {**best, "graphs": len(graphs)}


def graph_feature_maps(ops: list) -> dict:
    """Feature maps of one graph's operations (module docstring gives the rule)."""
    backward = {id(op) for op in ops if op.name.startswith(GRADIENT_SCOPE)}
    if not backward:
        return _null("the step's graph has no GradientTape ops (no 'gradient_tape/' scope): no backward to keep "
                     "tensors for")
    stack = [op for op in ops if id(op) in backward]
    while stack:  # everything downstream of a gradient is backward too (gradient sums, the update)
        op = stack.pop()
        for t in op.outputs:
            for c in t.consumers():
                if id(c) not in backward:
                    backward.add(id(c))
                    stack.append(c)
    batch = _from_the_batch(ops, backward)
    kept: dict[str, Any] = {}
    for op in ops:
        if id(op) not in backward or op.type in SHAPE_ONLY:
            continue
        for t in op.inputs:
            if id(t.op) in backward:
                continue
            root = _viewed(t)
            if root.op.type not in NOT_FEATURE_MAPS and id(root.op) in batch:
                kept.setdefault(root.name, root)
    by_op: dict[str, int] = defaultdict(int)
    unknown = []
    for name, t in kept.items():
        size = _nbytes(t)
        if size is None:
            unknown.append(f"{name} ({t.dtype.name}, shape {t.shape})")
        else:
            by_op[t.op.type] += size
    if unknown:
        return _null(f"{len(unknown)} kept forward tensor(s) have no static size in the traced graph, e.g. "
                     f"{'; '.join(unknown[:3])}")
    return {"bytes": int(sum(by_op.values())), "by_op": dict(sorted(by_op.items())), "tensors": len(kept),
            "second_order": any(op.name.startswith(GRADIENT_SCOPE * 2) for op in ops), "reason": None}


def _from_the_batch(ops: list, backward: set) -> set:
    """ids of the forward ops that read the batch, directly or through other forward ops."""
    stack = [op for op in ops if op.type == "Placeholder" and op.outputs and op.outputs[0].dtype.name != "resource"]
    seen = {id(op) for op in stack}
    while stack:
        op = stack.pop()
        for t in op.outputs:
            for c in t.consumers():
                if id(c) not in seen and id(c) not in backward:
                    seen.add(id(c))
                    stack.append(c)
    return seen


def _viewed(t: Any) -> Any:
    """The tensor whose buffer `t` is: through chains of view ops to the first non-view producer."""
    while t.op.type in VIEWS and t.op.inputs:
        t = t.op.inputs[0]
    return t


def _nbytes(t: Any) -> int | None:
    """Bytes of a tensor's static shape; None when a dimension or the element size is unknown."""
    if not t.shape.is_fully_defined() or t.dtype.name in ("variant", "resource", "string"):
        return None
    return int(math.prod(t.shape.as_list())) * int(t.dtype.size)


def _null(reason: str) -> dict:
    return {"bytes": None, "by_op": {}, "tensors": 0, "graphs": 0, "second_order": False, "reason": reason}
