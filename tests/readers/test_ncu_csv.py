"""Nsight Compute raw-page CSV exports: launches, units scaled to base, measured work, hostile files.

The fixture ncu_raw_small.csv is hand-written to ncu's documented layout; tests/fixtures/COUNTERS.md
derives every counter from its kernel's size, and the expectations below repeat that arithmetic.
"""

from __future__ import annotations

import os

import pytest
from testpaths import FIXTURES

from tbd.analysis.counters import (
    flops_by_precision,
    measured_work,
    tensor_instructions,
    tensor_ops_by_path,
    total_flops,
)
from tbd.core.errors import TraceFormatError
from tbd.profilers.ncu_csv import EXPORT_HINT, launch_work, measured_launches, parse_ncu_csv, read_ncu_csv, unit_scale
from tbd.profilers.traces.files import LIMIT_VARIABLE

SMALL = FIXTURES / "ncu_raw_small.csv"
SGEMM = "ampere_sgemm_128x64_nn"
HGEMM = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn"
FFMA, FMUL, FADD = (f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("ffma", "fmul", "fadd"))
HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC"')
EMPTY_IDENTITY = ",".join(['""'] * 11)
ROW = '"0","1","p","h","k","1","7","(32, 1, 1)","(4, 1, 1)","0","9.0"'


def _csv(metrics: list[tuple[str, str]], *values: str) -> str:
    """A one-launch (per value row) export with the given (metric, unit) columns."""
    header = HEAD + "".join(f',"{name}"' for name, _ in metrics)
    units = EMPTY_IDENTITY + "".join(f',"{unit}"' for _, unit in metrics)
    return "\n".join([header, units, *(ROW + "," + row for row in values)]) + "\n"


def _refused(text: str | bytes, match: str) -> TraceFormatError:
    with pytest.raises(TraceFormatError, match=match) as caught:
        parse_ncu_csv(text, "x.csv")
    assert "\n" not in caught.value.one_line()
    return caught.value


def test_the_fixture_has_six_launches_with_their_identity():
    report = read_ncu_csv(SMALL)
    assert [launch.id for launch in report.launches] == [0, 1, 2, 3, 4, 5]
    first, conv, add, _, add_again, hgemm = report.launches
    assert (first.kernel_name, first.stream, first.grid, first.block) == (SGEMM, 7, (16, 4, 1), (128, 1, 1))
    assert (first.process_id, first.context, first.device, first.cc) == (41237, 1, 0, "8.0")
    assert conv.kernel_name.startswith("void cudnn::cnn::implicit_convolve_sgemm<float, float, (int)1024,")
    assert conv.grid == (392, 1, 8)
    # ncu's demangler: "(int)4", "char *" and "(int, T2, T3)", not Kineto's "4", "char*" and full types.
    assert add.kernel_name == ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add"
                               "<float>, std::array<char *, (unsigned long)3>>(int, T2, T3)")
    assert (add_again.stream, hgemm.kernel_name, hgemm.block) == (13, HGEMM, (256, 1, 1))
    # ncu's own lines before the header are kept as messages, not parsed as rows.
    assert report.messages[0] == "==PROF== Connected to process 41237 (/usr/bin/python3.11)"
    assert report.messages[-1] == "==PROF== Disconnected from process 41237"


def test_values_are_in_base_units_with_thousands_separators_read():
    report = read_ncu_csv(SMALL)
    first = report.launches[0]
    assert first.metrics["dram__bytes_read.sum"] == 1_572_864  # "1,572,864" byte
    assert first.metrics["gpu__time_duration.sum"] == pytest.approx(18_432e-9)  # "18,432" nsecond -> seconds
    assert first.metrics[FFMA] == 512 * 1024 * 256  # "134,217,728" inst
    assert report.units["gpu__time_duration.sum"] == "second"
    assert report.units["dram__bytes_read.sum"] == "byte"
    assert report.units["launch__registers_per_thread"] == "register/thread"
    assert report.units[FFMA] == "inst"


