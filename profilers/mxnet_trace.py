"""MXNet profiler dump reader: `mx.profiler.dump()` output becomes `TraceRecords` (no mxnet import).

What MXNet 1.9's profiler writes (checked on real dumps, profile_all=True, aggregate_stats=False):
- Operator events: "B"/"E" pairs, cat "operator", pid = the device's process (named by a
  "process_name" metadata event: "cpu/0", "gpu/0", ...), tid = the engine worker thread. Names are
  MXNet operator names (Convolution, FullyConnected, _backward_Convolution, ...). NO operand
  shapes or arguments are recorded. The same operators are written again as async "b"/"e" pairs
  in an "operator" domain process; those duplicates are ignored.
- Times: integer microseconds ("displayTimeUnit": "ms" notwithstanding), so durations are exact
  only to the microsecond; they become integer ns (x 1000).
- Memory: "C" counter events cat "Device Storage", name "Memory: cpu/0" (one series per device
  storage), value = bytes currently allocated through MXNet's storage since profiling started.
  No addresses and no operator tags: they become `MemoryEvents` with addr 0 and bytes = the
  counter's change, total_allocated = the counter.
- Iterations: the hook marks each traced iteration with an `mx.profiler.Task` named
  "ProfilerStep#N" in the "tbd" domain, written as an async "b"/"e" pair.

Rows (CPU and GPU alike): one per operator event, covering its SELF time (operator events on one
thread rarely nest; when they do the parent keeps only its own time). On a GPU the rows are
MXNet's operator times, not CUDA kernels (the profiler does not record kernels); device = the
event's device. Busy intervals = the outermost operator intervals of each thread. Window: first
step start to last step end (else the whole trace, with a note); rows start inside it.

FLOPs: MXNet operators map onto the shared ATen formula table (`analysis.flops`) through
`MXNET_TO_ATEN` below (Convolution, FullyConnected, and RNN as aten::_cudnn_rnn); shapes come from the hook's per-step call log (raw/mxnet_shapes.json,
`shapes=`), since the dump has none. In each step the k-th forward event named X is the k-th
logged call of X, and the k-th "_backward_X" event the k-th call counted from the end (autograd
runs the graph in reverse). Rows without a logged call have NaN FLOPs.
"""

from __future__ import annotations

import math
import re
from typing import Callable

import numpy as np
from tbd.analysis.flops_args import OpShapes

from tbd.errors import TraceFormatError
from tbd.records import ANALYTIC, KernelTable, MemoryEvents, OpTable, StepSpan, TraceRecords

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
#: Engine events that wait for an array to be ready for a host read (asnumpy, wait_to_read): the
#: worker waits, it does no operator work, so they are neither rows nor busy time.
ENGINE_WAITS = frozenset({"WaitForVar", "WaitForAll"})
_DEVICE = re.compile(r"^(cpu|gpu)/(\d+)$")
_HINT = "record with mx.profiler.set_config(profile_all=True, aggregate_stats=False) and mx.profiler.dump()"
SHAPES_SCHEMA = "tbd.mxnet_shapes/1"

# numpy dtype name -> the type string analysis.flops.precision_of reads (Kineto's spelling).
_TYPES = {"float32": "float", "float16": "c10::Half", "float64": "double", "bfloat16": "c10::BFloat16"}


def _conv(call: dict) -> list[OpShapes]:
    # aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    t = _TYPES.get(call.get("dtype", ""), "")
    return [OpShapes("aten::convolution", (call["input"], call["weight"], [], [], [], [], [], [], []),
                     (t, t), ("", "", "", str(call["stride"]), str(call["pad"]), str(call["dilate"]),
                              "False", "", str(call["groups"])))]


def _conv_backward(call: dict) -> list[OpShapes]:
    # aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    # transposed, output_padding, groups, output_mask): grad_input only when the input needs it.
    t = _TYPES.get(call.get("dtype", ""), "")
    mask = [bool(call["input_grad"]), True, bool(call.get("bias", False))]
    return [OpShapes("aten::convolution_backward", (call["output"], call["input"], call["weight"]),
                     (t, t, t), ("", "", "", "", str(call["stride"]), str(call["pad"]), str(call["dilate"]),
                                 "False", "", str(call["groups"]), str(mask)))]


