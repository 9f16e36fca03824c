"""Byte formulas for the zero-FLOP data-movement ops: copies, casts, fills, factories, concatenation,
gathers, padding, views.

These ops are judged by bandwidth alone, so each gets a count wherever its shapes tell one: a copy
reads its source and writes its destination, a fill or a factory only writes, a gather reads the
indices and the gathered elements (not the whole source), a view or an allocation moves nothing.
Where the arguments cannot tell whether data moves (reshape copies only when the input's strides
forbid a view, and traces record no strides), there is no count (`analysis.op_bytes.ops.NO_BYTES`).
"""

from __future__ import annotations

from tbd.analysis.flops.args import concrete, input_shape, numel, require
from tbd.analysis.op_bytes.args import (
    DEFAULT_FLOAT,
    DEFAULT_INT,
    SCALAR_TYPES,
    broadcast_numel,
    code,
    dtype_arg,
    dtype_arg_code,
    elements,
    is_tensor,
    itemsize,
    list_elements,
    optional_bytes,
    promoted_size,
    reads,
    tensor_bytes,
)
from tbd.core.records import OpShapes

#: Views and allocations: no element is read or written (an allocation's memory is not touched
#: until something fills it, and that fill is its own op: zeros > empty + zero_).
NOTHING_MOVED = (
    "view _reshape_alias _unsafe_view t transpose permute expand squeeze unsqueeze select slice "
    "narrow as_strided detach split chunk unbind unsafe_split unsafe_chunk alias lift_fresh broadcast_tensors "
    "detach_ resize_ empty empty_like empty_strided new_empty"
).split()


def nothing(op: OpShapes) -> int:
    return 0


def copy_(op: OpShapes) -> int:
    """copy_(self, src, non_blocking): src read in its dtype (once, even when broadcast), self written."""
    return tensor_bytes(op, 1) + tensor_bytes(op, 0)


def clone(op: OpShapes) -> int:
    """clone / contiguous(self, memory_format): read and written once. An aten::contiguous in a trace
    always copies: Tensor.contiguous() returns an already contiguous tensor without dispatching."""
    return 2 * tensor_bytes(op, 0)


def to_copy(op: OpShapes) -> int:
    """_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format): always a copy,
    written in dtype (None: self's)."""
    return tensor_bytes(op, 0) + elements(op, 0) * dtype_arg(op, 1, itemsize(op, 0))


_PRESERVE_FORMAT = 1  # c10::MemoryFormat::Preserve, as Concrete Inputs record it


def to(op: OpShapes) -> int:
    """aten::to, told apart by its arguments: .dtype(self, dtype, non_blocking, copy, memory_format),
    .other(self, other, ...) (other's dtype), .device(self, device, dtype, non_blocking, copy,
    memory_format), .dtype_layout(self, dtype, layout, device, pin_memory, non_blocking, copy,
    memory_format).

    A copy (self read, the result written in the target dtype) unless the call keeps self's dtype
    and memory format without copy=True: then it returns self, or moves it to another device, which
    is a memcpy, not a kernel; either way no kernel's bytes. The device is not recorded, so the two
    cannot be told apart.
    """
    n = len(op.input_dims)
    if n == 5 and is_tensor(op, 1):
        target, copy_at, format_at = code(op, 1), 3, 4
    elif n == 5:
        target, copy_at, format_at = dtype_arg_code(op, 1), 3, 4
    elif n == 6:
        target, copy_at, format_at = dtype_arg_code(op, 2), 4, 5
    elif n == 8:
        target, copy_at, format_at = dtype_arg_code(op, 1), 6, 7
    else:
        require(False, f"{op.name}: {n} arguments: no overload of aten::to")
    target = code(op, 0) if target is None else target
    if target == code(op, 0) and not concrete(op, copy_at) and _keeps_format(op, format_at):
        return 0
    return tensor_bytes(op, 0) + elements(op, 0) * SCALAR_TYPES[target][0]


def _keeps_format(op: OpShapes, i: int) -> bool:
    """Whether memory_format at i is None or preserve; raises when another format (which copies
    only a tensor not already in it) or an unrecorded one leaves it unknown."""
    if i >= len(op.input_types) or op.input_types[i] in ("", None):
        return True
    require(concrete(op, i) == _PRESERVE_FORMAT, f"{op.name}: memory format {concrete(op, i, None)!r}")
    return True


# ---- fills and factories: written only ----------------------------------------------------------
def fill_(op: OpShapes) -> int:
    """fill_(self, value): self written; the .Tensor overload reads its 0-d value."""
    return optional_bytes(op, 1) + tensor_bytes(op, 0)


def zero_(op: OpShapes) -> int:
    return tensor_bytes(op, 0)


