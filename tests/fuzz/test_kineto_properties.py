"""Property: any Kineto trace, however hostile, gives a sane Profile or one TbdError, never anything else.

Traces are built from events whose fields are drawn from plausible values (the categories and
names the reader sorts by, small times so that ops nest and kernels find their launches) mixed
with hostile ones: wrong types, huge and negative numbers, NaN-like strings, control characters,
lone surrogates, long strings, deep nesting. "Sane" is `outcomes.profile_problem` (every figure
finite and in range through the checked loader, JSON encodable) and `outcomes.text_problem` (the
report prints no control character and no nan/inf).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from outcomes import error_problem, profile_problem, text_problem

from tbd.cli.run_analysis import profile_from_trace
from tbd.core.errors import TbdError
from tbd.reports.terminal import render_profile

_DIR = Path(tempfile.mkdtemp(prefix="tbd-fuzz-"))

_HOSTILE_TEXT = st.sampled_from(["", "NaN", "Infinity", "-1", "1e999", "0x10", "stream 7", "\x1b[2J\x1b]0;x\x07",
                                 "a\x00b", "\ud800", "\u202e", "ProfilerStep#", "ProfilerStep#" + "9" * 40,
                                 "x" * 5000])
_HOSTILE = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), _HOSTILE_TEXT,
                     st.floats(allow_nan=True, allow_infinity=True), st.just([]), st.just({}), st.just([[1, -2]]))
_NAMES = st.one_of(
    st.sampled_from(["aten::addmm", "aten::mm", "aten::convolution", "aten::relu", "aten::add", "aten::copy_",
                     "aten::native_batch_norm", "ProfilerStep#1", "ProfilerStep#2", "[memory]", "cudaLaunchKernel",
                     "volta_sgemm_128x64_nn", "ampere_tf32_s1688gemm", "ncclKernel_AllReduce", "triton_poi_0"]),
    st.text(max_size=12), st.sampled_from(["\x1b[31mred", "nul\x00", "\ud800lone", "\u202eevil", "k" * 6000]))
_SIZES = st.one_of(st.integers(0, 40), st.integers(-3, 3), st.sampled_from([10**15, 2**62, -(2**40)]))
_DIMS = st.one_of(
    st.lists(st.lists(_SIZES, max_size=3), max_size=4),
    st.recursive(st.one_of(_SIZES, st.text(max_size=3)), lambda inner: st.lists(inner, max_size=3), max_leaves=10),
    st.integers(10, 990).map(lambda depth: json.loads("[" * depth + "]" * depth)),
)
_ARGS = st.fixed_dictionaries({}, optional={
    "Input Dims": _DIMS,
    "Input type": st.lists(st.sampled_from(["float", "c10::Half", "c10::BFloat16", "double", "long int", "Scalar",
                                            "ScalarList", ""]), max_size=4),
    "Concrete Inputs": st.lists(st.sampled_from(["", "1", "[1, 1]", "[False, True, False]", "(" * 300, "9" * 5000]),
                                max_size=4),
    "correlation": st.integers(0, 4), "device": st.integers(0, 1), "stream": st.integers(0, 2),
    "Addr": st.integers(0, 6), "Bytes": st.integers(-4096, 4096), "Total Allocated": st.integers(-4096, 10**6),
    "Device Id": st.integers(-1, 1)})
# Times mostly small, so that ops nest, spans overlap and kernels fall in the window.
_EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "X", "X", "i", "M"]),
     "cat": st.sampled_from(["cpu_op", "cpu_op", "kernel", "kernel", "cuda_runtime", "user_annotation", "gpu_memcpy",
                             "cpu_instant_event", "Trace", "Operator", "Kernel"]),
     "name": _NAMES, "pid": st.integers(0, 1), "tid": st.integers(0, 2),
     "ts": st.one_of(st.integers(0, 300), st.floats(0, 300).map(lambda x: round(x, 3))),
     "dur": st.one_of(st.integers(-20, 100), st.floats(-20, 100).map(lambda x: round(x, 3)))},
    optional={"args": _ARGS, "s": st.just("t")})
_DEVICE = st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.sampled_from(["NVIDIA A100-SXM4-80GB", "AMD Instinct MI250X"]), _HOSTILE),
    "computeMajor": st.one_of(st.integers(0, 12), _HOSTILE), "computeMinor": st.one_of(st.integers(0, 9), _HOSTILE),
    "numSms": st.one_of(st.integers(1, 200), _HOSTILE), "totalGlobalMem": _HOSTILE, "warpSize": _HOSTILE})
_TRACE = st.fixed_dictionaries({"traceEvents": st.lists(_EVENT, min_size=1, max_size=25)},
                               optional={"deviceProperties": st.one_of(st.lists(_DEVICE, max_size=2), _HOSTILE),
                                         "baseTimeNanoseconds": _HOSTILE})
_DELETE = object()
#: A few fields, anywhere, set to a hostile value (or deleted): (event index, key or "args." key, value).
_ATTACKS = st.lists(st.tuples(st.integers(0, 24), st.sampled_from(
    ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "s", "args.Input Dims", "args.correlation",
     "args.Bytes", "args.Total Allocated", "args.Addr", "args.Device Id", "args.stream"]),
    st.one_of(_HOSTILE, st.just(_DELETE))), max_size=3)


def _attacked(trace: dict, attacks: list) -> dict:
    events = trace["traceEvents"]
    for index, key, value in attacks:
        if events:
            event = events[index % len(events)]
            target = event.setdefault("args", {}) if key.startswith("args.") else event
            if isinstance(target, dict):
                key = key.removeprefix("args.")
                if value is _DELETE:
                    target.pop(key, None)
                else:
                    target[key] = value
    return trace


@settings(max_examples=250, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(trace=_TRACE, attacks=_ATTACKS, ascii_only=st.booleans(), peak=st.sampled_from([None, 1e12]))
def test_any_kineto_trace_gives_a_sane_profile_or_one_error(trace, attacks, ascii_only, peak):
    trace = _attacked(trace, attacks)
    path = _DIR / "trace.json"
    # ensure_ascii=False writes lone surrogates raw: invalid UTF-8 in the file, which is the point.
    path.write_bytes(json.dumps(trace, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))
    try:
        profile = profile_from_trace(path, peak_flops=peak)
    except TbdError as exc:
        event(f"error: {type(exc).__name__}: {str(exc).split(': ', 1)[-1][:40]}")
        assert error_problem(exc.one_line()) is None, exc.one_line()[:300]
        return
    event(f"profile: {profile.spec['device']}, {len(profile.kernels)} kernel groups")
    assert profile_problem(profile) is None, profile_problem(profile)
    assert text_problem(render_profile(profile, width=100)) is None
