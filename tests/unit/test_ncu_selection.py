"""The ncu command of each kernel group selects exactly that group's launches: checked against a model of ncu.

The model is ncu's filter as its CLI guide describes it (analysis/ncu.py quotes it), written
here without tbd's code: each launch, in launch order, has a name in the chosen name base (its
demangled name as ncu's demangler prints it, or its bare function name); `--kernel-name regex:R`
keeps the launches whose name R matches (a partial match, Python's re.search); `--launch-skip S`
skips the first S of those and `--launch-count C` profiles the next C. The launches are those of
tbd's trace window, as ncu sees them inside tbd's NVTX range.

The trace is built here: three ProfilerSteps in which template instances of one function
(vectorized_elementwise_kernel with AddFunctor, MulFunctor, FillFunctor) follow each other, a
C-linkage cuBLAS kernel, a cuDNN template kernel, an elementwise_kernel with lambdas on a second
stream, and a kernel whose name is longer than tbd keeps (shortened to head ... tail). Each kernel
has its name as Kineto prints it and as ncu does ("(int)4", "char *", "(int, T2, T3)").

Where the last iteration interleaves a group's launches with another instance's (Add, Mul, Add, Add),
one ncu run cannot select them all: the command selects the longest run of the group's own
launches (the first of equal ones) and `Launches.in_step` says how many the iteration had.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from testpaths import real_trace

from tbd.analysis import drilldown
from tbd.analysis.assemble import ncu_target
from tbd.analysis.flops.ops import op_flops, precision_of
from tbd.analysis.ncu import kernel_function_name, ncu_command
from tbd.cli import main as cli
from tbd.core.records import IterationLog
from tbd.profilers.kineto.reader import trace_records
from tbd.profilers.traces.names import MAX_NAME_CHARS, clean_name

V100_TRACE = real_trace("gpu/pt19_resnet50_v100.json.gz")


@dataclass(frozen=True)
class Kernel:
    kineto: str  # as Kineto (and so the trace) prints it
    ncu: str  # as ncu's demangler prints it (its "demangled" name base, --rename-kernels off)
    function: str  # ncu's "function" name base
    op: str
    dims: tuple
    dur_us: float
    stream: int = 7


def _vectorized(functor: str, arrays: int, op: str, dur_us: float) -> Kernel:
    return Kernel(
        f"void at::native::vectorized_elementwise_kernel<4, at::native::{functor}<float>, at::detail::Array<char*, "
        f"{arrays}> >(int, at::native::{functor}<float>, at::detail::Array<char*, {arrays}>)",
        f"void at::native::vectorized_elementwise_kernel<(int)4, at::native::{functor}<float>, at::detail::Array<char "
        f"*, (int){arrays}>>(int, T2, T3)",
        "vectorized_elementwise_kernel", op, ((1 << 20,),) * (arrays - 1), dur_us)


ADD = _vectorized("AddFunctor", 3, "aten::add", 120.0)
MUL = _vectorized("MulFunctor", 3, "aten::mul", 40.0)
FILL = _vectorized("FillFunctor", 1, "aten::zero_", 30.0)
SGEMM = Kernel("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn", "aten::mm",
               ((512, 256), (256, 1024)), 300.0)
CONV = Kernel(
    "void cudnn::cnn::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, "
    "int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, "
    "float const*, float const*, bool, int, int)",
    "void cudnn::cnn::implicit_convolve_sgemm<float, float, (int)1024, (int)5, (int)5, (int)3, (int)3, (int)3, "
    "(int)1, (bool)0, (bool)0, (bool)1>(int, int, int, const T1 *, int, T1 *, const T2 *, kernel_conv_params, "
    "unsigned long long, int, float, float, int, const T1 *, const T1 *, bool, int, int)",
    "implicit_convolve_sgemm", "aten::convolution", ((8, 64, 56, 56), (64, 64, 3, 3)), 250.0)
_COPY_LAMBDA = ("at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
                "{lambda()#7}::operator()() const::{lambda(float)#1}")
_COPY_IMPL = f"at::native::gpu_kernel_impl<{_COPY_LAMBDA}>(at::TensorIteratorBase&, {_COPY_LAMBDA} const&)"
COPY = Kernel(
    f"void at::native::elementwise_kernel<128, 2, {_COPY_IMPL}::{{lambda(int)#1}}>(int, {_COPY_IMPL}::"
    "{lambda(int)#1})",
    "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl<void at::native::"
    "direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda() "
    "(instance 7)]::operator ()() const::[lambda(float) (instance 1)]>(at::TensorIteratorBase &, const T1 &)::"
    "[lambda(int) (instance 1)]>(int, T3)",
    "elementwise_kernel", "aten::copy_", ((1 << 24,), (1 << 24,)), 80.0, stream=20)
_TAGS = ", ".join(f"at::native::Tag<{i}>" for i in range(150))
_NCU_TAGS = ", ".join(f"at::native::Tag<(int){i}>" for i in range(150))
#: 6,400 characters: tbd keeps 4,096, head ... tail, and the cut drops "Outer<" but not its ">"
LONG = Kernel(f"void at::native::long_kernel<{_TAGS}, at::native::Outer<{_TAGS}> >(int)",
              f"void at::native::long_kernel<{_NCU_TAGS}, at::native::Outer<{_NCU_TAGS}>>(int)",
              "long_kernel", "aten::long", (), 10.0)
SHORT = Kernel("void at::native::long_kernel<float>(float*)", "void at::native::long_kernel<float>(T1 *)",
               "long_kernel", "aten::short", (), 12.0)
KERNELS = (ADD, MUL, FILL, SGEMM, CONV, COPY, LONG, SHORT)

#: Each iteration's launches in launch order; FillFunctor in the first only.
RUNS = [SGEMM, ADD, ADD, MUL, MUL, MUL, CONV, COPY, SHORT, LONG, SGEMM]
INTERLEAVED = [SGEMM, ADD, MUL, ADD, ADD, MUL, MUL, CONV, COPY, LONG, SHORT, LONG, SGEMM]


@dataclass(frozen=True)
class Launch:
    kernel: Kernel
    step: int  # ProfilerStep number, 0 before the first step (outside tbd's window)


def _trace(iterations: list[list[Kernel]]) -> tuple[dict, list[Launch]]:
    """A Kineto trace: one ADD launched before ProfilerStep#1, then one step per list (FILL first in step 1).

    Returns the trace and its launches in launch order (host call order), the window's only."""
    events = [{"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python"}},
              {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
    launches: list[Launch] = []
    free = {7: 0.0, 20: 0.0}  # when each stream is next free, µs
    host = [900.0]
    correlation = [0]

    def launch(kernel: Kernel, step: int) -> None:
        correlation[0] += 1
        t, c = host[0], correlation[0]
        concrete = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"] \
            if kernel.op == "aten::convolution" else [""] * len(kernel.dims)
        dims = [list(d) for d in kernel.dims] + ([[]] * 7 if kernel.op == "aten::convolution" else [])
        events.append({"ph": "X", "cat": "cpu_op", "name": kernel.op, "pid": 10, "tid": 100, "ts": t, "dur": 8.0,
                       "args": {"External id": c, "Input Dims": dims, "Input type": ["float"] * len(dims),
                                "Concrete Inputs": concrete}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 100,
                       "ts": t + 1, "dur": 2.0, "args": {"External id": c, "cbid": 211, "correlation": c}})
        start = max(free[kernel.stream], t + 3)
        free[kernel.stream] = start + kernel.dur_us
        events.append({"ph": "X", "cat": "kernel", "name": kernel.kineto, "pid": 0, "tid": kernel.stream,
                       "ts": start, "dur": kernel.dur_us,
                       "args": {"External id": c, "device": 0, "context": 1, "stream": kernel.stream,
                                "correlation": c, "registers per thread": 32, "shared memory": 0,
                                "grid": [256, 1, 1], "block": [128, 1, 1]}})
        host[0] = t + 10
        if step:
            launches.append(Launch(kernel, step))

    launch(ADD, 0)
    for number, kernels in enumerate(iterations, 1):
        host[0] = max([host[0], *free.values()]) + 10
        begin = host[0]
        for kernel in ([FILL] if number == 1 else []) + kernels:
            launch(kernel, number)
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}", "pid": 10, "tid": 100,
                       "ts": begin - 1, "dur": host[0] - begin + 1, "args": {}})
    end = max([host[0], *free.values()]) + 10
    events.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                   "tid": "PyTorch Profiler", "ts": 890.0, "dur": end - 890.0, "args": {"Op count": 0}})
    props = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85899345920, "computeMajor": 8,
             "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
             "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
             "sharedMemPerMultiprocessor": 167936, "numSms": 108, "sharedMemPerBlockOptin": 166912}
    return {"schemaVersion": 1, "deviceProperties": [props], "record_shapes": 1, "traceEvents": events}, launches


