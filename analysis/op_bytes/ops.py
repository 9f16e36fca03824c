"""Analytic estimate of the bytes each framework op moves between memory and the compute units.

With the FLOP count of `analysis.flops.ops` this places a kernel on the roofline: FLOPs per byte is its
arithmetic intensity, bytes per second its achieved bandwidth. Shapes and scalars are read as the
FLOP formulas read them (Kineto's "Input Dims", "Input type", "Concrete Inputs"; see
`analysis.flops.ops`), element sizes from "Input type" (`analysis.op_bytes.args`).

What is counted, the minimum traffic: every tensor the op's result depends on is read once and
every output is written once, at its dtype's element size. Real DRAM traffic differs: a kernel
that re-reads what its caches cannot hold (a GEMM's operand tiles, a convolution's input per
filter) or spills registers moves more; one whose inputs are still in L2 from the kernel before
moves less. So this is an estimate, to be labelled "analytic" (`tbd.core.records.ANALYTIC`) where it
is shown, and roughly a floor: a kernel that by this count beats the memory's bandwidth was fed
from cache.

Conventions (every formula follows them):

* Read once: each tensor operand in its own shape (a broadcast operand is not re-read), each
  0-d tensor as one element; a number ("Scalar") is a kernel argument, not traffic. A tensor
  passed only for its shape or dtype is not read (max_pool backward's self, nll_loss backward's
  self, zeros_like's self, layer-norm backward's bias), nor an input every requested output can
  do without (convolution backward reads the weight only for grad_input, the input only for
  grad_weight). A gather reads the indices and the gathered elements, not the whole source
  (embedding, embedding_bag, index_select, nll_loss's picked log-probabilities).
* Written once: each output the op returns whose size its arguments fix, in its dtype: the promoted
  type of an elementwise op (bool for comparisons, the default float for an integer input of a
  floating function), float32 for attention's logsumexp, the accumulate type (float32; float64 for
  double) for normalization statistics, int64 for pooling indices. In-place ops (``op_``) write
  self; an out= argument is the output, not an input. Outputs sized by the library rather than the
  arguments (cuDNN's RNN reserve space, debug masks) are not counted.
* Pure data movement is counted in full: copies and casts read the source and write the
  destination, fills and factories only write, views and allocations move nothing (0), and so
  does an aten::to that keeps the dtype (it returns self, or moves the tensor to another device
  by memcpy, not by a kernel). Where the arguments cannot tell whether data moves (reshape and
  flatten copy only when the strides forbid a view, and traces record no strides) there is no
  count.
* A TensorList records no dtype: cat, stack and the _foreach ops count their list elements at
  `list_itemsize`, which the caller supplies when it knows the element size (e.g. the step's
  precision); by default those calls are unknown, and so is a list of more than 30 tensors,
  whose shapes torch does not record. cuDNN RNN weights take the input's dtype.
* Unknown is NaN, never an exception: no formula, shapes or types missing or malformed, a scalar
  the count needs unrecorded (a schema default stands in where one exists, as for FLOPs), a count
  that comes out negative, not finite, or above `MAX_BYTES`.
* One nesting level, the FLOP formula's: the byte table holds exactly the ops that have a FLOP
  formula (``has_bytes_formula(name)`` implies ``flops.has_formula(name)``), so a kernel takes its
  bytes from the same op it takes its FLOPs from (the outermost op with a formula). A wrapper that
  carries the FLOPs of its children carries their fused traffic (mean reads its input and writes
  the mean, not sum's output and div_'s re-read of it). FLOP-formula ops without a byte count are
  listed, with the reason, in `NO_BYTES`; formulas for ops the FLOP table lacks (amax, amin,
  gather) wait in `_PREPARED` and take effect when it gains them.

Names are exact Kineto names with their ``aten::`` prefix. Layout: this module holds the API and the
table; `analysis.op_bytes.args` reads tensors and dtypes, and the formulas live in
`analysis.op_bytes.dense` (GEMM, convolution, attention, RNN), `analysis.op_bytes.elementwise`
(elementwise, _foreach, dropout, reductions, softmax, losses), `analysis.op_bytes.layers`
(normalization, pooling, embeddings) and `analysis.op_bytes.movement` (copies, fills, factories,
concatenation, gathers, views).
"""

