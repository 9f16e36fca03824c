import numpy as np

from analysis.stability import StabilityRule, warmup_end

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
