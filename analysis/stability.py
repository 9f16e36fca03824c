"""Stable-phase detection: where warm-up ends (DESIGN.md, "Stable phase").

Per-iteration times are watched in a sliding window. Warm-up ends at the first iteration i such
that the window times[i : i+w] has a coefficient of variation below `cv_max` and its median agrees
with the median of the next window times[i+w : i+2w] within `median_tol`. Two consecutive
windows are required so a single quiet stretch inside a still-changing series does not pass
(cuDNN autotuning and allocator growth make early iterations slow in bursts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StabilityRule:
    """Thresholds of the detector; the defaults suit iteration times of ms to s."""

    window: int = 5  # iterations per window
    cv_max: float = 0.10  # std / mean within a window
    median_tol: float = 0.05  # |median(next) - median(window)| / median(window)

    @property
    def needed(self) -> int:
        """Iterations that must exist beyond the candidate start to judge it."""
        return 2 * self.window


def warmup_end(times: np.ndarray, rule: StabilityRule = StabilityRule()) -> int | None:
    """Index of the first stable iteration, or None if no stable phase is visible yet.

    Args:
        times: per-iteration durations (any unit), in run order.
        rule: window length and thresholds.
    Returns:
        i such that iterations i, i+1, ... are the stable phase; None when not (yet) stable.
    """
    t = np.asarray(times, dtype=np.float64)
    w = rule.window
    if t.size < 2 * w:
        return None
    # windows[k] = t[k : k + w] for every k, via a strided view (no copies).
    windows = np.lib.stride_tricks.sliding_window_view(t, w)
    mean = windows.mean(axis=1)
    cv = np.divide(windows.std(axis=1), mean, out=np.full_like(mean, np.inf), where=mean > 0)
    median = np.median(windows, axis=1)
    n = windows.shape[0] - w  # candidates k that have a following window at k + w
    here, after = median[:n], median[w : w + n]
    agree = np.abs(after - here) <= rule.median_tol * here
    ok = (cv[:n] < rule.cv_max) & (cv[w : w + n] < rule.cv_max) & agree
    hits = np.flatnonzero(ok)
    return int(hits[0]) if hits.size else None


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
