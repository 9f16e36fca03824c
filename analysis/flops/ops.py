"""Analytic FLOP formulas for framework ops, keyed by ATen op name and argument shapes.

Ops read from PyTorch/Kineto traces (and TensorFlow/MXNet ops mapped onto the same names) get
their FLOPs here, forward and backward. Shapes and scalar arguments come as Kineto records them:
``args["Input Dims"]``, ``args["Input type"]``, ``args["Concrete Inputs"]``, one entry per
argument in schema order (keyword-only arguments included; see native_functions.yaml).

Conventions (every formula below follows them):

* A FLOP is one floating-point arithmetic operation. A multiply-add counts 2, as
  ``torch.utils.flop_counter.FlopCounterMode`` does; a comparison (max, relu, clamp) counts 1; an
  elementary function (exp, log, tanh, erf, sqrt, rsqrt, pow) counts 1.
* GEMM and convolution match FlopCounterMode exactly: ``mm/addmm`` = 2·m·n·k, ``bmm/baddbmm`` =
  2·b·m·n·k, conv = 2·N·Cout·prod(out spatial)·(Cin/groups)·prod(kernel); bias adds (addmm's
  ``self``, conv bias, conv grad_bias) are not counted. Convolution backward counts grad_input and
  grad_weight, each only when its ``output_mask`` entry is set, each as many MACs as the forward.
  One deliberate divergence: for groups > 1 FlopCounterMode's grad_weight term uses the full Cin
  (``conv_backward_flop`` transposes the whole input), overcounting by ``groups``; we count
  Cin/groups. Scaled-dot-product attention counts its two (forward) or five (backward) batched
  GEMMs, as FlopCounterMode's ``sdpa_flop_count``/``sdpa_backward_flop_count``; the softmax inside
  the fused kernel is not counted. The inner kernels (_flash_attention_*, _efficient_attention_*)
  take [B, S, H, D] where the _scaled_dot_product_* ops take [B, H, S, D]; each formula reads its
  op's layout, so inner and outer agree (FlopCounterMode reads the inner ones as [B, H, S, D]).
* Every other formula counts per-element work only: per-channel, per-row or per-call scalar work
  (batch-norm's rsqrt per channel, softmax's log per row, a loss's final divide) is O(1/elements)
  of the total and is left out, so every count is an integer multiple of an element count.
* Pure data movement (copies, fills, views, concatenation, gathers, dtype casts) is 0 FLOPs with
  a formula (a known zero, not an unknown), see ``flops.elementwise.ZERO_OPS``. Random-number generation
  (bernoulli_, normal_, uniform_) has no formula: its arithmetic depends on the generator.
* Ops whose tensor inputs are all integer or bool do integer arithmetic: 0 floating-point FLOPs.
* A scalar argument that the trace did not record takes its schema default when it has one
  (alpha = 1, reduction = mean, approximate = 'none'); one without a default (conv stride, pooling
  kernel, a training flag, an output_mask) makes the count NaN, unless the tensor shapes tell it
  (a conv's groups is never needed: weight.shape[1] is Cin/groups; an embedding bag's max mode
  shows as its [B, D] maximum_indices). Traces without "Concrete Inputs" (PyTorch 1.x and early
  2.x: the profiler gained them in 2023, pytorch#100593) record no scalar argument at all; one
  exception serves them: native_layer_norm_backward with no recorded output_mask counts every
  gradient it can give (grad_input, and grad_weight/grad_bias where weight/bias are passed),
  which is what autograd asks of an affine LayerNorm.
* Each computation carries a formula at exactly one nesting level of a PyTorch call stack, since
  the reader takes FLOPs from the outermost op with a formula and skips its descendants:
  conv on ``aten::convolution`` (not conv2d/_convolution/mkldnn_/cudnn_convolution), GEMMs on
  mm/addmm/bmm/baddbmm (not linear/matmul/einsum, which decompose into them), batch-norm on
  native_/cudnn_/miopen_batch_norm (not batch_norm/_batch_norm_impl_index), softmax on _softmax,
  cross-entropy on its parts (_log_softmax, nll_loss_forward), LSTM on the layer kernels
  (mkldnn_rnn_layer on CPU, _cudnn_rnn on CUDA) or, where aten::lstm/lstm_cell decompose into
  visible linear/sigmoid/tanh/mul ops (CPU without oneDNN, nn.LSTMCell), on those ops; aten::lstm
  itself has no formula. Conv backward (PyTorch >= 1.11) on convolution_backward; in PyTorch
  1.8-1.10 on the per-gradient ops cudnn_/miopen_(depthwise_)/mkldnn_convolution(_transpose)_
  backward_input and _backward_weight(s), not on the cudnn_/miopen_/mkldnn_convolution_backward
  that calls one per requested gradient: their presence is the output_mask those traces never
  record (grad_input then comes from the grad_output and weight shapes alone; grad_weight needs
  the int[] weight_size for its kernel size, NaN when unrecorded). Fused attention on the
  _scaled_dot_product_{flash,efficient,cudnn}_attention(_backward) ops (their inner
  _flash_/_efficient_/_cudnn_attention_forward/_backward carry equal formulas);
  scaled_dot_product_attention has none, and neither has _scaled_dot_product_attention_math, whose
  visible bmm/_softmax/mul ops carry the math path. Embedding backward on embedding_dense_backward
  / embedding_sparse_backward (0), not embedding_backward; embedding bags on _embedding_bag_dense_
  backward, not _embedding_bag_backward (the sparse path's visible index_select/mul_ carry it).
  Wrappers that contain the same computation (relu > clamp_min, mean > sum + div_, max_pool2d >
  max_pool2d_with_indices, _foreach_add_ > add_, convolution_backward > _slow_conv2d_backward,
  embedding_bag > _embedding_bag, _scaled_dot_product_flash_attention > _flash_attention_forward)
  carry equal formulas, so either level gives the same count.

Names are exact Kineto names with their ``aten::`` prefix.

Layout: this module holds the public API, the precision rule and the dispatch table; the op-call
record `OpShapes` lives in `tbd.core.records`, argument parsing in `analysis.flops.args`, the formulas
in `analysis.flops.dense` (GEMM, convolution, attention), `analysis.flops.rnn` (RNN/LSTM/GRU) and
`analysis.flops.elementwise` (elementwise, reductions, softmax, losses, normalization, pooling,
data movement).
"""

