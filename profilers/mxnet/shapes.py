"""Operand shapes of MXNet's operators, logged per traced iteration.

MXNet 1.9's profiler dump names operators but records no operand shapes, so the hook logs them:
Gluon forward hooks on Conv/Dense blocks and gluon.rnn layers, and for a hybridized block (one
cached graph, whose children's hooks never fire) the graph's own shape inference, which gives every
operator of the graph (the hooks only Conv/Dense/RNN layers run imperatively); and after each step
the trainer's parameter shapes, for its fused optimizer operators. The parent's reader
(profilers/mxnet/trace.py) pairs the k-th logged call of a step with the k-th operator event of
that kind, and backward operators with the calls in reverse order.
"""

from __future__ import annotations

import ast
import contextlib
import json
from typing import Any, Callable

import numpy as np


def flat_arrays(obj: Any) -> list:
    """NDArrays inside an updater state (an NDArray, None, or nested tuples/lists of them)."""
    if obj is None:
        return []
    if isinstance(obj, (tuple, list)):
        return [a for o in obj for a in flat_arrays(o)]
    return [obj] if hasattr(obj, "shape") and hasattr(obj, "dtype") else []


class ShapeLog:
    """Operand shapes of each traced step's operators (Gluon forward hooks, cached-graph shape inference)
    and, after the step, the trainer's parameter shapes."""

    def __init__(self, blocks: list, inputs: Any, trainer: Any = None):
        self.steps: dict[str, list] = {}
        self._trainers = [] if trainer is None else list(trainer) if isinstance(trainer, (list, tuple)) else [trainer]
        self._step: int | None = None
        self._handles: list = []
        self._inputs = inputs
        self._input_keys: set = set()
        for block in blocks:
            if block is not None:
                self._attach(block)

    def _attach(self, block: Any) -> None:
        # Lazy: MXNet reads its environment variables when it loads (the hook sets them in prepare()),
        # and this module imports where mxnet is not installed.
        from mxnet.gluon import nn, rnn

        kinds = [(getattr(nn, "Dense"), self._dense)]
        conv = getattr(getattr(nn, "conv_layers", None), "_Conv", None)
        if conv is not None:
            kinds.append((conv, self._conv))
        rnn_layer = getattr(getattr(rnn, "rnn_layer", None), "_RNNLayer", None)
        if rnn_layer is not None:
            kinds.append((rnn_layer, self._rnn))
        stack = [block]
        while stack:
            b = stack.pop()
            if getattr(b, "_active", False):
                # A hybridized block runs as one cached graph: its children's hooks never fire, so
                # its operators' shapes come from the graph's own shape inference.
                self._handles.append(b.register_forward_hook(self._hybrid))
                continue
            for cls, fn in kinds:
                if isinstance(b, cls):
                    self._handles.append(b.register_forward_hook(fn))
            stack.extend(b._children.values())

    @contextlib.contextmanager
    def step(self, number: int):
        """Log the calls made inside this block as ProfilerStep `number`."""
        self._step = number
        self.steps[str(number)] = []
        self._input_keys = {getattr(a.handle, "value", id(a)) for a in (self._inputs() if self._inputs else [])}
        try:
            yield
        finally:
            self._step = None
        self.steps[str(number)] += [_update_call(t) for t in self._trainers]

    def close(self) -> None:
        for h in self._handles:
            h.detach()
        self._handles = []

    def _needs_grad(self, x: Any) -> bool:
        # The input pool's arrays carry no autograd history: their gradient is never computed.
        return not (getattr(x.handle, "value", id(x)) in self._input_keys and x.grad is None)

    def _conv(self, block: Any, inputs: Any, output: Any) -> None:
        if self._step is None or not hasattr(inputs[0], "shape"):
            return
        kw = block._kwargs
        x = inputs[0]
        self.steps[str(self._step)].append({
            "op": "Convolution", "input": list(x.shape), "weight": list(block.weight.shape),
            "output": list(output.shape), "stride": list(kw["stride"]), "pad": list(kw["pad"]),
            "dilate": list(kw["dilate"]), "groups": int(kw["num_group"]), "bias": not kw["no_bias"],
            "input_grad": self._needs_grad(x), "dtype": _dtype_name(x)})

    def _dense(self, block: Any, inputs: Any, output: Any) -> None:
        if self._step is None or not hasattr(inputs[0], "shape"):
            return
        x = inputs[0]
        self.steps[str(self._step)].append({
            "op": "FullyConnected", "input": list(x.shape), "weight": list(block.weight.shape),
            "output": list(output.shape), "input_grad": self._needs_grad(x),
            "dtype": str(x.dtype.__name__ if hasattr(x.dtype, "__name__") else x.dtype)})

    def _rnn(self, block: Any, inputs: Any, output: Any) -> None:
        # A gluon.rnn layer run imperatively: one fused RNN operator over the whole sequence.
        if self._step is None or not hasattr(inputs[0], "shape"):
            return
        x = inputs[0]
        seq, batch = (x.shape[1], x.shape[0]) if block._layout == "NTC" else (x.shape[0], x.shape[1])
        self.steps[str(self._step)].append(_rnn_call(
            block._mode, seq, batch, x.shape[2], block._hidden_size, block._num_layers, block._dir == 2,
            block._projection_size, any(p.grad_req != "null" for p in block.collect_params().values()),
            self._needs_grad(x), _dtype_name(x)))

    def _hybrid(self, block: Any, inputs: Any, output: Any) -> None:
        if self._step is None or getattr(block, "_cached_graph", None) in (None, ()):
            return
        syms, out = block._cached_graph
        arrays = flat_arrays(list(inputs))
        if len(arrays) != len(syms):
            return
        data = {sym.name: a for sym, a in zip(syms, arrays)}
        internals = out.get_internals()
        _, out_shapes, _ = internals.infer_shape_partial(**{k: a.shape for k, a in data.items()})
        shape_of = dict(zip(internals.list_outputs(), out_shapes))
        nodes = json.loads(out.tojson())["nodes"]
        dtype = _graph_dtype(block, arrays)

        def entry(e: list) -> list | None:
            node = nodes[e[0]]
            name = node["name"]
            names = [name] if node["op"] == "null" else [f"{name}_output", f"{name}_output{e[1]}"]
            found = next((shape_of[n] for n in names if shape_of.get(n)), None)
            return list(found) if found else None

        grad_req = {p.name: p.grad_req for p in block.collect_params().values()}
        for i, node in enumerate(nodes):
            if node["op"] == "null":
                continue
            if node["op"] not in ("Convolution", "FullyConnected", "RNN"):
                # Every other operator: its operand shapes and attributes as the graph has them
                # (the reader maps the ones with a formula: BatchNorm, Pooling, elementwise, ...).
                self.steps[str(self._step)].append({
                    "op": node["op"], "inputs": [entry(e) for e in node["inputs"]], "output": entry([i, 0, 0]),
                    "attrs": dict(node.get("attrs") or {}), "dtype": dtype})
                continue
            call = self._layer_call(nodes, i, entry, data, grad_req, dtype)
            if call is not None:
                self.steps[str(self._step)].append(call)

    def _layer_call(self, nodes: list, i: int, entry: Callable[[list], list | None], data: dict, grad_req: dict,
                    dtype: str) -> dict | None:
        """Cached-graph node i (Convolution, FullyConnected or RNN) logged as its layer's hook logs it;
        None when shape inference left a shape unknown."""
        node = nodes[i]
        attrs = {k: ast.literal_eval(v) if v[:1] in "(0123456789-" else v
                 for k, v in (node.get("attrs") or {}).items()}
        src = nodes[node["inputs"][0][0]]
        x = data.get(src["name"]) if src["op"] == "null" else None
        if node["op"] == "RNN":
            # MXNet's RNN operator reads data as [T, N, C] (gluon swaps NTC input before it);
            # its parameters arrive as one flat vector, so the sizes come from the attributes.
            shape = entry(node["inputs"][0])
            if shape is None or len(shape) != 3:
                return None
            proj = attrs.get("projection_size", "None")
            weight_grad = any(grad_req.get(nodes[j]["name"], "null") != "null"
                              for j in _ancestors(nodes, node["inputs"][1][0]) if nodes[j]["op"] == "null")
            return _rnn_call(
                attrs["mode"], shape[0], shape[1], shape[2], attrs["state_size"], attrs.get("num_layers", 1),
                str(attrs.get("bidirectional", "False")) == "True", None if proj == "None" else proj,
                weight_grad, x is None or self._needs_grad(x), dtype)
        call = {"op": node["op"], "input": entry(node["inputs"][0]), "weight": entry(node["inputs"][1]),
                "output": entry([i, 0, 0]), "input_grad": x is None or self._needs_grad(x), "dtype": dtype}
        if None in (call["input"], call["weight"], call["output"]):
            return None
        if node["op"] == "Convolution":
            nsp = len(attrs["kernel"])
            call.update(stride=list(attrs.get("stride") or (1,) * nsp), pad=list(attrs.get("pad") or (0,) * nsp),
                        dilate=list(attrs.get("dilate") or (1,) * nsp), groups=int(attrs.get("num_group", 1)),
                        bias=str(attrs.get("no_bias", "False")) != "True")
        return call