def masked_fill_(op: OpShapes) -> int:
    """masked_fill_(self, mask, value): in place, self and the mask read (the kernel selects per
    element), self written."""
    return reads(op, (0, 1), (2,)) + tensor_bytes(op, 0)


def _size_list(op: OpShapes, i: int) -> int:
    sizes = concrete(op, i)
    sizes = [sizes] if isinstance(sizes, int) else sizes
    require(isinstance(sizes, (list, tuple)) and all(isinstance(s, int) and s >= 0 for s in sizes),
            f"{op.name}: size {sizes!r}")
    return numel(sizes)


def _value_size(op: OpShapes, i: int) -> int:
    """Element size of the tensor a fill value alone makes: bool, int64 or the default float."""
    value = concrete(op, i)
    if isinstance(value, bool):
        return 1
    if isinstance(value, int):
        return DEFAULT_INT
    require(isinstance(value, float) or value in ("inf", "-inf", "nan"), f"{op.name}: fill value {value!r}")
    return DEFAULT_FLOAT


def factory(dtype_at: int, value_at: int | None = None):
    """zeros/ones(size, dtype, ...), full(size, fill_value, dtype, ...): numel(size) elements written
    in dtype; None: the default float (a trace does not record torch.set_default_dtype), or for
    full the fill value's own type."""

    def f(op: OpShapes) -> int:
        if is_tensor(op, dtype_at):  # the out= overload: (size, [fill_value,] out)
            size = itemsize(op, dtype_at)
        elif value_at is not None and op.input_types[dtype_at] in ("", None):
            size = _value_size(op, value_at)
        else:
            size = dtype_arg(op, dtype_at, DEFAULT_FLOAT)
        return _size_list(op, 0) * size

    return f


def like(dtype_at: int, size_at: int | None = None):
    """zeros_like/ones_like(self, dtype, ...), full_like(self, fill_value, dtype, ...), and
    new_zeros/new_ones(self, size, dtype, ...): written only, in dtype (None: self's); self is passed
    for its shape (or only its dtype and device) and not read."""

    def f(op: OpShapes) -> int:
        n = elements(op, 0) if size_at is None else _size_list(op, size_at)
        return n * dtype_arg(op, dtype_at, itemsize(op, 0))

    return f


# ---- concatenation, gathers, selection, padding ---------------------------------------------------
def cat(op: OpShapes) -> tuple[int, int]:
    """cat/stack(tensors, dim): every input read once, the result (their sum) written once. The
    TensorList's dtype is not recorded: (typed bytes 0, elements)."""
    return 0, 2 * list_elements(op, 0)


def index_select(op: OpShapes) -> int:
    """index_select(self, dim, index): the index read, and one slice of self per index read and written."""
    x, d, n = input_shape(op, 0), concrete(op, 1), elements(op, 2)
    require(isinstance(d, int) and -max(len(x), 1) <= d < max(len(x), 1), f"{op.name}: dim {d!r} of {x}")
    per_index = numel(s for i, s in enumerate(x) if i != d % len(x)) if x else 1
    return tensor_bytes(op, 2) + 2 * n * per_index * itemsize(op, 0)


def gather(op: OpShapes) -> int:
    """gather(self, dim, index, sparse_grad): the index read, one element of self per index read and written."""
    return tensor_bytes(op, 2) + 2 * elements(op, 2) * itemsize(op, 0)


def where(op: OpShapes) -> int:
    """where(condition, self, other[, out]): the three read, the broadcast written in self and
    other's promoted dtype. where(condition) alone returns the true positions, a count the shapes
    do not tell."""
    require(len(op.input_dims) in (3, 4), f"{op.name}: {len(op.input_dims)} arguments")
    return reads(op, (0,), (1, 2)) + broadcast_numel(op, (0, 1, 2)) * promoted_size(op, (1, 2))


def constant_pad_nd(op: OpShapes) -> int:
    """constant_pad_nd(self, pad, value): pad = (left, right) pairs from the last dim backwards,
    negative ones crop. The kept part of self read, the padded result written once."""
    x, pad = list(input_shape(op, 0)), concrete(op, 1)
    require(isinstance(pad, (list, tuple)) and len(pad) % 2 == 0 and len(pad) // 2 <= len(x)
            and all(isinstance(p, int) for p in pad), f"{op.name}: pad {pad!r} of {x}")
    kept, out = list(x), list(x)
    for j in range(len(pad) // 2):
        left, right = pad[2 * j], pad[2 * j + 1]
        d = len(x) - 1 - j
        out[d] = x[d] + left + right
        kept[d] = max(x[d] + min(left, 0) + min(right, 0), 0)
    require(min(out, default=0) >= 0, f"{op.name}: padded size {out}")
    return (numel(kept) + numel(out)) * itemsize(op, 0)


def item(op: OpShapes) -> int:
    """item / _local_scalar_dense(self): its one element read."""
    return tensor_bytes(op, 0)