from __future__ import annotations

import math
import re
from typing import Callable

from tbd.analysis.flops.args import Unparseable, input_shape, numel
from tbd.analysis.flops.dense import ATTENTION, CONV_BACKWARD, batched_gemm, convolution, convolution_backward, gemm, mv
from tbd.analysis.flops.elementwise import (
    ELEMENTWISE,
    FOREACH,
    INPLACE_ELEMENTWISE,
    ZERO_OPS,
    adaptive_avg_pool,
    avg_pool,
    avg_pool_backward,
    batch_norm_backward,
    batch_norm_forward,
    batch_norm_legit,
    cudnn_batch_norm_backward,
    elementwise,
    embedding_bag,
    embedding_bag_dense_backward,
    foreach,
    layer_norm,
    layer_norm_backward,
    max_pool,
    mse_loss,
    mse_loss_backward,
    nll_loss_backward,
    nll_loss_forward,
    per_element,
    reduce_mean,
    reduce_sum,
    roi_align,
    roi_align_backward,
)
from tbd.analysis.flops.rnn import cudnn_rnn, fused_lstm_cell, fused_lstm_cell_backward, mkldnn_rnn_layer
from tbd.analysis.precision import op_precision
from tbd.core.records import OpShapes


def precision_of(input_types, input_dims=None) -> str:
    """Precision of an op call from its Kineto input types (and dims): `analysis.precision.op_precision`.

    "fp32", "fp16", "bf16", "fp64", "fp8", "int" (every typed input integer or bool) or "" (nothing
    tells). The first floating-point tensor input decides; a 0-d input (a wrapped Python scalar)
    decides only when no tensor input is floating.
    """
    return op_precision(input_types, input_dims)