def _option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def ncu_selects(argv: list[str], names: list[tuple[str, str]]) -> list[int]:
    """Which launches ncu profiles under `argv`: indexes into `names`, each launch's (demangled name as ncu
    prints it, function name), in launch order (module docstring)."""
    base = _option(argv, "--kernel-name-base")
    assert base in ("demangled", "function")
    if base == "demangled":  # ncu's own renaming would change the names the filter sees
        assert _option(argv, "--rename-kernels") == "off"
    pattern = _option(argv, "--kernel-name").removeprefix("regex:")
    skip, count = int(_option(argv, "--launch-skip")), int(_option(argv, "--launch-count"))
    passing = [i for i, (demangled, function) in enumerate(names)
               if re.search(pattern, demangled if base == "demangled" else function)]
    return passing[skip:skip + count]


def _runs(flags: list[bool]) -> list[int]:
    """Lengths of the runs of True in `flags`."""
    lengths, current = [], 0
    for flag in flags + [False]:
        if flag:
            current += 1
        elif current:
            lengths.append(current)
            current = 0
    return lengths


def _check_selection(argv: list[str], count: int, group: Kernel, launches: list[Launch]) -> list[Launch]:
    """The launches ncu selects are `count` of the group's own in its last iteration, the longest run of them
    among the launches ncu's filter passes; returns them."""
    names = [(x.kernel.ncu, x.kernel.function) for x in launches]
    chosen = [launches[i] for i in ncu_selects(argv, names)]
    last = max(x.step for x in launches if x.kernel == group)
    assert len(chosen) == count >= 1
    assert all(x.kernel == group and x.step == last for x in chosen), [(x.kernel.function, x.step) for x in chosen]
    base, pattern = _option(argv, "--kernel-name-base"), _option(argv, "--kernel-name").removeprefix("regex:")
    passing = [x for x in launches if re.search(pattern, x.kernel.ncu if base == "demangled" else x.kernel.function)]
    assert count == max(_runs([x.kernel == group and x.step == last for x in passing]))
    return chosen


