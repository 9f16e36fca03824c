"""The kernel drill-down on a real PyTorch 1.9 ResNet-50 trace from a V100 (tests/fixtures/gpu).

Expected values come from a recompute written here, over the raw JSON with plain loops, that
shares no code with tbd: each kernel's launching runtime call by correlation id, the ops open
around that call on its thread, the outermost convolution op among them (the op the count belongs
to), its FLOPs and bytes from the shapes the trace records, split among the kernels it launched by
duration. The trace predates "Concrete Inputs", so a forward convolution's output shape is read
from its autograd node (same "Sequence number"), and a per-gradient op's size argument from its
parent op, exactly as a person reading the trace would.

Worked example, the first bottleneck 1x1 conv: input 32x256x56x56, weight 128x256x1x1, output
(from CudnnConvolutionBackward #1282) 32x128x56x56: FLOPs = 2 * 32*128*56*56 * 256*1*1 =
6,576,668,672; bytes = 4 * (25,690,112 + 32,768 + 12,845,056) = 154,271,744.

The fixture is fetched, not committed (tests/fixtures/README.md): the tests skip without it.
"""

from __future__ import annotations

import collections
import gzip
import json
import math
import re

import pytest
from testpaths import real_trace

from tbd.cli.run_analysis import profile_from_trace

TRACE = real_trace("gpu/pt19_resnet50_v100.json.gz")
pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="real GPU traces not fetched (tests/fixtures/README.md)")

V100_FP32 = 15.7e12  # FLOP/s, NVIDIA V100 datasheet (SXM2/DGXS)
V100_BANDWIDTH = 900e9  # B/s, HBM2, the same datasheet
FORMULA_OPS = ("aten::convolution", "aten::cudnn_convolution_backward_input", "aten::cudnn_convolution_backward_weight")


# The set-up kernels of this trace's convolutions, by their names as the trace spells them (nchwToNhwcKernel,
# nhwcToNchwKernel, im2col4d_kernel, cask_cudnn::compute*OffsetsKernel, generateWinogradTilesKernel).
_SET_UP = re.compile(r"nchwtonhwc|nhwctonchw|im2col|compute\w*offsetskernel|generatewinogradtiles")


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _recompute() -> dict:
    """Per kernel name: calls, FLOPs, bytes, time (µs) and its calls' launch configurations."""
    with gzip.open(TRACE, "rt") as f:
        events = json.load(f)["traceEvents"]
    ops = [e for e in events if e.get("cat") == "Operator" and e.get("ph") == "X"]
    ops_on = collections.defaultdict(list)
    for op in ops:
        ops_on[op["tid"]].append(op)
    calls = {e["args"]["correlation"]: e for e in events if e.get("cat") == "Runtime" and "correlation" in e["args"]}
    outputs = {op["args"]["Sequence number"]: op["args"]["Input Dims"][0] for op in ops
               if op["name"] == "CudnnConvolutionBackward"}

    def work(op, parent):
        dims = op["args"]["Input Dims"]
        if op["name"] == "aten::convolution":  # (input, weight, ...); output from the autograd node
            x, w, out = dims[0], dims[1], outputs[op["args"]["Sequence number"]]
            return 2 * _prod(out) * _prod(w[1:]), 4 * (_prod(x) + _prod(w) + _prod(out))
        own = parent["args"]["Input Dims"]  # cudnn_convolution_backward(self, grad_output, weight, ...)
        if op["name"].endswith("_input"):  # (self_size, grad_output, weight): grad_input is self's shape
            go, w = dims[1], dims[2]
            return 2 * _prod(go) * _prod(w[1:]), 4 * (_prod(go) + _prod(w) + _prod(own[0]))
        go, x, ws = dims[1], dims[2], own[2]  # (weight_size, grad_output, self): grad_weight is weight's
        return 2 * _prod(go) * _prod(ws[1:]), 4 * (_prod(go) + _prod(x) + _prod(ws))

    launched = collections.defaultdict(list)  # id(formula op) -> [(kernel, op, parent)]
    for k in (e for e in events if e.get("cat") == "Kernel"):
        call = calls.get(k["args"].get("correlation"))
        if call is None:
            continue
        open_ops = sorted((o for o in ops_on[call["tid"]] if o["ts"] <= call["ts"] <= o["ts"] + o["dur"]),
                          key=lambda o: (o["ts"], -o["dur"]))
        counted = [i for i, o in enumerate(open_ops) if o["name"] in FORMULA_OPS]
        if counted:
            i = counted[0]
            launched[id(open_ops[i])].append((k, open_ops[i], open_ops[i - 1]))
    groups = collections.defaultdict(lambda: {"calls": 0, "flops": 0.0, "bytes": 0.0, "us": 0, "configs": []})
    for members in launched.values():
        flops, nbytes = work(members[0][1], members[0][2])
        total = sum(k["dur"] for k, _, _ in members)
        # cuDNN's layout, offset and split-K kernels do none of the convolution's multiply-adds: the op's FLOPs
        # go to its other kernels, by time (bytes stay shared by time among all of them).
        carrier_us = sum(k["dur"] for k, _, _ in members if not _SET_UP.search(k["name"].lower()))
        for k, _, _ in members:
            g, a = groups[k["name"]], k["args"]
            g["calls"] += 1
            carries = not _SET_UP.search(k["name"].lower())
            g["flops"] += flops * k["dur"] / carrier_us if carries else 0.0
            g["bytes"] += nbytes * k["dur"] / total
            g["us"] += k["dur"]
            g["configs"].append(((*a["grid"], *a["block"], a["registers per thread"], a["shared memory"]),
                                 k["dur"], a["est. achieved occupancy %"]))
    return groups