def _graph_dtype(block: Any, arrays: list) -> str:
    """The type a cached graph computes in: its parameters' (the graph's first input may be token
    ids), or for a block without parameters (a loss) its first floating-point input's."""
    return next((np.dtype(p.dtype).name for p in block.collect_params().values()
                 if np.issubdtype(np.dtype(p.dtype), np.floating)), "") or next(
        (np.dtype(a.dtype).name for a in arrays if np.issubdtype(np.dtype(a.dtype), np.floating)), "")


def _update_call(trainer: Any) -> dict:
    """The trainer's update as the reader pairs it with the optimizer operators of a step.

    gluon.Trainer updates its parameters that get gradients, in order, through the optimizer's
    fused operators; an aggregating optimizer (SGD: MXNET_OPTIMIZER_AGGREGATION_SIZE, 4 by
    default) updates `aggregate_num` consecutive parameters per multi_* call.
    """
    opt = trainer._optimizer
    params = [p for p in trainer._params if p.grad_req != "null"]
    return {"op": "_optimizer_update", "optimizer": type(opt).__name__.lower(),
            "aggregate": int(getattr(opt, "aggregate_num", 0) or 0),
            "params": [list(p.shape) for p in params],
            "dtype": np.dtype(params[0].dtype).name if params else ""}


def _rnn_call(mode: str, seq: int, batch: int, input_size: int, hidden: int, layers: int, bidirectional: bool,
              projection: Any, weight_grad: bool, input_grad: bool, dtype: str) -> dict:
    """One logged RNN call: sizes in elements; projection 0 when the layer has none."""
    return {"op": "RNN", "mode": str(mode), "seq_len": int(seq), "batch": int(batch), "input_size": int(input_size),
            "state_size": int(hidden), "num_layers": int(layers), "bidirectional": bool(bidirectional),
            "projection_size": int(projection or 0), "weight_grad": bool(weight_grad),
            "input_grad": bool(input_grad), "dtype": dtype}


def _ancestors(nodes: list, start: int) -> set:
    """Indices of node `start` and every node it reads from, in a symbol's JSON node list."""
    seen, stack = set(), [start]
    while stack:
        j = stack.pop()
        if j not in seen:
            seen.add(j)
            stack.extend(e[0] for e in nodes[j]["inputs"])
    return seen


def _dtype_name(arr: Any) -> str:
    return np.dtype(arr.dtype).name
