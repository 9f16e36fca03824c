"""The fused RNN operator's reserve space (analysis/memory/mxnet_rnn.py) against the C++ sources' formulas
written out by hand, and the hook's pure helpers that read RNN nodes off a graph (no mxnet)."""

from __future__ import annotations

import pytest

from tbd.analysis.memory.mxnet_rnn import (
    RnnCall,
    native_reserve_bytes,
    onednn_groups,
    onednn_reserve_bytes,
    onednn_workspace_bytes,
    reserve_bytes,
)
from tbd.core.errors import TbdError
from tbd.profilers.mxnet.memory import add_reserve, rnn_calls, rnn_reserve


def _call(mode="lstm", layers=2, h=16, bi=False, t=8, n=64, i=16, dtype_bytes=4, proj=0):
    return RnnCall(mode, layers, h, bi, t, n, i, dtype_bytes, proj)


def test_native_reserve_is_get_rnn_reserve_space_size_times_dtype():
    # GetRNNReserveSpaceSize (MXNet 1.9.1 rnn-inl.h), elements, with D=1, T=8, N=64, H=16, L=2:
    # LSTM D*T*N*H*(7L-1); float32: 4 B each. 425,984 B is also the allocation MXNet's storage
    # counter shows for one training forward of this LSTM (test_memory_mxnet.py measures it).
    assert native_reserve_bytes(_call()) == 1 * 8 * 64 * 16 * 13 * 4 == 425_984
    # GRU: T*N*H*D*(9L-1) + N*H*D*9 + H*T*6 + T*N*7*H*D, bidirectional (D=2), float64 (8 B).
    assert native_reserve_bytes(_call("gru", 3, 10, True, 5, 4, 7, 8)) == (
        5 * 4 * 10 * 2 * 26 + 4 * 10 * 2 * 9 + 10 * 5 * 6 + 5 * 4 * 7 * 10 * 2) * 8
    # RNN (tanh and relu alike): T*N*H*D*(6L-1) + N*H*D*3 + H*T*2 + T*N*2*H*D.
    for mode in ("rnn_tanh", "rnn_relu"):
        assert native_reserve_bytes(_call(mode, 1, 3, False, 2, 5, 4)) == (
            2 * 5 * 3 * 1 * 5 + 5 * 3 * 3 + 3 * 2 * 2 + 2 * 5 * 2 * 3) * 4


def test_onednn_workspace_of_a_fused_lstm_by_hand():
    # oneDNN v2.4.4 rnn_utils, f32: cells = L*D*T*N = 2*1*8*64 = 1024 rows, states grid =
    # (L+1)*D*(T+1)*N = 3*9*64 = 1728 rows; leading dims: 4H = 64, H = 16 (multiples of 16 floats,
    # not of 256). Regions: gates 1024*64, ht 1024*16, states layer + iter twice 3 x 1728*16, LSTM c
    # 1728*16, diff layer + diff iter 2 x 1728*16, diff c 1728*16, all x 4 B; every region here is
    # a whole number of 4,096-B pages, so no padding. oneDNN allocated exactly 1,101,824 B for this
    # primitive's workspace (posix_memalign traced with LD_PRELOAD, mxnet 1.9.1 on this machine).
    by_hand = (1024 * 64 + 1024 * 16 + 7 * 1728 * 16) * 4
    assert onednn_workspace_bytes("lstm", 2, 1, 16, 16, 8, 64) == by_hand == 1_101_824
    assert onednn_reserve_bytes(_call()) == by_hand  # one group: no intermediate output


def test_onednn_workspace_pads_each_region_to_a_page():
    # tanh RNN, L=3, H=I=48, T=7, N=5: cells 3*7*5 = 105 rows, grid 4*8*5 = 160 rows, ld 48.
    # gates 105*48*4 = 20,160 -> page 20,480; ht 20,160 -> ends 40,640, next page 40,960; states
    # 160*48*4 = 30,720 three times, each from a page: 71,680 -> 73,728 -> 104,448 -> 106,496 ->
    # 137,216 -> 139,264; no c states; diff layer 30,720 -> 169,984 -> 172,032; diff iter -> 202,752;
    # the empty regions after it still round the offset up: 204,800 (oneDNN allocated 204,800 B).
    assert onednn_workspace_bytes("rnn_tanh", 3, 1, 48, 48, 7, 5) == 204_800


