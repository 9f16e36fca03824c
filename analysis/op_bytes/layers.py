"""Byte formulas for layers with their own structure: batch and layer normalization, pooling,
RoI Align's backward, embeddings and embedding bags.

Each formula is bytes read plus bytes written at the minimum (`analysis.op_bytes.ops`). A pooling
output's size is the FLOP formulas' own (`analysis.flops.elementwise.pool_window`, imported, not
restated); argument positions follow the same schemas.
"""

from __future__ import annotations

from typing import Callable

from tbd.analysis.flops.args import concrete, input_shape, int_list, numel, output_mask, require
from tbd.analysis.flops.elementwise import pool_window
from tbd.analysis.op_bytes.args import acc_size, elements, itemsize, present, reads, tensor_bytes
from tbd.core.records import OpShapes


# ---- batch and layer normalization -----------------------------------------------------------
# Forward: input, weight, bias and the running statistics read; the output written, and in
# training the per-channel save_mean/save_invstd (accumulate type) and the updated running
# statistics. Backward: every tensor argument read (the running or the saved statistics, per
# channel); grad_input in the input's shape, grad_weight and grad_bias per channel, each as
# output_mask asks.
def batch_norm_forward(training_at: int | None, fixed: bool | None = None, running: bool = True) \
        -> Callable[[OpShapes], int]:
    def f(op: OpShapes) -> int:
        training = fixed if training_at is None else concrete(op, training_at)
        require(isinstance(training, bool), f"{op.name}: training flag {training!r}")
        x = input_shape(op, 0)
        require(len(x) >= 2, f"{op.name}: input {x}")
        stats = (3, 4) if running else ()
        writes = tensor_bytes(op, 0)
        if training:
            writes += 2 * x[1] * acc_size(op, 0) + reads(op, (), stats)
        return reads(op, (0,), (1, 2) + stats) + writes

    return f


def batch_norm_legit(op: OpShapes) -> int:
    """_native_batch_norm_legit: (input, weight, bias, running_mean, running_var, training@5, ...),
    or the .no_stats overload without running statistics (6 arguments, training@3)."""
    if len(op.input_dims) == 6:
        return batch_norm_forward(3, running=False)(op)
    return batch_norm_forward(5)(op)


def _bn_grads(op: OpShapes, x_at: int, mask) -> int:
    x = input_shape(op, x_at)
    require(len(x) >= 2, f"{op.name}: input {x}")
    param = itemsize(op, 2) if present(op, 2) else itemsize(op, x_at)
    return mask[0] * tensor_bytes(op, x_at) + (int(mask[1]) + int(mask[2])) * x[1] * param


def batch_norm_backward(reserve_at: int | None) -> Callable[[OpShapes], int]:
    """native_batch_norm_backward / batch_norm_backward(grad_out, input, weight, running_mean,
    running_var, save_mean, save_invstd, train, eps, output_mask@9[, reserve@10]); only
    batch_norm_backward has the reserve (at 10 the other's out= overload has its first output)."""
    optional = (2, 3, 4, 5, 6) + (() if reserve_at is None else (reserve_at,))
    return lambda op: reads(op, (0, 1), optional) + _bn_grads(op, 1, output_mask(op, 9, 3))


def cudnn_batch_norm_backward(reserve_at: int | None) -> Callable[[OpShapes], int]:
    """cudnn/miopen_batch_norm_backward(input, grad_output, weight, running_mean, running_var,
    save_mean, save_var, epsilon[, reserveSpace@8 (cuDNN)]): all three gradients."""
    optional = (3, 4, 5, 6) + (() if reserve_at is None else (reserve_at,))
    return lambda op: reads(op, (0, 1, 2), optional) + _bn_grads(op, 0, [True, True, True])


def _layer_rows(op: OpShapes) -> int:
    """Rows normalized by native_layer_norm: the input's leading dims before normalized_shape
    (recorded, or the weight's shape when it is not)."""
    x = input_shape(op, 0)
    ns = concrete(op, 1, None)
    if ns is None:
        require(present(op, 2), f"{op.name}: normalized_shape not recorded and no weight")
        ns = input_shape(op, 2)
    ns = [ns] if isinstance(ns, int) else list(ns)
    require(0 < len(ns) <= len(x) and list(x[len(x) - len(ns):]) == ns, f"{op.name}: normalized_shape {ns} of {x}")
    return numel(x[:len(x) - len(ns)])


def layer_norm(op: OpShapes) -> int:
    """native_layer_norm(input, normalized_shape, weight, bias, eps) -> (out, mean, rstd): mean and
    rstd one per row, in the accumulate type."""
    return reads(op, (0,), (2, 3)) + tensor_bytes(op, 0) + 2 * _layer_rows(op) * acc_size(op, 0)


def layer_norm_backward(op: OpShapes) -> int:
    """native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
    output_mask): bias is passed for its shape only (not read). An unrecorded output_mask asks for
    every gradient the call can give, as the FLOP formula reads it."""
    if concrete(op, 7, None) is None:
        m = [True, present(op, 5), present(op, 6)]
    else:
        m = output_mask(op, 7, 3)
    grads = m[0] * tensor_bytes(op, 1) + (m[1] and tensor_bytes(op, 5)) + (m[2] and tensor_bytes(op, 6))
    return reads(op, (0, 1, 3, 4), (5,)) + grads


# ---- pooling -----------------------------------------------------------------------------------
# Forward: the input read, the pooled output written; max pooling also writes its int64 argmax
# indices (max_poolNd_with_indices; the max_pool2d/3d wrappers run it under autograd and on CUDA,
# so they are counted with indices too: a CPU call without grad writes none). Backward: grad_output
# (and max pooling's indices) read, grad_input written in the input's shape; the input itself is
# passed for its shape only.
_INDEX = 8