@pytest.fixture(scope="module")
def expected() -> dict:
    return _recompute()


@pytest.fixture(scope="module")
def rows() -> dict:
    profile = profile_from_trace(TRACE)
    return {r.name: r for r in profile.kernels}, profile


def test_the_convolution_kernels_have_flops_bytes_and_their_roofline(expected, rows):
    by_name, profile = rows
    top = [r for r in profile.kernels[:10] if r.name in expected]
    assert len(top) >= 6  # dgrad, wgrad, two implicit_convolve_sgemm, volta_sgemm, volta_scudnn
    ridge = V100_FP32 / V100_BANDWIDTH  # 17.4 FLOP/B
    for row in top:
        want = expected[row.name]
        assert row.calls == want["calls"]
        assert row.time_s == pytest.approx(want["us"] * 1e-6, rel=1e-9)
        assert row.flops == pytest.approx(want["flops"], rel=1e-9)
        assert row.bytes == pytest.approx(want["bytes"], rel=1e-9)
        assert row.flops_per_s == pytest.approx(want["flops"] / (want["us"] * 1e-6), rel=1e-9)
        intensity = want["flops"] / want["bytes"]
        assert row.intensity == pytest.approx(intensity, rel=1e-9)
        assert row.bound == ("compute" if intensity >= ridge else "memory")
        attainable = min(V100_FP32, intensity * V100_BANDWIDTH)
        assert row.roofline_pct == pytest.approx(row.flops_per_s / attainable * 100, rel=1e-9)


def test_the_top_kernel_by_the_numbers(rows):
    # dgrad_engine: 27 calls, 13,499 µs in all, FLOPs 1.0803e11 from the recompute: 8.00 TFLOP/s, 51.0 %
    # of the V100's 15.7 TFLOP/s; intensity 1.0803e11 / 1.0907e9 = 99.1 FLOP/B, right of the 17.4 ridge.
    row = rows[1].kernels[0]
    assert row.name.startswith("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>")
    assert (row.calls, round(row.time_s * 1e6)) == (27, 13499)
    assert row.flops_per_s / 1e12 == pytest.approx(8.003, abs=5e-4)
    assert row.util_pct == pytest.approx(51.0, abs=0.05)
    assert row.intensity == pytest.approx(99.05, abs=0.01)
    assert (row.bound, round(row.roofline_pct, 1)) == ("compute", 51.0)


