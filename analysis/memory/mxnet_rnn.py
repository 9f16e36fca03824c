"""Bytes MXNet's fused RNN operator keeps for its backward outside the graph (analytic): its reserve space.

MXNet 1.9's `RNN` operator (gluon.rnn.LSTM / GRU / RNN) runs every layer and time step inside one
stateful operator, and keeps the gates and states its backward needs in operator state, not in graph
outputs. How much it keeps is a fixed function of the operator's parameters, per implementation:

- "native": MXNet's own CPU kernels (rnn_impl.h), used for a dtype other than float32, on a build
  without oneDNN, or with MXNET_USE_MKLDNN_RNN=0. The reserve space is one NDArray of
  `GetRNNReserveSpaceSize(num_layers, direction, seq_length, batch, state_size, mode)` elements of the
  data's dtype (apache/mxnet 1.9.1, src/operator/rnn-inl.h), allocated through MXNet's storage at
  each forward in training mode. `native_reserve_bytes` writes that function out.
- "onednn": oneDNN's RNN primitive, used on the CPU for float32 data when MXNet is built with oneDNN
  (the pip wheels) unless MXNET_USE_MKLDNN_RNN=0 (src/operator/nn/mkldnn/mkldnn_rnn-inl.h,
  SupportMKLDNNRnn). MXNet splits the layers into fused groups (mkldnn_rnn.cc,
  MKLDNNRnnFullParamParser): one group of all layers when input_size == state_size and the RNN is
  unidirectional; else a first layer alone and the other layers fused; a bidirectional RNN is one
  group per layer. Each group's training primitive has a workspace that oneDNN allocates itself
  (`new memory(fwd_trn_.GetWorkspaceDesc())`, not through MXNet's storage, so MXNet's storage
  counter never sees it), sized by oneDNN v2.4.4 (the submodule of MXNet 1.9.1, commit 5818c40):
  src/cpu/rnn/rnn_utils.hpp `set_workspace_sizes` and rnn_utils.cpp `set_offsets` (each region
  starts on a 4,096-byte page; ws_states_iter is registered twice there, so it is counted twice
  here), leading dimensions from `get_good_ld`. The outputs of every group but the last are
  kept too, in MXNet's storage (MKLDNNRnnOp's dst_, T x N x D*H each).
  `onednn_reserve_bytes` writes that out for float32 (oneDNN's f32 RNN keeps every part in fp32).
- "cudnn": cuDNN sizes its reserve space itself (cudnnGetRNNTrainingReserveSize); it publishes
  no formula, so there is none here.

Pure: parameters in, bytes out.
"""

from __future__ import annotations

from dataclasses import dataclass

from tbd.core.errors import TbdError

#: Gates per cell, per RNN mode as MXNet names it (the `mode` attribute of the RNN operator).
GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}
IMPLEMENTATIONS = ("native", "onednn", "cudnn")
_PAGE = 4096  # oneDNN's set_offsets: every workspace region starts on a page
_F32 = 4


@dataclass(frozen=True)
class RnnCall:
    """One call of MXNet's fused RNN operator: its attributes and the shape of its data input [T, N, I]."""

    mode: str  # "lstm", "gru", "rnn_relu", "rnn_tanh"
    num_layers: int
    state_size: int
    bidirectional: bool
    seq_len: int
    batch: int
    input_size: int
    dtype_bytes: int  # bytes per element of the data (and of the reserve space)
    projection_size: int = 0  # 0: no projection


def check_call(call: RnnCall) -> None:
    """Raise TbdError naming the first parameter the formulas cannot take."""
    if call.mode not in GATES:
        raise TbdError(f"unknown RNN mode {call.mode!r} (expected one of {', '.join(GATES)})")
    for name in ("num_layers", "state_size", "seq_len", "batch", "input_size", "dtype_bytes"):
        if getattr(call, name) <= 0:
            raise TbdError(f"RNN {name} must be positive, got {getattr(call, name)}")


