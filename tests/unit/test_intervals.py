import numpy as np

from tbd.analysis.intervals import clip, covered_in_window_ns, merge, union_length_ns


def a(*xs):
    return np.array(xs, dtype=np.int64)


def test_union_over_overlapping_streams():
    # stream 0: [0,10) [20,30); stream 1: [5,25) overlapping both; stream 2: [40,45)
    starts, ends = a(0, 20, 5, 40), a(10, 30, 25, 45)
    s, e = merge(starts, ends)
    assert s.tolist() == [0, 40] and e.tolist() == [30, 45]
    assert union_length_ns(starts, ends) == (30 - 0) + (45 - 40)


def test_touching_intervals_join_and_nested_ones_vanish():
    s, e = merge(a(0, 10, 12, 13), a(10, 20, 14, 15))
    assert s.tolist() == [0] and e.tolist() == [20]


def test_empty_and_zero_length():
    assert union_length_ns(a(), a()) == 0
    assert union_length_ns(a(5, 7), a(5, 7)) == 0


def test_covered_in_window_clips_both_ends():
    # [0,10) and [90,120) in window [5,100): 5 + 10
    assert covered_in_window_ns(a(0, 90), a(10, 120), 5, 100) == (10 - 5) + (100 - 90)
    s, e = clip(a(200), a(300), 5, 100)
    assert (e - s).tolist() == [0]


def test_unsorted_input():
    assert union_length_ns(a(50, 0, 10), a(60, 5, 20)) == 10 + 5 + 10