from __future__ import annotations

import math
from typing import Callable

from tbd.analysis.flops.args import Unparseable
from tbd.analysis.flops.dense import SLOW_CONV
from tbd.analysis.flops.ops import FORMULA_OPS
from tbd.analysis.op_bytes import dense
from tbd.analysis.op_bytes import elementwise as ew
from tbd.analysis.op_bytes import layers as ly
from tbd.analysis.op_bytes import movement as mv
from tbd.core.records import OpShapes

#: Most bytes one op is believed to move: a 64-bit address space. A count above it comes from a
#: corrupt trace's dims, not from a kernel.
MAX_BYTES = float(2**63)

Formula = Callable[[OpShapes], int]
ListFormula = Callable[[OpShapes], "tuple[int, int]"]

#: FLOP-formula ops without a byte count, and why.
NO_BYTES: dict[str, str] = {
    "aten::reshape": "copies only when the input's strides forbid a view; traces record no strides",
    "aten::flatten": "a reshape: copies only when the input's strides forbid a view",
    "torchvision::roi_align": "the input elements the bilinear samples touch depend on each RoI's box",
    "aten::_scaled_dot_product_attention_math_for_mps": "also returns the attention weights, in a shape "
                                                        "the arguments do not fix",
}


def _dense_table() -> dict[str, Formula]:
    t: dict[str, Formula] = {
        "aten::mm": dense.gemm(0, 1), "aten::addmm": dense.gemm(1, 2, 0),
        "aten::_addmm_activation": dense.gemm(1, 2, 0),
        "aten::_scaled_mm": dense.scaled_mm, "aten::bmm": dense.batched_gemm(0, 1),
        "aten::baddbmm": dense.batched_gemm(1, 2, 0), "aten::addbmm": dense.batched_gemm(1, 2, 0, summed=True),
        "aten::mv": dense.mv(0, 1), "aten::addmv": dense.mv(1, 2, 0), "aten::dot": dense.dot,
        "aten::convolution": dense.convolution, "aten::convolution_backward": dense.conv_backward(10),
        "aten::convolution_backward_overrideable": dense.conv_backward(9),
        "aten::mkldnn_convolution_backward_weights": dense.conv_backward_weight(with_bias_at=7),
        "aten::_cudnn_rnn": dense.cudnn_rnn(False), "aten::_cudnn_rnn_backward": dense.cudnn_rnn(True),
        "aten::mkldnn_rnn_layer": dense.mkldnn_rnn_layer,
        "aten::mkldnn_rnn_layer_backward": dense.mkldnn_rnn_layer_backward,
        "aten::_thnn_fused_lstm_cell": dense.fused_lstm_cell,
        "aten::_thnn_fused_lstm_cell_backward_impl": dense.fused_lstm_cell_backward,
        "aten::_thnn_fused_lstm_cell_backward": dense.fused_lstm_cell_backward,
    }
    for name in SLOW_CONV + ("slow_conv_transpose2d_backward", "slow_conv_transpose3d_backward"):
        t[f"aten::{name}"] = dense.slow_conv_backward
    for kind in ("cudnn", "miopen", "miopen_depthwise", "mkldnn"):
        t[f"aten::{kind}_convolution_backward_input"] = dense.conv_backward_input
    for kind in ("cudnn", "miopen", "miopen_depthwise"):
        t[f"aten::{kind}_convolution_backward_weight"] = dense.conv_backward_weight()
    for kind in ("cudnn", "miopen"):
        t[f"aten::{kind}_convolution_transpose_backward_input"] = dense.conv_transpose_backward_input
        t[f"aten::{kind}_convolution_transpose_backward_weight"] = dense.conv_backward_weight()
    t.update({f"aten::{name}": f for name, f in dense.ATTENTION.items()})
    return t


