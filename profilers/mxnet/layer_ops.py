"""MXNet's layer operators (Convolution, FullyConnected, RNN) as the ATen calls computing the same thing.

The hook logs their calls with fields of their own ("input", "weight", "output", "stride", ...:
Gluon forward hooks, or a hybridized graph's shape inference; profilers/mxnet/shapes.py), and the
reader pairs them with operator events in order (profilers/mxnet/trace.py). `LAYER_TO_ATEN` maps
each operator onto the logged call and its adapter; `profilers.mxnet.ops` merges it into the whole
table. `aten_type` spells a numpy dtype as ATen traces do.
"""

from __future__ import annotations

import math
from typing import Callable

from tbd.core.records import OpShapes

# numpy dtype name -> the type string analysis.flops.ops.precision_of reads (Kineto's spelling).
_TYPES = {"float32": "float", "float16": "c10::Half", "float64": "double", "bfloat16": "c10::BFloat16"}


def aten_type(dtype: str) -> str:
    """A numpy dtype name as the type string ATen traces write ("float32" -> "float"), "" if unknown."""
    return _TYPES.get(dtype, "")


def call_type(call: dict) -> str:
    """The ATen type string of a logged call's "dtype"."""
    return aten_type(call.get("dtype", ""))


def _conv(call: dict) -> list[OpShapes]:
    # aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    t = call_type(call)
    return [OpShapes("aten::convolution", (call["input"], call["weight"], [], [], [], [], [], [], []),
                     (t, t), ("", "", "", str(call["stride"]), str(call["pad"]), str(call["dilate"]),
                              "False", "", str(call["groups"])))]


def _conv_backward(call: dict) -> list[OpShapes]:
    # aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    # transposed, output_padding, groups, output_mask): grad_input only when the input needs it.
    t = call_type(call)
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
    t = call_type(call)
    m, k, n = _fc_dims(call)
    return [OpShapes("aten::mm", ([m, k], [k, n]), (t, t), ())]


def _fc_backward(call: dict) -> list[OpShapes]:
    # grad_weight = dy^T x: mm([n, m], [m, k]); grad_input = dy W: mm([m, n], [n, k]) when needed.
    t = call_type(call)
    m, k, n = _fc_dims(call)
    calls = [OpShapes("aten::mm", ([n, m], [m, k]), (t, t), ())]
    if call["input_grad"]:
        calls.append(OpShapes("aten::mm", ([m, n], [n, k]), (t, t), ()))
    return calls


# MXNet's RNN modes -> cuDNN's cudnnRNNMode_t numbers, as aten::_cudnn_rnn takes them (flops_rnn).
_RNN_MODES = {"rnn_relu": 0, "rnn_tanh": 1, "lstm": 2, "gru": 3}
_RNN_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


#: Most stacked layers an RNN call may log: real ones have a handful; a corrupt log's 10^18 would
#: make the weight list below loop for ever.
MAX_RNN_LAYERS = 1024


def _layers(call: dict) -> int:
    layers = int(call["num_layers"])
    if not 1 <= layers <= MAX_RNN_LAYERS:
        raise ValueError(f"num_layers {layers} outside [1, {MAX_RNN_LAYERS}]")
    return layers


def _rnn_weights(call: dict) -> list[list[int]]:
    """cuDNN's per layer and direction weights (w_ih, w_hh, b_ih, b_hh[, w_hr]) for the call's sizes.

    MXNet's RNN always has both bias vectors (src/operator/rnn-inl.h GetRnnParamSize), as cuDNN.
    """
    gates, hidden, proj = _RNN_GATES[call["mode"]], int(call["state_size"]), int(call.get("projection_size") or 0)
    dirs = 2 if call["bidirectional"] else 1
    out = []
    width = int(call["input_size"])
    for _ in range(_layers(call)):
        for _ in range(dirs):
            out += [[gates * hidden, width], [gates * hidden, proj or hidden], [gates * hidden], [gates * hidden]]
            out += [[proj, hidden]] if proj else []
        width = (proj or hidden) * dirs
    return out


def _rnn_args(call: dict, backward: bool) -> OpShapes:
    # aten::_cudnn_rnn(input, weight[], weight_stride0, weight_buf, hx, cx, mode, hidden_size,
    # proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes, dropout_state);
    # the backward puts output, grad_output, grad_hy, grad_cy after cx and output_mask at 21.
    t = call_type(call)
    mode, hidden = call["mode"], int(call["state_size"])
    proj = int(call.get("projection_size") or 0)
    seq, batch, layers = int(call["seq_len"]), int(call["batch"]), _layers(call)
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


#: MXNet layer operator -> (the logged call it reads, adapter to the ATen calls computing the same thing).
LAYER_TO_ATEN: dict[str, tuple[str, Callable[[dict], list[OpShapes]]]] = {
    "Convolution": ("Convolution", _conv),
    "_backward_Convolution": ("Convolution", _conv_backward),
    "FullyConnected": ("FullyConnected", _fc),
    "_backward_FullyConnected": ("FullyConnected", _fc_backward),
    "RNN": ("RNN", _rnn),
    "_backward_RNN": ("RNN", _rnn_backward),
}
