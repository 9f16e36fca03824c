"""Stable-phase detection: where warm-up ends (docs/architecture.md, "Stable phase"; docs/warmup.md).

A change-point test between consecutive windows, scaled by the series' own noise. Candidate start
k is accepted when the windows A = times[k : k+w] and B = times[k+w : k+2w] show no level shift:

    |median(log B) - median(log A)|  <=  max(floor, z * 1.2533 * sigma * sqrt(2 / w))

sigma is the noise of log(time) in A and B, estimated robustly from successive differences
(1.4826 * median|diff| / sqrt(2)): a slow drift or the one step between warm-up and stable phase
hardly moves it, while a fixed CV cap fails whenever another process makes every window noisy
(measured on tests/fixtures/warmup_corpus: docs/warmup.md). 1.2533 * sigma / sqrt(w) is the
standard error of a window's median, so the test asks whether the two medians differ by more
than z standard errors of their difference; `floor` keeps a nearly noiseless series from being
held up by shifts too small to matter. The Theil-Sen slope over A and B, times 2w, must pass the
same bound, so a slow drift is not called stable. Log times: warm-up and load change times by factors.

Online: the loop calls this after every iteration; a candidate k depends only on times[: k+2w],
so the first accepted k over a whole series is the one the loop would have stopped at, after
k + 2w iterations. The median ignores up to w/2 - 1 leading warm-up iterations of A, so the
reported start skips A's leading iterations outside the stable band (see `detect`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

#: sqrt(pi/2): a median's standard error over the mean's, for normal noise.
_MEDIAN_SE = 1.2533
#: MAD -> standard deviation, for normal noise.
_MAD_SIGMA = 1.4826


@dataclass(frozen=True)
class StabilityRule:
    """Thresholds of the detector (measured on the warm-up corpus: docs/warmup.md)."""

    # Iterations per window; two windows are compared. 10, not 8: MXNet runs step down ~15 % once
    # more near iteration 20, after a flat start; with 8 the rule decided before the true end in 3
    # of 31 corpus series, with 10 in 1, for 4 more iterations to decide (grid in docs/warmup.md).
    window: int = 10
    z: float = 3.0  # allowed median shift, in standard errors of the difference of two window medians
    floor: float = 0.05  # allowed |log| shift however small the noise (~5 %)
    band_z: float = 3.0  # a stable iteration lies within max(floor, band_z * sigma) of the stable median

    @property
    def needed(self) -> int:
        """Iterations that must exist beyond the candidate start to judge it."""
        return 2 * self.window


@dataclass(frozen=True)
class Detection:
    start: int  # first iteration of the stable phase
    decided_at: int  # iterations it took to decide (the loop stops warm-up here)
    median: float  # median time of the two windows that decided, in the times' unit
    noise: float  # sigma of log(time) there: ~ the relative spread of one iteration


def _log(times: np.ndarray) -> np.ndarray:
    t = np.asarray(times, dtype=np.float64)
    return np.log(np.maximum(t, 1e-300))  # a fake clock's 0 ns stays finite


def _noise(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Robust sigma of i.i.d. noise from successive differences (Var(diff) = 2 sigma^2).

    The differences are centred at 0, not at their median: without a level change they are
    symmetric about 0, and a series alternating fast/slow (every difference +-d) must show noise d.
    """
    d = np.diff(x, axis=axis)
    return _MAD_SIGMA * np.median(np.abs(d), axis=axis) / np.sqrt(2.0)


def _theil_sen(rows: np.ndarray) -> np.ndarray:
    """Median of the pairwise slopes of each row against its index (robust to outliers)."""
    i, j = np.triu_indices(rows.shape[-1], k=1)
    return np.median((rows[..., j] - rows[..., i]) / (j - i), axis=-1)


def detect(times: np.ndarray, rule: StabilityRule = StabilityRule()) -> Detection | None:
    """The stable phase seen so far, or None when no two consecutive windows agree yet."""
    x = _log(times)
    w = rule.window
    n_cand = x.size - 2 * w + 1
    if n_cand <= 0:
        return None
    medians = np.median(np.lib.stride_tricks.sliding_window_view(x, w), axis=1)
    pairs = np.lib.stride_tricks.sliding_window_view(x, 2 * w)  # A then B, for every k
    sigma = _noise(pairs)
    shift = np.abs(medians[w : w + n_cand] - medians[:n_cand])
    allowed = np.maximum(rule.floor, rule.z * _MEDIAN_SE * sigma * np.sqrt(2.0 / w))
    # A ramp moves the two medians by only half its rise over A and B; its Theil-Sen slope times
    # 2w sees all of it, so a slow drift fails where the medians alone would pass.
    drift = np.abs(_theil_sen(pairs)) * 2 * w
    hits = np.flatnonzero((shift <= allowed) & (drift <= allowed))
    if not hits.size:
        return None
    k = int(hits[0])
    level = float(np.median(pairs[k]))
    band = max(rule.floor, rule.band_z * float(sigma[k]))
    inside = np.flatnonzero(np.abs(x[k : k + w] - level) <= band)
    start = k + int(inside[0]) if inside.size else k
    return Detection(start=start, decided_at=k + 2 * w, median=float(np.exp(level)), noise=float(sigma[k]))