def test_onednn_leading_dimension_skips_multiples_of_256():
    # get_good_ld: 4H = 1024 floats -> 1024 + 16 = 1040 (a multiple of 256 floats gets 64 B more, against
    # 4K aliasing); H = 256 -> 272. LSTM, L=1, H=I=256, T=1, N=1: cells 1 row, grid (1+1)*(1+1)*1 = 4 rows.
    # gates 1040*4 = 4,160 | page 8,192 + ht 272*4 = 1,088 -> 9,280 | 12,288 + states 4*272*4 = 4,352
    # -> 16,640 | 20,480 + 4,352 -> 24,832 | 28,672 + 4,352 -> 33,024 | 36,864 + c 4*256*4 = 4,096 -> 40,960
    # | diff layer 4,352 -> 45,312 | 49,152 + diff iter 4,352 -> 53,504 | 57,344 + diff c 4,096 = 61,440.
    assert onednn_workspace_bytes("lstm", 1, 1, 256, 256, 1, 1) == 61_440


def test_onednn_groups_and_intermediate_outputs():
    assert onednn_groups(_call(i=16)) == [(2, 1, 16)]  # input == state: all layers fused
    assert onednn_groups(_call(layers=3, i=32)) == [(1, 1, 32), (2, 1, 16)]  # first layer alone
    assert onednn_groups(_call(layers=1, i=32)) == [(1, 1, 32)]
    assert onednn_groups(_call(layers=2, bi=True, i=32)) == [(1, 2, 32), (1, 2, 32)]  # one per layer, 2H in
    # GRU (oneDNN's LBR GRU), H=64, I=32, T=10, N=64: two groups, each workspace 3,112,960 B as oneDNN
    # allocated it, plus the first group's output kept for the second: T*N*H*4.
    call = _call("gru", 2, 64, False, 10, 64, 32)
    ws = [onednn_workspace_bytes("gru", layers, d, c, 64, 10, 64) for layers, d, c in onednn_groups(call)]
    assert ws == [3_112_960, 3_112_960]
    assert onednn_reserve_bytes(call) == 2 * 3_112_960 + 10 * 64 * 64 * 4


def test_reserve_dispatch_and_bad_input():
    assert reserve_bytes(_call(), "native") == 425_984
    assert reserve_bytes(_call(), "cudnn") is None  # cuDNN publishes no formula
    with pytest.raises(TbdError, match="unknown RNN implementation"):
        reserve_bytes(_call(), "mkl")
    with pytest.raises(TbdError, match="unknown RNN mode"):
        native_reserve_bytes(_call("rnn_sigmoid"))
    with pytest.raises(TbdError, match="seq_len must be positive"):
        native_reserve_bytes(_call(t=0))
    with pytest.raises(TbdError, match="float32"):
        onednn_reserve_bytes(_call(dtype_bytes=2))
    with pytest.raises(TbdError, match="projection"):
        native_reserve_bytes(_call(proj=8))


def _graph(data_producer="swapaxis0", attrs=None):
    nodes = [{"op": "null", "name": "data", "inputs": []},
             {"op": "SwapAxis", "name": "swapaxis0", "inputs": [[0, 0, 0]]},
             {"op": "null", "name": "params", "inputs": []},
             {"op": "RNN", "name": "rnn0", "attrs": attrs or {
                 "mode": "lstm", "num_layers": "2", "state_size": "16", "bidirectional": "False",
                 "projection_size": "None"},
              "inputs": [[1 if data_producer == "swapaxis0" else 0, 0, 0], [2, 0, 0]]}]
    return nodes


def test_rnn_calls_read_attributes_and_the_data_shape():
    shapes = {"swapaxis0_output": (8, 64, 16), "data": (64, 8, 16)}
    dtypes = {"swapaxis0_output": "float32", "data": "float32"}
    assert rnn_calls(_graph(), shapes, dtypes) == [_call()]
    # a variable fed straight in: its own name is the key
    assert rnn_calls(_graph("data"), shapes, dtypes) == [_call(t=64, n=8)]
    missing = rnn_calls(_graph(), {}, {})
    assert missing == ["rnn0: its data input's shape is unknown (swapaxis0_output: None)"]
    bad = rnn_calls(_graph(attrs={"num_layers": "2"}), shapes, dtypes)
    assert bad == ["rnn0: attribute 'mode' missing or unreadable"]


def test_rnn_reserve_sums_calls_or_says_why_not():
    assert rnn_reserve([_call(), _call(t=9)], "native") == (425_984 + 9 * 64 * 16 * 13 * 4, "native")
    total, why = rnn_reserve([_call()], "cudnn")
    assert total is None and "cudnnGetRNNTrainingReserveSize" in why
    assert rnn_reserve(["rnn0: unknown"], "native") == (None, "rnn0: unknown")
    base = {"bytes": 100, "by_op": {"Activation": 100}, "tensors": 1, "left_out": [], "reason": None}
    got = add_reserve(base, 425_984, "native")
    assert got["bytes"] == 100 + 425_984 and got["by_op"]["RNN reserve"] == 425_984
    assert got["reserve"] == {"bytes": 425_984, "implementation": "native"}
    assert add_reserve({**base, "bytes": None}, 5, "native")["bytes"] is None
