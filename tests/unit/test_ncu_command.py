"""The ncu command line: exactly the chosen launches of one kernel, inside tbd's NVTX range, with tbd's metrics.

Each flag is from the Nsight Compute CLI user guide (analysis/ncu.py quotes it).
"""

from __future__ import annotations

import re
import shlex

import pytest

from tbd.analysis import counters
from tbd.analysis.ncu import (
    DEFAULT_METRICS,
    DRAM_METRICS,
    ELLIPSIS,
    FLOP_METRICS,
    NVTX_RANGE,
    TENSOR_METRICS,
    csv_export_command,
    kernel_function_name,
    name_regex,
    ncu_command,
    nvtx_filter,
    shell_line,
)
from tbd.core.errors import UsageError
from tbd.profilers.traces import names as trace_names
from tbd.profilers.traces.names import clean_name

ADD_KINETO = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
              "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
ADD_NCU = ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, "
           "std::array<char *, (unsigned long)3>>(int, T2, T3)")
METRICS = ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum,smsp__sass_thread_inst_executed_op_fmul_pred_on.sum,"
           "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,smsp__sass_thread_inst_executed_op_hadd_pred_on.sum,"
           "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum,smsp__sass_thread_inst_executed_op_hfma_pred_on.sum,"
           "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum,smsp__sass_thread_inst_executed_op_dmul_pred_on.sum,"
           "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum,"
           r"regex:^sm__inst_executed_pipe_tensor[a-z0-9_]*\.sum$,regex:^sm__ops_path_tensor_src_[a-z0-9_]+\.sum$,"
           "dram__bytes_read.sum,dram__bytes_write.sum")


def test_the_whole_command_for_a_cublas_kernel_in_the_trace_window():
    argv = ncu_command("ampere_sgemm_128x64_nn", 3, 2, ["python", "-m", "tbd.cli.runner", "--batch", "32"], NVTX_RANGE,
                       log_file="counters.csv")
    assert argv == [
        "ncu", "--target-processes", "all",
        "--nvtx", "--nvtx-push-pop-scope", "process", "--nvtx-include", "tbd@tbd.trace_window/",
        "--kernel-name-base", "demangled", "--rename-kernels", "off", "--kernel-name", "regex:^ampere_sgemm_128x64_nn$",
        "--launch-skip", "3", "--launch-count", "2",
        "--metrics", METRICS,
        "--csv", "--page", "raw", "--print-units", "base", "--log-file", "counters.csv",
        "python", "-m", "tbd.cli.runner", "--batch", "32"]


def test_without_nvtx_target_or_log_file():
    argv = ncu_command("k", 0, 1, None, metrics=("dram__bytes_read.sum",))
    assert argv == ["ncu", "--target-processes", "all", "--kernel-name-base", "demangled", "--rename-kernels", "off",
                    "--kernel-name", "regex:^k$", "--launch-skip", "0", "--launch-count", "1",
                    "--metrics", "dram__bytes_read.sum", "--csv", "--page", "raw", "--print-units", "base"]


def test_a_report_instead_of_csv_and_the_command_that_prints_it():
    argv = ncu_command("k", 1, 1, ["./app"], report="runs/k")
    assert argv[-3:] == ["--export", "runs/k", "./app"]
    assert "--csv" not in argv and "--page" not in argv
    assert csv_export_command("runs/k") == ["ncu", "--import", "runs/k.ncu-rep", "--csv", "--page", "raw",
                                            "--print-units", "base"]
    assert csv_export_command("r.ncu-rep", log_file="c.csv")[2:3] == ["r.ncu-rep"]
    assert csv_export_command("r.ncu-rep", log_file="c.csv")[-2:] == ["--log-file", "c.csv"]


def test_the_name_regex_matches_exactly_that_name():
    pattern = name_regex(ADD_KINETO)
    assert pattern.startswith("^void at::native::vectorized_elementwise_kernel<4, ") and pattern.endswith(r"3>\)$")
    assert re.fullmatch(pattern[1:-1], ADD_KINETO) and re.search(pattern, ADD_KINETO)
    for other in (ADD_KINETO + " ", "x" + ADD_KINETO, ADD_KINETO.replace("float", "double"), ADD_NCU):
        assert not re.search(pattern, other)
    # only ECMAScript/PCRE-special characters are escaped: "\ ", "\#" or "\&" are not portable escapes
    assert name_regex("a b#&~(x*)") == r"^a b#&~\(x\*\)$"
    assert name_regex("f[2]{3}.$^|?+") == r"^f\[2\]\{3\}\.\$\^\|\?\+$"