#: A window needs this many seconds of iterations, not more: slow iterations (a full-size model on a
#: CPU, 1-10 s each) average the machine's jitter out within each one, so fewer of them tell a level
#: as well, and 2 x 10 of them would make the warm-up alone take minutes. Every corpus series
#: (iterations of 5-540 ms) keeps the full window, so the measured rates of docs/warmup.md hold.
WINDOW_SECONDS = 5.0
MIN_WINDOW = 4


def rule_for(iteration_s: float, rule: StabilityRule = StabilityRule()) -> StabilityRule:
    """`rule` with its window cut to about WINDOW_SECONDS of iterations of `iteration_s` each (at
    least MIN_WINDOW): ceil(5 s / 2 s) = 3 -> 4 iterations a window for 2-second iterations."""
    if not iteration_s or iteration_s <= 0 or not np.isfinite(iteration_s):
        return rule
    window = max(MIN_WINDOW, min(rule.window, int(np.ceil(WINDOW_SECONDS / iteration_s))))
    return rule if window == rule.window else replace(rule, window=window)


def detect_timed(times: np.ndarray, seconds_per_unit: float,
                 rule: StabilityRule = StabilityRule()) -> Detection | None:
    """`detect` with the window sized by the iterations' median time so far (`rule_for`)."""
    t = np.asarray(times, dtype=np.float64)
    if t.size == 0:
        return None
    return detect(t, rule_for(float(np.median(t)) * seconds_per_unit, rule))


def warmup_end(times: np.ndarray, rule: StabilityRule = StabilityRule()) -> int | None:
    """Index of the first stable iteration, or None if no stable phase is visible yet.

    Args:
        times: per-iteration durations (any unit), in run order.
        rule: window length and thresholds.
    Returns:
        i such that iterations i, i+1, ... are the stable phase; None when not (yet) stable.
    """
    found = detect(times, rule)
    return None if found is None else found.start


#: A traced iteration slower than this multiple of the timing window's mean is called out. The
#: profilers' own overhead on full-size CPU runs measured 0.95-1.56x here (PyTorch highest); an
#: interruption of the VM gave 2.8x; tiny test-size steps can exceed it from overhead alone.
TRACE_OUTLIER_FACTOR = 2.0


def trace_window_outliers(times_ns: np.ndarray, timing_window: tuple[int, int] | None,
                          trace_window: tuple[int, int] | None, timing_window_ns: int | None,
                          factor: float = TRACE_OUTLIER_FACTOR) -> list[str]:
    """Notes naming trace-window iterations much slower than the timing window's mean iteration.

    The per-op figures (FLOP utilization, the kernel tables) come from the few traced iterations,
    the throughput from the timing window: one interrupted traced iteration skews the former only.
    The reference is the window's synchronised wall time / its iterations: inside the window the
    iterations are not synchronised one by one (an asynchronous engine or device would show only
    the host's enqueue time), while each traced iteration is.
    Args:
        times_ns: every iteration's wall time, ns, in run order (traced ones synchronised).
        timing_window / trace_window: inclusive iteration indices, or None.
        timing_window_ns: the timing window's synchronised wall time, ns.
    Returns:
        one note per slow traced iteration (empty when none, or a window is missing).
    """
    if timing_window is None or trace_window is None or not timing_window_ns:
        return []
    t = np.asarray(times_ns, dtype=np.float64)
    mean = timing_window_ns / (timing_window[1] - timing_window[0] + 1)
    notes = []
    for i in range(trace_window[0], min(trace_window[1], t.size - 1) + 1):
        if t[i] > factor * mean:
            notes.append(f"traced iteration {i} took {t[i] / 1e9:.3f} s, {t[i] / mean:.1f}x the timing window's "
                         f"mean {mean / 1e9:.3f} s (the profiler's overhead or an interruption): the per-op figures (FLOP "
                         "utilization, kernel tables) may not represent the stable phase; re-run or trace more "
                         "iterations (--trace-iterations)")
    return notes
