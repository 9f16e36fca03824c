"""Conv/GEMM FLOPs read from a Kineto trace equal torch's FlopCounterMode for the same iteration.

One training iteration (forward, backward, SGD step) runs twice on identical shapes: once under
`torch.profiler` with record_shapes (the trace is exported and read back the way the trace reader
does: cpu_op events, FLOPs from the outermost op in a call stack that has a formula), once under
`torch.utils.flop_counter.FlopCounterMode`. FLOPs depend on shapes only, so the two totals of
convolution and matrix-multiply FLOPs must be the same integer.
"""

from __future__ import annotations

import importlib.util
import json
import math

import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from tbd.analysis.flops import has_formula, op_flops
from tbd.records import OpShapes

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