def _kernels_json(path: Path) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["kernels", str(path), "--json"]) == 0
    return json.loads(out.getvalue())


def _by_name(name: str, kernels: tuple[Kernel, ...] = KERNELS) -> Kernel:
    return next(k for k in kernels if clean_name(k.kineto) == name)


def _check_details(trace: dict, launches: list[Launch], kernels: tuple[Kernel, ...] = KERNELS) -> dict:
    """group_details' selection of every group, each checked with the model; by kernel."""
    out = {}
    for name, detail in _details(trace).items():
        s = detail.launches
        group = _by_name(name, kernels)
        _check_selection(ncu_command(name, s.skip, s.count, None, name_base=s.name_base), s.count, group, launches)
        out[group] = s
    return out


def _details(trace: dict) -> dict[str, drilldown.GroupDetail]:
    records = trace_records(trace, "t", flops_of=op_flops, precision_of=precision_of)
    names = sorted({str(n) for n in records.kernels.name})
    return drilldown.group_details(records.kernels, names, kernel_function_name)


def test_the_function_name_is_ncus_for_names_as_either_demangler_prints_them():
    for kernel in KERNELS:
        assert kernel_function_name(kernel.ncu) == kernel.function, kernel.ncu[:80]
        assert kernel_function_name(kernel.kineto) == kernel.function, kernel.kineto[:80]
        assert kernel_function_name(clean_name(kernel.kineto)) == kernel.function, kernel.kineto[:80]
    # the trace reader shortens LONG's name: its brackets no longer balance (read from the end, the
    # template list seemed to open at "Tag<"), the head still names the function
    short = clean_name(LONG.kineto)
    assert len(LONG.kineto) > MAX_NAME_CHARS == len(short) and short.count("<") != short.count(">")


