"""Feature maps of an MXNet training step, derived from its hybridized graphs (analytic, not measured).

Feature maps are the forward tensors kept for the backward pass. MXNet builds the backward of a
hybridized block's graph with nnvm's Gradient pass, whose backward nodes name the forward outputs
they read, so the kept set is read off MXNet's own gradient graph, not guessed from layer types:
the block's symbol is bound (simple executor, gradients as the block's parameters request them)
with lazily allocated arrays, so nothing is allocated, and the executor's `debug_str()` lists
every node of the forward + backward graph with its inputs.

Counted: each output of a forward operator that a backward node reads as data, once. Not counted:
- reads of a shape only: the right-hand side of `_identity_with_attr_like_rhs`, `reshape_like`,
  `broadcast_like`, the input of `zeros_like` / `ones_like` (their FIgnoreInputs: no buffer kept);
- views: the outputs of Reshape, Flatten, expand_dims, squeeze, _copy / identity, BlockGrad /
  stop_gradient share their input's buffer (in place), so the tensor they view is counted once;
- graph inputs (variables): parameters are weights, the batch is inputs (dynamic);
- hidden outputs MXNet does not expose to shape inference, except BatchNorm's saved batch mean
  and variance (one [C] vector each, C = its gamma's length, counted): e.g. the oneDNN max
  pooling's index workspace is an operator scratch buffer, not a layer output. They are listed in
  the result's `left_out` and said in the reason.
The fused RNN operator keeps most of what its backward needs (every time step's gates and states)
in operator state, its reserve space, which the graph does not show: each RNN node its backward
reads adds that reserve, sized by tbd.analysis.memory.mxnet_rnn from the node's attributes and its
data input's inferred shape [T, N, I], for the implementation MXNet picks in this process
(`rnn_implementation`: MXNet's own CPU kernels, oneDNN, or cuDNN, whose reserve has no published
formula: null with that reason). oneDNN allocates its workspace itself, so MXNet's storage counter
never sees that part; the native reserve is an NDArray the counter does see.
Bytes = elements x dtype size from the graph's own shape and type inference for the inputs of the
block's call. A step's figure is the sum over its calls of hybridized blocks (each call's kept
tensors live until its backward runs), the model and the hybridized loss blocks alike.

Runs in the runner child (needs mxnet); `kept_entries` and `feature_map_bytes` are pure.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections import defaultdict
from typing import Any

import numpy as np

from tbd.analysis.memory.mxnet_rnn import RnnCall, reserve_bytes
from tbd.core.errors import TbdError
from tbd.profilers.mxnet.shapes import flat_arrays

#: Backward reads of these (op, input position) are shape-only: MXNet keeps no buffer for them.
SHAPE_ONLY_ARGS = {"_identity_with_attr_like_rhs": {1}, "reshape_like": {1}, "broadcast_like": {1},
                   "zeros_like": {0}, "ones_like": {0}, "shape_array": {0}, "size_array": {0}}
#: Ops whose output 0 is their input 0's buffer (in-place identity in MXNet's memory planner).
VIEWS = frozenset({"Reshape", "reshape", "Flatten", "flatten", "expand_dims", "squeeze", "_copy", "identity",
                   "BlockGrad", "stop_gradient", "_identity_with_attr_like_rhs", "reshape_like"})
#: Backward ops of operators that keep what their backward needs in operator state, not graph outputs.
OPAQUE_STATE = {"_backward_RNN": "RNN"}
#: Where each implementation's reserve formula comes from (tbd.analysis.memory.mxnet_rnn gives them).
RESERVE_SOURCES = {
    "native": "MXNet 1.9.1 GetRNNReserveSpaceSize (src/operator/rnn-inl.h), an NDArray in MXNet's storage",
    "onednn": ("oneDNN v2.4.4's RNN training workspace (rnn_utils set_workspace_sizes/set_offsets) per fused "
               "group plus the groups' intermediate outputs; oneDNN allocates the workspace itself, outside "
               "MXNet's storage, so MXNet's storage counter does not see it"),
}
#: Hidden outputs whose size is known from the op's inputs: BatchNorm's saved mean and var are [C].
_BATCHNORM_SAVED = {1, 2}

_NODE = re.compile(r"^Op:([^,]+), Name=(.+)$")
_ARG = re.compile(r"^\targ\[(\d+)\]=(.+)\((\d+)\)(?: version=\d+)?$")


def backward_reads(debug_str: str, forward: set[str]) -> list[tuple[str, int, str, int]]:
    """(consumer op, input position, producer node, output index) of each input of a backward node.

    debug_str: an MXNet 1.x executor's debug_str() (nodes as "Op:<type>, Name=<name>" followed by
    "Inputs:" lines "\\targ[i]=<node>(<output>)[ version=v]"). forward: the forward graph's node names;
    every other op node is backward.
    """
    out, op, name, in_inputs = [], None, None, False
    for line in debug_str.splitlines():
        m = _NODE.match(line)
        if m:
            op, name, in_inputs = m.group(1), m.group(2), False
            continue
        if line == "Inputs:":
            in_inputs = op is not None
            continue
        a = _ARG.match(line) if in_inputs else None
        if a is None:
            in_inputs = in_inputs and line.startswith("\t")
            continue
        if name not in forward:
            out.append((op, int(a.group(1)), a.group(2), int(a.group(3))))
    return out


def kept_entries(nodes: list[dict], reads: list[tuple[str, int, str, int]]) -> set[tuple[str, int]]:
    """The forward outputs (node name, output index) the backward keeps (module docstring's rule).

    nodes: the forward symbol's JSON nodes ({"op", "name", "inputs": [[node, output, version]]}).
    """
    by_name = {n["name"]: n for n in nodes}
    kept = set()
    for op, pos, producer, index in reads:
        if pos in SHAPE_ONLY_ARGS.get(op, ()):
            continue
        node = by_name.get(producer)
        # Through views to the buffer's owner; a variable (parameter, batch) is not a feature map.
        while node is not None and node["op"] in VIEWS and index == 0 and node["inputs"]:
            src = node["inputs"][0]
            node, index = nodes[src[0]], src[1]
        if node is not None and node["op"] != "null":
            kept.add((node["name"], index))
    return kept


def feature_map_bytes(nodes: list[dict], kept: set[tuple[str, int]], shape_of: dict[str, Any],
                      dtype_of: dict[str, Any]) -> dict:
    """Bytes of the kept entries: {"bytes", "by_op", "tensors", "left_out", "reason"}.

    shape_of / dtype_of: by the internals' output names (list_outputs of get_internals(), e.g.
    "conv0_fwd_output", "slice0_output1") and by variable names (arguments and aux states).
    """
    by_name = {n["name"]: n for n in nodes}
    by_op: dict[str, int] = defaultdict(int)
    left_out, unknown = [], []
    for name, index in sorted(kept):
        node = by_name[name]
        keys = ([f"{name}_output"] if index == 0 else []) + [f"{name}_output{index}"]
        key = next((k for k in keys if k in shape_of), None)
        if key is None and node["op"] == "BatchNorm" and index in _BATCHNORM_SAVED:
            key = nodes[node["inputs"][1][0]]["name"]  # gamma: the saved mean / var have its shape and type
        if key is None:
            left_out.append(f"{name}({index}) ({node['op']})")
            continue
        shape, dtype = shape_of.get(key), dtype_of.get(key)
        if not shape or any(d <= 0 for d in shape) or dtype is None:
            unknown.append(f"{key} (shape {shape}, dtype {dtype})")
            continue
        by_op[node["op"]] += int(math.prod(shape)) * int(np.dtype(dtype).itemsize)
    if unknown:
        return {"bytes": None, "by_op": {}, "tensors": 0, "left_out": left_out,
                "reason": f"shape inference left {len(unknown)} kept output(s) unknown, e.g. {'; '.join(unknown[:3])}"}
    return {"bytes": int(sum(by_op.values())), "by_op": dict(sorted(by_op.items())),
            "tensors": len(kept) - len(left_out), "left_out": left_out, "reason": None}


def block_feature_maps(mx: Any, block: Any, data: dict[str, tuple], ctx: Any) -> dict:
    """Feature maps of one call of a hybridized `block` whose inputs were data {name: (shape, dtype, needs_grad)}."""
    from mxnet.ndarray.ndarray import NDArray, _new_alloc_handle

    _, out = block._cached_graph
    nodes = json.loads(out.tojson())["nodes"]
    names = [n["name"] for n in nodes if n["op"] != "null"]
    if len(set(names)) != len(names):
        return _null("the graph has operator nodes with the same name: backward reads cannot be told apart")
    shapes = {k: v[0] for k, v in data.items()}
    types = {k: v[1] for k, v in data.items()}
    params = {p.name: p for p in block.collect_params().values()}
    types.update({k: np.dtype(p.dtype).name for k, p in params.items()})
    arg_shapes, _, aux_shapes = out.infer_shape(**shapes)
    arg_types, _, aux_types = out.infer_type(**{k: v for k, v in types.items() if k in out.list_arguments()})
    if arg_shapes is None or arg_types is None:
        return _null("shape or type inference of the block's graph is incomplete for its inputs")

    def lazy(shape, dtype):  # delay_alloc: an NDArray whose memory is allocated only when first used
        return NDArray(_new_alloc_handle(tuple(shape), ctx, True, dtype))

    args = out.list_arguments()
    req = {n: ("write" if data[n][2] else "null") if n in data else
           (params[n].grad_req if n in params else "null") for n in args}
    grads = {n: lazy(s, t) for n, s, t in zip(args, arg_shapes, arg_types) if req[n] != "null"}
    exe = out.bind(ctx, [lazy(s, t) for s, t in zip(arg_shapes, arg_types)], args_grad=grads, grad_req=req,
                   aux_states=[lazy(s, t) for s, t in zip(aux_shapes, aux_types)])
    reads = backward_reads(exe.debug_str(), set(names))
    internals = out.get_internals()
    _, out_shapes, _ = internals.infer_shape_partial(**shapes)
    _, out_types, _ = internals.infer_type_partial(**{k: v for k, v in types.items()
                                                      if k in internals.list_arguments()})
    outputs = internals.list_outputs()
    shape_of = dict(zip(outputs, out_shapes or [None] * len(outputs)))
    dtype_of = dict(zip(outputs, out_types or [None] * len(outputs)))
    # Outputs with their own names (RNN's "state", "statecell": "<node>_state_output") also go under
    # "<node>_output<index>", the key feature_map_bytes looks up: internals' heads follow list_outputs.
    inner = json.loads(internals.tojson())
    for (node_id, index, *_), key in zip(inner["heads"], outputs):
        alias = f"{inner['nodes'][node_id]['name']}_output{index}"
        shape_of.setdefault(alias, shape_of.get(key))
        dtype_of.setdefault(alias, dtype_of.get(key))
    shape_of.update(zip(args, arg_shapes))
    dtype_of.update(zip(args, arg_types))
    result = feature_map_bytes(nodes, kept_entries(nodes, reads), shape_of, dtype_of)
    if any(r[0] in OPAQUE_STATE for r in reads):
        calls = rnn_calls(nodes, shape_of, dtype_of)
        reserve, why = rnn_reserve(calls, rnn_implementation(mx, ctx, calls))
        if reserve is None:
            return _null(f"{block.name}: {why}")
        result = add_reserve(result, reserve, why)
    return result


def rnn_calls(nodes: list[dict], shape_of: dict[str, Any], dtype_of: dict[str, Any]) -> list[RnnCall | str]:
    """Each RNN node of the forward graph as an RnnCall (attributes, data input [T, N, I] from shape inference),
    or a string saying why it cannot be sized."""
    out: list[RnnCall | str] = []
    for node in (n for n in nodes if n["op"] == "RNN"):
        attrs, (src, index, *_) = node.get("attrs", {}), node["inputs"][0]
        producer = nodes[src]
        keys = [producer["name"]] if producer["op"] == "null" else (
            ([f"{producer['name']}_output"] if index == 0 else []) + [f"{producer['name']}_output{index}"])
        key = next((k for k in keys if k in shape_of), keys[0])
        shape, dtype = shape_of.get(key), dtype_of.get(key)
        if not shape or len(shape) != 3 or any(d <= 0 for d in shape) or dtype is None:
            out.append(f"{node['name']}: its data input's shape is unknown ({key}: {shape})")
            continue
        projection = attrs.get("projection_size", "None")
        try:
            out.append(RnnCall(mode=attrs["mode"], num_layers=int(attrs.get("num_layers", "1")),
                               state_size=int(attrs["state_size"]),
                               bidirectional=attrs.get("bidirectional", "False") in ("True", "1", "true"),
                               seq_len=int(shape[0]), batch=int(shape[1]), input_size=int(shape[2]),
                               dtype_bytes=int(np.dtype(dtype).itemsize),
                               projection_size=0 if projection in ("None", "", None) else int(projection)))
        except (KeyError, ValueError) as exc:
            out.append(f"{node['name']}: attribute {exc} missing or unreadable")
    return out


def rnn_implementation(mx: Any, ctx: Any, calls: list) -> str:
    """Which RNN kernels MXNet 1.9 runs here: "cudnn" on a GPU; on the CPU "onednn" when MXNet is built with
    oneDNN, MXNET_USE_MKLDNN_RNN is not 0 and every call is float32 without projection (SupportMKLDNNRnn,
    src/operator/nn/mkldnn/mkldnn_rnn-inl.h), else "native"."""
    if getattr(ctx, "device_type", "cpu") == "gpu":
        return "cudnn"
    try:
        wanted = int(os.environ.get("MXNET_USE_MKLDNN_RNN", "1")) != 0
    except ValueError:
        wanted = True
    simple = all(isinstance(c, RnnCall) and c.dtype_bytes == 4 and not c.projection_size for c in calls)
    return "onednn" if wanted and simple and mx.runtime.Features().is_enabled("MKLDNN") else "native"


def rnn_reserve(calls: list[RnnCall | str], implementation: str) -> tuple[int | None, str]:
    """(Σ reserve bytes of the calls, what it is) or (None, why not)."""
    unknown = [c for c in calls if isinstance(c, str)]
    if unknown:
        return None, "; ".join(unknown)
    if implementation == "cudnn":
        return None, ("its RNN operator(s) run with cuDNN, which sizes their reserve space itself "
                      "(cudnnGetRNNTrainingReserveSize) with no published formula, and the graph does not show it")
    try:
        total = sum(reserve_bytes(c, implementation) or 0 for c in calls)
    except TbdError as exc:
        return None, f"the RNN reserve space cannot be sized: {exc}"
    return total, implementation


def add_reserve(result: dict, reserve: int, implementation: str) -> dict:
    """A feature_map_bytes result with the RNN reserve space added (by_op["RNN reserve"], "reserve")."""
    if result["bytes"] is None:
        return result
    by_op = {**result["by_op"], "RNN reserve": reserve}
    return {**result, "bytes": result["bytes"] + reserve, "by_op": dict(sorted(by_op.items())),
            "reserve": {"bytes": reserve, "implementation": implementation}}


class GraphCalls:
    """The calls of each hybridized block per traced step (input shapes, dtypes, whether they get a gradient),
    logged by forward hooks; `feature_maps()` turns them into bytes once the window is over."""

    def __init__(self, blocks: list, inputs: Any):
        self.steps: dict[int, list[tuple[int, tuple]]] = {}
        self.imperative = 0  # blocks with their own parameters outside every hybridized graph
        self._blocks: list = []
        self._handles: list = []
        self._step: int | None = None
        self._inputs = inputs
        self._input_keys: set = set()
        for block in blocks:
            if block is not None:
                self._attach(block)

    def _attach(self, block: Any) -> None:
        stack = [block]
        while stack:
            b = stack.pop()
            if getattr(b, "_active", False):
                self._handles.append(b.register_forward_hook(self._called(len(self._blocks))))
                self._blocks.append(b)
                continue
            self.imperative += int(bool(getattr(b, "_reg_params", None)))
            stack.extend(getattr(b, "_children", {}).values())

    @contextlib.contextmanager
    def step(self, number: int):
        """Log the hybridized calls made inside this block as step `number`."""
        self._step = number
        self.steps[number] = []
        self._input_keys = {_key(a) for a in (self._inputs() if self._inputs else [])}
        try:
            yield
        finally:
            self._step = None

    def close(self) -> None:
        for h in self._handles:
            h.detach()
        self._handles = []

    def _called(self, index: int):
        def hook(block: Any, inputs: Any, output: Any) -> None:
            if self._step is None:
                return
            arrays = flat_arrays(list(inputs))
            # The input pool's arrays carry no autograd history: no gradient flows into them.
            sig = tuple((tuple(a.shape), np.dtype(a.dtype).name,
                         not (_key(a) in self._input_keys and a.grad is None)) for a in arrays)
            self.steps[self._step].append((index, sig))
        return hook

    def feature_maps(self, mx: Any, ctx: Any) -> tuple[dict[int, int | None], str]:
        """({step: bytes or None}, reason): the reason says what the figure leaves out, or why it is null."""
        if not self._blocks:
            return {s: None for s in self.steps}, "no hybridized block: MXNet builds no graph to read the kept tensors from"
        done: dict[tuple, dict] = {}
        per_step: dict[int, int | None] = {}
        reserve: dict[int, int] = {}
        for number, calls in self.steps.items():
            total: int | None = 0
            for index, sig in calls:
                if (index, sig) not in done:
                    done[(index, sig)] = self._one(mx, index, sig, ctx)
                got = done[(index, sig)]["bytes"]
                total = None if got is None or total is None else total + got
                reserve[number] = reserve.get(number, 0) + done[(index, sig)].get("reserve", {}).get("bytes", 0)
            per_step[number] = total if calls else None
        return per_step, _reason(list(done.values()), self.imperative, any(not c for c in self.steps.values()),
                                 _reserve_note(per_step, reserve, done.values()))

    def _one(self, mx: Any, index: int, sig: tuple, ctx: Any) -> dict:
        block = self._blocks[index]
        syms = getattr(block, "_cached_graph", ())[0] if getattr(block, "_cached_graph", ()) else None
        if syms is None or len(syms) != len(sig):
            return _null(f"{block.name}: its cached graph's inputs do not match the call's arrays")
        try:
            return block_feature_maps(mx, block, {s.name: v for s, v in zip(syms, sig)}, ctx)
        except Exception as exc:  # noqa: BLE001 - MXNet raises MXNetError for any graph it cannot bind
            return _null(f"{block.name}: binding its graph failed ({str(exc).splitlines()[0][:200]})")


def _reserve_note(per_step: dict[int, int | None], reserve: dict[int, int], results: Any) -> str | None:
    """What the RNN reserve space adds, in the step with the most feature maps; None without one."""
    kinds = sorted({r["reserve"]["implementation"] for r in results if r.get("reserve")})
    sized = {k: v for k, v in per_step.items() if v is not None}
    if not kinds or not sized:
        return None
    step = max(sized, key=lambda k: sized[k])
    return (f"includes the fused RNN operators' reserve space, analytic ({reserve.get(step, 0)} B of "
            f"{sized[step]} B in step {step}): " + "; ".join(RESERVE_SOURCES[k] for k in kinds))


def _reason(results: list[dict], imperative: int, empty_step: bool, reserve_note: str | None = None) -> str:
    failed = [r["reason"] for r in results if r["bytes"] is None]
    if failed:
        return "; ".join(dict.fromkeys(failed))
    if empty_step:
        return "a traced step made no call of a hybridized block"
    parts = ["analytic: the forward outputs MXNet's gradient graph reads (nnvm Gradient pass, the hybridized "
             "blocks' graphs), sized by its shape inference, views and shape-only reads counted once or not at all"]
    if reserve_note:
        parts.append(reserve_note)
    left = sorted({x for r in results for x in r.get("left_out", [])})
    if left:
        parts.append(f"leaves out {len(left)} hidden operator output(s) shape inference does not size (operator "
                     f"scratch, e.g. oneDNN pooling workspaces): {', '.join(left[:4])}{' ...' if len(left) > 4 else ''}")
    if imperative:
        parts.append(f"leaves out {imperative} block(s) with parameters that run imperatively (not in a graph)")
    return "; ".join(parts)


def _key(a: Any) -> Any:
    return getattr(getattr(a, "handle", None), "value", None) or id(a)


def _null(reason: str) -> dict:
    return {"bytes": None, "by_op": {}, "tensors": 0, "left_out": [], "reason": reason}
