"""ForwardedSignals: the parent records the user's signals and passes them on in steps."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from tbd.cli.signals import ForwardedSignals


def test_with_no_child_a_signal_is_recorded_not_raised_until_the_third():
    fs = ForwardedSignals()
    with fs.installed():
        os.kill(os.getpid(), signal.SIGTERM)  # while the parent analyses: held
        os.kill(os.getpid(), signal.SIGINT)
        assert fs.received == signal.SIGTERM and fs.count == 2 and fs.exit_code() == 143
        with pytest.raises(KeyboardInterrupt):  # the user insists: give up
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_a_child_gets_sigint_then_sigterm_then_sigkill():
    # A child that ignores SIGINT and SIGTERM: only the third step (SIGKILL) ends it.
    child = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                              "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                              "print('ready', flush=True)\ntime.sleep(60)"], stdout=subprocess.PIPE)
    assert child.stdout.readline().strip() == b"ready"
    fs = ForwardedSignals()
    with fs.forward_to(child):
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)
        assert child.poll() is None and not fs.killed
        os.kill(os.getpid(), signal.SIGINT)
        assert child.wait(timeout=10) == -signal.SIGKILL and fs.killed
    assert fs.exit_code() == 130 and fs.name() == "Ctrl-C (SIGINT)"


def test_sighup_is_a_sigterm_that_exits_129_and_reaches_the_child_as_sigint():
    # A child that reports the signal it got, so the first forwarding step is seen.
    child = subprocess.Popen([sys.executable, "-c", "import signal, sys, time\n"
                              "signal.signal(signal.SIGINT, lambda s, f: sys.exit(42))\n"
                              "print('ready', flush=True)\ntime.sleep(60)"], stdout=subprocess.PIPE)
    assert child.stdout.readline().strip() == b"ready"
    fs = ForwardedSignals()
    with fs.forward_to(child):
        os.kill(os.getpid(), signal.SIGHUP)
        assert child.wait(timeout=10) == 42  # got SIGINT: saves what its stage gathered
    assert fs.received == signal.SIGHUP and fs.exit_code() == 128 + 1 and "SIGHUP" in fs.name()
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL  # restored


# A parent on a terminal that hangs up: its report, printed after the signal, must not fail on EIO.
_HUNG_UP = """
import os, signal, sys, time
from tbd.cli.signals import ForwardedSignals
fs = ForwardedSignals()
with fs.installed():
    open(sys.argv[1] + ".ready", "w").close()
    while fs.received is None:  # the test closes the terminal's other end, then sends SIGHUP
        time.sleep(0.02)
    print("the report " * 10000, flush=True)
    sys.stderr.write("a note\\n")
with open(sys.argv[1], "w") as f:
    f.write(str(fs.exit_code()))
"""


def test_after_sighup_writes_to_the_hung_up_terminal_go_nowhere_instead_of_failing(tmp_path):
    master, slave = os.openpty()
    done = tmp_path / "done"
    proc = subprocess.Popen([sys.executable, "-c", _HUNG_UP, str(done)], stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    deadline = time.time() + 30
    while not (tmp_path / "done.ready").exists() and time.time() < deadline:
        time.sleep(0.02)
    os.close(master)  # the terminal hangs up: writes to it now fail with EIO
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(timeout=30) == 0
    assert done.read_text() == "129"


def test_the_runner_child_finishes_the_traced_iteration_on_the_first_signal_and_stops_at_the_second():
    from tbd.cli.runner import _interrupter
    from tbd.profilers.loop import LoopState

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        state = LoopState(stage="trace")
        handle = _interrupter(state)
        handle(signal.SIGINT, None)  # the trace window ends after the iteration under way
        assert state.stop_requested
        with pytest.raises(KeyboardInterrupt):  # the parent's second step (SIGTERM): stop at once
            handle(signal.SIGTERM, None)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # later ones cannot cut the saving short
        with pytest.raises(KeyboardInterrupt):  # anywhere else, the first one stops the run
            _interrupter(LoopState(stage="timing"))(signal.SIGHUP, None)
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_a_stop_in_the_trace_window_ends_it_after_the_iteration_under_way_before_the_tracer_advances():
    from tbd.profilers.loop import LoopCallbacks, LoopState, run_trace_window

    state = LoopState(times_ns=[10, 10])
    ticks, advanced = [0], []

    def clock():
        return ticks[0]

    def step():
        ticks[0] += 7
        if len(state.times_ns) == 2 + 1 + 2:  # lead-in + 2 recorded done: the 3rd recorded is under way
            state.stop_requested = True

    run_trace_window(LoopCallbacks(step=step, clock=clock), 10, state, lambda i: contextlib.nullcontext(),
                     lambda: advanced.append(len(state.times_ns)), lead_in=1)
    # Recorded iterations 3..5 (index 2 is the lead-in); the tracer advanced after the lead-in and the first two
    # recorded ones only, so stopping it closes the third's step: every step in the trace is complete.
    assert state.trace_window == (3, 5) and state.times_ns[3:] == [7, 7, 7]
    assert advanced == [3, 4, 5]
    assert any("trace window cut to 3 of 10 iterations by an interrupt" in n for n in state.notes)


def test_a_stop_before_the_first_traced_iteration_traces_none():
    from tbd.profilers.loop import LoopCallbacks, LoopState, run_trace_window

    state = LoopState(stop_requested=True)
    run_trace_window(LoopCallbacks(step=lambda: None), 3, state, lambda i: contextlib.nullcontext(), lambda: None,
                     lead_in=1)
    assert state.trace_window is None and state.times_ns == []
    assert any("trace window not run" in n for n in state.notes)