def test_launch_configuration_is_the_one_most_time_ran_with(expected, rows):
    by_name, _ = rows
    for name in list(expected)[:8]:
        row, configs = by_name[name], expected[name]["configs"]
        time_of = collections.Counter()
        for key, dur, _ in configs:
            time_of[key] += dur
        best, best_time = max(time_of.items(), key=lambda kv: (kv[1], -list(time_of).index(kv[0])))
        occupancy = [(occ, dur) for key, dur, occ in configs if key == best]
        launch = row.launch
        assert tuple(launch["grid"]) + tuple(launch["block"]) == best[:6]
        assert (launch["registers_per_thread"], launch["shared_memory_bytes"]) == best[6:]
        assert launch["configs"] == len(time_of)
        assert launch["share_pct"] == pytest.approx(100 * best_time / sum(time_of.values()), rel=1e-9)
        assert launch["occupancy_pct"] == pytest.approx(sum(o * d for o, d in occupancy) / sum(d for _, d in occupancy))


def test_the_forward_convolution_shows_its_op_shapes_and_python_stack(rows):
    by_name, _ = rows
    row = next(r for n, r in by_name.items() if n.startswith("void implicit_convolve_sgemm<float, float, 1024,"))
    op = row.ops[0]
    assert op["name"] == "aten::convolution"
    assert op["shapes"] == "32×256×14×14, 1024×256×1×1 (float)"
    # PyTorch 1.9's "Call stack", innermost first, install prefix dropped; it reads "torch/nn/modules/conv.py(440):
    # _conv_forward < torch/nn/modules/conv.py(443): forward < torch/nn/modules/module.py(1051): _call_impl <
    # torchvision/models/resnet.py(...": torch's own frames go, the stack starts at the model's code (issue 28)
    assert op["stack"].startswith("torchvision/models/resnet.py(")
    assert "torch/nn/modules/conv.py" not in op["stack"] and "_call_impl" not in op["stack"]
    assert tuple(row.launch["grid"]) == (98, 8, 1) and tuple(row.launch["block"]) == (8, 32, 1)
    # 2 * 32*1024*14*14 (the output, from the autograd node) * 256 = 3,288,334,336 FLOPs per call
    assert 2 * 32 * 1024 * 14 * 14 * 256 == 3_288_334_336


def test_the_worked_example(rows):
    """The module docstring's conv, counted through tbd's own formulas on the completed shapes."""
    from tbd.analysis.flops.ops import op_flops
    from tbd.analysis.op_bytes.ops import op_bytes
    from tbd.core.records import OpShapes
    op = OpShapes("aten::convolution", ((32, 256, 56, 56), (128, 256, 1, 1), (), (), (), (), (), (), ()),
                  ("float", "float", "", "GenericList", "GenericList", "GenericList", "Bool", "GenericList", "Int"),
                  (), output_dims=((32, 128, 56, 56),))
    assert op_flops(op) == 6_576_668_672
    assert op_bytes(op) == 154_271_744


def test_a_note_says_what_was_recovered_and_the_unknown_share_fell(rows):
    _, profile = rows
    note = next(n for n in profile.notes if n.startswith("shapes this trace did not record, recovered"))
    # 52 grad_input ops (the first conv's input needs no gradient) and 53 grad_weight ops
    assert "105 convolution backward ops' size argument from their parent op" in note
    assert "53 forward convolutions' output shape from their autograd node" in note
    unknown = profile.metrics.no_flop_formula
    assert unknown is not None and unknown.pct < 10 and math.isfinite(unknown.pct)
