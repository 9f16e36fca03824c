"""Shortened kernel names stay unique within a table (issue 28): reports.kernels.short_names.unique_short_names."""

import pytest
from testpaths import real_trace

from tbd.cli.run_analysis import profile_from_trace
from tbd.reports.kernels.short_names import short_kernel_name, unique_short_names

CONV_A = ("void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, true, true>(int, int, int, "
          "float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int)")
CONV_B = CONV_A.replace("128, 5, 5, 3, 3, 3,", "128, 6, 7, 3, 3, 5,")
NLL_OUT = "void cunn_ClassNLLCriterion_updateOutput_kernel<float, float>(float*, float*, float*, long*, float*, int)"
NLL_GRAD = "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>(float*, float*, long*, float*, float*, int)"


def test_the_two_convolutions_keep_the_template_arguments_that_differ():
    # Both shorten alike alone; together each keeps its differing arguments: 5, 5 ... 3 against 6, 7 ... 5.
    assert short_kernel_name(CONV_A, 40) == short_kernel_name(CONV_B, 40) == "implicit_convolve_sgemm<…>"
    assert unique_short_names([CONV_A, CONV_B], 40) == ["implicit_convolve_sgemm<…5, 5…3…>",
                                                        "implicit_convolve_sgemm<…6, 7…5…>"]


def test_a_richer_form_that_fits_and_differs_is_taken_first():
    a = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<long>, at::detail::Array<char*, 1> >(int)"
    b = a.replace("FillFunctor<long>", "FillFunctor<int>")
    # compact forms keep the scalar argument list of what the wrapper wraps
    assert unique_short_names([a, b], 60) == ["vectorized_elementwise_kernel<FillFunctor<long>>",
                                              "vectorized_elementwise_kernel<FillFunctor<int>>"]


def test_names_differing_in_the_middle_keep_that_word():
    out = unique_short_names([NLL_OUT, NLL_GRAD], 28)
    assert len(set(out)) == 2 and all(len(s) <= 28 for s in out)
    assert "updateOutput" in out[0] and "updateGradInput" in out[1]


def test_the_same_name_twice_reads_the_same_and_others_are_untouched():
    out = unique_short_names([CONV_A, "volta_sgemm_128x64_nt", CONV_A], 40)
    assert out[0] == out[2] and out[1] == "volta_sgemm_128x64_nt"


def test_numbers_when_no_words_fit():
    out = unique_short_names([CONV_A, CONV_B], 16)
    assert len(set(out)) == 2 and all(len(s) <= 16 for s in out)
    assert out[0].endswith(" #1") and out[1].endswith(" #2")


@pytest.mark.parametrize("trace", ["pt19_resnet50_v100", "pt1x_v100_nccl2_cudagraph_async_flows"])
def test_every_kernel_of_a_real_trace_reads_differently_at_every_width(trace):
    path = real_trace(f"gpu/{trace}.json.gz")
    if not path.exists():
        pytest.skip("real GPU traces not fetched (tests/fixtures/README.md)")
    names = [r.name for r in profile_from_trace(path).kernels]
    for width in (16, 20, 28, 40, 60):
        out = unique_short_names(names, width)
        assert len(set(out)) == len(names), width
        assert max(map(len, out)) <= width
