"""Numeric options at the edge of the representable (issue 29): refused in one line with the valid range.

Before, `--peak-flops 1e-300` printed utilizations of astronomic size, `--max-seconds 1e308`,
`--window-seconds 1e308` and `--seed 2**64` failed inside the runner child with an OverflowError.
Every value here is refused by argparse before any work starts: exit 2, one line naming the option
and the range, no traceback, nothing written.
"""

from __future__ import annotations

import time

import pytest
from testpaths import FIXTURES

from tbd.cli.main import main

TRACE = str(FIXTURES / "kineto_cuda_synthetic.json")

# (command words before the option, option, value, a piece of the valid range the line must state)
REFUSED = [
    (["analyze", TRACE], "--peak-flops", "1e-300", "1e+09 and 1e+18 FLOP/s"),
    (["analyze", TRACE], "--peak-flops", "5e-324", "1e+09 and 1e+18 FLOP/s"),
    (["analyze", TRACE], "--peak-flops", "1e300", "1e+09 and 1e+18 FLOP/s"),
    (["analyze", TRACE], "--sm-clock-mhz", "5e-324", "between 1 and 10000 MHz"),
    (["analyze", TRACE], "--sm-clock-mhz", "0.5", "between 1 and 10000 MHz"),
    (["analyze", TRACE], "--sm-clock-mhz", "1e6", "between 1 and 10000 MHz"),
    (["analyze", TRACE], "--memory-bandwidth", "1", "1e+08 and 1e+15 bytes/s"),
    (["analyze", TRACE], "--memory-bandwidth", "inf", "finite"),
    (["analyze", TRACE], "--samples-per-step", "1e300", "1e+12 samples"),
    (["analyze", TRACE], "--top", "0", "at least 1 and at most 1,000,000 rows"),
    (["analyze", TRACE], "--top", str(2**64), "at least 1 and at most 1,000,000 rows"),
    (["kernels", TRACE], "--top", "-5", "at least 1 and at most 1,000,000 rows"),
    (["report", TRACE], "--top", "1e3", "not an integer"),
    (["compare", TRACE, TRACE], "--peak-flops", "B=1e-300", "1e+09 and 1e+18 FLOP/s"),
    (["compare", TRACE, TRACE], "--memory-bandwidth", "nan", "finite"),
    (["profile", "resnet50"], "--max-seconds", "1e308", "between 0.001 and 1e+07 s"),
    (["profile", "resnet50"], "--max-seconds", "5e-324", "between 0.001 and 1e+07 s"),
    (["profile", "resnet50"], "--window-seconds", "1e308", "between 0.001 and 1e+07 s"),
    (["profile", "resnet50"], "--window-seconds", "-1", "between 0.001 and 1e+07 s"),
    (["profile", "resnet50"], "--seed", str(2**64), "at least 0 and at most 2,147,483,647"),
    (["profile", "resnet50"], "--seed", "-1", "at least 0 and at most 2,147,483,647"),
    (["profile", "resnet50"], "--peak-flops", "5e-324", "1e+09 and 1e+18 FLOP/s"),
    (["profile", "resnet50"], "--warmup", "-1", "at least 0 and at most 10,000,000 iterations"),
    (["profile", "resnet50"], "--warmup", str(10**30), "at least 0 and at most 10,000,000 iterations"),
    (["profile", "resnet50"], "--iterations", "0", "at least 1 and at most 10,000,000 iterations"),
    (["profile", "resnet50"], "--repeat", "100000", "at least 1 and at most 1,000"),
    (["profile", "resnet50"], "--trace-iterations", "1000000", "at least 0 and at most 10,000 iterations"),
    (["profile", "resnet50"], "--batch", str(2**40), "at least 1 and at most 16,777,216 samples"),
    (["profile", "resnet50"], "--threads", "100000", "at least 1 and at most 4,096 threads"),
    (["profile", "resnet50"], "--ncu", "0", "at least 1 and at most 10,000 kernels"),
    (["profile", "resnet50"], "--nproc-per-node", "1000000", "at least 1 and at most 1,024 processes"),
    (["profile", "resnet50"], "--nnodes", "0", "at least 1 and at most 100,000 machines"),
    (["profile", "resnet50"], "--node-rank", "-1", "at least 0 and at most 99,999"),
    (["profile", "resnet50"], "--rdzv-timeout", "1e308", "between 0.001 and 1e+07 s"),
    (["profile", "resnet50"], "--rank-timeout", "0", "between 0.001 and 1e+07 s"),
    (["profile", "resnet50"], "--memory-limit-gib", "1e308", "2**30 GiB"),
    (["sweep", "resnet50"], "--batch", f"2,{2**40}", "at most 16,777,216"),
    (["sweep", "resnet50", "--batch", "max"], "--batch-start", "0", "at least 1 and at most 16,777,216 samples"),
    (["sweep", "resnet50", "--batch", "max"], "--max-batch", "1e9", "not an integer"),
    (["sweep", "resnet50", "--batch", "max"], "--timeout-min", "0", "at least 1 and at most 1,000,000 minutes"),
    (["sweep", "resnet50", "--batch", "2", "--tta"], "--runs", "0", "at least 1 and at most 1,000 runs"),
    (["sweep", "resnet50", "--batch", "2", "--tta"], "--max-epochs", str(10**9), "at least 1 and at most 1,000,000 epochs"),
    (["sweep", "resnet50", "--batch", "2", "--tta"], "--target", "nan", "finite"),
    (["train", "resnet50"], "--cost-per-hour", "1e300", "1e-06 and 1e+06 USD"),
    (["train", "resnet50"], "--seed", str(2**64), "at least 0 and at most 2,147,483,647"),
    (["train", "resnet50"], "--runs", "-3", "at least 1 and at most 1,000 runs"),
    (["train", "resnet50"], "--batch", "0", "at least 1 and at most 16,777,216 samples"),
    (["train", "resnet50"], "--target", "-inf", "finite"),
    (["tta", str(FIXTURES)], "--target", "1e999", "finite"),
]


