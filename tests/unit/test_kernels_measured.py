"""Measured counters merged into `tbd kernels` rows: the ncu CSV fixture and the CUPTI-counter fixture.

ncu_raw_small.csv measures six launches of four kernels on an A100 (tests/fixtures/COUNTERS.md). The
trace they merge into is built here with the same launches in the same order, under the names Kineto
gives those kernels (those of kineto_cupti_counters.json), and the ops and shapes COUNTERS.md sizes
them by: C = A·B with M=512, N=1024, K=256; an 8x64x56x56 convolution with 64 3x3 filters; an add of
1,048,576 floats, twice; a 1024³ half GEMM. The expected figures are computed here from the CSV's
own text (read with the csv module) by COUNTERS.md's rules: FLOPs = fadd + fmul + 2·ffma (FP32) +
2·hadd + 2·hmul + 4·hfma (FP16) + dadd + dmul + 2·dfma (FP64); tensor-path ops apart, never in the
FLOPs; DRAM bytes = read + write; a group's figure is the mean over its launches; the difference
against analytic is 100·(measured − analytic per call) / analytic per call.

ncu prints C++ names with its own demangler ("(int)1024", "(bool)0", "const T1 *"; the add as
"std::array<char *, (unsigned long)3>" where the trace has "at::detail::Array<char*, 3>"), so the
merge must read both demanglers' names: the convolution matches on the name both agree on, the add
on its function name, which no other group of the trace has.

kineto_cupti_counters.json is laid out as Kineto's range profiler writes it, with no kernel events
(Kineto refuses that profiler beside kernel tracing): through `tbd kernels` it has no kernel group to
merge into, which the note says; its ranges merge into the kernel trace's groups by name.
"""

from __future__ import annotations

import csv
import io
import json
from contextlib import redirect_stdout
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from testpaths import FIXTURES

from tbd.analysis.counters import MeasuredLaunch, canonical_name, merge_measured_lists
from tbd.cli import main as cli
from tbd.cli.run_analysis import profile_from_trace
from tbd.profilers import cupti_counters

CSV = FIXTURES / "ncu_raw_small.csv"
CUPTI = FIXTURES / "kineto_cupti_counters.json"
OPS = ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma", "dadd", "dmul", "dfma")
WEIGHTS = {"fadd": 1, "fmul": 1, "ffma": 2, "hadd": 2, "hmul": 2, "hfma": 4, "dadd": 1, "dmul": 1, "dfma": 2}


def _range_names() -> list[str]:
    """The CUPTI fixture's kernel names (Kineto's demangler), in its order: sgemm, conv, add, hgemm."""
    events = json.loads(CUPTI.read_text())["traceEvents"]
    return [e["name"] for e in events if e.get("cat") == "cuda_profiler_range" and e["name"] != "__missing__"]


def _csv_launches() -> list[dict]:
    """The CSV's launches as dicts of its cells, thousands separators dropped from the numbers."""
    lines = [line for line in CSV.read_text().splitlines() if not line.startswith("==PROF==")]
    header, _units, *rows = list(csv.reader(lines))
    return [dict(zip(header, row)) for row in rows]


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