def native_reserve_bytes(call: RnnCall) -> int:
    """Bytes of MXNet's CPU reserve space: GetRNNReserveSpaceSize (MXNet 1.9.1 rnn-inl.h) x dtype bytes.

    With L layers, D directions, T steps, N batch, H state size, in elements:
    LSTM  D*T*N*H*(7L - 1);
    GRU   T*N*H*D*(9L - 1) + N*H*D*9 + H*T*6 + T*N*7*H*D;
    RNN   T*N*H*D*(6L - 1) + N*H*D*3 + H*T*2 + T*N*2*H*D (relu and tanh alike).
    """
    check_call(call)
    if call.projection_size:
        raise TbdError("MXNet's CPU RNN does not train with a projection (rnn-inl.h), so it has no reserve space")
    layers, d, t, n, h = call.num_layers, 2 if call.bidirectional else 1, call.seq_len, call.batch, call.state_size
    if call.mode == "lstm":
        elements = d * t * n * h * (layers * 7 - 1)
    elif call.mode == "gru":
        elements = t * n * h * d * (layers * 9 - 1) + n * h * d * 9 + h * t * 6 + t * n * 7 * h * d
    else:
        elements = t * n * h * d * (layers * 6 - 1) + n * h * d * 3 + h * t * 2 + t * n * 2 * h * d
    return elements * call.dtype_bytes


def onednn_groups(call: RnnCall) -> list[tuple[int, int, int]]:
    """(layers, directions, input channels) of each fused oneDNN primitive MXNet builds (MKLDNNRnnFullParamParser)."""
    check_call(call)
    h, layers = call.state_size, call.num_layers
    if call.bidirectional:
        return [(1, 2, call.input_size)] + [(1, 2, 2 * h)] * (layers - 1)
    if call.input_size == h:
        return [(layers, 1, h)]
    return [(1, 1, call.input_size)] + ([(layers - 1, 1, h)] if layers > 1 else [])


def onednn_workspace_bytes(mode: str, layers: int, directions: int, input_channels: int, state_size: int,
                           seq_len: int, batch: int) -> int:
    """Bytes of one float32 oneDNN v2.4 RNN training primitive's workspace (rnn_utils set_workspace_sizes,
    set_offsets): gates, ht, states (layer, iter twice), LSTM c states, the diff states, LBR-GRU's grid."""
    g, h, t, n = GATES[mode], state_size, seq_len, batch
    lstm, lbr = mode == "lstm", mode == "gru"  # MXNet's GRU is oneDNN's linear-before-reset GRU
    cells = layers * directions * t * n  # one row per layer, direction, step and sample
    grid = (layers + 1) * directions * (t + 1) * n  # states have one more layer and step (the inputs)
    states_ld = _good_ld(max(h, input_channels))
    diff_ld = _good_ld(max(input_channels, h))
    regions = [
        cells * _good_ld(h * g) * _F32,  # ws_gates
        cells * _good_ld(h) * _F32,  # ws_ht
        grid * states_ld * _F32,  # ws_states_layer
        grid * states_ld * _F32,  # ws_states_iter
        grid * states_ld * _F32,  # ws_states_iter, registered a second time in set_offsets
        grid * h * _F32 if lstm else 0,  # ws_states_iter_c
        grid * diff_ld * _F32,  # ws_diff_states_layer
        grid * diff_ld * _F32,  # ws_diff_states_iter
        grid * h * _F32 if lstm else 0,  # ws_diff_states_iter_c
        (layers * directions * t * n * h * _F32 * _F32) if lbr else 0,  # ws_grid_comp: ws_per_cell * sizeof(float)
    ]
    offset = 0
    for size in regions:
        offset = -(-offset // _PAGE) * _PAGE + size
    return offset


def onednn_reserve_bytes(call: RnnCall) -> int:
    """Bytes the oneDNN path keeps for the backward: each fused group's workspace plus the outputs of all
    groups but the last (T x N x D*H float32 each, in MXNet's storage)."""
    check_call(call)
    if call.dtype_bytes != _F32 or call.projection_size:
        raise TbdError("MXNet runs its RNN with oneDNN only for float32 data without projection")
    groups = onednn_groups(call)
    work = sum(onednn_workspace_bytes(call.mode, layers, d, c, call.state_size, call.seq_len, call.batch)
               for layers, d, c in groups)
    d = 2 if call.bidirectional else 1
    return work + (len(groups) - 1) * call.seq_len * call.batch * d * call.state_size * _F32


def reserve_bytes(call: RnnCall, implementation: str) -> int | None:
    """Bytes kept outside the graph for the backward of one training call, or None for cuDNN (no formula)."""
    if implementation == "native":
        return native_reserve_bytes(call)
    if implementation == "onednn":
        return onednn_reserve_bytes(call)
    if implementation == "cudnn":
        return None
    raise TbdError(f"unknown RNN implementation {implementation!r} (expected one of {', '.join(IMPLEMENTATIONS)})")


def _good_ld(dim: int) -> int:
    """oneDNN's get_good_ld for float32: rounded up to 64 bytes, plus 64 bytes when a multiple of 256 elements."""
    ld = -(-dim // 16) * 16
    return ld + 16 if ld % 256 == 0 else ld
