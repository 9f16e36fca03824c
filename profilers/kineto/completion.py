"""Shapes one op record of a Kineto trace leaves out, recovered from other records of the same call.

Traces written before "Concrete Inputs" (PyTorch < 2.1, pytorch#100593) record an int[] argument
as [] without its value. Two kinds of convolution record then lack what their FLOP and byte counts
need, although the trace holds it elsewhere:

- The per-gradient backward ops of PyTorch 1.8-1.10, `aten::cudnn_convolution_backward_input(
  self_size, grad_output, weight, ...)` and `..._backward_weight(weight_size, grad_output, self,
  ...)` (cudnn, miopen, mkldnn; regular and transposed): the size argument is the shape of a tensor
  that their parent, `aten::cudnn_convolution_backward(self, grad_output, weight, ...)`, records.
  It is filled in as if recorded: it is the same number.
- A forward convolution (aten::convolution and the ops it wraps): stride, padding and dilation are
  unrecorded, so its output size is unknown. The autograd node made for it ("CudnnConvolutionBackward",
  "ConvolutionBackward0", ...) records the same "Sequence number" (PyTorch 1.9 on) and the shape of
  the gradient it receives, which is the output's shape: it becomes the call's `output_dims`.
  Sequence numbers count per forward thread, so a number whose forward ops ran on more than one
  thread is ambiguous and left alone.

Pure: the trace's columns and op tree in; an extended signature table and per-op codes out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec
import numpy as np

from tbd.profilers.kineto.columns import KinetoTrace, Signature
from tbd.profilers.kineto.tree import OpTree

_PER_GRADIENT = re.compile(r"aten::(\w+?_convolution(?:_transpose)?_backward)_(input|weight)")
_FORWARD_CONV = re.compile(r"aten::(?!.*backward)\w*conv\w*")
_CONV_NODE = re.compile(r"\w*Conv\w*Backward\d*")


def uses_sequence(name: str) -> bool:
    """Whether an op named `name` needs its "Sequence number" here: a forward convolution or the
    autograd node of one (the decoder reads the number for these ops only)."""
    return bool(_FORWARD_CONV.fullmatch(name) or _CONV_NODE.fullmatch(name))


@dataclass(frozen=True)
class Completion:
    signatures: tuple[Signature, ...]  # the trace's, then the completed ones
    signature: np.ndarray  # int32 per tree op: its (possibly completed) signature code
    sizes_filled: int  # per-gradient ops given their size argument
    outputs_found: int  # forward convolution calls given their output's shape


def complete_shapes(trace: KinetoTrace, tree: OpTree) -> Completion:
    """Completed signatures for the ops of `tree` (module docstring); unchanged codes elsewhere."""
    table = _Table(trace.signatures)
    code = tree.signature.copy()
    names = [str(n) for n in trace.names]
    sizes = _fill_sizes(trace, tree, names, table, code)
    outputs = _forward_outputs(trace, tree, names, table, code)
    return Completion(table.signatures, code, sizes, outputs)


class _Table:
    """The signature table, grown by completed signatures (each distinct one once)."""

    def __init__(self, signatures: tuple[Signature, ...]):
        self.signatures = signatures
        self._added: dict[Signature, int] = {}
        self._new: list[Signature] = []

    def code(self, s: Signature) -> int:
        if s not in self._added:
            self._added[s] = len(self.signatures) + len(self._new)
            self._new.append(s)
        return self._added[s]

    def finish(self) -> None:
        self.signatures = self.signatures + tuple(self._new)
        self._new = []


def _of_names(tree: OpTree, names: list[str], pattern: re.Pattern) -> np.ndarray:
    """Indices of the ops whose name matches `pattern` in full."""
    hits = np.array([i for i, n in enumerate(names) if pattern.fullmatch(n)], dtype=np.int64)
    return np.flatnonzero(np.isin(tree.name, hits)) if hits.size else np.zeros(0, dtype=np.int64)


def _decoded(text: bytes):
    try:
        return msgspec.json.decode(text) if text else []
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None


def _is_shape(dims) -> bool:
    return isinstance(dims, list) and len(dims) >= 3 and all(type(d) is int and d >= 0 for d in dims)


def _fill_sizes(trace: KinetoTrace, tree: OpTree, names: list[str], table: _Table, code: np.ndarray) -> int:
    filled = 0
    for i in _of_names(tree, names, _PER_GRADIENT).tolist():
        parent = int(tree.parent[i])
        if parent < 0:
            continue
        found = _PER_GRADIENT.fullmatch(names[tree.name[i]])
        if names[tree.name[parent]] != "aten::" + found.group(1):
            continue
        if found.group(2) == "input" and "_transpose" in found.group(1):
            continue  # transposed backward_input has no size argument: (grad_output, weight, ...)
        s, p = trace.signatures[code[i]], trace.signatures[tree.signature[parent]]
        concrete, dims, parent_dims = _decoded(s.concrete_inputs), _decoded(s.input_dims), _decoded(p.input_dims)
        if concrete is None or dims is None or not isinstance(parent_dims, list) or len(parent_dims) < 3:
            continue
        if concrete and concrete[0] not in ("", None):
            continue  # recorded: nothing to recover
        size = parent_dims[0] if found.group(2) == "input" else parent_dims[2]  # self, or weight
        if not _is_shape(size):
            continue
        values = [""] * max(len(dims), 1)
        values[:len(concrete)] = [v if isinstance(v, str) else "" for v in concrete[:len(values)]]
        values[0] = str(size)
        code[i] = table.code(Signature(s.name, s.input_dims, s.input_types, msgspec.json.encode(values),
                                       s.output_dims))
        filled += 1
    table.finish()
    return filled


def _forward_outputs(trace: KinetoTrace, tree: OpTree, names: list[str], table: _Table, code: np.ndarray) -> int:
    if tree.sequence is None:
        return 0
    outputs: dict[int, bytes | None] = {}
    for i in _of_names(tree, names, _CONV_NODE).tolist():
        seq = int(tree.sequence[i])
        dims = _decoded(table.signatures[code[i]].input_dims)
        if seq < 0 or not isinstance(dims, list) or not dims or not _is_shape(dims[0]):
            continue
        text = msgspec.json.encode([dims[0]])
        outputs[seq] = text if outputs.get(seq, text) == text else None  # two nodes disagree: unknown
    forward = _of_names(tree, names, _FORWARD_CONV)
    forward = forward[np.isin(tree.sequence[forward], list(outputs))] if outputs else forward[:0]
    threads: dict[int, set] = {}
    for i in forward.tolist():
        threads.setdefault(int(tree.sequence[i]), set()).add(int(tree.thread[i]))
    found = set()
    for i in forward.tolist():
        seq = int(tree.sequence[i])
        if outputs[seq] is None or len(threads[seq]) > 1:
            continue
        s = table.signatures[code[i]]
        code[i] = table.code(Signature(s.name, s.input_dims, s.input_types, s.concrete_inputs, outputs[seq]))
        found.add(seq)
    table.finish()
    return len(found)  # convolution calls: the ops of one call (conv2d, convolution, ...) share its number