def _fc_dims(call: dict) -> tuple[int, int, int]:
    """(m, k, n) of FullyConnected: data flattened to [m, k], weight [n, k]."""
    n, k = call["weight"]
    return math.prod(call["input"]) // k, k, n


def _fc(call: dict) -> list[OpShapes]:
    # y = x W^T: aten::mm([m, k], [k, n]); the bias add is not counted, as for addmm.
    t = _TYPES.get(call.get("dtype", ""), "")
    m, k, n = _fc_dims(call)
    return [OpShapes("aten::mm", ([m, k], [k, n]), (t, t), ())]


def _fc_backward(call: dict) -> list[OpShapes]:
    # grad_weight = dy^T x: mm([n, m], [m, k]); grad_input = dy W: mm([m, n], [n, k]) when needed.
    t = _TYPES.get(call.get("dtype", ""), "")
    m, k, n = _fc_dims(call)
    calls = [OpShapes("aten::mm", ([n, m], [m, k]), (t, t), ())]
    if call["input_grad"]:
        calls.append(OpShapes("aten::mm", ([m, n], [n, k]), (t, t), ()))
    return calls


# MXNet's RNN modes -> cuDNN's cudnnRNNMode_t numbers, as aten::_cudnn_rnn takes them (flops_rnn).
_RNN_MODES = {"rnn_relu": 0, "rnn_tanh": 1, "lstm": 2, "gru": 3}
_RNN_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _rnn_weights(call: dict) -> list[list[int]]:
    """cuDNN's per layer and direction weights (w_ih, w_hh, b_ih, b_hh[, w_hr]) for the call's sizes.

    MXNet's RNN always has both bias vectors (src/operator/rnn-inl.h GetRnnParamSize), as cuDNN.
    """
    gates, hidden, proj = _RNN_GATES[call["mode"]], int(call["state_size"]), int(call.get("projection_size") or 0)
    dirs = 2 if call["bidirectional"] else 1
    out = []
    width = int(call["input_size"])
    for _ in range(int(call["num_layers"])):
        for _ in range(dirs):
            out += [[gates * hidden, width], [gates * hidden, proj or hidden], [gates * hidden], [gates * hidden]]
            out += [[proj, hidden]] if proj else []
        width = (proj or hidden) * dirs
    return out


def _rnn_args(call: dict, backward: bool) -> OpShapes:
    # aten::_cudnn_rnn(input, weight[], weight_stride0, weight_buf, hx, cx, mode, hidden_size,
    # proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes, dropout_state);
    # the backward puts output, grad_output, grad_hy, grad_cy after cx and output_mask at 21.
    t = _TYPES.get(call.get("dtype", ""), "")
    mode, hidden = call["mode"], int(call["state_size"])
    proj = int(call.get("projection_size") or 0)
    seq, batch, layers = int(call["seq_len"]), int(call["batch"]), int(call["num_layers"])
    if mode not in _RNN_MODES:
        raise ValueError(f"RNN mode {mode!r}")
    groups = layers * (2 if call["bidirectional"] else 1)
    x, state = [seq, batch, int(call["input_size"])], [groups, batch, proj or hidden]
    cell = [groups, batch, hidden] if mode == "lstm" else []
    dims = [x, _rnn_weights(call), [], [], state, cell]
    types = [t, "TensorList", "Scalar", "", t, t if cell else ""]
    scalars = ["", "", "", "", "", ""]
    if backward:
        y = [seq, batch, (proj or hidden) * (2 if call["bidirectional"] else 1)]
        dims += [y, y, state, cell]
        types += [t, t, t, t if cell else ""]
        scalars += ["", "", "", ""]
    dims += [[]] * 10
    types += ["Scalar"] * 8 + ["ScalarList", ""]
    scalars += [str(_RNN_MODES[mode]), str(hidden), str(proj), str(layers), "False", "0.0", "True",
                str(bool(call["bidirectional"])), "[]", ""]
    if backward:
        # output_mask (input, hx, cx, weight): cuDNN's backward-data pass runs whatever the mask.
        mask = [bool(call.get("input_grad", True)), True, mode == "lstm", bool(call["weight_grad"])]
        dims += [[], []]
        types += ["", "ScalarList"]
        scalars += ["", str(mask)]
    name = "aten::_cudnn_rnn_backward" if backward else "aten::_cudnn_rnn"
    return OpShapes(name, tuple(dims), tuple(types), tuple(scalars))