def test_a_name_shortened_by_the_trace_reader_matches_by_head_and_tail():
    long_name = "void k<" + "A, " * 3000 + "B>(int)"
    short = clean_name(long_name)
    pattern = name_regex(short)
    assert len(short) < len(long_name) and ".*" in pattern
    assert re.search(pattern, long_name)


def test_function_names_as_ncu_matches_them():
    assert kernel_function_name(ADD_KINETO) == kernel_function_name(ADD_NCU) == "vectorized_elementwise_kernel"
    assert kernel_function_name("ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"
    pool = "void at::native::(anonymous namespace)::max_pool_forward_nchw<float>(int, float const*)"
    assert kernel_function_name(pool) == "max_pool_forward_nchw"
    assert kernel_function_name("void elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl<F>("
                                "at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)") \
        == "elementwise_kernel"
    assert kernel_function_name("vectorAdd(float const*, float*, int)") == "vectorAdd"
    argv = ncu_command(ADD_KINETO, 7, 1, None, name_base="function")
    at = argv.index("--kernel-name-base")
    # renaming off as for whole names: the CSV then holds ncu's full demangled names, which the merge reads
    assert argv[at:at + 6] == ["--kernel-name-base", "function", "--rename-kernels", "off",
                               "--kernel-name", "regex:^vectorized_elementwise_kernel$"]


def test_nvtx_filter_syntax_for_push_pop_ranges():
    assert nvtx_filter("tbd.trace_window") == "tbd@tbd.trace_window/"
    assert nvtx_filter("step 1", None) == "step 1/"  # the default domain
    assert nvtx_filter("a/b,c", "d@e") == r"d\@e@a\/b\,c/"  # quantifiers escaped with "\"
    for domain, name in (("tbd", ""), ("tbd", "a\\b"), ("regex:x", "r"), ("tbd", "two\nlines")):
        with pytest.raises(UsageError, match="cannot be given to ncu"):
            nvtx_filter(name, domain)


def test_default_metrics_hold_every_counter_the_work_needs():
    # the command module imports core only: its copies equal the names the readers and analysis.counters use
    assert FLOP_METRICS == counters.FLOP_METRICS and ELLIPSIS == trace_names.ELLIPSIS
    assert DRAM_METRICS == (counters.DRAM_READ, counters.DRAM_WRITE)
    ops = [f"smsp__sass_thread_inst_executed_op_{p}{o}_pred_on.sum" for p in "fhd" for o in ("add", "mul", "fma")]
    assert set(ops) <= set(DEFAULT_METRICS)
    assert {"dram__bytes_read.sum", "dram__bytes_write.sum"} <= set(DEFAULT_METRICS)
    assert set(TENSOR_METRICS) <= set(DEFAULT_METRICS)
    pipe, paths = (re.compile(m.removeprefix("regex:")) for m in TENSOR_METRICS)
    # the regexes take each GPU's names and only .sum counters
    for name in ("sm__inst_executed_pipe_tensor.sum", "sm__inst_executed_pipe_tensor_op_hmma.sum",
                 "sm__inst_executed_pipe_tensor_op_hmma_v2.sum", "sm__inst_executed_pipe_tensor_subpipe_hmma.sum"):
        assert pipe.search(name), name
    for name in ("sm__ops_path_tensor_src_fp16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum",
                 "sm__ops_path_tensor_src_fp8_sparsity_on.sum"):
        assert paths.search(name), name
    for name in ("sm__inst_executed_pipe_tensor.sum.per_second", "sm__ops_path_tensor_src_fp16.sum.peak_sustained",
                 "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum"):
        assert not pipe.search(name) and not paths.search(name), name


@pytest.mark.parametrize("kwargs, message", [
    ({"kernel_name": ""}, "the kernel name is empty"),
    ({"kernel_name": "a\nb"}, "line break"),
    ({"launch_skip": -1}, "launch skip must be"),
    ({"launch_skip": True}, "launch skip must be"),
    ({"launch_count": 0}, "launch count must be"),
    ({"launch_count": 1.5}, "launch count must be"),
    ({"metrics": ("a,b",)}, "without commas"),
    ({"metrics": ()}, "without commas"),
    ({"name_base": "mangled"}, "name_base must be one of"),
])
def test_bad_arguments_are_usage_errors(kwargs, message):
    args = {"kernel_name": "k", "launch_skip": 0, "launch_count": 1, "target": None, **kwargs}
    with pytest.raises(UsageError, match=message):
        ncu_command(**args)


def test_shell_line_quotes_what_the_shell_would_split():
    argv = ncu_command(ADD_KINETO, 0, 1, ["python", "train.py"], NVTX_RANGE)
    line = shell_line(argv)
    assert shlex.split(line) == argv
    assert "'regex:^void at::native::vectorized_elementwise_kernel<4, " in line
