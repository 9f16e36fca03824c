"""TensorFlow op types as the ATen ops computing the same thing, so the shared FLOP formulas count them.

TF's profiler records no operand shapes; the hook logs the step graph's nodes (type, operand and
result shapes, attributes; profilers/tensorflow/xspace.py). `base_type` strips oneDNN/grappler
rewrites off an executed op's type, `shape_node` finds the logged node holding its operands, and
`TF_TO_ATEN` turns that node into ATen calls (`OpShapes`); `TF_ZERO_FLOPS` are the types that
only move data. The reader (profilers/tensorflow/trace.py) applies the caller's FLOP formulas.
"""

from __future__ import annotations

import math
import re
from typing import Callable

from tbd.core.records import OpShapes

# TF dtype name -> the type string analysis.flops.ops.precision_of reads (Kineto's spelling); integer
# and bool ops do no floating-point work (precision "int": 0 FLOPs), e.g. the optimizer's step count.
_TYPES = {"float32": "float", "float16": "c10::Half", "float64": "double", "bfloat16": "c10::BFloat16",
          "int32": "int", "int64": "long int", "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}


def aten_type(dtype: str) -> str:
    """A TF dtype name as the type string ATen traces write ("float32" -> "float"), "" if unknown."""
    return _TYPES.get(dtype, "")


# oneDNN / grappler rewrites of a kernel keep the base op's semantics (bias add and activation fused
# in are not counted, as aten::addmm's bias is not).
_PREFIXES = ("_MklNativeFused", "_MklNative", "_MklFused", "_Mkl", "_Fused")
_SUFFIXES = ("WithBias",)


def base_type(tf_type: str) -> str:
    """'_MklNativeFusedConv2D' -> 'Conv2D', '_MklNativeConv2DBackpropFilterWithBias' -> 'Conv2DBackpropFilter',
    '_MklNativePadWithConv2D' -> 'Conv2D' (an explicit pad fused into the convolution that reads it)."""
    for p in _PREFIXES:
        if tf_type.startswith(p):
            tf_type = tf_type[len(p):]
            break
    for p in ("PadWithFused", "PadWith"):
        if tf_type.startswith(p):
            tf_type = tf_type[len(p):]
            break
    for s in _SUFFIXES:
        tf_type = tf_type.removesuffix(s)
    return tf_type


def _nchw(shape: list, fmt: str) -> list:
    return [shape[0], shape[3], shape[1], shape[2]] if fmt.startswith("NHWC") else list(shape)


def _filter(f: list) -> list:
    """TF filter [kh, kw, cin, cout] -> ATen weight [cout, cin, kh, kw]."""
    return [f[3], f[2], f[0], f[1]]


def _conv_common(node: dict, x: list, f: list, out: list) -> tuple:
    a = node["attrs"]
    fmt = a.get("data_format", "NHWC")
    x4, o4, w4 = _nchw(x, fmt), _nchw(out, fmt), _filter(f)
    sp = slice(1, 3) if fmt.startswith("NHWC") else slice(2, 4)
    stride, dil = list(a["strides"])[sp], list(a["dilations"])[sp]
    return x4, o4, w4, stride, dil, x4[1] // w4[1]


def _padding(node: dict, x4: list, w4: list, o4: list, stride: list, dil: list) -> list:
    """Symmetric padding giving the graph's output size (ATen pads symmetrically); ValueError if none."""
    pads = []
    for i in range(2):
        h, k, s, d, o = x4[2 + i], w4[2 + i], stride[i], dil[i], o4[2 + i]
        total = max((o - 1) * s + d * (k - 1) + 1 - h, 0)
        for p in (total // 2, (total + 1) // 2):
            if (h + 2 * p - d * (k - 1) - 1) // s + 1 == o:
                pads.append(p)
                break
        else:
            raise ValueError(f"no symmetric padding gives output {o} from {h}")
    return pads


def _conv2d(node: dict, t: str) -> list[OpShapes]:
    x, f = node["inputs"][0], node["inputs"][1]
    x4, o4, w4, stride, dil, groups = _conv_common(node, x, f, node["outputs"][0])
    pad = _padding(node, x4, w4, o4, stride, dil)
    return [OpShapes("aten::convolution", (x4, w4, [], [], [], [], [], [], []), (t, t),
                     ("", "", "", str(stride), str(pad), str(dil), "False", "", str(groups)))]


def _conv_backward(node: dict, t: str, x: list, f: list, go: list, mask: list) -> list[OpShapes]:
    x4, o4, w4, stride, dil, groups = _conv_common(node, x, f, go)
    pad = _padding(node, x4, w4, o4, stride, dil)
    return [OpShapes("aten::convolution_backward", (o4, x4, w4), (t, t, t),
                     ("", "", "", "", str(stride), str(pad), str(dil), "False", "", str(groups), str(mask)))]


def _conv_bwd_input(node: dict, t: str) -> list[OpShapes]:
    # Conv2DBackpropInput(input_sizes, filter, out_backprop): only grad_input.
    return _conv_backward(node, t, node["outputs"][0], node["inputs"][1], node["inputs"][2], [True, False, False])


def _conv_bwd_filter(node: dict, t: str) -> list[OpShapes]:
    # Conv2DBackpropFilter(input, filter_sizes, out_backprop): only grad_weight (a fused bias grad is not counted).
    return _conv_backward(node, t, node["inputs"][0], node["outputs"][0], node["inputs"][2], [False, True, False])


def _matmul(node: dict, t: str) -> list[OpShapes]:
    a, b = list(node["inputs"][0]), list(node["inputs"][1])
    at = node["attrs"]
    if at.get("transpose_a") or at.get("adj_x"):
        a[-2], a[-1] = a[-1], a[-2]
    if at.get("transpose_b") or at.get("adj_y"):
        b[-2], b[-1] = b[-1], b[-2]
    if len(a) == 2 and len(b) == 2:
        return [OpShapes("aten::mm", (a, b), (t, t), ())]
    batch = math.prod(node["outputs"][0][:-2])  # broadcast batch dims
    return [OpShapes("aten::bmm", ([batch, a[-2], a[-1]], [batch, b[-2], b[-1]]), (t, t), ())]


def _elementwise(aten: str) -> Callable[[dict, str], list[OpShapes]]:
    """An elementwise TF op as one ATen call over the same operands (broadcast like ATen's)."""
    def f(node: dict, t: str) -> list[OpShapes]:
        dims = tuple(list(s) for s in node["inputs"])
        return [OpShapes(aten, dims, tuple(t for _ in dims), tuple("" for _ in dims))]
    f.elementwise = True
    return f


def _chain(*atens: str) -> Callable[[dict, str], list[OpShapes]]:
    """An elementwise TF op computing several ATen ops in a row over the same operands."""
    def f(node: dict, t: str) -> list[OpShapes]:
        return [c for a in atens for c in _elementwise(a)(node, t)]
    f.elementwise = True
    return f


def _add_n(node: dict, t: str) -> list[OpShapes]:
    # AddN of n tensors: n - 1 additions of the (equal) shapes.
    x = list(node["inputs"][0])
    return [OpShapes("aten::add", (x, x), (t, t), ("", "")) for _ in node["inputs"][1:]]


def _assign_add(node: dict, t: str) -> list[OpShapes]:
    # AssignAdd/SubVariableOp(resource, value): var += value (the optimizer's update in Keras 3).
    v = list(node["inputs"][1])
    return [OpShapes("aten::add", (v, v), (t, t), ("", ""))]


def _reduce(node: dict, t: str) -> list[OpShapes]:
    # Sum(x, axes): one add per input element (aten::sum's convention).
    return [OpShapes("aten::sum", (list(node["inputs"][0]),), (t,), ("",))]


def _mean(node: dict, t: str) -> list[OpShapes]:
    # Mean(x, axes): the sum plus one divide per output element (aten::mean's convention).
    out = list(node["outputs"][0])
    return [OpShapes("aten::sum", (list(node["inputs"][0]),), (t,), ("",)),
            OpShapes("aten::div", (out, []), (t, "Scalar"), ("", ""))]


def _bias_add_grad(node: dict, t: str) -> list[OpShapes]:
    # BiasAddGrad(g): the sum of g over all but the channel axis.
    return [OpShapes("aten::sum", (list(node["inputs"][0]),), (t,), ("",))]


def _softmax(aten: str) -> Callable[[dict, str], list[OpShapes]]:
    return lambda node, t: [OpShapes(aten, (list(node["inputs"][0]), [], []), (t, "Scalar", "Scalar"), ("", "-1", ""))]


def _sparse_xent(node: dict, t: str) -> list[OpShapes]:
    # SparseSoftmaxCrossEntropyWithLogits(logits [B, C], labels [B]) returns the loss AND its
    # gradient (softmax - onehot), so it is log_softmax + nll_loss and their backward in one op;
    # the later backward only scales that gradient (a Mul).
    x, labels = list(node["inputs"][0]), list(node["inputs"][1])
    return [OpShapes("aten::_log_softmax", (x, [], []), (t, "Scalar", "Scalar"), ("", "-1", "")),
            OpShapes("aten::nll_loss_forward", (x, labels, [], [], []), (t, "long int", "", "Scalar", "Scalar"),
                     ("", "", "", "1", "-100")),
            OpShapes("aten::nll_loss_backward", ([], x, labels, [], [], [], []),
                     (t, t, "long int", "", "Scalar", "Scalar", t), ("", "", "", "", "1", "-100", "")),
            OpShapes("aten::_log_softmax_backward_data", (x, x, [], []), (t, t, "Scalar", "Scalar"),
                     ("", "", "-1", ""))]


def _fused_bn(node: dict, t: str) -> list[OpShapes]:
    # FusedBatchNormV3(x, scale, offset, mean, variance): native_batch_norm, training flag at 5.
    x = _nchw(list(node["inputs"][0]), node["attrs"].get("data_format", "NHWC"))
    training = bool(node["attrs"].get("is_training", True))
    return [OpShapes("aten::native_batch_norm", (x, [x[1]], [x[1]], [x[1]], [x[1]], [], [], []),
                     (t, t, t, t, t, "Scalar", "Scalar", "Scalar"), ("", "", "", "", "", str(training), "", ""))]


def _fused_bn_grad(node: dict, t: str) -> list[OpShapes]:
    # FusedBatchNormGradV3(y_backprop, x, scale, ...): all three gradients.
    x = _nchw(list(node["inputs"][1]), node["attrs"].get("data_format", "NHWC"))
    training = bool(node["attrs"].get("is_training", True))
    c = [x[1]]
    return [OpShapes("aten::native_batch_norm_backward", (x, x, c, c, c, c, c, [], [], []),
                     (t, t, t, t, t, t, t, "Scalar", "Scalar", "ScalarList"),
                     ("", "", "", "", "", "", "", str(training), "", "[True, True, True]"))]


def _pool_window(node: dict, x: list, out: list) -> tuple | None:
    """(x NCHW, kernel, stride, symmetric padding) of a 2-D pooling node; None if no padding fits."""
    a = node["attrs"]
    fmt = a.get("data_format", "NHWC")
    sp = slice(1, 3) if fmt.startswith("NHWC") else slice(2, 4)
    k, s = list(a["ksize"])[sp], list(a["strides"])[sp]
    x4, o4 = _nchw(x, fmt), _nchw(out, fmt)
    try:
        pad = _padding(node, x4, [0, 0, *k], o4, s, [1, 1])
    except ValueError:
        return None
    return x4, k, s, pad


def _max_pool(node: dict, t: str) -> list[OpShapes] | None:
    w = _pool_window(node, list(node["inputs"][0]), list(node["outputs"][0]))
    if w is None:
        return None
    x4, k, s, pad = w
    return [OpShapes("aten::max_pool2d_with_indices", (x4, [], [], [], [], []), (t, "ScalarList", "ScalarList",
                     "ScalarList", "ScalarList", "Scalar"), ("", str(k), str(s), str(pad), "[1, 1]", "False"))]


def _max_pool_grad(node: dict, t: str) -> list[OpShapes]:
    # MaxPoolGrad(orig_input, orig_output, grad): one add per grad_output element.
    g = _nchw(list(node["inputs"][2]), node["attrs"].get("data_format", "NHWC"))
    return [OpShapes("aten::max_pool2d_with_indices_backward", (g,), (t,), ("",))]


def _avg_pool(node: dict, t: str) -> list[OpShapes] | None:
    w = _pool_window(node, list(node["inputs"][0]), list(node["outputs"][0]))
    if w is None:
        return None
    x4, k, s, pad = w
    return [OpShapes("aten::avg_pool2d", (x4, [], [], [], [], [], []), (t, "ScalarList", "ScalarList",
                     "ScalarList", "Scalar", "Scalar", ""), ("", str(k), str(s), str(pad), "False", "True", ""))]


def _avg_pool_grad(node: dict, t: str) -> list[OpShapes]:
    # AvgPoolGrad(orig_input_shape, grad): (window + 1) per grad_output element.
    a = node["attrs"]
    sp = slice(1, 3) if a.get("data_format", "NHWC").startswith("NHWC") else slice(2, 4)
    g = _nchw(list(node["inputs"][1]), a.get("data_format", "NHWC"))
    return [OpShapes("aten::avg_pool2d_backward", (g, [], [], [], [], [], [], []),
                     (t, t, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", ""),
                     ("", "", str(list(a["ksize"])[sp]), "", "", "", "", ""))]


#: TF op type (after `base_type`) -> adapter from the logged graph node to the ATen calls; an
#: adapter returns None when the node's shapes admit no ATen equivalent (its FLOPs stay unknown).
TF_TO_ATEN: dict[str, Callable[[dict, str], list[OpShapes] | None]] = {
    "Conv2D": _conv2d, "Conv2DBackpropInput": _conv_bwd_input, "Conv2DBackpropFilter": _conv_bwd_filter,
    "MatMul": _matmul, "BatchMatMul": _matmul, "BatchMatMulV2": _matmul, "BatchMatMulV3": _matmul,
    "Relu": _elementwise("aten::relu"), "ReluGrad": _elementwise("aten::threshold_backward"),
    "AddV2": _elementwise("aten::add"), "Add": _elementwise("aten::add"), "Mul": _elementwise("aten::mul"),
    "Sub": _elementwise("aten::sub"), "BiasAdd": _elementwise("aten::add"), "RealDiv": _elementwise("aten::div"),
    "DivNoNan": _elementwise("aten::div"), "Maximum": _elementwise("aten::maximum"),
    "Minimum": _elementwise("aten::minimum"), "Neg": _elementwise("aten::neg"), "Sqrt": _elementwise("aten::sqrt"),
    "Rsqrt": _elementwise("aten::rsqrt"), "Exp": _elementwise("aten::exp"), "Log": _elementwise("aten::log"),
    "Tanh": _elementwise("aten::tanh"), "Sigmoid": _elementwise("aten::sigmoid"),
    "TanhGrad": _elementwise("aten::tanh_backward"), "SigmoidGrad": _elementwise("aten::sigmoid_backward"),
    "Pow": _elementwise("aten::pow"), "Less": _elementwise("aten::lt"), "LessEqual": _elementwise("aten::le"),
    "Greater": _elementwise("aten::gt"), "GreaterEqual": _elementwise("aten::ge"),
    "Equal": _elementwise("aten::eq"), "NotEqual": _elementwise("aten::ne"),
    "LogicalAnd": _elementwise("aten::logical_and"), "LogicalOr": _elementwise("aten::logical_or"),
    "LogicalNot": _elementwise("aten::logical_not"),
    "Square": _chain("aten::mul"), "SquaredDifference": _chain("aten::sub", "aten::mul"),
    "AddN": _add_n, "AssignAddVariableOp": _assign_add, "AssignSubVariableOp": _assign_add,
    "Sum": _reduce, "Mean": _mean, "BiasAddGrad": _bias_add_grad,
    "Softmax": _softmax("aten::_softmax"), "LogSoftmax": _softmax("aten::_log_softmax"),
    "SparseSoftmaxCrossEntropyWithLogits": _sparse_xent,
    "FusedBatchNormV3": _fused_bn, "FusedBatchNormGradV3": _fused_bn_grad,
    "MaxPool": _max_pool, "MaxPoolGrad": _max_pool_grad, "AvgPool": _avg_pool, "AvgPoolGrad": _avg_pool_grad,
}

#: Types whose executed op computes over its own node's operands, elementwise (see shape_node).
_ELEMENTWISE_TYPES = frozenset(k for k, v in TF_TO_ATEN.items() if getattr(v, "elementwise", False))

#: TF op types that move, gather, cast or bookkeep data and do no arithmetic: a known 0 FLOPs
#: (as analysis.flops.ops' data-movement ops), no shapes needed.
TF_ZERO_FLOPS = frozenset("""
    Identity IdentityN VariableShape Reshape Transpose ConjugateTranspose Tile Slice StridedSlice StridedSliceGrad Pad PadV2
    Fill ZerosLike OnesLike ConcatV2 Concat Pack Unpack Split SplitV ExpandDims Squeeze Cast Shape ShapeN Size
    Range GatherV2 ResourceGather Gather GatherNd ScatterNd TensorScatterUpdate OneHot BroadcastTo
    BroadcastArgs BroadcastGradientArgs Select SelectV2 ReadVariableOp AssignVariableOp VarHandleOp Const NoOp
    TensorListFromTensor TensorListReserve TensorListPushBack TensorListPopBack TensorListStack
    TensorListGetItem TensorListSetItem TensorListLength TensorListElementShape TensorListConcatV2
    TensorListSplit EmptyTensorList StopGradient PreventGradient Snapshot Reverse ReverseV2 DeepCopy
    InplaceUpdate _Send _Recv _HostSend _HostRecv Enter Exit Merge Switch NextIteration LoopCond
""".split())


def _lookup(node_name: str, shapes: dict) -> dict | None:
    """The logged node of an executed op. Ops inside a while/cond body run as
    "<loop>/body/_<id>/<node in the body's function graph>": try the name, then each such tail."""
    node = shapes.get(node_name)
    if node is not None:
        return node
    for m in _CALL_PREFIX.finditer(node_name):
        node = shapes.get(node_name[m.end():])
        if node is not None:
            return node
    return None


_CALL_PREFIX = re.compile(r"/_\d+/")


def shape_node(node_name: str, kind: str, shapes: dict) -> dict | None:
    """The graph node holding the op's operand shapes. Grappler names a fused op after its last node
    (BiasAdd, Relu, ...): walk first inputs back to the node of the executed base type. It also
    rewrites elementwise ops in place (a RealDiv by a constant runs as Mul, Sqrt + RealDiv as
    Rsqrt): an elementwise op takes its own node's shapes, whatever elementwise type the graph had."""
    node = _lookup(node_name, shapes)
    if kind in _ELEMENTWISE_TYPES:
        return node if node is not None and node.get("type") in _ELEMENTWISE_TYPES else None
    for _ in range(4):  # Conv2D -> BiasAdd -> Relu at most, with slack
        if node is None or node.get("type") == kind or (kind.startswith("BatchMatMul") and
                                                         str(node.get("type")).startswith("BatchMatMul")):
            return node
        node = _lookup((node.get("input_ops") or [""])[0], shapes)
    return None