def _elementwise_table() -> dict[str, Formula]:
    t: dict[str, Formula] = {}
    for name in ew.ARITY:
        t[f"aten::{name}"], t[f"aten::{name}_"] = ew.elementwise(name, False), ew.elementwise(name, True)
    t.update({"aten::native_dropout": ew.native_dropout,
              "aten::sum": ew.sum_or_mean(True), "aten::mean": ew.sum_or_mean(False),
              "aten::linalg_vector_norm": ew.reduction(2, 4),
              "aten::_softmax": ew.softmax, "aten::_log_softmax": ew.softmax,
              "aten::_softmax_backward_data": ew.softmax_backward,
              "aten::_log_softmax_backward_data": ew.softmax_backward,
              "aten::nll_loss_forward": ew.nll_loss_forward, "aten::nll_loss2d_forward": ew.nll_loss_forward,
              "aten::nll_loss_backward": ew.nll_loss_backward, "aten::nll_loss2d_backward": ew.nll_loss_backward,
              "aten::mse_loss": ew.mse_loss, "aten::mse_loss_backward": ew.mse_loss_backward})
    return t


def _layers_table() -> dict[str, Formula]:
    t: dict[str, Formula] = {}
    t.update({"aten::native_batch_norm": ly.batch_norm_forward(5), "aten::cudnn_batch_norm": ly.batch_norm_forward(5),
              "aten::miopen_batch_norm": ly.batch_norm_forward(5),
              "aten::_native_batch_norm_legit": ly.batch_norm_legit,
              "aten::_native_batch_norm_legit_no_training": ly.batch_norm_forward(None, False),
              "aten::_batch_norm_with_update": ly.batch_norm_forward(None, True),
              "aten::_batch_norm_no_update": ly.batch_norm_forward(None, False),
              "aten::native_batch_norm_backward": ly.batch_norm_backward(None),
              "aten::batch_norm_backward": ly.batch_norm_backward(10),
              "aten::cudnn_batch_norm_backward": ly.cudnn_batch_norm_backward(8),
              "aten::miopen_batch_norm_backward": ly.cudnn_batch_norm_backward(None),
              "aten::native_layer_norm": ly.layer_norm, "aten::native_layer_norm_backward": ly.layer_norm_backward})
    for nsp in (1, 2, 3):
        t[f"aten::max_pool{nsp}d_with_indices"] = ly.max_pool(nsp)
    t.update({"aten::max_pool2d": ly.max_pool(2), "aten::max_pool3d": ly.max_pool(3),
              "aten::max_pool2d_with_indices_backward": ly.max_pool_backward,
              "aten::max_pool3d_with_indices_backward": ly.max_pool_backward,
              "aten::avg_pool2d": ly.avg_pool(2), "aten::avg_pool3d": ly.avg_pool(3),
              "aten::avg_pool2d_backward": ly.pool_backward, "aten::avg_pool3d_backward": ly.pool_backward,
              "aten::adaptive_avg_pool2d": ly.adaptive_avg_pool(2),
              "aten::_adaptive_avg_pool2d": ly.adaptive_avg_pool(2),
              "aten::_adaptive_avg_pool2d_backward": ly.pool_backward,
              "torchvision::_roi_align_backward": ly.roi_align_backward,
              "aten::embedding": ly.embedding, "aten::embedding_dense_backward": ly.embedding_dense_backward,
              "aten::embedding_sparse_backward": ly.embedding_sparse_backward,
              "aten::embedding_bag": ly.embedding_bag, "aten::_embedding_bag": ly.embedding_bag,
              "aten::_embedding_bag_forward_only": ly.embedding_bag,
              "aten::_embedding_bag_dense_backward": ly.embedding_bag_dense_backward})
    return t