def _rnn(call: dict) -> list[OpShapes]:
    # MXNet's fused RNN operator (every layer and direction, the whole sequence) is cuDNN's RNN.
    return [_rnn_args(call, False)]


def _rnn_backward(call: dict) -> list[OpShapes]:
    return [_rnn_args(call, True)]


# --- Every other graph operator: logged as {"op", "inputs": [shapes], "output": shape, "attrs":
# {name: string}} (profilers/mxnet_shapes.py), mapped onto the ATen op computing the same thing.

def _t(call: dict) -> str:
    return _TYPES.get(call.get("dtype", ""), "")


def _attr(call: dict, name: str, default=None):
    """An operator attribute as MXNet's JSON writes it ("(3, 3)", "True", "max"), parsed."""
    raw = (call.get("attrs") or {}).get(name)
    if raw is None:
        return default
    text = str(raw)
    if text in ("True", "False"):
        return text == "True"
    if text[:1] in "([-0123456789":
        import ast

        return ast.literal_eval(text)
    return text


def _ew(aten: str, *shapes: list, t: str, scalar: bool = False) -> OpShapes:
    """An elementwise ATen call over tensors of `shapes` (plus a Scalar operand when `scalar`)."""
    dims = tuple(list(x) for x in shapes) + (([],) if scalar else ())
    types = tuple(t for _ in shapes) + (("Scalar",) if scalar else ())
    return OpShapes(aten, dims, types, tuple("" for _ in dims))


def _unary(aten: str) -> Callable[[dict], list[OpShapes]]:
    return lambda call: [_ew(aten, call["inputs"][0], t=_t(call))]


def _binary(aten: str) -> Callable[[dict], list[OpShapes]]:
    return lambda call: [_ew(aten, call["inputs"][0], call["inputs"][1], t=_t(call))]


def _scalar(aten: str) -> Callable[[dict], list[OpShapes]]:
    # _mul_scalar, _plus_scalar, ...: tensor (op) scalar, one operation per element.
    return lambda call: [_ew(aten, call["inputs"][0], t=_t(call), scalar=True)]


def _add_n(call: dict) -> list[OpShapes]:
    # add_n / ElementWiseSum of n arrays: n - 1 additions.
    x = call["inputs"][0]
    return [_ew("aten::add", x, x, t=_t(call)) for _ in call["inputs"][1:]]


_ACTIVATIONS = {"relu": ("aten::relu", "aten::threshold_backward"), "tanh": ("aten::tanh", "aten::tanh_backward"),
                "sigmoid": ("aten::sigmoid", "aten::sigmoid_backward")}


def _activation(backward: bool, kind: str | None = None) -> Callable[[dict], list[OpShapes] | None]:
    # Activation(act_type=...) or relu/tanh/sigmoid; the backward reads the gradient and the output.
    def f(call: dict) -> list[OpShapes] | None:
        names = _ACTIVATIONS.get(kind or _attr(call, "act_type", ""))
        if names is None:
            return None  # softrelu, softsign: no ATen formula
        x = call["inputs"][0]
        return [_ew(names[1], x, x, t=_t(call))] if backward else [_ew(names[0], x, t=_t(call))]
    return f


def _batch_norm(call: dict) -> list[OpShapes]:
    # BatchNorm(data, gamma, beta, moving_mean, moving_var): native_batch_norm, training at 5
    # (use_global_stats=True is MXNet's frozen/inference form: y = x·α + β).
    x, t = call["inputs"][0], _t(call)
    c = [x[int(_attr(call, "axis", 1))]]
    training = not _attr(call, "use_global_stats", False)
    return [OpShapes("aten::native_batch_norm", (x, c, c, c, c, [], [], []), (t, t, t, t, t, "Scalar", "Scalar", "Scalar"),
                     ("", "", "", "", "", str(training), "", ""))]