def _build_table() -> dict[str, Callable[[OpShapes], float]]:
    """Op name -> formula; one level per computation (module docstring)."""
    t: dict[str, Callable[[OpShapes], float]] = {}
    t.update({"aten::mm": gemm(0, 1), "aten::addmm": gemm(1, 2), "aten::_addmm_activation": gemm(1, 2),
              "aten::_scaled_mm": gemm(0, 1), "aten::bmm": batched_gemm(0, 1),
              "aten::baddbmm": batched_gemm(1, 2), "aten::addbmm": batched_gemm(1, 2),
              "aten::mv": mv(0, 1), "aten::addmv": mv(1, 2),
              "aten::dot": lambda op: 2 * numel(input_shape(op, 0)),
              "aten::convolution": convolution, "aten::convolution_backward": convolution_backward})
    for name, cost in INPLACE_ELEMENTWISE.items():
        t[f"aten::{name}"] = t[f"aten::{name}_"] = elementwise(cost)
    for name, cost in ELEMENTWISE.items():
        t[f"aten::{name}"] = elementwise(cost)
    for name, cost in FOREACH.items():
        t[f"aten::_foreach_{name}"] = t[f"aten::_foreach_{name}_"] = foreach(cost)
    t["aten::_foreach_norm"] = foreach(2)
    t.update({"aten::sum": reduce_sum, "aten::mean": reduce_mean, "aten::linalg_vector_norm": per_element(2),
              "aten::_softmax": per_element(5), "aten::_log_softmax": per_element(5),
              "aten::_softmax_backward_data": per_element(4),
              "aten::_log_softmax_backward_data": per_element(4),
              "aten::nll_loss_forward": nll_loss_forward, "aten::nll_loss2d_forward": nll_loss_forward,
              "aten::nll_loss_backward": nll_loss_backward, "aten::nll_loss2d_backward": nll_loss_backward,
              "aten::mse_loss": mse_loss, "aten::mse_loss_backward": mse_loss_backward,
              "aten::embedding_dense_backward": per_element(1)})
    t.update({"aten::native_batch_norm": batch_norm_forward(5), "aten::cudnn_batch_norm": batch_norm_forward(5),
              "aten::miopen_batch_norm": batch_norm_forward(5), "aten::_native_batch_norm_legit": batch_norm_legit,
              "aten::_native_batch_norm_legit_no_training": batch_norm_forward(None, False),
              "aten::_batch_norm_with_update": batch_norm_forward(None, True),
              "aten::_batch_norm_no_update": batch_norm_forward(None, False),
              "aten::native_batch_norm_backward": batch_norm_backward, "aten::batch_norm_backward": batch_norm_backward,
              "aten::cudnn_batch_norm_backward": cudnn_batch_norm_backward,
              "aten::miopen_batch_norm_backward": cudnn_batch_norm_backward,
              "aten::native_layer_norm": layer_norm, "aten::native_layer_norm_backward": layer_norm_backward})
    for nsp in (1, 2, 3):
        t[f"aten::max_pool{nsp}d_with_indices"] = max_pool(nsp)
    t.update({"aten::max_pool2d": max_pool(2), "aten::max_pool3d": max_pool(3),
              "aten::max_pool2d_with_indices_backward": per_element(1),
              "aten::max_pool3d_with_indices_backward": per_element(1),
              "aten::avg_pool2d": avg_pool(2), "aten::avg_pool3d": avg_pool(3),
              "aten::avg_pool2d_backward": avg_pool_backward(2),
              "aten::avg_pool3d_backward": avg_pool_backward(3),
              "aten::adaptive_avg_pool2d": adaptive_avg_pool(2),
              "aten::_adaptive_avg_pool2d": adaptive_avg_pool(2),
              "aten::_adaptive_avg_pool2d_backward": per_element(1, 1)})
    t.update({"torchvision::roi_align": roi_align, "torchvision::_roi_align_backward": roi_align_backward})
    for name, formula in {**CONV_BACKWARD, **ATTENTION}.items():
        t[f"aten::{name}"] = formula
    t.update({"aten::embedding_bag": embedding_bag, "aten::_embedding_bag": embedding_bag,
              "aten::_embedding_bag_forward_only": embedding_bag,
              "aten::_embedding_bag_dense_backward": embedding_bag_dense_backward})
    t.update({"aten::_cudnn_rnn": cudnn_rnn(False), "aten::_cudnn_rnn_backward": cudnn_rnn(True),
              "aten::mkldnn_rnn_layer": mkldnn_rnn_layer(False),
              "aten::mkldnn_rnn_layer_backward": mkldnn_rnn_layer(True),
              "aten::_thnn_fused_lstm_cell": fused_lstm_cell,
              "aten::_thnn_fused_lstm_cell_backward_impl": fused_lstm_cell_backward,
              "aten::_thnn_fused_lstm_cell_backward": fused_lstm_cell_backward})
    for name in ZERO_OPS:
        t[f"aten::{name}"] = lambda op: 0.0
    return t