@pytest.mark.parametrize("iterations", [[RUNS] * 3, [INTERLEAVED] * 3], ids=["runs", "interleaved"])
def test_every_ranked_groups_command_selects_its_launches(tmp_path, iterations):
    trace, launches = _trace(iterations)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    data = _kernels_json(path)
    ranked = {r["name"]: r for r in data["low_util_kernels"] + data["low_bandwidth_kernels"]}
    # not vacuous: the C-linkage GEMM and both interleaved template instances are ranked
    assert {clean_name(k.kineto) for k in (SGEMM, ADD, MUL)} <= set(ranked)
    for name, row in ranked.items():
        ncu = row["ncu"]
        group = _by_name(name)
        assert ncu["name_base"] == ("demangled" if group is SGEMM else "function")
        assert ncu["step"] == max(x.step for x in launches if x.kernel == group) and ncu["nvtx_range"] is None
        assert ncu["argv"][ncu["argv"].index("--launch-skip") + 1] == str(ncu["launch_skip"])
        chosen = _check_selection(ncu["argv"], ncu["launch_count"], group, launches)
        if iterations[0] is RUNS:  # every group's launches of its last step are consecutive: all selected
            assert len(chosen) == sum(x.kernel == group and x.step == ncu["step"] for x in launches)


def test_group_details_select_every_groups_launches_when_they_run_consecutively(tmp_path):
    trace, launches = _trace([RUNS] * 3)
    sel = _check_details(trace, launches)
    assert set(sel) == set(KERNELS)  # every kernel is a group
    for group, s in sel.items():
        last = 1 if group is FILL else 3
        assert s.step == last and s.count == s.in_step == sum(x.kernel == group and x.step == last for x in launches)
    # The figures, by hand. vectorized_elementwise_kernel launches in the window: FILL, then per step
    # A A M M M: FILL is the first (skip 0), step 3's ADDs follow 1 + 5 + 5 of them, its MULs 2 more.
    assert (sel[FILL].skip, sel[FILL].count, sel[FILL].name_base) == (0, 1, "function")
    assert (sel[ADD].skip, sel[ADD].count, sel[MUL].skip, sel[MUL].count) == (11, 2, 13, 3)
    # the C-linkage GEMM is matched whole: skip its own 2 + 2 earlier launches
    assert (sel[SGEMM].skip, sel[SGEMM].count, sel[SGEMM].name_base) == (4, 2, "demangled")
    # long_kernel: SHORT, LONG per step; step 3's SHORT follows 4, its LONG 5
    assert (sel[SHORT].skip, sel[SHORT].count, sel[LONG].skip, sel[LONG].count) == (4, 1, 5, 1)
    assert sel[LONG].name_base == "function"


def test_interleaved_instances_select_the_longest_run_and_say_how_many_the_iteration_had(tmp_path):
    trace, launches = _trace([INTERLEAVED] * 3)
    sel = _check_details(trace, launches)
    # Per step A M A A M M: step 3's matches start after FILL + 6 + 6 = 13; ADD at 13 and 15-16, MUL at 14, 17-18.
    # One ncu run selects one run: the longer (2 of the 3 launches), never a MUL between them.
    assert (sel[ADD].skip, sel[ADD].count, sel[ADD].in_step) == (15, 2, 3)
    assert (sel[MUL].skip, sel[MUL].count, sel[MUL].in_step) == (17, 2, 3)
    # long_kernel per step LONG SHORT LONG: step 3's at 6, 7, 8: LONG's runs are 1 and 1, the first is taken
    assert (sel[LONG].skip, sel[LONG].count, sel[LONG].in_step) == (6, 1, 2)
    assert (sel[SHORT].skip, sel[SHORT].count, sel[SHORT].in_step) == (7, 1, 1)
    # whole-name matches are never interleaved: the GEMM's two launches of step 3 after its 4 earlier ones
    assert (sel[SGEMM].skip, sel[SGEMM].count, sel[SGEMM].in_step) == (4, 2, 2)


def test_a_c_linkage_name_and_a_template_of_the_same_function_name(tmp_path):
    # ncu's function name of "vectorized_elementwise_kernel" (C linkage) is itself: the template instances'
    # filter passes it too, so their skip counts it; its own (whole-name) filter passes only it.
    plain = Kernel("vectorized_elementwise_kernel", "vectorized_elementwise_kernel", "vectorized_elementwise_kernel",
                   "aten::plain", (), 5.0)
    trace, launches = _trace([[plain, ADD, plain, ADD]] * 2)
    sel = _check_details(trace, launches, KERNELS + (plain,))
    # function matches: FILL, p A p A, p A p A -> step 2's ADDs at 6 and 8
    assert (sel[ADD].skip, sel[ADD].count, sel[ADD].in_step, sel[ADD].name_base) == (6, 1, 2, "function")
    assert (sel[plain].skip, sel[plain].count, sel[plain].name_base) == (2, 2, "demangled")


