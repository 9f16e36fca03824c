"""MXNet operators as the ATen ops computing the same thing, so the shared FLOP formulas count them.

MXNet's profiler records operator names only; the hook logs each graph operator's operand shapes
and attributes, and the trainer's parameter shapes (profilers/mxnet/shapes.py). `MXNET_TO_ATEN`
maps an operator onto the logged call it reads and an adapter from that call to ATen calls
(`OpShapes`): the Gluon layers (Conv, Dense, RNN) from `profilers.mxnet.layer_ops`, every other
graph operator here. `update_atens` does the same for the fused optimizer operators, per
parameter. The reader (profilers/mxnet/trace.py) pairs logged calls with operator events and
applies the caller's FLOP formulas.
"""

from __future__ import annotations

import ast
import math
from typing import Callable

from tbd.core.records import OpShapes
from tbd.profilers.mxnet.layer_ops import LAYER_TO_ATEN, call_type

# Every graph operator but the layers is logged as {"op", "inputs": [shapes], "output": shape,
# "attrs": {name: string}} (profilers/mxnet/shapes.py) and mapped onto the ATen op computing the same thing.


def _attr(call: dict, name: str, default=None):
    """An operator attribute as MXNet's JSON writes it ("(3, 3)", "True", "max"), parsed."""
    raw = (call.get("attrs") or {}).get(name)
    if raw is None:
        return default
    text = str(raw)
    if text in ("True", "False"):
        return text == "True"
    if text[:1] in "([-0123456789":
        return ast.literal_eval(text)
    return text


def _ew(aten: str, *shapes: list, t: str, scalar: bool = False) -> OpShapes:
    """An elementwise ATen call over tensors of `shapes` (plus a Scalar operand when `scalar`)."""
    dims = tuple(list(x) for x in shapes) + (([],) if scalar else ())
    types = tuple(t for _ in shapes) + (("Scalar",) if scalar else ())
    return OpShapes(aten, dims, types, tuple("" for _ in dims))


def _unary(aten: str) -> Callable[[dict], list[OpShapes]]:
    return lambda call: [_ew(aten, call["inputs"][0], t=call_type(call))]


def _binary(aten: str) -> Callable[[dict], list[OpShapes]]:
    return lambda call: [_ew(aten, call["inputs"][0], call["inputs"][1], t=call_type(call))]


def _scalar(aten: str) -> Callable[[dict], list[OpShapes]]:
    # _mul_scalar, _plus_scalar, ...: tensor (op) scalar, one operation per element.
    return lambda call: [_ew(aten, call["inputs"][0], t=call_type(call), scalar=True)]


def _add_n(call: dict) -> list[OpShapes]:
    # add_n / ElementWiseSum of n arrays: n - 1 additions.
    x = call["inputs"][0]
    return [_ew("aten::add", x, x, t=call_type(call)) for _ in call["inputs"][1:]]


_ACTIVATIONS = {"relu": ("aten::relu", "aten::threshold_backward"), "tanh": ("aten::tanh", "aten::tanh_backward"),
                "sigmoid": ("aten::sigmoid", "aten::sigmoid_backward")}


def _activation(backward: bool, kind: str | None = None) -> Callable[[dict], list[OpShapes] | None]:
    # Activation(act_type=...) or relu/tanh/sigmoid; the backward reads the gradient and the output.
    def f(call: dict) -> list[OpShapes] | None:
        names = _ACTIVATIONS.get(kind or _attr(call, "act_type", ""))
        if names is None:
            return None  # softrelu, softsign: no ATen formula
        x = call["inputs"][0]
        return [_ew(names[1], x, x, t=call_type(call))] if backward else [_ew(names[0], x, t=call_type(call))]
    return f


def _batch_norm(call: dict) -> list[OpShapes]:
    # BatchNorm(data, gamma, beta, moving_mean, moving_var): native_batch_norm, training at 5
    # (use_global_stats=True is MXNet's frozen/inference form: y = x·α + β).
    x, t = call["inputs"][0], call_type(call)
    c = [x[int(_attr(call, "axis", 1))]]
    training = not _attr(call, "use_global_stats", False)
    return [OpShapes("aten::native_batch_norm", (x, c, c, c, c, [], [], []), (t, t, t, t, t, "Scalar", "Scalar", "Scalar"),
                     ("", "", "", "", "", str(training), "", ""))]