def _by_hand(launch: dict) -> dict:
    """COUNTERS.md's arithmetic on one CSV row."""
    count = {op: _number(launch[f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"]) for op in OPS}
    parent = "sm__ops_path_tensor_src_fp16_dst_fp32.sum"  # its _sparsity_off/_on children are in it already
    tensor = sum(_number(launch[p]) for p in (parent, "sm__ops_path_tensor_src_fp64.sum",
                                               "sm__ops_path_tensor_src_tf32_dst_fp32.sum"))
    return {"flops": sum(WEIGHTS[op] * count[op] for op in OPS),
            "fp32": count["fadd"] + count["fmul"] + 2 * count["ffma"],
            "fp16": 2 * count["hadd"] + 2 * count["hmul"] + 4 * count["hfma"],
            "tensor_ops": tensor,
            "dram_bytes": _number(launch["dram__bytes_read.sum"]) + _number(launch["dram__bytes_write.sum"])}


def _trace() -> dict:
    """One ProfilerStep with the CSV's six launches, in its order, on its streams and for its durations."""
    sgemm, conv, add, hgemm = _range_names()
    conv_args = {"Input Dims": [[8, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], []],
                 "Input type": ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar",
                                "ScalarList", "Scalar"],
                 "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]}
    launches = [  # (kernel, stream, op, op args) for CSV IDs 0..5
        (sgemm, 7, "aten::mm", {"Input Dims": [[512, 256], [256, 1024]], "Input type": ["float", "float"]}),
        (conv, 7, "aten::convolution", conv_args),
        (add, 7, "aten::add", {"Input Dims": [[1048576], [1048576], []], "Input type": ["float", "float", "Scalar"],
                               "Concrete Inputs": ["", "", "1"]}),
        (sgemm, 7, "aten::mm", {"Input Dims": [[512, 256], [256, 1024]], "Input type": ["float", "float"]}),
        (add, 13, "aten::add", {"Input Dims": [[1048576], [1048576], []], "Input type": ["float", "float", "Scalar"],
                                "Concrete Inputs": ["", "", "1"]}),
        (hgemm, 7, "aten::mm", {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["c10::Half", "c10::Half"]}),
    ]
    durations = [_number(x["gpu__time_duration.sum"]) / 1000 for x in _csv_launches()]  # ns -> µs
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 10, "tid": 100, "ts": 1000.0,
               "dur": 100.0, "args": {}}]
    gpu = 1010.0
    for i, ((kernel, stream, op, args), dur) in enumerate(zip(launches, durations), 1):
        host = 1000.0 + 10 * i
        events += [
            {"ph": "X", "cat": "cpu_op", "name": op, "pid": 10, "tid": 100, "ts": host, "dur": 5.0,
             "args": {"External id": i, **args}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 100, "ts": host + 1,
             "dur": 2.0, "args": {"External id": i, "cbid": 211, "correlation": i}},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": stream, "ts": max(gpu, host + 3),
             "dur": dur, "args": {"External id": i, "device": 0, "context": 1, "stream": stream, "correlation": i}}]
        gpu = max(gpu, host + 3) + dur
    events.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                   "tid": "PyTorch Profiler", "ts": 990.0, "dur": gpu - 990.0 + 10, "args": {"Op count": 0}})
    props = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85899345920, "computeMajor": 8,
             "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
             "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
             "sharedMemPerMultiprocessor": 167936, "numSms": 108, "sharedMemPerBlockOptin": 166912}
    return {"schemaVersion": 1, "deviceProperties": [props], "record_shapes": 1, "traceEvents": events}


@pytest.fixture
def trace_path(tmp_path) -> Path:
    path = tmp_path / "a100_step.json"
    path.write_text(json.dumps(_trace()))
    return path


def _kernels(*args: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["kernels", *args]) == 0
    return out.getvalue()


def _expected_groups() -> dict[str, list[dict]]:
    """Kernel name in the trace -> the CSV rows measuring it (IDs 0, 3 sgemm; 1 conv; 2, 4 add; 5 hgemm)."""
    sgemm, conv, add, hgemm = _range_names()
    launches = _csv_launches()
    return {sgemm: [launches[0], launches[3]], conv: [launches[1]], add: [launches[2], launches[4]],
            hgemm: [launches[5]]}