def test_measured_work_of_each_kernel():
    launches = read_ncu_csv(SMALL).launches
    sgemm = launch_work(launches[0])
    # FP32 = fadd + fmul + 2 ffma, M=512 N=1024 K=256: 0 + 512*1024 + 2*512*1024*256
    assert sgemm.fp32_flops == 0 + 524_288 + 2 * 134_217_728 == 268_959_744
    assert (sgemm.fp16_flops, sgemm.fp64_flops) == (0, 0)  # measured zeros, not missing
    assert sgemm.dram_bytes == 1_572_864 + 2_097_152
    assert (sgemm.tensor_ops, sgemm.tensor_instructions) == (0, 0)
    conv = launch_work(launches[1])
    # outputs 8*64*56*56 = 1,605,632, each 64*3*3 = 576 FMAs, plus one fadd per output
    assert conv.fp32_flops == 1_605_632 + 0 + 2 * (1_605_632 * 576) == 1_851_293_696
    assert conv.dram_read_bytes == 8 * 64 * 56 * 56 * 4 + 64 * 64 * 9 * 4 == 6_569_984
    add = launch_work(launches[2])
    assert add.fp32_flops == 2 * 1_048_576  # one ffma per element
    assert add.dram_bytes == 2 * 4 * 1_048_576 + 4 * 1_048_576
    hgemm = launch_work(launches[5])
    # FP16 = 2 hadd + 2 hmul + 4 hfma (packed HFMA2): 4 * 1024*1024/2 = 2*M*N
    assert hgemm.fp16_flops == 2 * 0 + 2 * 0 + 4 * 524_288 == 2 * 1024 * 1024
    assert hgemm.fp32_flops == 0
    assert hgemm.tensor_instructions == 1024**3 // (16 * 8 * 16) == 524_288  # HMMA.16816 = 2048 MACs
    # the fp16->fp32 parent counter, not parent + its _sparsity_off child (that would be twice 2*1024^3)
    assert hgemm.tensor_ops == 2 * 1024**3
    assert dict(hgemm.tensor_ops_by_path) == {"fp16_dst_fp32": 2 * 1024**3, "fp64": 0, "tf32_dst_fp32": 0}


def test_auto_scaled_units_are_brought_to_base():
    text = _csv([("dram__bytes_read.sum", "Mbyte"), ("dram__bytes_write.sum", "Kbyte"),
                 ("gpu__time_duration.sum", "usecond"), (FFMA, "Minst"), ("dram__bytes.sum.per_second", "Gbyte/second"),
                 ("sm__cycles_elapsed.avg.per_second", "cycle/nsecond")],
                '"1.57","2,097.15","18.43","134.22","85.33","1.41"')
    launch = parse_ncu_csv(text, "auto.csv").launches[0]
    assert launch.metrics["dram__bytes_read.sum"] == pytest.approx(1.57e6)
    assert launch.metrics["dram__bytes_write.sum"] == pytest.approx(2_097.15e3)
    assert launch.metrics["gpu__time_duration.sum"] == pytest.approx(18.43e-6)
    assert launch.metrics[FFMA] == pytest.approx(134.22e6)
    assert launch.metrics["dram__bytes.sum.per_second"] == pytest.approx(85.33e9)
    assert launch.metrics["sm__cycles_elapsed.avg.per_second"] == pytest.approx(1.41 / 1e-9)


def test_unit_scale_table():
    assert unit_scale("") == (1.0, "")
    assert unit_scale("byte") == (1.0, "byte")
    assert unit_scale("Gbyte") == (1e9, "byte")
    assert unit_scale("msecond") == (1e-3, "second")
    assert unit_scale("Ghz") == (1e9, "hz")
    assert unit_scale("inst/cycle") == (1.0, "inst/cycle")
    assert unit_scale("KiB") is None and unit_scale("a/b/c") is None


