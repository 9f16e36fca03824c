import numpy as np

from tbd.analysis.stability import StabilityRule, detect, warmup_end

RULE = StabilityRule()  # window 10: a decision needs 20 iterations beyond the start


def test_known_change_point():
    # 8 slow, decaying warm-up iterations, then a steady 100 ms with +-1% jitter: the windows' medians
    # agree once fewer than half of the first window is warm-up (the median ignores the rest), and
    # the reported start skips the warm-up iterations still in it, outside the stable band.
    warm = [900, 700, 500, 400, 300, 250, 200, 150]
    rng = np.random.default_rng(0)
    steady = 100 * (1 + 0.01 * rng.standard_normal(30))
    times = np.array(warm + list(steady))
    assert warmup_end(times, RULE) == len(warm)
    found = detect(times, RULE)
    assert found.decided_at <= len(warm) + 2 * RULE.window and abs(found.median - 100) < 1 and found.noise < 0.02


def test_alternating_iterations_are_a_stationary_phase_with_a_large_noise():
    # fast/slow alternation (two workers taking turns): no level shift between windows, so it is
    # stable, and the noise says how much one iteration varies (the old CV cap never called it stable)
    found = detect(np.array([50, 150] * 40, dtype=float), RULE)
    assert found is not None and found.start == 0 and found.noise > 1.0


def test_drifting_series_is_not_stable():
    # 3% per-iteration growth: windows 10 apart differ by ~34%
    times = 100 * 1.03 ** np.arange(40)
    assert warmup_end(times, RULE) is None


def test_needs_two_windows():
    w = RULE.window
    assert warmup_end(np.full(2 * w - 1, 100.0), RULE) is None
    assert warmup_end(np.full(2 * w, 100.0), RULE) == 0
    assert warmup_end(np.zeros(2 * w), RULE) == 0  # a fake clock's zero-length steps


def test_online_decision_equals_the_whole_series_answer():
    # The loop asks after every iteration; the first answer must be the one a call on the whole
    # series gives, after `decided_at` iterations.
    rng = np.random.default_rng(3)
    times = np.concatenate([[5000, 900, 400, 300], 100 * np.exp(0.3 * rng.standard_normal(80))])
    whole = detect(times, RULE)
    online = next(n for n in range(1, times.size + 1) if detect(times[:n], RULE) is not None)
    assert online == whole.decided_at and detect(times[:online], RULE) == whole


def test_a_slow_traced_iteration_is_called_out():
    from tbd.analysis.stability import trace_window_outliers

    ms = 1_000_000
    # Timing window 2..6 lasted 500 ms (mean 100 ms a step; its own per-step times are host times of an
    # unsynchronised loop, here 1 ms, and are not the reference). Trace window 8..9: 220 ms = 2.2x.
    times = np.array([300, 120, 1, 1, 1, 1, 496, 150, 190, 220]) * ms
    notes = trace_window_outliers(times, (2, 6), (8, 9), 500 * ms)
    assert len(notes) == 1 and notes[0].startswith("traced iteration 9 took 0.220 s, 2.2x the timing window's mean 0.100 s")
    assert trace_window_outliers(times, (2, 6), (7, 8), 500 * ms) == []  # 1.5x, 1.9x: profiler overhead
    assert trace_window_outliers(times, None, (8, 9), 500 * ms) == []
    assert trace_window_outliers(times, (2, 6), (8, 9), None) == []
