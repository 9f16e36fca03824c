"""The Python call stack above an op, from a trace's python_function frames (with_stack=True).

torch.profiler(with_stack=True) writes each Python frame as a "python_function" span on the
thread that ran it (PyTorch 1.11 on), nested by time like the cpu_ops: the frames open at an op's
start are its Python stack. They form a tree exactly as the ops do (`kineto.tree.op_tree`), so the
innermost open frame of many ops at once is one `enclosing_ops` query; each distinct innermost
frame is then walked up once. Without frames every stack is "".

A stack starts at the user's frame: the framework's own frames inside the op (`<built-in function
linear>`, `torch/nn/modules/linear.py(124): forward`, `torch/_ops.py: __call__`, the `nn.Module: Linear_24`
markers) are dropped from its inner end, and nn.Module's call plumbing (`torch/nn/modules/module.py:
_call_impl`, `_wrapped_call_impl`) wherever it is, before the MAX_FRAMES are counted. A stack made of
nothing else keeps its frames (they are all there is).
"""

from __future__ import annotations

import numpy as np

from tbd.profilers.kineto.columns import KinetoTrace
from tbd.profilers.kineto.tree import OpTree, enclosing_ops, op_tree

#: Frames kept per stack, innermost first: the user's code is usually within a few frames of the op.
MAX_FRAMES = 6
SEPARATOR = " < "  # "innermost < caller < its caller"


def python_stacks(trace: KinetoTrace, ops: OpTree, op: np.ndarray) -> np.ndarray:
    """Per row, the Python frames open at the start of op index `op` (-1: none), innermost first.

    From the python_function frames when the trace has them, else from the ops' own "Call stack"
    (PyTorch 1.8-1.10's with_stack=True: "file(line): function" entries joined by ";", innermost first).
    """
    out = np.full(len(op), "", dtype=object)
    frames = trace.python
    has = op >= 0
    if not has.any():
        return out
    if len(frames.start_ns) == 0:
        return _call_stacks(trace, ops, op) if ops.stack is not None and len(trace.stack_texts) > 1 else out
    tree = op_tree(frames)
    inner = np.full(len(op), -1, dtype=np.int64)
    inner[has] = enclosing_ops(tree, ops.thread[op[has]], ops.start_ns[op[has]])
    texts = {f: _stack_text(trace, tree, f) for f in np.unique(inner[inner >= 0]).tolist()}
    found = np.flatnonzero(inner >= 0)
    out[found] = [texts[f] for f in inner[found].tolist()]
    return out


#: Frames walked up from an op before the framework's are dropped: deeper stacks end with "…".
_MAX_WALK = 64
#: The framework's own frames, as `short_frame` writes them: dropped from a stack's inner end.
_FRAMEWORK = ("torch/", "<built-in ", "<built-in method", "nn.Module: ", "torchvision/ops/", "triton/")
#: nn.Module's call plumbing: dropped wherever it is.
_PLUMBING = ("torch/nn/modules/module.py(",)


def _stack_text(trace: KinetoTrace, tree: OpTree, frame: int) -> str:
    names = []
    while frame >= 0 and len(names) < _MAX_WALK:
        names.append(short_frame(str(trace.names[tree.name[frame]])))
        frame = int(tree.parent[frame])
    return user_stack(names, more=frame >= 0)


def user_stack(frames: list[str], more: bool = False) -> str:
    """`frames` (innermost first, as `short_frame` writes them) from the user's frame on (module docstring),
    at most MAX_FRAMES, joined; "…" ends a stack that goes on (`more`: frames beyond `frames`)."""
    kept = [f for f in frames if not f.startswith(_PLUMBING)]
    start = next((i for i, f in enumerate(kept) if not f.startswith(_FRAMEWORK)), 0)
    kept = kept[start:] or frames
    more = more or len(kept) > MAX_FRAMES
    return SEPARATOR.join(kept[:MAX_FRAMES]) + (SEPARATOR + "…" if more else "")


def _call_stacks(trace: KinetoTrace, ops: OpTree, op: np.ndarray) -> np.ndarray:
    """Per row, the "Call stack" of op index `op` in the form `_stack_text` writes ("" none)."""
    texts = [_call_stack_text(t) for t in trace.stack_texts]
    codes = np.full(len(op), 0, dtype=np.int64)
    has = op >= 0
    codes[has] = ops.stack[op[has]]
    return np.array(texts, dtype=object)[codes] if len(op) else np.full(0, "", dtype=object)


def _call_stack_text(text: str) -> str:
    return user_stack([short_frame(f.strip()) for f in text.split(";") if f.strip()])


_INSTALL_ROOTS = ("site-packages/", "dist-packages/")


def short_frame(frame: str) -> str:
    """A frame's file path from its package on ("torch/nn/modules/conv.py(443): forward"): the
    interpreter's install prefix says nothing about the user's code and fills the line."""
    for root in _INSTALL_ROOTS:
        at = frame.rfind(root)
        if at >= 0:
            return frame[at + len(root):]
    return frame