def test_launch_order_across_streams(tmp_path):
    # ADD waits on stream 7 behind the GEMM; a MUL launched after it on stream 20 starts first on the GPU.
    mul20 = Kernel(MUL.kineto, MUL.ncu, MUL.function, MUL.op, MUL.dims, MUL.dur_us, stream=20)
    trace, launches = _trace([[SGEMM, ADD, mul20]] * 2)
    _check_details(trace, launches, (ADD, FILL, SGEMM, mul20))


def _bare_function(name: str) -> str:
    """ncu's function name base, computed apart from tbd: every bracketed group removed, then the last name."""
    previous = None
    while previous != name:
        previous, name = name, re.sub(r"<[^<>]*>|\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\}", "", name)
    return name.strip().split(" ")[-1].split("::")[-1]


@pytest.mark.skipif(not V100_TRACE.exists(), reason="real GPU traces not fetched (tests/fixtures/README.md)")
def test_ranked_groups_of_a_real_v100_trace_select_their_own_launches():
    with gzip.open(V100_TRACE, "rt") as f:
        events = json.load(f)["traceEvents"]
    calls = {e["args"]["correlation"]: e for e in events if e.get("cat") == "Runtime" and "correlation" in e["args"]}
    kernels = [e for e in events if e.get("cat") == "Kernel"]
    # launch order = the launching calls' order (one step, ProfilerStep#7, holds every launch of this trace)
    kernels.sort(key=lambda e: (float(calls[e["args"]["correlation"]]["ts"]), e["args"]["correlation"]))
    names = [clean_name(e["name"]) for e in kernels]
    # ncu prints a C-linkage name as Kineto does; only those are matched whole (asserted below)
    view = [(name, _bare_function(name)) for name in names]
    data = _kernels_json(V100_TRACE)
    ranked = data["low_util_kernels"] + data["low_bandwidth_kernels"]
    assert len(ranked) >= 10
    interleaved = 0
    for row in ranked:
        ncu, name = row["ncu"], row["name"]
        if ncu["name_base"] == "demangled":
            assert drilldown.whole_name_matches(name)
        chosen = ncu_selects(ncu["argv"], view)
        assert len(chosen) == ncu["launch_count"] >= 1 and all(names[i] == name for i in chosen), name
        base = 0 if ncu["name_base"] == "demangled" else 1
        pattern = _option(ncu["argv"], "--kernel-name").removeprefix("regex:")
        passing = [n for n, v in zip(names, view) if re.search(pattern, v[base])]
        assert ncu["launch_count"] == max(_runs([n == name for n in passing]))
        interleaved += ncu["launch_count"] < names.count(name)
    # the optimizer's MulScalarFunctor (161 launches) interleaves with other instances of its function
    assert interleaved >= 1


def test_the_rerun_command_is_one_tbd_profile_accepts():
    """The command ncu reruns must parse as `tbd profile` (a GPU run once failed on a `--precision` it lacks)."""
    log = IterationLog(times_ns=np.full(30, 10), warmup=5, warmup_detected=True, stable=True, timing_window=(8, 27),
                       trace_window=(28, 29), timing_window_ns=200, warmup_run=8)
    spec = {"model": "resnet50", "framework": "pytorch", "device": "cuda:0", "batch": 64, "size": "full",
            "precision": "fp32", "threads": 4}
    argv = ncu_target(spec, log)
    assert argv[:3] == ["env", "TBD_NO_TRACER=1", "tbd"]
    parsed = cli.build_parser().parse_args(argv[3:])
    assert (parsed.model, parsed.batch, parsed.size, parsed.threads, parsed.warmup) == ("resnet50", 64, "full", 4, 8)
    assert (parsed.iterations, parsed.repeat, parsed.trace_iterations) == (20, 1, 2)
    assert not parsed.window_seconds  # 0: the windows are not cut by time
