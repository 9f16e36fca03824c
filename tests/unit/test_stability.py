import numpy as np

from tbd.analysis.stability import StabilityRule, warmup_end

RULE = StabilityRule(window=5, cv_max=0.10, median_tol=0.05)


def test_known_change_point():
    # 8 slow, decaying warm-up iterations, then a steady 100 ms with +-1% jitter.
    warm = [900, 700, 500, 400, 300, 250, 200, 150]
    rng = np.random.default_rng(0)
    steady = 100 * (1 + 0.01 * rng.standard_normal(30))
    times = np.array(warm + list(steady))
    assert warmup_end(times, RULE) == len(warm)


def test_never_stabilises():
    # alternating fast/slow iterations: CV stays ~ 0.5 in every window
    times = np.array([50, 150] * 40, dtype=float)
    assert warmup_end(times, RULE) is None


def test_drifting_series_is_not_stable():
    # 3% per-iteration growth: each window's CV is small but the next window's median is ~16% higher
    times = 100 * 1.03 ** np.arange(40)
    assert warmup_end(times, RULE) is None


def test_needs_two_windows():
    assert warmup_end(np.full(9, 100.0), RULE) is None
    assert warmup_end(np.full(10, 100.0), RULE) == 0


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
