"""The measurement-quality record (analysis/quality.py) from hand-made raw records: every figure is
recomputed here from the records' own numbers."""

import pytest

from tbd.analysis import quality


def _repeat(first, last, wall_s, *, others_s=0.0, own_s=None, busy=(1.0, 1.0), total=(1.0, 1.0), top=(), samples=None):
    return {"first": first, "last": last, "wall_ns": int(wall_s * 1e9), "samples": samples,
            "cpu": {"busy_s": list(busy), "total_s": list(total), "wall_ns": int(wall_s * 1e9), "cores": len(busy)},
            "load": {"wall_s": wall_s, "workload_cpu_s": wall_s if own_s is None else own_s, "tbd_parent_cpu_s": 0.01,
                     "others_cpu_s": others_s, "others_top": list(top)}}


def _records(*repeats, before=50e9, start=2600.0, end=2600.0):
    return {"schema": "tbd.quality_records/1", "repeats": list(repeats), "gemm_before": {"flops_per_s": before},
            "clock_start": {"mhz": [start, start]}, "clock_end": {"mhz": [end, end]}}


def test_a_quiet_run_is_reliable_and_its_median_and_spread_are_the_repeats():
    # 8 samples per step: 10 iterations in 2.0, 2.05 and 1.95 s -> 40, 39.02..., 41.03... samples/s
    recs = _records(_repeat(5, 14, 2.0), _repeat(15, 24, 2.05), _repeat(25, 34, 1.95))
    q = quality.measurement_quality(recs, {"flops_per_s": 51e9}, 8, 2)
    rates = [80 / 2.0, 80 / 2.05, 80 / 1.95]
    assert q.throughput_median == pytest.approx(40.0)
    assert q.throughput_spread_pct == pytest.approx((max(rates) - min(rates)) / 40.0 * 100)
    assert [r["throughput"] for r in q.repeats] == pytest.approx(rates)
    # 95 % interval of the mean: t(2) = 4.303 x sd / sqrt(3), in % of the median (40)
    sd = (sum((r - sum(rates) / 3) ** 2 for r in rates) / 2) ** 0.5
    assert q.throughput_interval_pct == pytest.approx(4.303 * sd / 3 ** 0.5 / 40.0 * 100)
    assert q.gemm_ceiling_flops == {"before": 50e9, "after": 51e9}
    assert q.gemm_spread_pct == pytest.approx(1e9 / 51e9 * 100)
    assert q.clock_mhz == {"start": 2600.0, "end": 2600.0}
    assert q.reliable and q.warnings == [] and q.wall_s == pytest.approx(6.0)
    assert q.cpu_util_median_pct == 100.0 and q.cpu_util_range_pct == [100.0, 100.0]  # busy 2 of 2 core-seconds


def test_another_load_is_measured_in_cores_and_named():
    top = [{"pid": 42, "name": "python", "command": "python hog.py", "cpu_s": 1.8}, {"pid": 7, "name": "make", "cpu_s": 0.2}]
    recs = _records(_repeat(0, 9, 2.0, others_s=2.0, own_s=1.0, top=top))
    q = quality.measurement_quality(recs, {"flops_per_s": 50e9}, 8, 2)
    assert q.other_load_cores == pytest.approx(1.0) and q.workload_cores == pytest.approx(0.5)
    assert q.other_processes[0] == {"name": "python", "pid": 42, "command": "python hog.py", "cores": pytest.approx(0.9)}
    assert not q.reliable
    assert q.warnings[0].startswith("another load used 1.00 cores of 2 during the timing windows (0.90 python hog.py "
                                    "(pid 42); 0.10 make (pid 7))")
    assert q.reasons["throughput_spread_pct"].startswith("one timing window") and q.throughput_interval_pct is None


def test_a_drifting_ceiling_clock_and_throughput_each_warn():
    recs = _records(_repeat(0, 9, 1.0), _repeat(10, 19, 2.0), before=39.1e9, start=2600.0, end=2000.0)
    q = quality.measurement_quality(recs, {"flops_per_s": 74.4e9}, 1, 2)
    assert q.gemm_spread_pct == pytest.approx((74.4 - 39.1) / 74.4 * 100)
    text = " | ".join(q.warnings)
    assert "GEMM ceiling moved 47 % between before the windows (39.1 GFLOP/s) and after (74.4 GFLOP/s)" in text
    assert "throughput of the 2 timing windows varied by 67 %" in text  # 10 and 5 samples/s around 7.5
    assert "clock moved from 2600 MHz to 2000 MHz" in text


def test_workers_counting_their_own_samples_and_a_missing_ceiling():
    recs = _records(_repeat(0, 0, 2.0, samples=300.0))
    recs["gemm_before"] = None
    q = quality.measurement_quality(recs, {"flops_per_s": 50e9}, 20, 2)
    assert q.throughput_median == pytest.approx(150.0)  # the workers' count, not 20 x 1 iteration
    assert q.gemm_spread_pct is None and "measured only once" in q.reasons["gemm_spread_pct"]


@pytest.mark.parametrize("records", [None, {}, {"repeats": []}])
def test_no_records_no_quality(records):
    assert quality.measurement_quality(records, None, 8, 2) is None


def test_threads_starved_beside_another_load_are_called_out():
    # 2 threads got 0.9 cores beside a load of 1.0: the warning names both fixes
    recs = _records(_repeat(0, 9, 2.0, others_s=2.0, own_s=1.8))
    q = quality.measurement_quality(recs, {"flops_per_s": 50e9}, 8, 2, threads=2)
    assert any(w.startswith("the workload's 2 threads got 0.90 cores beside the other load") and
               w.endswith("--threads 1 or OMP_WAIT_POLICY=PASSIVE avoids that") for w in q.warnings)
    # one thread, or two threads that got their cores: no such warning
    for threads, own_s in ((1, 1.8), (2, 3.2)):
        q = quality.measurement_quality(_records(_repeat(0, 9, 2.0, others_s=2.0, own_s=own_s)), None, 8, 2,
                                        threads=threads)
        assert not any("threads got" in w for w in q.warnings)
