"""FLOPs, precision and why FLOPs are unknown, once per distinct op call signature of a Kineto trace.

A signature is an op's name with the JSON text of its three shape arguments ("Input Dims", "Input
type", "Concrete Inputs"), as `profilers.kineto.decode` interned them; the caller's FLOP formula
runs once per signature. Shape text that cannot be shapes (longer than `MAX_SHAPE_TEXT`, nested
deeper than `MAX_SHAPE_DEPTH`, not decodable) and a count that is negative or not finite leave the
op's FLOPs unknown: NaN, flop gap "shapes_unreadable" when the op has a formula.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

from tbd.core.records import NO_FORMULA, NO_LAUNCH_OP, SHAPES_NOT_RECORDED, SHAPES_UNREADABLE, OpShapes
from tbd.profilers.kineto.columns import Signature
from tbd.profilers.kineto.tree import OpTree

__all__ = ["SignatureFlops", "signature_flops", "describe_shapes", "flop_gaps", "MAX_SHAPE_TEXT", "MAX_SHAPE_DEPTH"]


@dataclass(frozen=True)
class SignatureFlops:
    """Per signature code: FLOPs (NaN: formula, shapes missing), whether a formula exists, precision."""

    flops: np.ndarray  # float64
    has_formula: np.ndarray  # bool
    precision: np.ndarray  # object
    shapes_recorded: np.ndarray  # bool: the trace holds "Input Dims" for the call
    # float64: bytes the call reads and writes (an analytic estimate), NaN when unknown or not asked.
    bytes: np.ndarray | None = None
    shapes_text: np.ndarray | None = None  # object: the input tensors' shapes for display ("" none)


def signature_flops(signatures: tuple[Signature, ...], flops_of, precision_of, bytes_of=None) -> SignatureFlops:
    """Per signature: `flops_of(OpShapes)`, `precision_of(types, dims)` and `bytes_of(OpShapes)` (optional)."""
    flops = np.full(len(signatures), np.nan)
    nbytes = np.full(len(signatures), np.nan)
    has = np.zeros(len(signatures), dtype=bool)
    precision = np.empty(len(signatures), dtype=object)
    text = np.full(len(signatures), "", dtype=object)
    recorded = np.array([bool(s.input_dims) for s in signatures], dtype=bool)
    for code, s in enumerate(signatures):
        shapes = _op_shapes(s)
        if shapes is None:  # over-deep or over-long shape text: a formula op's FLOPs are unreadable
            has[code] = flops_of(OpShapes(s.name, (), (), ())) is not None
            precision[code] = ""
            continue
        value = flops_of(shapes)
        if value is not None:
            has[code], flops[code] = True, _count(value)
        precision[code] = precision_of(shapes.input_types, shapes.input_dims)
        if bytes_of is not None:
            nbytes[code] = _count(bytes_of(shapes))
        text[code] = describe_shapes(shapes)
    return SignatureFlops(flops, has, precision, recorded, nbytes, text)


#: Longest shape description kept for display (a TensorList of thousands of tensors is cut).
MAX_SHAPES_TEXT = 160


def describe_shapes(op: OpShapes) -> str:
    """The tensor inputs' shapes and element types, compactly: "33×100, 100×100, 100 (float)".

    Scalars and absent arguments are left out; a TensorList is its shapes in brackets; the types
    are the distinct tensor types in order.
    """
    parts, types = [], []
    for i, dims in enumerate(op.input_dims):
        if not isinstance(dims, tuple) or not dims:
            continue
        if all(type(d) is int for d in dims):
            parts.append("×".join(map(str, dims)))
        elif all(isinstance(t, tuple) and all(type(d) is int for d in t) for t in dims):
            parts.append("[" + ", ".join("×".join(map(str, t)) or "scalar" for t in dims[:4])
                         + (", …" if len(dims) > 4 else "") + "]")
        else:
            continue
        kind = op.input_types[i] if i < len(op.input_types) else ""
        if isinstance(kind, str) and kind and kind not in types:
            types.append(kind)
    text = ", ".join(parts) + (f" ({', '.join(types)})" if types and parts else "")
    return text if len(text) <= MAX_SHAPES_TEXT else text[:MAX_SHAPES_TEXT - 1] + "…"


def _count(value) -> float:
    """A formula's FLOP count, NaN (unreadable) when negative, non-finite or not a number at all."""
    try:
        count = float(value)
    except (TypeError, ValueError, OverflowError):
        return np.nan
    return count if np.isfinite(count) and count >= 0 else np.nan


#: Longest shape argument text read, and deepest nesting: "Input Dims" of a TensorList of
#: thousands of tensors is ~100 KB and 3 levels deep; anything beyond is not shapes.
MAX_SHAPE_TEXT = 1 << 20
MAX_SHAPE_DEPTH = 8


def _op_shapes(s: Signature) -> OpShapes | None:
    """The signature's shape arguments as an OpShapes; None when their text cannot be shapes."""
    try:
        return OpShapes(name=s.name, input_dims=_tuples(_json(s.input_dims)),
                        input_types=tuple(_json(s.input_types)), concrete_inputs=tuple(_json(s.concrete_inputs)),
                        output_dims=_tuples(_json(s.output_dims)))
    except _Unreadable:
        return None


class _Unreadable(Exception):
    """Shape text too long, too deep, or not decodable."""


def flop_gaps(flops: np.ndarray, root: np.ndarray, counted_from: np.ndarray, tree: OpTree,
               sig: SignatureFlops) -> np.ndarray:
    """Per row, why its FLOPs are unknown (records.FLOP_GAPS), "" where known.

    root: the row's formula root op (-1 none); counted_from: the op the row hangs from (the
    launching op of a kernel, the op itself on the CPU), -1 when there is none.
    """
    gap = np.full(len(flops), "", dtype=object)
    unknown = ~np.isfinite(flops)
    gap[unknown & (counted_from < 0)] = NO_LAUNCH_OP
    gap[unknown & (counted_from >= 0) & (root < 0)] = NO_FORMULA
    rooted = unknown & (root >= 0)
    recorded = sig.shapes_recorded[tree.signature[root[rooted]]] if rooted.any() else np.zeros(0, dtype=bool)
    gap[np.flatnonzero(rooted)] = np.where(recorded, SHAPES_UNREADABLE, SHAPES_NOT_RECORDED)
    return gap


def _json(text: bytes) -> list:
    """A shape argument's JSON text -> list; absent or not a list -> []; _Unreadable when over-long or over-deep."""
    if not text:
        return []
    if len(text) > MAX_SHAPE_TEXT:
        raise _Unreadable
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        raise _Unreadable from None
    return value if isinstance(value, list) else []


def _tuples(value, depth: int = 0):
    """Nested JSON lists -> nested tuples (hashable, immutable); other values unchanged.

    Raises:
        _Unreadable: nested deeper than MAX_SHAPE_DEPTH (a recursion here would otherwise
            exhaust the stack on a 1,000-deep "Input Dims").
    """
    if type(value) is not list:
        return value
    if depth >= MAX_SHAPE_DEPTH:
        raise _Unreadable
    return tuple(_tuples(v, depth + 1) for v in value)
