"""Hand-made series for the change-point warm-up rule (analysis/stability.py, docs/warmup.md)."""

import numpy as np

from tbd.analysis.stability import StabilityRule, detect, warmup_end

RULE = StabilityRule()


def test_a_step_down_then_flat_is_stable_from_the_step():
    # 12 iterations at 3x (allocator growth, autotuning), then flat at 100 with 3% noise
    rng = np.random.default_rng(1)
    times = np.concatenate([300 * (1 + 0.03 * rng.standard_normal(12)), 100 * (1 + 0.03 * rng.standard_normal(60))])
    found = detect(times, RULE)
    # the windows' medians agree once fewer than half of the first window is warm-up; the start
    # then skips the warm-up iterations still in it
    assert found.start == 12 and 12 + RULE.window <= found.decided_at <= 12 + 2 * RULE.window


def test_a_slow_drift_is_never_called_stable():
    # +1.5% per iteration with 2% noise: each window's CV stays ~5%, but the level keeps moving
    rng = np.random.default_rng(2)
    i = np.arange(200)
    times = 100 * np.exp(0.015 * i + 0.02 * rng.standard_normal(i.size))
    assert warmup_end(times, RULE) is None


def test_a_drift_that_levels_off_is_stable_only_after_it_has():
    # decays by 4% an iteration towards 100 for 40 iterations, then flat with 2% noise
    rng = np.random.default_rng(5)
    i = np.arange(120)
    level = 100 * (1 + 3 * 0.96 ** np.minimum(i, 40) - 3 * 0.96 ** 40)
    found = detect(level * (1 + 0.02 * rng.standard_normal(i.size)), RULE)
    assert found is not None and found.start >= 25


def test_flat_noise_with_outliers_is_stable_at_once():
    # 10% noise and one iteration in eight 5x slower (another process taking the core): the
    # windows' medians ignore the outliers, so the phase is stable from the start, at its median
    rng = np.random.default_rng(4)
    times = 100 * np.exp(0.1 * rng.standard_normal(100))
    times[::8] *= 5
    found = detect(times, RULE)
    assert found.start <= 1 and found.decided_at <= 1 + 2 * RULE.window and abs(found.median / 100 - 1) < 0.1


def test_heavy_noise_converges_where_a_cv_cap_never_does():
    # a loaded 2-core machine: iteration times vary by a factor ~2 (sigma of log ~0.7); a fixed CV
    # cap of 10% never passes, the rule scaled by the series' own noise decides within 3 windows
    rng = np.random.default_rng(6)
    times = 30 * np.exp(0.7 * rng.standard_normal(200))
    found = detect(times, RULE)
    assert found is not None and found.decided_at <= 3 * RULE.window and found.noise > 0.4


def test_slow_iterations_need_fewer_of_them_fast_ones_the_full_window():
    from tbd.analysis.stability import MIN_WINDOW, StabilityRule, detect_timed, rule_for

    assert rule_for(0.5).window == 10 and rule_for(0.54).window == 10  # every corpus series keeps 10
    assert rule_for(1.0).window == 5 and rule_for(2.0).window == MIN_WINDOW == 4 and rule_for(30.0).window == 4
    assert rule_for(float("nan")) == StabilityRule() and rule_for(0.0) == StabilityRule()
    # a full-size model on a CPU: one slow first iteration, then ~2 s with 1 % jitter (seconds)
    rng = np.random.default_rng(0)
    times = np.concatenate([[3.1], 2.0 * np.exp(rng.normal(0, 0.01, 20))])
    found = detect_timed(times, 1.0)
    assert found is not None and found.start == 1 and found.decided_at == 8  # 2 windows of 4, not of 10
    # a 1 %-per-iteration drift over the same time is still not called stable
    ramp = 2.0 * 1.01 ** np.arange(20)
    assert detect_timed(ramp, 1.0) is None
