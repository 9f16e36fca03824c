import numpy as np

from tbd.core.records import RunSpec
from tbd.profilers.loop import LoopCallbacks, LoopState, run_timing_window, run_trace_window, run_warmup


class FakeClock:
    """Each step advances time by the next scripted duration; synchronize adds `sync_ns`."""

    def __init__(self, durations, sync_ns=0):
        self.now, self.durations, self.sync_ns, self.syncs = 0, list(durations), sync_ns, 0

    def clock(self):
        return self.now

    def step(self):
        self.now += self.durations.pop(0)

    def synchronize(self):
        self.syncs += 1
        self.now += self.sync_ns


def hooks_for(clock):
    return LoopCallbacks(step=clock.step, synchronize=clock.synchronize, clock=clock.clock)


def test_warmup_detected_then_windows():
    warm = [9000, 7000, 5000, 3000]
    c = FakeClock(warm + [1000] * 40)
    state, spec = LoopState(), RunSpec(model="m", iterations=5, trace_iterations=2)
    run_warmup(hooks_for(c), spec, state, deadline_ns=10**12)
    assert state.warmup == 4 and state.stable and state.warmup_detected
    # two windows of 10 accept candidate 0 (4 of its 10 are warm-up: the median ignores them); the
    # start skips those 4. The progress bar counts the 20 run, the report says both.
    assert len(state.times_ns) == 20 and state.warmup_run == 20
    run_timing_window(hooks_for(c), 5, state, deadline_ns=10**12)
    assert state.timing_window == (20, 24) and state.timing_window_ns == 5 * 1000
    run_trace_window(hooks_for(c), 2, state, around_step=lambda i: _null(), after_step=lambda: None, lead_in=1)
    assert state.trace_window == (26, 27) and len(state.times_ns) == 28
    log = state.iteration_log()
    assert log.warmup_seconds == sum(warm) / 1e9 and log.warmup_run == 20


def test_warmup_given_and_unstable_budget():
    c = FakeClock([int(1000 * 1.03 ** i) for i in range(100)])  # still drifting 3% an iteration
    state = LoopState()
    run_warmup(hooks_for(c), RunSpec(model="m", max_warmup_iterations=30), state, deadline_ns=10**12)
    assert state.stable is False and not state.warmup_detected and state.warmup == state.warmup_run == 30
    assert "not reached" in state.notes[0]
    c2 = FakeClock([100] * 3)
    s2 = LoopState()
    run_warmup(hooks_for(c2), RunSpec(model="m", warmup=3), s2, deadline_ns=10**12)
    # a given warm-up is not checked: stable is None ("not checked"), never a claimed yes
    assert s2.warmup == s2.warmup_run == 3 and not s2.warmup_detected and s2.stable is None
    assert s2.iteration_log().stable is None


def test_timing_window_synchronizes_only_at_ends_and_counts_the_drain():
    c = FakeClock([1000] * 4, sync_ns=500)
    state = LoopState()
    run_timing_window(hooks_for(c), 4, state, deadline_ns=10**12)
    assert c.syncs == 2
    # window = 4 steps + the final drain; the first sync happens before the clock starts
    assert state.timing_window_ns == 4 * 1000 + 500
    assert np.sum(state.times_ns) == state.timing_window_ns


def test_timing_window_respects_deadline():
    c = FakeClock([1000] * 10)
    state = LoopState()
    run_timing_window(hooks_for(c), 10, state, deadline_ns=2500)
    assert state.timing_window == (0, 2) and "cut to 3 of 10" in state.notes[0]


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_timing_window_reads_the_workers_counter():
    # 3 steps of 1000 ns; other workers add 7 samples per step on top of the hook's own 2
    c = FakeClock([1000] * 3)
    counted = [100.0]

    def step():
        c.step()
        counted[0] += 2 + 7

    callbacks = LoopCallbacks(step=step, synchronize=c.synchronize, clock=c.clock, samples_counter=lambda: counted[0])
    state = LoopState()
    run_timing_window(callbacks, 3, state, deadline_ns=10**12)
    assert state.timing_window_samples == 3 * (2 + 7)
    assert state.iteration_log().timing_window_samples == 27


def test_an_interrupted_timing_window_keeps_its_completed_iterations():
    c = FakeClock([1000, 1000, 1000], sync_ns=500)
    steps = {"n": 0}

    def step():
        steps["n"] += 1
        if steps["n"] == 4:
            raise KeyboardInterrupt  # the fourth iteration is cut short
        c.step()

    state = LoopState()
    callbacks = LoopCallbacks(step=step, synchronize=c.synchronize, clock=c.clock)
    try:
        run_timing_window(callbacks, 10, state, deadline_ns=10**12)
    except KeyboardInterrupt:
        pass
    assert state.timing_window == (0, 2)
    # three steps and the drain of the final synchronisation; the times add up to the window
    assert state.timing_window_ns == 3 * 1000 + 500 == sum(state.times_ns)
    assert "cut to 3 of 10 iterations by an interrupt" in state.notes[0]
