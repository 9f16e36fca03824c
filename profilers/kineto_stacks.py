"""The Python call stack above an op, from a trace's python_function frames (with_stack=True).

torch.profiler(with_stack=True) writes each Python frame as a "python_function" span on the
thread that ran it (PyTorch 1.11 on), nested by time like the cpu_ops: the frames open at an op's
start are its Python stack. They form a tree exactly as the ops do (`kineto_tree.op_tree`), so the
innermost open frame of many ops at once is one `enclosing_ops` query; each distinct innermost
frame is then walked up once. Without frames every stack is "".
"""

from __future__ import annotations

import numpy as np

from tbd.profilers.kineto_columns import KinetoTrace
from tbd.profilers.kineto_tree import OpTree, enclosing_ops, op_tree

#: Frames kept per stack, innermost first: the user's code is usually within a few frames of the op.
MAX_FRAMES = 6
SEPARATOR = " < "  # "innermost < caller < its caller"


def python_stacks(trace: KinetoTrace, ops: OpTree, op: np.ndarray) -> np.ndarray:
    """Per row, the Python frames open at the start of op index `op` (-1: none), innermost first."""
    out = np.full(len(op), "", dtype=object)
    frames = trace.python
    has = op >= 0
    if len(frames.start_ns) == 0 or not has.any():
        return out
    tree = op_tree(frames)
    inner = np.full(len(op), -1, dtype=np.int64)
    inner[has] = enclosing_ops(tree, ops.thread[op[has]], ops.start_ns[op[has]])
    texts = {f: _stack_text(trace, tree, f) for f in np.unique(inner[inner >= 0]).tolist()}
    found = np.flatnonzero(inner >= 0)
    out[found] = [texts[f] for f in inner[found].tolist()]
    return out


def _stack_text(trace: KinetoTrace, tree: OpTree, frame: int) -> str:
    names = []
    while frame >= 0 and len(names) < MAX_FRAMES:
        names.append(str(trace.names[tree.name[frame]]))
        frame = int(tree.parent[frame])
    return SEPARATOR.join(names) + (SEPARATOR + "…" if frame >= 0 else "")