def _batch_norm_backward(call: dict) -> list[OpShapes]:
    # MXNet's BatchNorm backward computes grad_input, grad_gamma and grad_beta together.
    x, t = call["inputs"][0], _t(call)
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
    kind, t, nsp = _attr(call, "pool_type", "max"), _t(call), len(call["inputs"][0]) - 2
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
    out, t, nsp = call["output"], _t(call), len(call["inputs"][0]) - 2
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
        x, t = call["inputs"][0], _t(call)
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
    t = _t(call)
    if len(a) == 2:
        return [OpShapes("aten::mm", (a, b), (t, t), ())]
    batch = math.prod(a[:-2])
    return [OpShapes("aten::bmm", ([batch, a[-2], a[-1]], [batch, b[-2], b[-1]]), (t, t), ())]


def _batch_dot_backward(call: dict) -> list[OpShapes]:
    # dA = dC Bᵀ and dB = Aᵀ dC: two products of the forward's size.
    return _batch_dot(call) * 2


def _reduce(mean: bool) -> Callable[[dict], list[OpShapes]]:
    # sum: one add per input element; mean: plus one divide per output element (analysis.flops).
    def f(call: dict) -> list[OpShapes]:
        calls = [OpShapes("aten::sum", (call["inputs"][0],), (_t(call),), ("",))]
        return calls + ([_ew("aten::div", call["output"], t=_t(call), scalar=True)] if mean else [])
    return f


def _mean_backward(call: dict) -> list[OpShapes]:
    # The gradient spread over the input, divided by the count: one divide per input element.
    return [_ew("aten::div", call["inputs"][0], t=_t(call), scalar=True)]


def _mul_backward(call: dict) -> list[OpShapes]:
    # d(a·b): grad·b and grad·a over the output, plus a sum into each operand the forward broadcast.
    out, t = call["output"], _t(call)
    calls = [_ew("aten::mul", out, out, t=t), _ew("aten::mul", out, out, t=t)]
    return calls + [OpShapes("aten::sum", (out,), (t,), ("",)) for x in call["inputs"][:2] if list(x) != list(out)]


def _embedding_backward(call: dict) -> list[OpShapes]:
    # Scatter-add of each output row's gradient into the table: one add per gradient element.
    return [OpShapes("aten::embedding_dense_backward", (call["output"],), (_t(call),), ("",))]


def _dropout(backward: bool) -> Callable[[dict], list[OpShapes]]:
    def f(call: dict) -> list[OpShapes]:
        x, t = call["inputs"][0], _t(call)
        if backward:
            return [OpShapes("aten::native_dropout_backward", (x, x, []), (t, t, "Scalar"), ("", "", ""))]
        return [OpShapes("aten::native_dropout", (x, [], []), (t, "Scalar", "Scalar"), ("", "", "True"))]
    return f


def _layer_norm(backward: bool) -> Callable[[dict], list[OpShapes]]:
    def f(call: dict) -> list[OpShapes]:
        x, t = call["inputs"][0], _t(call)
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
    t = _t(call)
    return [OpShapes("torchvision::roi_align", (x, rois, [], [], [], [], []),
                     (t, t, "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"),
                     ("", "", str(_attr(call, "spatial_scale", 1.0)), str(ph), str(pw), str(ratio), "True"))]


def _roi_align_backward(call: dict) -> list[OpShapes]:
    x, rois, ph, pw, ratio = _roi_align_args(call)
    t = _t(call)
    grad = [rois[0], x[1], ph, pw]
    return [OpShapes("torchvision::_roi_align_backward", (grad, rois) + ([],) * 9,
                     (t, t) + ("Scalar",) * 9,
                     ("", "", "", str(ph), str(pw), str(x[0]), str(x[1]), str(x[2]), str(x[3]), str(ratio), "True"))]