def _batch_norm_backward(call: dict) -> list[OpShapes]:
    # MXNet's BatchNorm backward computes grad_input, grad_gamma and grad_beta together.
    x, t = call["inputs"][0], call_type(call)
    c = [x[int(_attr(call, "axis", 1))]]
    training = not _attr(call, "use_global_stats", False)
    return [OpShapes("aten::native_batch_norm_backward", (x, x, c, c, c, c, c, [], [], []),
                     (t, t, t, t, t, t, t, "Scalar", "Scalar", "ScalarList"),
                     ("", "", "", "", "", "", "", str(training), "", "[True, True, True]"))]


def _pool_args(call: dict) -> tuple[list, list, list, list, bool]:
    x = call["inputs"][0]
    nsp = len(x) - 2
    k = list(_attr(call, "kernel", ()) or ())
    return (x, k, list(_attr(call, "stride", ()) or (1,) * nsp), list(_attr(call, "pad", ()) or (0,) * nsp),
            _attr(call, "pooling_convention", "valid") == "full")


def _pooling(call: dict) -> list[OpShapes] | None:
    x, k, s, p, ceil = _pool_args(call)
    kind, t, nsp = _attr(call, "pool_type", "max"), call_type(call), len(call["inputs"][0]) - 2
    if _attr(call, "global_pool", False):
        if kind != "avg":
            return None
        return [OpShapes(f"aten::adaptive_avg_pool{nsp}d", (x, []), (t, "ScalarList"), ("", str([1] * nsp)))]
    if kind == "max":
        return [OpShapes(f"aten::max_pool{nsp}d_with_indices", (x, [], [], [], [], []),
                         (t, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"),
                         ("", str(k), str(s), str(p), str([1] * nsp), str(ceil)))]
    if kind == "avg":
        include = _attr(call, "count_include_pad", True)
        return [OpShapes(f"aten::avg_pool{nsp}d", (x, [], [], [], [], [], []),
                         (t, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", ""),
                         ("", str(k), str(s), str(p), str(ceil), str(include), ""))]
    return None


def _pooling_backward(call: dict) -> list[OpShapes] | None:
    x, k, _, _, _ = _pool_args(call)
    out, t, nsp = call["output"], call_type(call), len(call["inputs"][0]) - 2
    kind = _attr(call, "pool_type", "max")
    if _attr(call, "global_pool", False):
        # One divide per input element (adaptive average pool's backward).
        return [OpShapes(f"aten::_adaptive_avg_pool{nsp}d_backward", (out, x), (t, t), ("", ""))] if kind == "avg" else None
    if kind == "max":
        return [OpShapes(f"aten::max_pool{nsp}d_with_indices_backward", (out,), (t,), ("",))]
    if kind == "avg":
        return [OpShapes(f"aten::avg_pool{nsp}d_backward", (out, x, []), (t, t, "ScalarList"), ("", "", str(k)))]
    return None


def _softmax(aten: str, backward: bool) -> Callable[[dict], list[OpShapes]]:
    def f(call: dict) -> list[OpShapes]:
        x, t = call["inputs"][0], call_type(call)
        if backward:
            return [OpShapes(aten, (x, x, [], []), (t, t, "Scalar", "Scalar"), ("", "", "-1", ""))]
        return [OpShapes(aten, (x, [], []), (t, "Scalar", "Scalar"), ("", "-1", ""))]
    return f


def _batch_dot_dims(call: dict) -> tuple[list, list]:
    a, b = list(call["inputs"][0]), list(call["inputs"][1])
    if _attr(call, "transpose_a", False):
        a[-2], a[-1] = a[-1], a[-2]
    if _attr(call, "transpose_b", False):
        b[-2], b[-1] = b[-1], b[-2]
    return a, b


def _batch_dot(call: dict) -> list[OpShapes]:
    a, b = _batch_dot_dims(call)
    t = call_type(call)
    if len(a) == 2:
        return [OpShapes("aten::mm", (a, b), (t, t), ())]
    batch = math.prod(a[:-2])
    return [OpShapes("aten::bmm", ([batch, a[-2], a[-1]], [batch, b[-2], b[-1]]), (t, t), ())]


def _batch_dot_backward(call: dict) -> list[OpShapes]:
    # dA = dC Bᵀ and dB = Aᵀ dC: two products of the forward's size.
    return _batch_dot(call) * 2


def _reduce(mean: bool) -> Callable[[dict], list[OpShapes]]:
    # sum: one add per input element; mean: plus one divide per output element (analysis.flops.ops).
    def f(call: dict) -> list[OpShapes]:
        calls = [OpShapes("aten::sum", (call["inputs"][0],), (call_type(call),), ("",))]
        return calls + ([_ew("aten::div", call["output"], t=call_type(call), scalar=True)] if mean else [])
    return f


def _mean_backward(call: dict) -> list[OpShapes]:
    # The gradient spread over the input, divided by the count: one divide per input element.
    return [_ew("aten::div", call["inputs"][0], t=call_type(call), scalar=True)]


def _mul_backward(call: dict) -> list[OpShapes]:
    # d(a·b): grad·b and grad·a over the output, plus a sum into each operand the forward broadcast.
    out, t = call["output"], call_type(call)
    calls = [_ew("aten::mul", out, out, t=t), _ew("aten::mul", out, out, t=t)]
    return calls + [OpShapes("aten::sum", (out,), (t,), ("",)) for x in call["inputs"][:2] if list(x) != list(out)]


def _embedding_backward(call: dict) -> list[OpShapes]:
    # Scatter-add of each output row's gradient into the table: one add per gradient element.
    return [OpShapes("aten::embedding_dense_backward", (call["output"],), (call_type(call),), ("",))]


def _dropout(backward: bool) -> Callable[[dict], list[OpShapes]]:
    def f(call: dict) -> list[OpShapes]:
        x, t = call["inputs"][0], call_type(call)
        if backward:
            return [OpShapes("aten::native_dropout_backward", (x, x, []), (t, t, "Scalar"), ("", "", ""))]
        return [OpShapes("aten::native_dropout", (x, [], []), (t, "Scalar", "Scalar"), ("", "", "True"))]
    return f


def _layer_norm(backward: bool) -> Callable[[dict], list[OpShapes]]:
    def f(call: dict) -> list[OpShapes]:
        x, t = call["inputs"][0], call_type(call)
        c = [x[int(_attr(call, "axis", -1))]]
        if backward:
            return [OpShapes("aten::native_layer_norm_backward", (x, x, [], [], [], c, c, []),
                             (t, t, "ScalarList", t, t, t, t, "ScalarList"),
                             ("", "", str(c), "", "", "", "", "[True, True, True]"))]
        return [OpShapes("aten::native_layer_norm", (x, [], c, c, []), (t, "ScalarList", t, t, "Scalar"),
                         ("", str(c), "", "", ""))]
    return f


def _roi_align_args(call: dict) -> tuple[list, list, int, int, int]:
    """(data [N, C, H, W], rois [R, 5], pooled h, pooled w, sample ratio) of _contrib_ROIAlign."""
    ph, pw = _attr(call, "pooled_size")
    return call["inputs"][0], call["inputs"][1], int(ph), int(pw), int(_attr(call, "sample_ratio", -1))


def _roi_align(call: dict) -> list[OpShapes]:
    x, rois, ph, pw, ratio = _roi_align_args(call)
    t = call_type(call)
    return [OpShapes("torchvision::roi_align", (x, rois, [], [], [], [], []),
                     (t, t, "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"),
                     ("", "", str(_attr(call, "spatial_scale", 1.0)), str(ph), str(pw), str(ratio), "True"))]


def _roi_align_backward(call: dict) -> list[OpShapes]:
    x, rois, ph, pw, ratio = _roi_align_args(call)
    t = call_type(call)
    grad = [rois[0], x[1], ph, pw]
    return [OpShapes("torchvision::_roi_align_backward", (grad, rois) + ([],) * 9,
                     (t, t) + ("Scalar",) * 9,
                     ("", "", "", str(ph), str(pw), str(x[0]), str(x[1]), str(x[2]), str(x[3]), str(ratio), "True"))]


#: MXNet operator -> (the logged call it reads, adapter to the ATen calls computing the same thing).
#: An adapter may return None: that call's shapes admit no formula (e.g. softrelu): FLOPs unknown.
MXNET_TO_ATEN: dict[str, tuple[str, Callable[[dict], list[OpShapes] | None]]] = {
    **LAYER_TO_ATEN,
    "BatchNorm": ("BatchNorm", _batch_norm), "_backward_BatchNorm": ("BatchNorm", _batch_norm_backward),
    "Activation": ("Activation", _activation(False)), "_backward_Activation": ("Activation", _activation(True)),
    "Pooling": ("Pooling", _pooling), "_backward_Pooling": ("Pooling", _pooling_backward),
    "softmax": ("softmax", _softmax("aten::_softmax", False)),
    "_backward_softmax": ("softmax", _softmax("aten::_softmax_backward_data", True)),
    "log_softmax": ("log_softmax", _softmax("aten::_log_softmax", False)),
    "_backward_log_softmax": ("log_softmax", _softmax("aten::_log_softmax_backward_data", True)),
    "batch_dot": ("batch_dot", _batch_dot), "_backward_batch_dot": ("batch_dot", _batch_dot_backward),
    "dot": ("dot", _batch_dot), "_backward_dot": ("dot", _batch_dot_backward),
    "sum": ("sum", _reduce(False)), "mean": ("mean", _reduce(True)), "_backward_mean": ("mean", _mean_backward),
    "elemwise_add": ("elemwise_add", _binary("aten::add")), "broadcast_add": ("broadcast_add", _binary("aten::add")),
    "elemwise_sub": ("elemwise_sub", _binary("aten::sub")), "broadcast_sub": ("broadcast_sub", _binary("aten::sub")),
    "elemwise_mul": ("elemwise_mul", _binary("aten::mul")), "broadcast_mul": ("broadcast_mul", _binary("aten::mul")),
    "elemwise_div": ("elemwise_div", _binary("aten::div")), "broadcast_div": ("broadcast_div", _binary("aten::div")),
    "_backward_mul": ("elemwise_mul", _mul_backward), "_backward_broadcast_mul": ("broadcast_mul", _mul_backward),
    "add_n": ("add_n", _add_n), "ElementWiseSum": ("ElementWiseSum", _add_n),
    "_mul_scalar": ("_mul_scalar", _scalar("aten::mul")), "_backward_mul_scalar": ("_mul_scalar", _scalar("aten::mul")),
    "_div_scalar": ("_div_scalar", _scalar("aten::div")), "_backward_div_scalar": ("_div_scalar", _scalar("aten::div")),
    "_plus_scalar": ("_plus_scalar", _scalar("aten::add")), "_minus_scalar": ("_minus_scalar", _scalar("aten::sub")),
    "_rminus_scalar": ("_rminus_scalar", _scalar("aten::sub")), "negative": ("negative", _unary("aten::neg")),
    "_equal_scalar": ("_equal_scalar", _scalar("aten::eq")),
    "relu": ("relu", _activation(False, "relu")), "_backward_relu": ("relu", _activation(True, "relu")),
    "tanh": ("tanh", _activation(False, "tanh")), "_backward_tanh": ("tanh", _activation(True, "tanh")),
    "sigmoid": ("sigmoid", _activation(False, "sigmoid")), "_backward_sigmoid": ("sigmoid", _activation(True, "sigmoid")),
    "exp": ("exp", _unary("aten::exp")), "log": ("log", _unary("aten::log")), "sqrt": ("sqrt", _unary("aten::sqrt")),
    "square": ("square", _unary("aten::mul")),
    "_backward_Embedding": ("Embedding", _embedding_backward),
    "Dropout": ("Dropout", _dropout(False)), "_backward_Dropout": ("Dropout", _dropout(True)),
    "LayerNorm": ("LayerNorm", _layer_norm(False)), "_backward_LayerNorm": ("LayerNorm", _layer_norm(True)),
    "_contrib_ROIAlign": ("_contrib_ROIAlign", _roi_align), "_backward_ROIAlign": ("_contrib_ROIAlign", _roi_align_backward),
}

#: Operators whose logged calls pair with events only when their counts in the step agree (see the
#: reader's pairing): the ones also run outside the logged graphs or whose backward may be skipped.
#: (The Gluon layers' hook-logged calls pair in order.)
PAIR_BY_COUNT = frozenset(MXNET_TO_ATEN) - frozenset(LAYER_TO_ATEN)

#: MXNet operators that move, gather, mask or free data and do no arithmetic: a known 0 FLOPs
#: (as analysis.flops.ops' data-movement ops), no shapes needed. DeleteVariable is the engine freeing
#: an array; SetValueOp fills; _backward_add/_backward_reshape/... copy the gradient through.
MXNET_ZERO_FLOPS = frozenset("""
    Reshape _backward_reshape reshape_like SwapAxis _backward_SwapAxis transpose _backward_transpose Concat
    _backward_Concat concat stack _backward_stack SliceChannel split _split_v2 _backward_split_v2 slice
    _backward_slice slice_axis _backward_slice_axis slice_like expand_dims _backward_expand_dims squeeze Flatten
    _backward_Flatten _rnn_param_concat DeleteVariable SetValueOp _zeros _zeros_without_dtype _ones _full zeros_like
    ones_like _copy _copyto _backward_copy Cast _backward_Cast amp_cast broadcast_like broadcast_to broadcast_axis
    where _backward_where pick _backward_pick take _backward_take Embedding one_hot SequenceMask
    _backward_SequenceMask _backward_add _backward_plus _arange _contrib_arange_like _identity_with_attr_like_rhs
    BlockGrad stop_gradient _backward_elemwise_add identity _backward_identity
""".split())


# --- Optimizer operators, paired with the trainer's parameter list (profilers/mxnet_shapes._update_call).
# Per-element work of MXNet's kernels (src/operator/optimizer_op-inl.h), written as the ATen
# elementwise ops that compute it so the shared table counts it:
#   sgd_update: w = w - lr·(rescale·g + wd·w): scale g (1), add wd·w (2), add into w (2) = 5.
#   sgd_mom_update: m = μ·m - lr·(rescale·g + wd·w); w += m: the above into m (5) + μ·m (1) + w += m (1) = 7.
#   adam_update: g' = rescale·g + wd·w (3); m = β1·m + (1-β1)·g' (3); v = β2·v + (1-β2)·g'² (4);
#   w -= lr·m / (sqrt(v) + ε): sqrt (1), + ε (1), addcdiv (3) = 15.
#   rmsprop_update (centered=False): g' (3); n = (1-γ1)·g'² + γ1·n (4); w -= lr·g' / sqrt(n + ε):
#   + ε (1), sqrt (1), addcdiv (3) = 12.
def update_atens(kind: str, shape: list, t: str) -> list[OpShapes]:
    """The ATen calls of one parameter's update (`kind` of `UPDATE_OPS`, parameter `shape`, type `t`)."""
    grad = [_ew("aten::mul", shape, t=t, scalar=True), _alpha_add(shape, t)]
    if kind == "sgd":
        return grad + [_alpha_add(shape, t)]
    if kind == "sgd_mom":
        return grad + [_alpha_add(shape, t), _ew("aten::mul", shape, t=t, scalar=True), _ew("aten::add", shape, shape, t=t)]
    if kind == "adam":
        return grad + [_ew("aten::mul", shape, t=t, scalar=True), _alpha_add(shape, t),
                       _ew("aten::mul", shape, t=t, scalar=True), _addc(shape, t),
                       _ew("aten::sqrt", shape, t=t), _ew("aten::add", shape, t=t, scalar=True), _addc(shape, t)]
    if kind == "rmsprop":
        return grad + [_ew("aten::mul", shape, t=t, scalar=True), _addc(shape, t),
                       _ew("aten::add", shape, t=t, scalar=True), _ew("aten::sqrt", shape, t=t), _addc(shape, t)]
    raise ValueError(f"optimizer kind {kind!r}")


def _alpha_add(shape: list, t: str) -> OpShapes:
    # a + alpha·b with alpha != 1: 2 per element.
    return OpShapes("aten::add", (shape, shape, []), (t, t, "Scalar"), ("", "", "0.5"))


def _addc(shape: list, t: str) -> OpShapes:
    # a + value·(b∘c) with value != 1: 3 per element.
    return OpShapes("aten::addcmul", (shape, shape, shape, []), (t, t, t, "Scalar"), ("", "", "", "0.5"))


#: Optimizer operator -> (update kind, aggregated: True for multi_* operators taking several weights).
UPDATE_OPS = {"sgd_update": ("sgd", False), "sgd_mom_update": ("sgd_mom", False),
              "multi_sgd_update": ("sgd", True), "multi_sgd_mom_update": ("sgd_mom", True),
              "adam_update": ("adam", False), "rmsprop_update": ("rmsprop", False)}