@pytest.mark.parametrize("words, option, value, stated", REFUSED, ids=[f"{w[0]}{o}={v[:12]}" for w, o, v, _ in REFUSED])
def test_a_meaningless_number_is_refused_in_one_line_with_the_range(tmp_path, capsys, words, option, value, stated):
    started = time.perf_counter()
    code = main([*words, f"{option}={value}", *(["--out", str(tmp_path / "r")] if words[0] == "profile" else [])])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("tbd: error: ") and f"argument {option}" in err, err
    assert stated in err, err
    assert "Traceback" not in err and time.perf_counter() - started < 5
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("option, value", [
    ("--peak-flops", "1e9"), ("--peak-flops", "6.7e13"), ("--peak-flops", "1e18"), ("--sm-clock-mhz", "1"),
    ("--sm-clock-mhz", "1410"), ("--sm-clock-mhz", "10000"), ("--memory-bandwidth", "4.8e12"),
    ("--samples-per-step", "0.5"), ("--top", "1000000"),
])
def test_a_value_inside_the_range_is_taken(tmp_path, capsys, option, value):
    assert main(["analyze", TRACE, option, value, "--json", str(tmp_path / "p.json")]) == 0, capsys.readouterr().err


def test_the_run_options_at_their_bounds_parse():
    from tbd.cli.main import build_parser

    args = build_parser(only="profile").parse_args(
        ["profile", "resnet50", "--seed", str(2**31 - 1), "--max-seconds", "1e7", "--window-seconds", "0",
         "--warmup", "0", "--trace-iterations", "0", "--batch", str(2**24), "--iterations", str(10**7)])
    assert (args.seed, args.max_seconds, args.window_seconds, args.warmup, args.batch) == (2**31 - 1, 1e7, 0.0, 0,
                                                                                            2**24)
    assert int(args.max_seconds * 1e9) < 2**63  # the child's deadline in int64 ns, far from overflow


def test_the_budget_bounds_a_given_warm_up():
    # `--warmup 100000 --max-seconds 5` ran all 100000 (killed at 120 s): warm-up now stops at the deadline.
    from tbd.core.records import RunSpec
    from tbd.profilers.loop import LoopCallbacks, LoopState, run_warmup

    now = [0]

    def step():
        now[0] += 10**9  # one second per iteration

    state = LoopState()
    run_warmup(LoopCallbacks(step=step, clock=lambda: now[0]), RunSpec(model="m", warmup=100000, max_seconds=5.0),
               state, deadline_ns=5 * 10**9)
    assert len(state.times_ns) == 5 and state.warmup == state.warmup_run == 5  # 5 s at 1 s each
    assert state.stable is False  # the run is flagged, not hung
    assert any("warm-up cut to 5 of the 100000 iterations" in n and "--max-seconds 5" in n for n in state.notes)


def test_an_overlong_window_or_budget_from_the_api_does_not_overflow_the_plan():
    # The API takes any finite number: a 1e308 s window once overflowed int() in the child (issue 29).
    from tbd.core.records import RunSpec
    from tbd.profilers.loop import LoopState
    from tbd.profilers.stages import window_plan

    state = LoopState(times_ns=[10**7] * 10, warmup=2)  # stable phase: 0.01 s per iteration
    plan = window_plan(RunSpec(model="m", iterations=20, trace_iterations=3, window_seconds=1e308), state, 0.1)
    assert (plan.timing_iterations, plan.trace_iterations) == (20, 3)  # no cut: the window is longer than asked
    plan = window_plan(RunSpec(model="m", iterations=20, trace_iterations=3, window_seconds=0.055), state, 0.1)
    assert plan.timing_iterations == 5  # 0.055 s at 0.01 s each: cut by time, as before
