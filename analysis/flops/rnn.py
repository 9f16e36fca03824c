"""FLOP formulas for recurrent layers: cuDNN RNNs, oneDNN (mkldnn) RNN layers, the fused LSTM cell.

Each layer and direction counts its input and recurrent GEMMs (2 FLOPs per multiply-add) plus the
per-hidden-unit cell arithmetic derived below, forward and backward. Where aten::lstm decomposes
into visible linear/sigmoid/tanh/mul ops instead, those ops carry the FLOPs (see `analysis.flops.ops`).
"""

from __future__ import annotations

from typing import Callable

from tbd.analysis.flops.args import concrete, has_tensor, input_shape, input_shape_list, numel, output_mask, require
from tbd.core.records import OpShapes

# Recurrent layers. Mode numbers are cuDNN's cudnnRNNMode_t as ATen passes them (RNN.h):
# 0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU, with G = 1, 1, 4, 3 gates. Per time step, batch element,
# layer and direction: the input and recurrent GEMMs 2·(|W_ih| + |W_hh| (+ |W_hr|, projection)),
# plus per hidden unit the cell arithmetic E_f:
#   gate pre-activations x·W_ihᵀ + h·W_hhᵀ + b_ih + b_hh: G·(1 + 2·bias) adds;
#   LSTM: 3 sigmoids (9), tanh(g) 1, c' = f·c + i·g 3, h' = o·tanh(c') 2 -> +15;
#   GRU (torch.nn.GRU equations): r·(W_hn h + b_hn) 1, 2 sigmoids 6, tanh 1,
#     h' = (1-z)·n + z·h 4 -> +12;  RNN_TANH/RELU: the activation, +1.
# Backward per hidden unit, E_b: LSTM 24 (the fused-cell backward below, 23, plus adding the
# recurrent dh), GRU 17 (dz 5, dn 2, tanh' 3, r-path 5, dh·z 1, recurrent add 1), RNN_TANH 4,
# RNN_RELU 2; backward-data GEMMs equal the forward's; weight gradients (output_mask[3]) as many
# again, plus 2·G·H bias-gradient accumulations when biases exist. cuDNN always computes the full
# backward-data pass (cudnnRNNBackwardData), so output_mask[0..2] do not change the count.
_RNN_GATES = {0: 1, 1: 1, 2: 4, 3: 3}
_RNN_CELL = {0: 1, 1: 1, 2: 15, 3: 12}
_RNN_CELL_BACKWARD = {0: 2, 1: 4, 2: 24, 3: 17}


def _rnn_mode(op: OpShapes, at: int) -> int:
    mode = concrete(op, at)
    require(mode in _RNN_GATES, f"{op.name}: RNN mode {mode!r}")
    return mode


def _rnn_layer_flops(steps: int, hidden: int, weights: list, mode: int, bias: bool,
                     backward: bool, weight_grads: bool) -> int:
    gemm = 2 * sum(numel(w) for w in weights)
    gates = _RNN_GATES[mode] * hidden
    if not backward:
        return steps * (gemm + gates * (1 + 2 * bias) + _RNN_CELL[mode] * hidden)
    grads = gemm * (1 + weight_grads) + 2 * gates * (bias and weight_grads)
    return steps * (grads + _RNN_CELL_BACKWARD[mode] * hidden)


def cudnn_rnn(backward: bool) -> Callable[[OpShapes], float]:
    """_cudnn_rnn(input, weight[], stride0, weight_buf, hx, cx, mode@6, hidden@7, proj@8,
    num_layers@9, batch_first, dropout, train, bidirectional@13, ...); the backward's scalars sit
    4 later (output, grad_output, grad_hy, grad_cy come first) and output_mask is at 21."""

    def f(op: OpShapes) -> float:
        o = 4 if backward else 0
        mode, hidden, proj = _rnn_mode(op, 6 + o), concrete(op, 7 + o), concrete(op, 8 + o)
        groups = concrete(op, 9 + o) * (2 if concrete(op, 13 + o) else 1)
        weights = input_shape_list(op, 1)
        per = len(weights) // groups
        require(per * groups == len(weights) and per in (2, 3, 4, 5), f"{op.name}: weights")
        bias = per - 2 - (proj > 0) == 2
        weight_grads = output_mask(op, 21, 4)[3] if backward else False
        steps = numel(input_shape(op, 0)[:-1])  # T·B, or the packed sum of batch sizes
        total = 0
        for g in range(groups):
            mats = [weights[g * per], weights[g * per + 1]] + ([weights[g * per + per - 1]] if proj else [])
            total += _rnn_layer_flops(steps, hidden, mats, mode, bias, backward, weight_grads)
        return total

    return f


def mkldnn_rnn_layer(backward: bool) -> Callable[[OpShapes], float]:
    """One layer and direction: (input, w_ih, w_hh, b_ih, b_hh, ...); forward mode@9 hidden@10
    has_biases@12; backward mode@14 hidden@15 has_biases@17 (weight grads always computed)."""

    def f(op: OpShapes) -> float:
        mode_at = 14 if backward else 9
        mode, hidden = _rnn_mode(op, mode_at), concrete(op, mode_at + 1)
        bias = bool(concrete(op, mode_at + 3))
        steps = numel(input_shape(op, 0)[:-1])
        return _rnn_layer_flops(steps, hidden, [input_shape(op, 1), input_shape(op, 2)], mode, bias,
                                backward, True)

    return f


# Fused LSTM cell (CUDA, nn.LSTMCell): the GEMMs run before it as separate addmm/mm ops.
# Forward: gate sums with biases 4·(1 + 2·bias) + cell 15 per hidden unit (as E_f above).
# Backward (_thnn_fused_lstm_cell_backward_impl): do = gh·tanh(c')·o(1-o) 5, dc' = gh·o·(1-tanh²)
# + gc 5, di, df, dg 4 each, dc = dc'·f 1 -> 23; bias gradient Σ over the batch: +4 per unit.
def fused_lstm_cell(op: OpShapes) -> float:
    b, h = input_shape(op, 2)
    return b * h * (4 * (1 + 2 * has_tensor(op, 3)) + _RNN_CELL[2])


def fused_lstm_cell_backward(op: OpShapes) -> float:
    b, h = input_shape(op, 2)
    return b * h * (23 + 4 * bool(concrete(op, 5)))