def test_a_missing_metric_is_none_and_an_empty_cell_is_absent():
    sass = [(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum", "inst")
            for op in ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma", "dadd", "dmul")]  # no dfma column
    text = _csv(sass + [("dram__bytes_read.sum", "byte"), ("dram__bytes_write.sum", "byte")],
                '"1","2","3","4","5","6","7","8","100",""')
    work = launch_work(parse_ncu_csv(text, "x.csv").launches[0])
    assert work.fp32_flops == 1 + 2 + 2 * 3
    assert work.fp16_flops == 2 * 4 + 2 * 5 + 4 * 6
    assert work.fp64_flops is None  # dfma not collected: unknown, never 0
    assert (work.dram_read_bytes, work.dram_write_bytes, work.dram_bytes) == (100, None, None)
    assert (work.tensor_ops, work.tensor_instructions) == (None, None)
    assert dict(work.tensor_ops_by_path) == {}


def test_sm_spelling_and_tensor_counters_by_opcode_and_sparsity():
    work = measured_work({"sm__sass_thread_inst_executed_op_fadd_pred_on.sum": 1.0,
                          "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": 2.0,
                          "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 3.0})
    assert work.fp32_flops == 1 + 2 + 2 * 3
    # No parent counter: the path is its _sparsity_off + _sparsity_on children (GA100 without the parent).
    paths = tensor_ops_by_path({"sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum": 10.0,
                                "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_on.sum": 5.0,
                                "sm__ops_path_tensor_src_int8.sum": 7.0})
    assert paths == {"bf16_dst_fp32": 10 + 5, "int8": 7}
    # A path under a wider present path is left to it ("fp16" holds "fp16_dst_fp32").
    assert tensor_ops_by_path({"sm__ops_path_tensor_src_fp16.sum": 8.0,
                               "sm__ops_path_tensor_src_fp16_dst_fp32.sum": 6.0}) == {"fp16": 8}
    # The per-opcode breakdown (op_ over subpipe_, op_..._v2 over op_) is not counted as ops.
    assert tensor_ops_by_path({"sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum": 9.0}) == {}
    assert tensor_instructions({"sm__inst_executed_pipe_tensor_op_hmma.sum": 3.0,
                                "sm__inst_executed_pipe_tensor_op_hmma_v2.sum": 4.0,
                                "sm__inst_executed_pipe_tensor_subpipe_hmma.sum": 5.0,
                                "sm__inst_executed_pipe_tensor_op_imma.sum": 1.0}) == 4 + 1
    assert tensor_instructions({"sm__inst_executed_pipe_tensor.sum": 2.0,
                                "sm__inst_executed_pipe_tensor_op_hmma.sum": 2.0}) == 2


def test_ncu_lines_between_rows_and_a_repeated_table_are_skipped():
    one = _csv([("dram__bytes_read.sum", "byte")], '"1,000"')
    two = one.replace('"0","1","p"', '"1","2","p"').replace('"1,000"', '"2,000"')
    text = "app says hi\n" + one + "==WARNING== a warning\n\n" + two
    report = parse_ncu_csv(text, "x.csv")
    assert [(launch.id, launch.process_id, launch.metrics["dram__bytes_read.sum"]) for launch in report.launches] \
        == [(0, 1, 1000), (1, 2, 2000)]
    assert report.messages == ("==WARNING== a warning",)


def test_not_a_csv_is_refused_with_the_export_command():
    error = _refused('{"traceEvents": []}', "no ncu raw-page header")
    assert error.hint == EXPORT_HINT and "--page raw" in error.hint
    _refused("", "empty file")
    _refused(b"NCUR\0\x01\x02 protobuf", "binary data, not a CSV")


def test_headers_tbd_cannot_read_are_refused():
    _refused('"ID","Process ID","Stream"\n"","",""\n"0","1","7"\n', 'no "Kernel Name" column')
    details = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name",'
               '"Metric Name","Metric Unit","Metric Value"\n'
               '"0","1","p","h","k","1","7","s","dram__bytes.sum","byte","1"\n')
    _refused(details, "details-page export")
    _refused(HEAD + ',"a__b","a__b"\n', "appears twice")
    _refused(HEAD + ',"dram__bytes_read.sum"\n' + ROW + ',"1"\n', "no units row")


def test_values_that_are_not_numbers_are_refused_naming_the_metric():
    error = _refused(_csv([("dram__bytes_read.sum", "byte")], '"n/a"'), r"dram__bytes_read.sum is 'n/a', not a number")
    assert "drop it from --metrics" in error.hint
    for bad in ('"12abc"', '"1,23"', '"inf"', '"nan"', '"1e999"'):
        _refused(_csv([("dram__bytes_read.sum", "byte")], bad), "not a number")


def test_broken_rows_are_refused():
    text = _csv([("dram__bytes_read.sum", "byte")], '"1"')
    _refused(text + '"1","1","p"\n', r"line 4: 3 fields, the header has 12")
    _refused(text.replace('"(4, 1, 1)"', '"4x1x1"'), "Grid Size is '4x1x1', not")
    _refused(text.replace('"0","1","p"', '"zero","1","p"'), "ID is 'zero', not an integer")
    _refused(text.replace('"7","(32', '"-7","(32'), "Stream is '-7'")


def test_an_unknown_unit_is_refused_only_where_work_is_computed_from_it():
    _refused(_csv([("dram__bytes_read.sum", "KiB")], '"1"'), "unit 'KiB' of dram__bytes_read.sum")
    report = parse_ncu_csv(_csv([("sm__warps_active.avg", "warp-ish")], '"3"'), "x.csv")
    assert report.launches[0].metrics["sm__warps_active.avg"] == 3  # kept as printed, unscaled
    assert report.units["sm__warps_active.avg"] == "warp-ish"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_and_a_directory_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "counters.csv"
    os.mkfifo(fifo)
    with pytest.raises(TraceFormatError, match="a FIFO .named pipe., not an ncu CSV export") as caught:
        read_ncu_csv(fifo)
    assert caught.value.hint == EXPORT_HINT
    with pytest.raises(TraceFormatError, match="a directory, not an ncu CSV export"):
        read_ncu_csv(tmp_path)


def test_a_file_over_the_size_limit_is_refused(tmp_path, monkeypatch):
    big = tmp_path / "big.csv"
    big.write_bytes(SMALL.read_bytes())
    monkeypatch.setenv(LIMIT_VARIABLE, "1000")
    with pytest.raises(TraceFormatError, match="above the limit of 1,000 bytes") as caught:
        read_ncu_csv(big)
    assert LIMIT_VARIABLE in caught.value.hint


def test_a_gzipped_export_reads_the_same(tmp_path):
    import gzip

    packed = tmp_path / "counters.csv.gz"
    packed.write_bytes(gzip.compress(SMALL.read_bytes()))
    assert read_ncu_csv(packed).launches == read_ncu_csv(SMALL).launches


def test_measured_launches_for_the_kernel_table():
    launches = measured_launches(SMALL)
    assert [x.name for x in launches][::5] == [SGEMM, HGEMM]
    sgemm, hgemm = launches[0], launches[5]
    # FLOPs = FP32 + FP16 + FP64: 268,959,744 + 0 + 0; tensor ops apart (not FLOPs)
    assert (sgemm.flops, sgemm.flops_by_precision) == (268_959_744, {"fp32": 268_959_744, "fp16": 0, "fp64": 0})
    assert (sgemm.tensor_ops, sgemm.dram_bytes) == (0, 1_572_864 + 2_097_152)
    assert (hgemm.flops, hgemm.tensor_ops) == (0 + 4 * 524_288 + 0, 2 * 1024**3)
    partial = measured_work({FFMA: 1.0, FMUL: 1.0, FADD: 1.0})
    # fadd + fmul + 2 ffma = 1 + 1 + 2; FP16 and FP64 unknown, so no total
    assert (total_flops(partial), flops_by_precision(partial)) == (None, {"fp32": 1 + 1 + 2 * 1})