_TABLE: dict[str, Callable[[OpShapes], float]] = _build_table()

#: Names of the ops that have a formula.
FORMULA_OPS: frozenset[str] = frozenset(_TABLE)


#: Ops that do no arithmetic of their own, by exact Kineto name: the data movement of ZERO_OPS (with its in-place
#: and PyTorch's unprefixed `detach` spellings; resolve_conj/resolve_neg return their input unless it is lazily
#: conjugated or negated), and autograd's bookkeeping, whose arithmetic its ATen ops do: the
#: nodes (ReluBackward0, AccumulateGrad) and the engine's `evaluate_function:` around each.
NO_ARITHMETIC_OPS: frozenset[str] = frozenset(
    [f"aten::{name}" for name in ZERO_OPS] + [f"aten::{name}_" for name in ZERO_OPS if not name.endswith("_")]
    + ["detach", "detach_", "aten::resolve_conj", "aten::resolve_neg", "aten::set_", "aten::record_stream"])
_AUTOGRAD = re.compile(r"autograd::engine::evaluate_function: .*|(?:torch::autograd::)?(?:\w+Backward\d*|"
                       r"AccumulateGrad|CopySlices|GraphRoot|Error|NotImplemented|UndefinedGradBackward)")


def does_no_arithmetic(name: str) -> bool:
    """Whether the op `name` (an exact Kineto name) does no arithmetic in its own time: data movement or
    bookkeeping (NO_ARITHMETIC_OPS, autograd's nodes and engine). Its op's FLOPs are never its, on the CPU
    where a row is an op's self time: `aten::empty` or `detach` under an `aten::addmm` takes no share of the
    GEMM, and `ReluBackward0`'s work is counted where its ATen op (`aten::threshold_backward`) is."""
    return name in NO_ARITHMETIC_OPS or _AUTOGRAD.fullmatch(name) is not None


def has_formula(name: str) -> bool:
    """Whether `name` (an exact Kineto op name, e.g. "aten::addmm") has a FLOP formula."""
    return name in _TABLE


def op_flops(op: OpShapes) -> float | None:
    """FLOPs of one call; None when the op has no formula.

    Raises nothing on odd shapes: for a formula op whose shapes or scalar arguments are missing or
    unparseable returns math.nan, and so for a count that comes out negative or not finite
    (negative or astronomically large dims in a corrupt trace). Integer-only calls (precision
    "int") return 0.0.
    """
    formula = _TABLE.get(op.name)
    if formula is None:
        return None
    if precision_of(op.input_types, op.input_dims) == "int":
        return 0.0
    try:
        count = float(formula(op))
    except (Unparseable, ArithmeticError, IndexError, KeyError, TypeError, ValueError, RecursionError):
        return math.nan  # ArithmeticError: ZeroDivisionError, and OverflowError of a count beyond float
    return count if math.isfinite(count) and count >= 0 else math.nan