def _check_row(row: dict, launches: list[dict], source: str) -> None:
    hand = [_by_hand(x) for x in launches]
    measured = row["measured"]
    assert measured["source"] == source and measured["launches"] == len(launches)
    for key in ("flops", "tensor_ops", "dram_bytes"):
        assert measured[key] == pytest.approx(sum(h[key] for h in hand) / len(hand), rel=1e-12), key
    assert measured["flops_by_precision"]["fp32"] == pytest.approx(sum(h["fp32"] for h in hand) / len(hand))
    assert measured["flops_by_precision"]["fp16"] == pytest.approx(sum(h["fp16"] for h in hand) / len(hand))
    analytic_flops = row["flops"] / row["calls"] if row["flops"] is not None else None
    assert measured["analytic_flops"] == pytest.approx(analytic_flops)
    if analytic_flops:
        assert measured["flops_difference_pct"] == pytest.approx(
            100 * (measured["flops"] - analytic_flops) / analytic_flops)
    if row["bytes"]:
        analytic_bytes = row["bytes"] / row["calls"]
        assert measured["analytic_bytes"] == pytest.approx(analytic_bytes)
        assert measured["bytes_difference_pct"] == pytest.approx(
            100 * (measured["dram_bytes"] - analytic_bytes) / analytic_bytes)
    assert measured["intensity"] == pytest.approx(measured["flops"] / measured["dram_bytes"])


def test_the_ncu_csv_merges_with_measured_flops_equal_to_the_counters_sum(trace_path):
    data = json.loads(_kernels(str(trace_path), "--ncu", str(CSV), "--json"))
    rows = {r["name"]: r for r in data["kernels"]}
    expected = _expected_groups()
    assert set(rows) == set(expected)
    for name, launches in expected.items():
        _check_row(rows[name], launches, "ncu")
    # a ranked row carries the same measurement as the table's
    for ranked in data["low_util_kernels"] + data["low_bandwidth_kernels"]:
        assert ranked["measured"] == rows[ranked["name"]]["measured"]
    assert data["notes"] == [f"6 ncu launches read from {CSV}: 6 merged into kernel groups, 0 matched no kernel group"]


def test_the_merged_figures_by_hand(trace_path):
    # COUNTERS.md's worked figures, for the reader of this test
    sgemm, conv, add, hgemm = _range_names()
    rows = {r["name"]: r["measured"] for r in json.loads(_kernels(str(trace_path), "--ncu", str(CSV), "--json"))
            ["kernels"]}
    assert rows[sgemm]["flops"] == 524_288 + 2 * 134_217_728 == 268_959_744
    assert rows[sgemm]["dram_bytes"] == ((1_572_864 + 2_097_152) + (1_576_960 + 2_097_152)) / 2 == 3_672_064
    assert rows[sgemm]["analytic_flops"] == 2 * 512 * 1024 * 256  # aten::mm, 2·M·N·K
    assert rows[sgemm]["flops_difference_pct"] == pytest.approx(100 * 524_288 / 268_435_456)  # alpha's fmul: +0.195 %
    assert rows[conv]["flops"] == 1_605_632 + 2 * 924_844_032
    assert rows[conv]["analytic_flops"] == 2 * 8 * 64 * 56 * 56 * 64 * 3 * 3
    assert rows[add]["flops"] == 2 * 1_048_576 and rows[add]["launches"] == 2  # a + alpha·b: one FFMA per element
    assert rows[add]["dram_bytes"] == ((8_388_608 + 4_194_304) + (8_392_704 + 4_194_304)) / 2
    assert rows[hgemm]["flops"] == 4 * 524_288  # the epilogue's HFMA2; the tensor-core work is apart:
    assert rows[hgemm]["tensor_ops"] == 2 * 1024 ** 3 and rows[hgemm]["analytic_flops"] == 2 * 1024 ** 3


def test_the_text_report_says_what_was_merged(trace_path):
    text = _kernels(str(trace_path), "--ncu", str(CSV))
    assert f"note: 6 ncu launches read from {CSV}: 6 merged into kernel groups, 0 matched no kernel group" in text


def test_ncu_launches_of_kernels_a_trace_does_not_have_are_counted_not_merged():
    text = _kernels(str(FIXTURES / "kineto_cuda_synthetic.json"), "--ncu", str(CSV), "--json")
    data = json.loads(text)
    assert all(r["measured"] is None for r in data["kernels"])
    assert data["notes"][-1].endswith("0 merged into kernel groups, 6 matched no kernel group")


