"""Conv/GEMM/attention FLOPs read from a Kineto trace equal torch's FlopCounterMode for the same work.

One training iteration (forward, backward, SGD step) runs twice on identical shapes: once under
`torch.profiler` with record_shapes (the trace is exported and read back the way the trace reader
does: cpu_op events, FLOPs from the outermost op in a call stack that has a formula), once under
`torch.utils.flop_counter.FlopCounterMode`. FLOPs depend on shapes only, so the two totals of
convolution and matrix-multiply FLOPs must be the same integer.

The same holds op by op for the ops this torch cannot run on the CPU: the fused CUDA attention
kernels (called on meta tensors, which both the profiler and FlopCounterMode see) and the
per-gradient convolution backward ops of PyTorch 1.8-1.10 (records built from the shapes of a
convolution_backward that FlopCounterMode counts).
"""

from __future__ import annotations

import importlib.util
import json
import math

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count

from tbd.analysis.flops.ops import has_formula, op_flops
from tbd.core.records import OpShapes

# The ops FlopCounterMode counts that a ResNet's training step runs.
_CONV_GEMM = {"aten::convolution", "aten::convolution_backward", "aten::mm", "aten::addmm",
              "aten::bmm", "aten::baddbmm"}


def _outermost_formula_ops(events: list[dict]) -> list[dict]:
    """cpu_op events that have a formula and no ancestor (on their thread) with one."""
    ops = sorted((e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"),
                 key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    chosen, stack = [], []  # stack of (event, covered: it or an ancestor has a formula)
    for e in ops:
        while stack and (stack[-1][0]["tid"] != e["tid"] or stack[-1][0]["ts"] + stack[-1][0]["dur"] <= e["ts"]):
            stack.pop()
        covered = bool(stack) and stack[-1][1]
        formula = has_formula(e["name"])
        if formula and not covered:
            chosen.append(e)
        stack.append((e, covered or formula))
    return chosen


def _trace_conv_gemm_flops(step, path) -> int:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    total = 0
    for e in _outermost_formula_ops(events):
        if e["name"] not in _CONV_GEMM:
            continue
        args = e["args"]
        flops = op_flops(OpShapes(e["name"], tuple(args["Input Dims"]), tuple(args["Input type"]),
                                  tuple(args["Concrete Inputs"])))
        assert flops is not None and not math.isnan(flops), e
        assert flops == int(flops)
        total += int(flops)
    return total


def _flopcounter_flops(step) -> int:
    counter = FlopCounterMode(display=False)
    with counter:
        step()
    return counter.get_total_flops()


class _Bottleneck(nn.Module):
    def __init__(self, cin: int, mid: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + self.down(x))


def _small_resnet_step():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 7, stride=2, padding=3), nn.BatchNorm2d(8), nn.ReLU(inplace=True),  # stem with a bias
        nn.MaxPool2d(3, stride=2, padding=1),
        _Bottleneck(8, 4, 16, 1), _Bottleneck(16, 8, 32, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images, labels = torch.randn(2, 3, 40, 40), torch.tensor([1, 7])

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(model(images), labels).backward()
        opt.step()

    return step


def test_small_resnet_conv_gemm_flops_match_flopcounter(tmp_path):
    step = _small_resnet_step()
    step()  # first step allocates optimizer state; both measured steps are then identical
    expected = _flopcounter_flops(step)
    assert expected > 0
    assert _trace_conv_gemm_flops(step, tmp_path / "small.json") == expected


@pytest.mark.skipif(importlib.util.find_spec("tbd.models.pytorch.resnet50") is None,
                    reason="models/pytorch/resnet50.py not present")
def test_resnet50_conv_gemm_flops_match_flopcounter(tmp_path):
    from tbd.models.pytorch import resnet50

    workload = resnet50.build(1, "cpu", "full", 0)
    expected = _flopcounter_flops(workload.step)
    # ResNet-50 forward is about 4.1 GMACs per 224x224 image (He et al. 2016, Table 1: 3.8e9
    # "FLOPs" = multiply-adds without the fc layer); training is about 3x the forward.
    assert 3 * 2 * 3.8e9 < expected < 3 * 2 * 4.5e9
    assert _trace_conv_gemm_flops(workload.step, tmp_path / "resnet50.json") == expected


# ---- convolution backward: legacy per-gradient ops and the native kernels --------------------

def _counts_by_op(step) -> dict:
    counter = FlopCounterMode(display=False)
    with counter:
        step()
    return counter.get_flop_counts()["Global"]


def _legacy_record(name: str, dims: list, concrete: list) -> OpShapes:
    """A legacy op call as PyTorch 1.8-1.10 takes it, with every scalar argument recorded."""
    types = tuple("float" if d else "ScalarList" if c.startswith("[") else "Scalar" for d, c in zip(dims, concrete))
    return OpShapes(name, tuple(dims), types, tuple(concrete))


@pytest.mark.parametrize("transposed", [False, True])
def test_legacy_cudnn_conv_backward_matches_flopcounter(transposed):
    # PyTorch 1.8-1.10 split cudnn_convolution(_transpose)_backward into one op per gradient; their
    # sum must equal what FlopCounterMode counts for today's convolution_backward on the same shapes.
    torch.manual_seed(0)
    conv = nn.ConvTranspose2d(4, 8, 3, stride=2, bias=False) if transposed else nn.Conv2d(3, 8, 3, 2, 1, bias=False)
    x = torch.randn(2, 4 if transposed else 3, 9, 9, requires_grad=True)
    expected = _counts_by_op(lambda: conv(x).sum().backward())[torch.ops.aten.convolution_backward]
    go, w = list(conv(x).shape), list(conv.weight.shape)
    pad, stride = ("[0, 0]", "[2, 2]") if transposed else ("[1, 1]", "[2, 2]")
    tail = [pad, stride, "[1, 1]", "1", "False", "False", "True"]
    kind = "cudnn_convolution_transpose" if transposed else "cudnn_convolution"
    grad_input = (_legacy_record(f"aten::{kind}_backward_input", [go, w] + [[]] * 7, ["", ""] + tail) if transposed
                  else _legacy_record(f"aten::{kind}_backward_input", [[], go, w] + [[]] * 7,
                                      [str(list(x.shape)), "", ""] + tail))
    grad_weight = _legacy_record(f"aten::{kind}_backward_weight", [[], go, list(x.shape)] + [[]] * 7,
                                 [str(w), "", ""] + tail)
    assert op_flops(grad_input) + op_flops(grad_weight) == expected


@pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN")
def test_native_conv_backward_equals_its_convolution_backward(tmp_path):
    # Without oneDNN, CPU convolution_backward calls _slow_conv2d_backward; both carry a formula and
    # must agree, since the reader may meet either as the outermost op with one.
    torch.manual_seed(0)
    conv, x = nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.randn(2, 3, 16, 16, requires_grad=True)
    with torch.backends.mkldnn.flags(enabled=False), \
            profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        conv(x).sum().backward()
    prof.export_chrome_trace(str(tmp_path / "conv.json"))
    events = [e for e in json.loads((tmp_path / "conv.json").read_text())["traceEvents"] if e.get("cat") == "cpu_op"]
    flops = {}
    for e in events:
        if e["name"] in ("aten::convolution_backward", "aten::_slow_conv2d_backward"):
            a = e["args"]
            flops.setdefault(e["name"], []).append(op_flops(OpShapes(e["name"], tuple(a["Input Dims"]),
                                                                     tuple(a["Input type"]),
                                                                     tuple(a["Concrete Inputs"]))))
    expected = _counts_by_op(lambda: conv(x).sum().backward())[torch.ops.aten.convolution_backward]
    assert flops == {"aten::convolution_backward": [expected], "aten::_slow_conv2d_backward": [expected]}


# ---- scaled-dot-product attention ------------------------------------------------------------
# The CUDA kernels have meta implementations, so FlopCounterMode and the profiler both see them
# called on meta tensors on a CPU-only machine; the profiler records them as on a GPU.

_B, _H, _HKV, _SQ, _SK, _D = 2, 4, 2, 8, 10, 16


def _meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="meta", dtype=dtype)


def _recorded_flops(call, tmp_path, name: str) -> float:
    """Our count for the one `name` call in a profile of call()."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        call()
    prof.export_chrome_trace(str(tmp_path / "attn.json"))
    events = [e for e in json.loads((tmp_path / "attn.json").read_text())["traceEvents"]
              if e.get("cat") == "cpu_op" and e["name"] == name]
    assert len(events) == 1, name
    a = events[0]["args"]
    return op_flops(OpShapes(name, tuple(a["Input Dims"]), tuple(a["Input type"]), tuple(a["Concrete Inputs"])))


def _attention_calls():
    aten = torch.ops.aten
    q, k, v = _meta(_B, _H, _SQ, _D), _meta(_B, _HKV, _SK, _D), _meta(_B, _HKV, _SK, _D)
    kf, vf = _meta(_B, _H, _SK, _D), _meta(_B, _H, _SK, _D)  # full heads: the efficient/cuDNN meta kernels want them
    go, lse, none = _meta(_B, _H, _SQ, _D), _meta(_B, _H, _SQ), _meta(0)
    seed, offset = _meta(2, dtype=torch.int64), _meta(0, dtype=torch.int64)
    return {
        "aten::_scaled_dot_product_flash_attention": lambda: aten._scaled_dot_product_flash_attention(q, k, v),
        "aten::_scaled_dot_product_efficient_attention":
            lambda: aten._scaled_dot_product_efficient_attention(q, kf, vf, None, True),
        "aten::_scaled_dot_product_cudnn_attention":
            lambda: aten._scaled_dot_product_cudnn_attention(q, kf, vf, None, True),
        "aten::_scaled_dot_product_flash_attention_backward":
            lambda: aten._scaled_dot_product_flash_attention_backward(go, q, kf, vf, go, lse, none, none, _SQ, _SK,
                                                                      0.0, False, seed, offset),
        "aten::_scaled_dot_product_efficient_attention_backward":
            lambda: aten._scaled_dot_product_efficient_attention_backward(go, q, kf, vf, none, go, lse, seed[0],
                                                                          seed[1], 0.0, [True, True, True, False]),
    }


@pytest.mark.parametrize("name", list(_attention_calls()))
def test_fused_attention_matches_flopcounter(name, tmp_path):
    call = _attention_calls()[name]
    counter = FlopCounterMode(display=False)
    with counter:
        call()
    assert counter.get_total_flops() > 0
    assert _recorded_flops(call, tmp_path, name) == counter.get_total_flops()


def test_inner_attention_kernels_count_what_their_outer_op_counts(tmp_path):
    # _flash/_efficient_attention_forward take query.transpose(1, 2), [B, S, H, D]. FlopCounterMode
    # reads those shapes as [B, H, S, D] (and rejects them here, 8 "heads" over 10); the outer op's
    # count on the [B, H, S, D] tensors is the right one, and the inner op must give it too.
    aten = torch.ops.aten
    q, k, v, go = _meta(_B, _H, _SQ, _D), _meta(_B, _H, _SK, _D), _meta(_B, _H, _SK, _D), _meta(_B, _H, _SQ, _D)
    counter = FlopCounterMode(display=False)
    with counter:
        aten._scaled_dot_product_flash_attention(q, k, v)
    forward = counter.get_total_flops()
    t = [x.transpose(1, 2) for x in (q, k, v, go)]
    assert _recorded_flops(lambda: aten._flash_attention_forward(*t[:3], None, None, _SQ, _SK, 0.0, False, False),
                           tmp_path, "aten::_flash_attention_forward") == forward
    assert _recorded_flops(lambda: aten._efficient_attention_forward(*t[:3], None, None, None, _SQ, _SK, 0.0, 0),
                           tmp_path, "aten::_efficient_attention_forward") == forward
    lse, seed, offset = _meta(_B, _H, _SQ), _meta(2, dtype=torch.int64), _meta(0, dtype=torch.int64)
    backward = sdpa_backward_flop_count(go.shape, q.shape, k.shape, v.shape)
    assert _recorded_flops(lambda: aten._flash_attention_backward(t[3], *t[:3], t[3], lse, None, None, _SQ, _SK, 0.0,
                                                                  False, seed, offset),
                           tmp_path, "aten::_flash_attention_backward") == backward


def test_cpu_sdpa_training_step_matches_torch_counts(tmp_path):
    # On the CPU, F.scaled_dot_product_attention runs _scaled_dot_product_flash_attention_for_cpu
    # and its backward, which FlopCounterMode does not count; its forward GEMMs equal the math
    # backend's two bmm (which FlopCounterMode does count), its backward torch's sdpa_backward_flop_count.
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, s, 16, requires_grad=True) for s in (8, 10, 10))
    step = lambda: nn.functional.scaled_dot_product_attention(q, k, v).sum().backward()  # noqa: E731
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    prof.export_chrome_trace(str(tmp_path / "sdpa.json"))
    flops = {}
    for e in _outermost_formula_ops(json.loads((tmp_path / "sdpa.json").read_text())["traceEvents"]):
        a = e["args"]
        flops[e["name"]] = op_flops(OpShapes(e["name"], tuple(a["Input Dims"]), tuple(a["Input type"]),
                                             tuple(a["Concrete Inputs"])))
    with sdpa_kernel(SDPBackend.MATH):
        forward = _counts_by_op(lambda: nn.functional.scaled_dot_product_attention(q, k, v))
    assert flops["aten::_scaled_dot_product_flash_attention_for_cpu"] == sum(forward.values())
    assert flops["aten::_scaled_dot_product_flash_attention_for_cpu_backward"] == \
        sdpa_backward_flop_count(q.shape, q.shape, k.shape, v.shape)
