"""Realistic synthetic Kineto traces of any size, with their exact ground truth.

    .venv/bin/python bench/synthetic_kineto.py OUT.json[.gz] --events 1000000 [--steps 10] [--origin-us 1712195495000000]

What it writes is a CUDA training trace in today's torch.profiler layout (PyTorch 2.x, Kineto's
ChromeTraceLogger: one event over several lines, "ts"/"dur" in microseconds with 3 decimals on an
epoch-sized origin by default, so float64 cannot hold them to the nanosecond): `deviceProperties`
and `distributedInfo` headers, process/thread metadata, `ProfilerStep#N` user annotations, a
forward pass of conv / batch-norm / relu blocks and a classifier on the main thread with the
ATen call stacks torch records (aten::conv2d > convolution > _convolution > cudnn_convolution,
batch_norm > _batch_norm_impl_index > cudnn_batch_norm, ...) and their shapes ("Input Dims",
"Input type", "Input Strides", "Concrete Inputs"), cudaLaunchKernel calls with correlation ids,
kernels on the compute stream with launch configuration (grid, block, registers, occupancy),
ac2g and fwdbwd flow events, the backward pass on the autograd thread, NCCL all-reduce kernels on
a second stream overlapping compute (DDP), an SGD step with _foreach ops, a host-to-device copy,
loss.item() with its device-to-host copy and stream synchronisation, "[memory]" allocator
events, GPU-side annotations (which a reader must ignore), and the profiler's own spans.

Ground truth comes from the generator's own bookkeeping of the integer-nanosecond intervals it
wrote (a sort-and-sweep union here, independent of tbd's analysis/intervals.py):
- the window: first ProfilerStep's start to the latest of the last step's host end and every
  kernel end (every kernel is launched inside a step);
- device busy time: the union of all kernel intervals, both streams (copies are not kernels);
- per kernel name: calls and total duration;
- conv and GEMM FLOPs by the textbook formulas (2·N·Cout·Ho·Wo·Cin·k² per convolution, twice that
  for its backward when both gradients are asked for, 2·M·N·K per addmm), to check that a
  reader's FLOP attribution at scale loses nothing.

Sizes are picked to reach `--events`: the per-step plan is a stack of conv blocks cycling through
a fixed set of shapes (so shapes repeat every step, as in training), as many as the target needs.
Also a module: `write_trace(path, events=..., ...) -> GroundTruth`. The event writer and the
ground truth it keeps: bench/synthetic_kineto_writer.py.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from pathlib import Path

import numpy as np
from synthetic_kineto_writer import BWD_TID, COMPUTE_STREAM, MAIN_TID, NCCL_STREAM, PID, GroundTruth, Writer, us

#: Bump when the traces written change, so cached copies (bench/trace_analysis.py) are rebuilt.
GENERATOR_VERSION = 1
#: An epoch-sized origin in µs (2024-04-04), as recent Kineto traces have; 3 decimals of it
#: need 63 bits of ns, beyond float64's 53-bit mantissa.
DEFAULT_ORIGIN_US = 1712195495000000
BATCH = 32
#: (Cin, Cout, H=W of the input, kernel, stride) of the conv blocks, cycled through.
_CONV_SHAPES = (
    (3, 64, 224, 7, 2), (64, 64, 56, 3, 1), (64, 128, 56, 3, 2), (128, 128, 28, 3, 1), (128, 256, 28, 3, 2),
    (256, 256, 14, 3, 1), (256, 512, 14, 3, 2), (512, 512, 7, 3, 1), (512, 512, 7, 1, 1), (256, 64, 56, 1, 1),
)
_CLASSES, _FEATURES = 1000, 512

_K_FPROP = ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
            "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_trt")
_K_DGRAD = "sm80_xmma_dgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nchwkcrs_nchw_tilesize128x128x16"
_K_WGRAD = ("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>(int, int, int, float "
            "const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)")
_K_BN_FW = ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float "
            "const*, cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, "
            "float*, float, float)")
_K_BN_BW = ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, float, float, "
            "cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float "
            "const*, float*, float*, float const*, float const*, float)")
_K_RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
           "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::"
           "operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >"
           "(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, "
           "c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::"
           "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)")
_K_RELU_BW = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
              "threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, "
              "at::detail::Array<char*, 3> >(int, at::native::(anonymous namespace)::threshold_kernel_impl<float>"
              "(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3>)")
_K_GEMM = "ampere_sgemm_128x64_tn"
_K_SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
              "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)")
_K_NLL = ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, "
          "float*, float const*, long const*, float const*, bool, long, long, long, long)")
_K_FOREACH = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
              "TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, "
              "std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, "
              "at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float)")
_K_NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _conv_out(side: int, k: int, s: int) -> int:
    return (side + 2 * (k // 2) - k) // s + 1


def _kernel_ns(flops: float, rng: np.random.Generator, rate: float) -> int:
    """A kernel duration for `flops` at `rate` FLOP/ns with +-20 % noise, at least 1.5 µs."""
    return max(1500, int(flops / rate * rng.uniform(0.8, 1.2)))


class _Step:
    """One training iteration: host ops on two threads, kernels on two streams."""

    def __init__(self, w: Writer, blocks: int):
        self.w, self.blocks = w, blocks

    def run(self, number: int, t: int) -> int:
        """Writes ProfilerStep#number from host time t; returns the step's host end."""
        w = self.w
        start = t
        w.ext += 1
        step_ext = w.ext
        t += 2000
        t = self._input_copy(t)
        shapes = [_CONV_SHAPES[i % len(_CONV_SHAPES)] for i in range(self.blocks)]
        for i, shape in enumerate(shapes):
            t = self._forward_block(t, i, shape)
        t = self._classifier(t)
        t = self._backward(t, shapes)
        t = self._optimizer(t)
        end = t + 3000
        w.span("user_annotation", f"ProfilerStep#{number}", MAIN_TID, start, end - start,
               f'"External id": {step_ext}, "Record function id": 0, "Ev Idx": {step_ext - 1}')
        w.span("gpu_user_annotation", f"ProfilerStep#{number}", COMPUTE_STREAM, start + 9000, end - start,
               f'"External id": {step_ext}', pid=0)
        return end

    def _input_copy(self, t: int) -> int:
        w = self.w
        nbytes = BATCH * 3 * 224 * 224 * 4
        w.op("aten::to", MAIN_TID, t, 30000, [[BATCH, 3, 224, 224], [], [], [], []],
             ["float", "Scalar", "Scalar", "Scalar", "Scalar"], ["", "", "", "False", "False"])
        w.op("aten::_to_copy", MAIN_TID, t + 1000, 28000, [[BATCH, 3, 224, 224], [], [], [], [], []],
             ["float", "Scalar", "", "Scalar", "", ""], ["", "6", "", "0", "", ""])
        w.malloc(t + 2000, nbytes)
        w.op("aten::copy_", MAIN_TID, t + 3000, 25000, [[BATCH, 3, 224, 224], [BATCH, 3, 224, 224], []],
             ["float", "float", "Scalar"], ["", "", "True"])
        w.copy(MAIN_TID, t + 5000, "HtoD (Pageable -> Device)", nbytes, 400000)
        return t + 32000

    def _forward_block(self, t: int, i: int, shape: tuple) -> int:
        """conv2d (+ its ATen stack, one kernel), batch_norm (one kernel), relu_ (one kernel)."""
        w = self.w
        cin, cout, side, k, s = shape
        out_side = _conv_out(side, k, s)
        x, wt = [BATCH, cin, side, side], [cout, cin, k, k]
        flops = 2.0 * BATCH * cout * out_side * out_side * cin * k * k
        w.truth.conv_gemm_flops += flops
        conv_dims = [x, wt, [], [], [], [], [], [], []]
        conv_types = ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]
        conv_concrete = ["", "", "", f"[{s}, {s}]", f"[{k // 2}, {k // 2}]", "[1, 1]", "False", "[0, 0]", "1"]
        host = 48000
        w.op("aten::conv2d", MAIN_TID, t, host, [x, wt, [], [], [], [], []],
             ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
             ["", "", "", f"[{s}, {s}]", f"[{k // 2}, {k // 2}]", "[1, 1]", "1"], seq=1000 + i)
        w.op("aten::convolution", MAIN_TID, t + 1000, host - 2000, conv_dims, conv_types, conv_concrete)
        w.op("aten::_convolution", MAIN_TID, t + 2000, host - 4000, conv_dims + [[], [], [], []],
             conv_types + ["Scalar"] * 4, conv_concrete + ["False", "False", "True", "True"])
        w.op("aten::cudnn_convolution", MAIN_TID, t + 3000, host - 6000, [x, wt, [], [], [], [], [], [], []],
             ["float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
             ["", "", f"[{k // 2}, {k // 2}]", f"[{s}, {s}]", "[1, 1]", "1", "False", "True", "True"])
        w.op("aten::empty", MAIN_TID, t + 4000, 3000, [[], [], [], [], [], []],
             ["ScalarList", "Scalar", "", "", "", ""], ["", "6", "", "", "", ""])
        w.malloc(t + 5000, 4 * BATCH * cout * out_side * out_side)
        w.launch(MAIN_TID, t + 9000, _K_FPROP, _kernel_ns(flops, w.rng, 60000.0), grid=(out_side * out_side, 2, 1))
        t += host + 2000
        bn = [BATCH, cout, out_side, out_side]
        host = 40000
        w.op("aten::batch_norm", MAIN_TID, t, host, [bn, [cout], [cout], [cout], [cout], [], [], [], []],
             ["float"] * 5 + ["Scalar"] * 4, ["", "", "", "", "", "True", "0.1", "1e-05", "True"], seq=2000 + i)
        w.op("aten::_batch_norm_impl_index", MAIN_TID, t + 1000, host - 2000,
             [bn, [cout], [cout], [cout], [cout], [], [], [], []], ["float"] * 5 + ["Scalar"] * 4,
             ["", "", "", "", "", "True", "0.1", "1e-05", "True"])
        w.op("aten::cudnn_batch_norm", MAIN_TID, t + 2000, host - 4000, [bn, [cout], [cout], [cout], [cout], [], [], []],
             ["float"] * 5 + ["Scalar"] * 3, ["", "", "", "", "", "True", "0.1", "1e-05"])
        w.op("aten::empty_like", MAIN_TID, t + 3000, 3000, [bn, [], [], [], [], []],
             ["float", "", "", "", "", "Scalar"], ["", "", "", "", "", "0"])
        w.launch(MAIN_TID, t + 8000, _K_BN_FW, _kernel_ns(10.0 * math.prod(bn), w.rng, 1250.0))
        t += host + 2000
        w.op("aten::relu_", MAIN_TID, t, 20000, [bn], ["float"], [""], seq=3000 + i)
        w.launch(MAIN_TID, t + 5000, _K_RELU, _kernel_ns(float(math.prod(bn)), w.rng, 190.0))
        return t + 22000

    def _classifier(self, t: int) -> int:
        """Pooling output [B, 512] -> linear (addmm, one GEMM) -> cross-entropy (two kernels); loss.item()."""
        w = self.w
        flops = 2.0 * BATCH * _FEATURES * _CLASSES
        w.truth.conv_gemm_flops += flops
        w.op("aten::linear", MAIN_TID, t, 40000, [[BATCH, _FEATURES], [_CLASSES, _FEATURES], [_CLASSES]],
             ["float", "float", "float"], ["", "", ""], seq=5000)
        w.op("aten::t", MAIN_TID, t + 1000, 6000, [[_CLASSES, _FEATURES]], ["float"], [""])
        w.op("aten::addmm", MAIN_TID, t + 9000, 28000,
             [[_CLASSES], [BATCH, _FEATURES], [_FEATURES, _CLASSES], [], []],
             ["float", "float", "float", "Scalar", "Scalar"], ["", "", "", "1", "1"])
        w.launch(MAIN_TID, t + 15000, _K_GEMM, _kernel_ns(flops, w.rng, 15000.0), grid=(8, 1, 1), block=(128, 1, 1))
        t += 42000
        w.op("aten::cross_entropy_loss", MAIN_TID, t, 60000, [[BATCH, _CLASSES], [BATCH], [], [], [], []],
             ["float", "long int", "", "Scalar", "Scalar", "Scalar"], ["", "", "", "1", "-100", "0."], seq=5001)
        w.op("aten::log_softmax", MAIN_TID, t + 1000, 25000, [[BATCH, _CLASSES], [], []],
             ["float", "Scalar", ""], ["", "1", ""])
        w.op("aten::_log_softmax", MAIN_TID, t + 2000, 22000, [[BATCH, _CLASSES], [], []],
             ["float", "Scalar", "Scalar"], ["", "1", "False"])
        w.launch(MAIN_TID, t + 6000, _K_SOFTMAX, 4000, grid=(BATCH, 1, 1))
        w.op("aten::nll_loss_nd", MAIN_TID, t + 28000, 30000, [[BATCH, _CLASSES], [BATCH], [], [], []],
             ["float", "long int", "", "Scalar", "Scalar"], ["", "", "", "1", "-100"])
        w.op("aten::nll_loss", MAIN_TID, t + 29000, 28000, [[BATCH, _CLASSES], [BATCH], [], [], []],
             ["float", "long int", "", "Scalar", "Scalar"], ["", "", "", "1", "-100"])
        w.op("aten::nll_loss_forward", MAIN_TID, t + 30000, 26000, [[BATCH, _CLASSES], [BATCH], [], [], []],
             ["float", "long int", "", "Scalar", "Scalar"], ["", "", "", "1", "-100"])
        w.launch(MAIN_TID, t + 35000, _K_NLL, 3000, grid=(1, 1, 1))
        t += 62000
        # loss.item(): copies 4 bytes back behind the queued kernels, then waits for the device.
        # (Written after the copy, once the wait is known: Kineto's event order is not time order either.)
        w.copy(MAIN_TID, t + 2000, "DtoH (Device -> Pageable)", 4, 1500)
        wait_end = max(t + 30000, w.stream_free[COMPUTE_STREAM] + 5000)
        w.op("aten::item", MAIN_TID, t, wait_end - t + 8000, [[]], ["float"], [""])
        w.op("aten::_local_scalar_dense", MAIN_TID, t + 1000, wait_end - t + 6000, [[]], ["float"], [""])
        w.span("cuda_runtime", "cudaStreamSynchronize", MAIN_TID, t + 15000, wait_end - t - 15000,
               f'"External id": {w.ext}, "cbid": 131, "correlation": {w.corr + 1}')
        w.corr += 1
        w.truth.runtime_calls += 1
        return wait_end + 10000

    def _backward(self, t: int, shapes: list) -> int:
        """Autograd thread: relu, batch-norm and conv backward per block (4 kernels), in reverse;
        an NCCL all-reduce on the side stream every 4 blocks (DDP buckets)."""
        w = self.w
        w.op("autograd::engine::evaluate_function: NllLossBackward0", BWD_TID, t, 30000, seq=5001)
        w.op("aten::nll_loss_backward", BWD_TID, t + 2000, 25000, [[], [BATCH, _CLASSES], [BATCH], [], [], [], []],
             ["float", "float", "long int", "", "Scalar", "Scalar", "float"], ["", "", "", "", "1", "-100", ""])
        w.launch(BWD_TID, t + 6000, _K_NLL, 2500)
        t += 32000
        gemm = 2.0 * BATCH * _FEATURES * _CLASSES
        w.truth.conv_gemm_flops += 2 * gemm
        w.op("autograd::engine::evaluate_function: AddmmBackward0", BWD_TID, t, 50000, seq=5000)
        w.op("aten::mm", BWD_TID, t + 2000, 20000, [[BATCH, _CLASSES], [_CLASSES, _FEATURES]], ["float", "float"],
             ["", ""])
        w.launch(BWD_TID, t + 6000, _K_GEMM, _kernel_ns(gemm, w.rng, 15000.0))
        w.op("aten::mm", BWD_TID, t + 24000, 20000, [[_CLASSES, BATCH], [BATCH, _FEATURES]], ["float", "float"],
             ["", ""])
        w.launch(BWD_TID, t + 28000, _K_GEMM, _kernel_ns(gemm, w.rng, 15000.0))
        t += 52000
        for i in reversed(range(len(shapes))):
            t = self._backward_block(t, i, shapes[i])
            if i % 4 == 0:
                t = self._all_reduce(t, i)
        return t

    def _backward_block(self, t: int, i: int, shape: tuple) -> int:
        w = self.w
        cin, cout, side, k, s = shape
        out_side = _conv_out(side, k, s)
        bn = [BATCH, cout, out_side, out_side]
        w.op("autograd::engine::evaluate_function: ReluBackward0", BWD_TID, t, 26000, seq=3000 + i)
        w.op("ReluBackward0", BWD_TID, t + 1000, 24000, seq=3000 + i)
        w.op("aten::threshold_backward", BWD_TID, t + 2000, 22000, [bn, bn, []], ["float", "float", "Scalar"],
             ["", "", "0"])
        w.launch(BWD_TID, t + 6000, _K_RELU_BW, _kernel_ns(float(math.prod(bn)), w.rng, 190.0))
        t += 28000
        w.op("autograd::engine::evaluate_function: CudnnBatchNormBackward0", BWD_TID, t, 40000, seq=2000 + i)
        w.op("CudnnBatchNormBackward0", BWD_TID, t + 1000, 38000, seq=2000 + i)
        w.op("aten::cudnn_batch_norm_backward", BWD_TID, t + 2000, 36000,
             [bn, bn, [cout], [cout], [cout], [cout], [cout], [], [0]],
             ["float"] * 7 + ["Scalar", "unsigned char"], [""] * 7 + ["1e-05", ""])
        w.free_oldest(t + 3000)
        w.launch(BWD_TID, t + 8000, _K_BN_BW, _kernel_ns(14.0 * math.prod(bn), w.rng, 1250.0))
        t += 42000
        x, wt = [BATCH, cin, side, side], [cout, cin, k, k]
        fwd = 2.0 * BATCH * cout * out_side * out_side * cin * k * k
        first = i == 0  # the input image needs no gradient: weight gradient only
        w.truth.conv_gemm_flops += fwd if first else 2 * fwd
        w.op("autograd::engine::evaluate_function: ConvolutionBackward0", BWD_TID, t, 70000, seq=1000 + i)
        w.op("ConvolutionBackward0", BWD_TID, t + 1000, 68000, seq=1000 + i)
        w.op("aten::convolution_backward", BWD_TID, t + 2000, 66000,
             [bn, x, wt, [], [], [], [], [], [], [], []],
             ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar",
              "ScalarList", "Scalar", "ScalarList"],
             ["", "", "", "[0]", f"[{s}, {s}]", f"[{k // 2}, {k // 2}]", "[1, 1]", "False", "[0, 0]", "1",
              f"[{'False' if first else 'True'}, True, False]"])
        if not first:
            w.launch(BWD_TID, t + 10000, _K_DGRAD, _kernel_ns(fwd, w.rng, 55000.0), grid=(side * side, 2, 1))
        w.launch(BWD_TID, t + 30000, _K_WGRAD, _kernel_ns(fwd, w.rng, 45000.0), grid=(cin, cout // 64 + 1, 1))
        w.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", BWD_TID, t + 72000, 9000)
        w.op("torch::autograd::AccumulateGrad", BWD_TID, t + 73000, 7000)
        w.op("aten::detach", BWD_TID, t + 74000, 4000, [wt], ["float"], [""])
        return t + 83000

    def _all_reduce(self, t: int, i: int) -> int:
        w = self.w
        w.ext += 1
        w.span("user_annotation", "nccl:all_reduce", BWD_TID, t, 30000,
               f'"External id": {w.ext}, "Record function id": 0, "Ev Idx": {w.ext - 1}')
        w.op("record_param_comms", BWD_TID, t + 1000, 28000,
             [[[1 << 20]], [[1 << 20]], [], [], [], [], [], [], [], [], [], []],
             ["TensorList", "TensorList"] + ["Scalar"] * 10, [""] * 12)
        w.launch(BWD_TID, t + 5000, _K_NCCL, int(w.rng.integers(150000, 400000)), stream=NCCL_STREAM,
                 grid=(2, 1, 1), block=(640, 1, 1))
        return t + 32000

    def _optimizer(self, t: int) -> int:
        """Optimizer.step#SGD.step: _foreach_add_ over the parameter list, one multi-tensor kernel per chunk."""
        w = self.w
        params = [[c, ci, k, k] for ci, c, _, k, _ in (_CONV_SHAPES[j % len(_CONV_SHAPES)] for j in range(self.blocks))]
        chunks = max(1, len(params) // 8)
        w.ext += 1
        ext = w.ext
        host = 20000 + chunks * 12000
        w.span("user_annotation", "Optimizer.step#SGD.step", MAIN_TID, t, host,
               f'"External id": {ext}, "Record function id": 0, "Ev Idx": {ext - 1}')
        w.op("aten::_foreach_add_", MAIN_TID, t + 2000, host - 4000, [params, params, []],
             ["TensorList", "TensorList", "Scalar"], ["", "", "-0.1"])
        for c in range(chunks):
            w.launch(MAIN_TID, t + 5000 + c * 12000, _K_FOREACH, int(w.rng.integers(20000, 60000)))
        return t + host + 1000


def _blocks_for(events: int, steps: int) -> int:
    """Conv blocks per step so the trace holds about `events` events (per-block count measured on the plan)."""
    # Measured on the plan: 53.6 events per block (forward 11 cpu_ops, 3 launches of 4 events each,
    # a malloc; backward 14 cpu_ops, 4 launches (3 for the first block), a free; an all-reduce every
    # 4th block), 67 per step for the classifier, loss, copies, optimizer and the step's spans.
    per_block, fixed = 53.6, 67
    return max(1, round((events / steps - fixed) / per_block))


def write_trace(path: str | Path, events: int = 100_000, steps: int = 10, origin_us: int = DEFAULT_ORIGIN_US,
                seed: int = 0) -> GroundTruth:
    """Write a synthetic Kineto trace of about `events` events (gzip when `path` ends in .gz).

    Returns:
        GroundTruth counted while writing (events, kernels, ops, window, busy ns, per-kernel totals).
    """
    path = Path(path)
    truth = GroundTruth(steps=steps)
    blocks = _blocks_for(events, steps)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as out:
        w = Writer(out, seed, truth)
        w.origin_ns = origin_us * 1000
        out.write(_header())
        for pid, tid, name in ((PID, 0, "process_name"), (PID, MAIN_TID, "thread_name"), (PID, BWD_TID, "thread_name"),
                               (0, 0, "process_name"), (0, COMPUTE_STREAM, "thread_name"),
                               (0, NCCL_STREAM, "thread_name")):
            w.meta(name, pid, tid, {"name": "python" if tid == 0 else f"thread {tid}" if pid else f"stream {tid} "})
        t = w.origin_ns + 1_000_000
        w._emit('{\n    "ph": "X", "cat": "Trace", "ts": %s, "dur": %s,\n    "pid": "Spans", "tid": "PyTorch Profiler",\n'
                '    "name": "PyTorch Profiler (0)",\n    "args": {\n      "Op count": 0\n    }\n  }'
                % (us(t - 500_000), us(400_000)))
        truth.window_start_ns = t
        step = _Step(w, blocks)
        host_end = t
        for n in range(steps):
            host_end = step.run(n + 1, t)
            # The host runs ahead of the device: the next step starts once this one's host work is done.
            t = host_end + 1000
        truth.window_end_ns = max(host_end, max(w.kernel_ends))
        truth.busy_ns = _union_ns(w.kernel_starts, w.kernel_ends)
        w._emit('{\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", "ts": %s\n  }'
                % us(truth.window_end_ns + 5000))
        out.write('\n],\n  "traceName": "synthetic_kineto.py",\n  "displayTimeUnit": "ms"\n}\n')
    return truth


def _header() -> str:
    props = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85097971712, "computeMajor": 8,
             "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
             "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
             "sharedMemPerMultiprocessor": 167936, "numSms": 108, "sharedMemPerBlockOptin": 166912}
    dist = {"backend": "nccl", "rank": 0, "world_size": 2, "pg_count": 1, "pg_config": [], "nccl_version": "2.20.5"}
    return ('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    %s\n  ],\n  "distributedInfo": %s,\n'
            '  "record_shapes": 1,\n  "with_stack": 0,\n  "profile_memory": 1,\n  "cupti_version": 18,\n'
            '  "cuda_runtime_version": 12010,\n  "cuda_driver_version": 12020,\n  "trace_id": "SYNTHETIC",\n'
            '  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1712195400000000000,\n  "traceEvents": [\n'
            % (json.dumps(props), json.dumps(dist)))


def _union_ns(starts: list[int], ends: list[int]) -> int:
    """Covered length of half-open intervals: sort by start, sweep."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(zip(starts, ends)):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="trace to write (.json or .json.gz)")
    ap.add_argument("--events", type=int, default=100_000, help="about how many events (default 100000)")
    ap.add_argument("--steps", type=int, default=10, help="ProfilerSteps (default 10)")
    ap.add_argument("--origin-us", type=int, default=DEFAULT_ORIGIN_US, help="time origin in µs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--truth", type=Path, default=None, help="also write the ground truth as JSON here")
    args = ap.parse_args()
    truth = write_trace(args.out, args.events, args.steps, args.origin_us, args.seed)
    if args.truth:
        args.truth.write_text(json.dumps(truth.to_dict(), indent=1))
    print(f"{args.out}: {truth.events:,} events, {truth.kernels:,} kernels, {truth.cpu_ops:,} cpu_ops, "
          f"busy {truth.busy_ns:,} ns of {truth.window_ns:,} ns")


if __name__ == "__main__":
    main()