def _pooled(op: OpShapes, nsp: int, dilation_at: int | None, ceil_at: int) -> int:
    """Output elements of a pooling op: the input's leading dims times the pooled spatial sizes."""
    x, _, out = pool_window(op, nsp, dilation_at, ceil_at)
    require(min(out) >= 0, f"{op.name}: output {out}")
    return numel(x[:-nsp]) * numel(out)


def max_pool(nsp: int) -> Callable[[OpShapes], int]:
    return lambda op: tensor_bytes(op, 0) + _pooled(op, nsp, 4, 5) * (itemsize(op, 0) + _INDEX)


def max_pool_backward(op: OpShapes) -> int:
    """max_poolNd_with_indices_backward(grad_output, self, kernel, stride, padding, dilation, ceil, indices)."""
    return reads(op, (0, 7)) + elements(op, 1) * itemsize(op, 0)


def avg_pool(nsp: int) -> Callable[[OpShapes], int]:
    return lambda op: tensor_bytes(op, 0) + _pooled(op, nsp, None, 4) * itemsize(op, 0)


def pool_backward(op: OpShapes) -> int:
    """avg_poolNd_backward / _adaptive_avg_pool2d_backward(grad_output, self, ...)."""
    return tensor_bytes(op, 0) + elements(op, 1) * itemsize(op, 0)


def adaptive_avg_pool(nsp: int) -> Callable[[OpShapes], int]:
    def f(op: OpShapes) -> int:
        x = input_shape(op, 0)
        out = int_list(concrete(op, 1), nsp, op.name)
        require(len(x) > nsp and min(out) >= 0, f"{op.name}: input {x}, output {out}")
        return tensor_bytes(op, 0) + numel(x[:-nsp]) * numel(out) * itemsize(op, 0)

    return f


def roi_align_backward(op: OpShapes) -> int:
    """_roi_align_backward(grad, rois, spatial_scale, pooled_h, pooled_w, N@5, C@6, H@7, W@8, ...):
    grad_input [N, C, H, W] written whole (zero-filled, then accumulated into)."""
    sizes = [concrete(op, i) for i in (5, 6, 7, 8)]
    require(all(isinstance(s, int) and s >= 0 for s in sizes), f"{op.name}: sizes {sizes}")
    return reads(op, (0, 1)) + numel(sizes) * itemsize(op, 0)


# ---- embeddings ----------------------------------------------------------------------------------
# A lookup is a gather: the indices read, one table row per index read and written (not the whole
# table). The dense backward writes the whole grad_weight [num_weights, D] (zero-filled, then
# rows accumulated); the sparse backward only wraps grad_output and the indices in a sparse tensor
# (views, nothing moved) unless a padding_idx is excluded, which copies a number of rows the
# shapes do not tell.
def embedding(op: OpShapes) -> int:
    """embedding(weight [V, D], indices, padding_idx, scale_grad_by_freq, sparse) -> [*indices, D]."""
    w = input_shape(op, 0)
    require(len(w) == 2, f"{op.name}: weight {w}")
    rows = elements(op, 1) * w[1] * itemsize(op, 0)
    return tensor_bytes(op, 1) + 2 * rows


def embedding_dense_backward(op: OpShapes) -> int:
    """embedding_dense_backward(grad_output [*, D], indices, num_weights, padding_idx, scale_grad_by_freq)."""
    g, rows = input_shape(op, 0), concrete(op, 2)
    require(len(g) >= 1 and isinstance(rows, int) and rows >= 0, f"{op.name}: grad {g}, num_weights {rows!r}")
    return reads(op, (0, 1)) + rows * g[-1] * itemsize(op, 0)


def embedding_sparse_backward(op: OpShapes) -> int:
    require(concrete(op, 3) == -1, f"{op.name}: padding_idx excluded: rows copied unknown")
    return 0


def embedding_bag(op: OpShapes) -> int:
    """embedding_bag / _embedding_bag(_forward_only)(weight, indices, offsets, scale_grad_by_freq,
    mode=0, sparse, per_sample_weights, include_last_offset=False, ...) -> (output [B, D],
    offset2bag [n], bag_size [B], max_indices [B, D] in max mode): the integer outputs as the CUDA
    kernel allocates them, in the indices' dtype."""
    w, offsets = input_shape(op, 0), input_shape(op, 2)
    require(len(w) == 2 and len(offsets) == 1, f"{op.name}: weight {w}, offsets {offsets}")
    n, size, index = elements(op, 1), itemsize(op, 0), itemsize(op, 1)
    bags = offsets[0] - bool(concrete(op, 7, False))
    mode = concrete(op, 4, 0)
    require(mode in (0, 1, 2) and bags >= 0, f"{op.name}: mode {mode!r}, {bags} bags")
    read = reads(op, (1, 2), (6,)) + n * w[1] * size
    writes = bags * w[1] * size + (n + bags) * index + (bags * w[1] * index if mode == 2 else 0)
    return read + writes


def embedding_bag_dense_backward(op: OpShapes) -> int:
    """_embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
    num_weights, ...); PyTorch 1.8 had offsets at 2, moving everything after one later."""
    old = len(op.input_dims) > 5 and bool(op.input_dims[5])
    g, rows = input_shape(op, 0), concrete(op, 6 if old else 5)
    require(len(g) == 2 and isinstance(rows, int) and rows >= 0, f"{op.name}: grad {g}, num_weights {rows!r}")
    required, weights = ((0, 1, 2, 3, 4, 5), (9,)) if old else ((0, 1, 2, 3, 4), (8,))
    return reads(op, required, weights) + rows * g[1] * itemsize(op, 0)