def test_cupti_ranges_merge_into_the_kernel_groups_by_name(trace_path):
    profile = profile_from_trace(trace_path)
    ranges = cupti_counters.measured_launches(CUPTI)
    (rows,), unmatched = merge_measured_lists([profile.kernels], ranges, "cupti_range")
    sgemm, conv, add, hgemm = _range_names()
    launches = _csv_launches()
    by_name = {r.name: asdict(r) for r in rows}
    # the CUPTI fixture carries the CSV's counters: ID 0 sgemm, 1 conv, 2 add, 5 hgemm (its ranges have no
    # tensor-ops counter: tensor_ops unknown, not 0), and "__missing__" (ID 3) which names no kernel
    assert unmatched == 1
    for name, csv_row in ((sgemm, launches[0]), (conv, launches[1]), (add, launches[2]), (hgemm, launches[5])):
        measured, hand = by_name[name]["measured"], _by_hand(csv_row)
        assert measured["source"] == "cupti_range" and measured["launches"] == 1
        assert measured["flops"] == hand["flops"] and measured["dram_bytes"] == hand["dram_bytes"]
        assert measured["tensor_ops"] is None


def test_a_range_profiler_trace_through_the_cli_says_its_ranges_have_no_kernels_to_merge_into():
    data = json.loads(_kernels(str(CUPTI), "--json"))
    assert all(r["measured"] is None for r in data["kernels"])
    assert data["notes"] == ["5 CUPTI counter ranges: a range-profiler trace records no kernels of its own, so no "
                             "kernel group holds them; `tbd analyze` shows them per range, kernel and launching op "
                             "(\"Measured counters\")"]
    assert "note: 5 CUPTI counter ranges: a range-profiler trace" in _kernels(str(CUPTI))


def test_both_demanglers_names_read_alike():
    sgemm, conv, add, _ = _range_names()
    ncu = {x["ID"]: x["Kernel Name"] for x in _csv_launches()}
    assert canonical_name(ncu["1"]) == canonical_name(conv)
    assert canonical_name(ncu["0"]) == canonical_name(sgemm) == sgemm
    # not a demangler's difference: the type itself (at::detail::Array became std::array in PyTorch)
    assert canonical_name(ncu["2"]) != canonical_name(add)
    assert canonical_name("void f<(unsigned int)4, [lambda(int) (instance 1)]>(const T1 *, int)") \
        == canonical_name("void f<4u, {lambda(int)#1}>(float const*, int)")
    assert canonical_name("void at::native::<unnamed>::k<(bool)1>(T1 *)") \
        == canonical_name("void at::native::(anonymous namespace)::k<true>(float*)")


def _launch(name: str, flops: float) -> MeasuredLaunch:
    return MeasuredLaunch(name=name, flops=flops, flops_by_precision={"fp32": flops}, tensor_ops=None, dram_bytes=1.0)


def test_a_launch_matched_by_function_name_alone_only_where_one_group_has_it(trace_path):
    # ncu's add (std::array where the trace has at::detail::Array) matches no group's canonical name; its
    # function name is the add group's alone: merged there. With a second instance of that function among
    # the groups the launch could be either's: unmatched, in the table and in a ranking that holds only one.
    profile = profile_from_trace(trace_path)
    add = next(r for r in profile.kernels if "CUDAFunctor_add" in r.name)
    ncu_add = next(x["Kernel Name"] for x in _csv_launches() if x["ID"] == "2")
    (rows,), unmatched = merge_measured_lists([profile.kernels], [_launch(ncu_add, 1.0)], "ncu")
    assert unmatched == 0 and next(r for r in rows if r.name == add.name).measured["flops"] == 1.0
    twin = replace(add, name=add.name.replace("CUDAFunctor_add", "CUDAFunctor_sub"))
    (rows, ranked), unmatched = merge_measured_lists([profile.kernels + [twin], [add]], [_launch(ncu_add, 1.0)],
                                                     "ncu")
    assert unmatched == 1 and all(r.measured is None for r in rows + ranked)