def _movement_table() -> dict[str, Formula]:
    t: dict[str, Formula] = {f"aten::{name}": mv.nothing for name in mv.NOTHING_MOVED}
    t.update({"aten::copy_": mv.copy_, "aten::clone": mv.clone, "aten::contiguous": mv.clone,
              "aten::to": mv.to, "aten::_to_copy": mv.to_copy,
              "aten::fill_": mv.fill_, "aten::zero_": mv.zero_, "aten::masked_fill_": mv.masked_fill_,
              "aten::zeros": mv.factory(1), "aten::ones": mv.factory(1), "aten::full": mv.factory(2, value_at=1),
              "aten::zeros_like": mv.like(1), "aten::ones_like": mv.like(1), "aten::full_like": mv.like(2),
              "aten::new_zeros": mv.like(2, size_at=1), "aten::new_ones": mv.like(2, size_at=1),
              "aten::index_select": mv.index_select, "aten::where": mv.where,
              "aten::constant_pad_nd": mv.constant_pad_nd,
              "aten::item": mv.item, "aten::_local_scalar_dense": mv.item})
    return t


def _list_table() -> dict[str, ListFormula]:
    t: dict[str, ListFormula] = {"aten::cat": mv.cat, "aten::stack": mv.cat, "aten::_foreach_norm": ew.foreach_norm}
    for name, arity in ew.FOREACH_ARITY.items():
        t[f"aten::_foreach_{name}"] = t[f"aten::_foreach_{name}_"] = ew.foreach(arity)
    return t


_ALL: dict[str, Formula] = {**_dense_table(), **_elementwise_table(), **_layers_table(), **_movement_table()}
_ALL_LISTS: dict[str, ListFormula] = _list_table()
#: Written formulas for ops the FLOP table has no formula for: inactive until it gains them.
_PREPARED: dict[str, Formula] = {"aten::amax": ew.reduction(1, None), "aten::amin": ew.reduction(1, None),
                                 "aten::gather": mv.gather}
_TABLE: dict[str, Formula] = {k: f for k, f in {**_ALL, **_PREPARED}.items() if k in FORMULA_OPS}
_LISTS: dict[str, ListFormula] = {k: f for k, f in _ALL_LISTS.items() if k in FORMULA_OPS}

#: Names of the ops that have a byte formula (each has a FLOP formula too).
BYTES_OPS: frozenset[str] = frozenset(_TABLE) | frozenset(_LISTS)


def has_bytes_formula(name: str) -> bool:
    """Whether `name` (an exact Kineto op name, e.g. "aten::addmm") has a byte formula."""
    return name in BYTES_OPS


def op_bytes(op: OpShapes, *, list_itemsize: float | None = None) -> float:
    """Bytes one call reads plus writes at the minimum (module docstring); NaN when unknown.

    Pure and cheap: call it once per distinct op signature (name, dims, types, concrete inputs),
    as the FLOP reader does with `analysis.flops.ops.op_flops`.

    Args:
        op: the op call as the trace records it.
        list_itemsize: element size in bytes to count TensorList tensors at (cat, stack, _foreach
            ops), whose dtype traces do not record; None leaves such calls unknown.
    Returns:
        Bytes as a float: 0.0 for views and allocations; NaN for an op without a byte formula,
        missing or malformed shapes, types or needed scalars, and for a count that is negative,
        not finite or above `MAX_BYTES`. Never raises.
    """
    try:
        formula = _TABLE.get(op.name)
        if formula is not None:
            count = float(formula(op))
        elif op.name in _LISTS:
            typed, listed = _LISTS[op.name](op)
            if listed and not _valid_itemsize(list_itemsize):
                return math.nan
            count = float(typed) + (float(listed) * float(list_itemsize) if listed else 0.0)
        else:
            return math.nan
    except (Unparseable, ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError,
            RecursionError):
        return math.nan  # ArithmeticError: OverflowError of a count beyond float, ZeroDivisionError
    return count if math.isfinite(count) and 0 <= count <= MAX_BYTES else math.nan


def _valid_itemsize(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