#: MXNet operator -> (the logged call it reads, adapter to the ATen calls computing the same thing).
#: An adapter may return None: that call's shapes admit no formula (e.g. softrelu): FLOPs unknown.
MXNET_TO_ATEN: dict[str, tuple[str, Callable[[dict], list[OpShapes] | None]]] = {
    "Convolution": ("Convolution", _conv),
    "_backward_Convolution": ("Convolution", _conv_backward),
    "FullyConnected": ("FullyConnected", _fc),
    "_backward_FullyConnected": ("FullyConnected", _fc_backward),
    "RNN": ("RNN", _rnn),
    "_backward_RNN": ("RNN", _rnn_backward),
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

#: Operators whose logged calls pair with events only when their counts in the step agree (see
#: `_row_flops`): the ones also run outside the logged graphs or whose backward may be skipped.
_PAIR_BY_COUNT = frozenset(MXNET_TO_ATEN) - {"Convolution", "_backward_Convolution", "FullyConnected",
                                               "_backward_FullyConnected", "RNN", "_backward_RNN"}

#: MXNet operators that move, gather, mask or free data and do no arithmetic: a known 0 FLOPs
#: (as analysis.flops' data-movement ops), no shapes needed. DeleteVariable is the engine freeing
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
def _update_atens(kind: str, shape: list, t: str) -> list[OpShapes]:
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
_UPDATE_OPS = {"sgd_update": ("sgd", False), "sgd_mom_update": ("sgd_mom", False),
               "multi_sgd_update": ("sgd", True), "multi_sgd_mom_update": ("sgd_mom", True),
               "adam_update": ("adam", False), "rmsprop_update": ("rmsprop", False)}


def trace_records(trace: dict, source: str, flops_of=None, precision_of=None,
                  shapes: dict | None = None) -> TraceRecords:
    """Build the records of one loaded MXNet profiler dump (pure: no I/O).

    Args:
        trace: what `profilers.kineto.read_trace_file` returned for the dump.
        source: the trace's name, for notes and errors.
        flops_of: callable(OpShapes) -> FLOPs | None | NaN; default `analysis.flops.op_flops`.
        precision_of: callable(input types) -> "fp32", ...; default `analysis.flops.precision_of`.
        shapes: the hook's call log (raw/mxnet_shapes.json), or None: then every FLOP is NaN.
    Returns:
        TraceRecords with integer-ns times; device_kind "cuda" if operators ran on a GPU, else "cpu".
    Raises:
        TraceFormatError: not a trace, malformed events, unpaired operator events, no operators.
    """
    if flops_of is None or precision_of is None:
        from tbd.analysis import flops as _flops

        flops_of = flops_of or _flops.op_flops
        precision_of = precision_of or _flops.precision_of
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise TraceFormatError(f'{source}: not an MXNet profiler dump (no "traceEvents" list of objects)', hint=_HINT)
    devices = {e.get("pid"): str((e.get("args") or {}).get("name", "")) for e in events
               if e.get("ph") == "M" and e.get("name") == "process_name"}
    ops = _operators(events, devices, source)
    if not len(ops["name"]):
        raise TraceFormatError(f"{source}: no MXNet operator events", hint=_HINT)
    steps = _steps(events, source)
    notes: list[str] = []
    if steps:
        lo, hi = steps[0].start_ns, max(s.end_ns for s in steps)
    else:
        lo, hi = int(ops["start"].min()), int(ops["end"].max())
        notes.append("no ProfilerStep spans: the whole trace is the window")
    step_no = _step_numbers(ops["start"], steps)
    flops, precision, covered = _row_flops(ops, step_no, shapes, flops_of, precision_of, source)
    notes += _flop_notes(shapes, covered, ops["name"][step_no >= 0])
    keep = (ops["start"] >= lo) & (ops["start"] <= hi)
    order = np.flatnonzero(keep)[np.argsort(ops["start"][keep], kind="stable")]
    table = KernelTable(ops["name"], ops["start"], ops["self"], ops["device"], ops["tid"], ops["name"].copy(),
                        flops, np.where(np.isfinite(flops), ANALYTIC, "").astype(object), precision, step_no)
    rows = table.select(order)
    roots = keep & (ops["depth"] == 0)
    kind = "cuda" if bool((ops["device"][keep] >= 0).any()) else "cpu"
    if kind == "cuda":
        notes.append("MXNet operator times, not CUDA kernels: MXNet's profiler records no kernels")
    op_table = OpTable(ops["name"][keep], ops["start"][keep], ops["end"][keep], ops["tid"][keep])
    memory, mem_notes = _memory(events, source)
    return TraceRecords(source, kind, rows, ops["start"][roots], ops["end"][roots], steps, lo, hi, op_table,
                        memory, tuple(notes + mem_notes))


def _ns(value, source: str, what: str) -> int:
    """MXNet's integer-microsecond times -> integer ns (exact); malformed -> TraceFormatError."""
    from tbd.profilers.kineto_events import _ns as kineto_ns

    try:
        return kineto_ns(value)
    except TypeError:
        raise TraceFormatError(f"{source}: malformed {what} event time {value!r}") from None


def _device_of(name: str) -> int | None:
    """-1 for "cpu/N", N for "gpu/N", None for other storages (cpu pinned, cpu shared)."""
    m = _DEVICE.match(name)
    if m is None:
        return None
    return -1 if m.group(1) == "cpu" else int(m.group(2))


def _operators(events: list, devices: dict, source: str) -> dict[str, np.ndarray]:
    """Operator B/E pairs -> columns name, start, end, self (ns), depth, device, tid (small ints).

    MXNet writes each operator's "B" and "E" back to back, so a nested operator shows as an
    overlapping pair, not as B B E E: pairs are matched first, nesting is found by time per thread.
    """
    open_at: dict = {}
    tids: dict = {}
    rows: list[tuple] = []
    for ev in events:
        ph = ev.get("ph")
        if ev.get("cat") != "operator" or ph not in ("B", "E") or ev.get("name") in ENGINE_WAITS:
            continue
        key = (ev.get("pid"), ev.get("tid"), str(ev.get("name")))
        t = _ns(ev.get("ts"), source, "operator")
        if ph == "B":
            open_at.setdefault(key, []).append(t)
            continue
        if not open_at.get(key):
            raise TraceFormatError(f"{source}: operator end {ev.get('name')!r} at {ev.get('ts')} has no matching begin",
                                   hint="the dump may be truncated; record again")
        start = open_at[key].pop()
        if t < start:
            raise TraceFormatError(f"{source}: operator {key[2]!r} ends before it begins")
        dev = _device_of(devices.get(ev.get("pid"), ""))
        rows.append((key[2], start, t, -1 if dev is None else dev, tids.setdefault(key[:2], len(tids))))
    open_ops = sum(len(v) for v in open_at.values())
    if open_ops:
        raise TraceFormatError(f"{source}: {open_ops} operator begin events have no end",
                               hint="the dump may be truncated; record again")
    rows.sort(key=lambda r: (r[4], r[1], -r[2]))  # per thread, by start; a parent before its child
    depth = [0] * len(rows)
    self_ns = [r[2] - r[1] for r in rows]
    stack: list[int] = []
    for i, (_, start, end, _, tid) in enumerate(rows):
        while stack and (rows[stack[-1]][4] != tid or rows[stack[-1]][2] <= start):
            stack.pop()
        if stack:
            depth[i] = len(stack)
            self_ns[stack[-1]] -= end - start
        stack.append(i)
    cols = {"name": np.array([r[0] for r in rows], dtype=object),
            "start": np.array([r[1] for r in rows], dtype=np.int64),
            "end": np.array([r[2] for r in rows], dtype=np.int64),
            "self": np.array(self_ns, dtype=np.int64), "depth": np.array(depth, dtype=np.int64),
            "device": np.array([r[3] for r in rows], dtype=np.int64),
            "tid": np.array([r[4] for r in rows], dtype=np.int64)}
    order = np.argsort(cols["start"], kind="stable")
    return {k: v[order] for k, v in cols.items()}


def _steps(events: list, source: str) -> tuple[StepSpan, ...]:
    """ProfilerStep#N async spans ("b"/"e" pairs by name), sorted by start."""
    begin: dict[str, int] = {}
    spans = []
    for ev in events:
        name = str(ev.get("name", ""))
        m = _STEP.match(name)
        if m is None or ev.get("ph") not in ("b", "e", "B", "E"):
            continue
        t = _ns(ev.get("ts"), source, "ProfilerStep")
        if ev["ph"] in ("b", "B"):
            begin[name] = t
        elif name in begin:
            start = begin.pop(name)
            spans.append(StepSpan(int(m.group(1)), start, t, t))
        else:
            raise TraceFormatError(f"{source}: {name} ends without a begin")
    if begin:
        raise TraceFormatError(f"{source}: {', '.join(sorted(begin))} never end", hint="the dump may be truncated")
    return tuple(sorted(spans, key=lambda s: s.start_ns))


def _step_numbers(start_ns: np.ndarray, steps: tuple[StepSpan, ...]) -> np.ndarray:
    """ProfilerStep number holding each start time, -1 outside every step."""
    out = np.full(len(start_ns), -1, dtype=np.int64)
    for s in steps:
        out[(start_ns >= s.start_ns) & (start_ns <= s.end_ns)] = s.number
    return out


def _row_flops(ops: dict, step_no: np.ndarray, shapes: dict | None, flops_of, precision_of,
               source: str) -> tuple[np.ndarray, np.ndarray, int]:
    """FLOPs and precision per operator row from the hook's call log; count of rows it covered.

    Data-movement operators get a known 0 without the log. A mapped operator's k-th event in a
    step takes the k-th logged call of its operator (backward events: the k-th from the end); for
    operators in `_PAIR_BY_COUNT` only when the step has exactly as many events as logged calls
    (an operator also run outside the logged graphs would shift the pairing). Optimizer
    operators pair with the trainer's parameters, in order, `aggregate` per multi_* call.
    """
    n = len(ops["name"])
    flops = np.full(n, np.nan)
    precision = np.array([""] * n, dtype=object)
    names = ops["name"]
    flops[np.array([str(x) in MXNET_ZERO_FLOPS for x in names], dtype=bool)] = 0.0
    if shapes is None:
        return flops, precision, 0
    if (not isinstance(shapes, dict) or shapes.get("schema") != SHAPES_SCHEMA
            or not isinstance(shapes.get("steps"), dict)):
        raise TraceFormatError(f"{source}: MXNet shape log is not of schema {SHAPES_SCHEMA!r}")
    covered = 0
    for number in np.unique(step_no[step_no >= 0]).tolist():
        calls = shapes["steps"].get(str(number))
        if not isinstance(calls, list):
            continue
        by_op: dict[str, list] = {}
        for c in calls:
            by_op.setdefault(str(c.get("op")), []).append(c)
        rows = np.flatnonzero(step_no == number).tolist()
        events: dict[str, int] = {}
        for i in rows:
            events[str(names[i])] = events.get(str(names[i]), 0) + 1
        updates = _update_groups(by_op.get("_optimizer_update", []), events, source)
        seen: dict[str, int] = {}
        for i in rows:
            name = str(names[i])
            k = seen.get(name, 0)
            seen[name] = k + 1
            if name in updates:
                groups, kind, t = updates[name]
                aten = [a for shape in groups[k] for a in _update_atens(kind, shape, t)]
            elif name in MXNET_TO_ATEN:
                logged, adapter = MXNET_TO_ATEN[name]
                log = by_op.get(logged, [])
                call = _paired_call(name, k, events[name], log)
                if call is None:
                    continue
                if name in _PAIR_BY_COUNT and (call.get("output") is None or None in call.get("inputs", [None])):
                    continue  # shape inference left this call's shapes unknown
                try:
                    aten = adapter(call)
                except (KeyError, TypeError, ValueError, IndexError, SyntaxError) as exc:
                    raise TraceFormatError(f"{source}: malformed {logged} call in the shape log ({exc})") from None
                if aten is None:
                    continue
            else:
                continue
            values = [flops_of(a) for a in aten]
            flops[i] = math.nan if any(v is None for v in values) else float(sum(values))
            precision[i] = precision_of(aten[0].input_types)
            covered += 1
    return flops, precision, covered


#: Operators whose backward runs as more calls of the operator itself (no "_backward_" event):
#: batch_dot's gradients dA = dC Bᵀ and dB = Aᵀ dC are two batch_dots of the forward's size.
_BACKWARD_AS_SELF = {"batch_dot": 2, "dot": 2}


def _paired_call(name: str, k: int, events: int, log: list) -> dict | None:
    """The logged call the k-th `name` event of a step computes, or None when the pairing is unknown."""
    n = len(log)
    if name in _BACKWARD_AS_SELF and n and events == n * (1 + _BACKWARD_AS_SELF[name]):
        # The n forward calls in order, then the backward's calls: reverse order, `per` for each.
        per = _BACKWARD_AS_SELF[name]
        return log[k] if k < n else log[n - 1 - (k - n) // per]
    if k >= n or (name in _PAIR_BY_COUNT and events != n):
        return None
    return log[k] if not name.startswith("_backward_") else log[n - 1 - k]


def _update_groups(records: list, events: dict[str, int], source: str) -> dict[str, tuple[list, str, str]]:
    """Optimizer operator name -> (parameter shapes per event, update kind, type) for one step.

    Only for an operator whose event count is what the trainer's parameters imply; otherwise the
    pairing is unknown and its rows keep NaN.
    """
    if not records:
        return {}
    try:
        params = [list(map(int, p)) for r in records for p in r["params"]]
        aggregate = max(1, int(records[0].get("aggregate") or 1))
        t = _TYPES.get(str(records[0].get("dtype", "")), "")
    except (KeyError, TypeError, ValueError):
        raise TraceFormatError(f"{source}: malformed optimizer record in the MXNet shape log") from None
    out = {}
    for name, (kind, multi) in _UPDATE_OPS.items():
        if name not in events:
            continue
        groups = ([params[j:j + aggregate] for j in range(0, len(params), aggregate)] if multi
                  else [[p] for p in params])
        if events[name] == len(groups):
            out[name] = (groups, kind, t)
    return out


def _flop_notes(shapes: dict | None, covered: int, names: np.ndarray) -> list[str]:
    if shapes is None:
        return ["MXNet's profiler records no operand shapes and no shape log was given: FLOPs unknown "
                "(data-movement operators are a known 0)"]
    mapped = int(sum(1 for x in names if x in MXNET_TO_ATEN or x in _UPDATE_OPS))
    return [f"MXNet's profiler records no operand shapes: FLOPs come from the hook's log of the step's "
            f"graph operators and the trainer's parameters ({covered} of {mapped} events of operators with a "
            "formula matched); other operators' FLOPs are unknown, data-movement operators a known 0"]


def _memory(events: list, source: str) -> tuple[MemoryEvents | None, list[str]]:
    """'Device Storage' counters -> MemoryEvents (addr 0: MXNet records no addresses)."""
    ts, total, dev = [], [], []
    skipped = set()
    for ev in events:
        if ev.get("cat") != "Device Storage" or ev.get("ph") != "C":
            continue
        name = str(ev.get("name", ""))
        storage = name.removeprefix("Memory: ")
        d = _device_of(storage)
        if d is None:
            skipped.add(storage)
            continue
        try:
            value = int((ev.get("args") or {})[name])
        except (KeyError, TypeError, ValueError):
            raise TraceFormatError(f"{source}: malformed Device Storage counter {name!r}") from None
        ts.append(_ns(ev.get("ts"), source, "Device Storage"))
        total.append(value)
        dev.append(d)
    notes = [f"storage counters of {', '.join(sorted(skipped))} are not read"] if skipped else []
    if not ts:
        return None, notes
    ts_a, total_a, dev_a = (np.array(x, dtype=np.int64) for x in (ts, total, dev))
    order = np.lexsort((ts_a, dev_a))  # by device, then time: deltas are per device
    ts_a, total_a, dev_a = ts_a[order], total_a[order], dev_a[order]
    prev = np.concatenate([[0], total_a[:-1]])
    prev[np.concatenate([[True], dev_a[1:] != dev_a[:-1]])] = 0  # each series starts from 0 bytes
    by_time = np.argsort(ts_a, kind="stable")
    memory = MemoryEvents(ts_ns=ts_a[by_time], addr=np.zeros(len(ts_a), dtype=np.uint64),
                          bytes=(total_a - prev)[by_time], total_allocated=total_a[by_time], device=dev_a[by_time])
    return memory, notes + ["MXNet storage counters carry totals only: no addresses, no operator tags"]
