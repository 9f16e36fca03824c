"""analysis.cluster on hand-built intervals and profiles: every figure written as arithmetic; the
Cluster record's JSON round trip and validation; its terminal, HTML and compare renderings."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from tbd.analysis.cluster import CommTimes, RankInput, ScalingInput, cluster_summary, comm_times
from tbd.analysis.compare_runs import NO_CLUSTER, Side, compare_profiles
from tbd.analysis.intervals import difference
from tbd.core.errors import ResultFormatError
from tbd.core.profile_result import FlopUtil, Iterations, Memory, Metrics, Profile, Throughput, Value
from tbd.reports.cluster_text import render_cluster
from tbd.reports.comparison_text import render_comparison
from tbd.reports.html.run_page import profile_html
from tbd.reports.terminal import render_profile


def a(*xs):
    return np.array(xs, dtype=np.int64)


def _times(**kw) -> CommTimes:
    # window [0, 200) ns, 2 steps; comm [0,50) [100,130); compute [40,120) [150,160)
    args = dict(window_start_ns=0, window_end_ns=200, steps=2, backend_kind="nccl")
    args.update(kw)
    return comm_times(a(0, 100), a(50, 130), a(40, 150), a(120, 160), **args)


def test_comm_compute_overlap_as_unions_in_the_window():
    t = _times()
    assert t.window_s == 200e-9 and t.steps == 2 and t.backend_kind == "nccl"
    assert t.comm_s == pytest.approx((50 + 30) * 1e-9, rel=1e-12)
    assert t.compute_s == pytest.approx((80 + 10) * 1e-9, rel=1e-12)
    # both: [40,50) and [100,120)
    assert t.overlap_s == pytest.approx((10 + 20) * 1e-9, rel=1e-12)
    assert t.exposed_comm_s == pytest.approx((80 - 30) * 1e-9, rel=1e-12)


def test_intervals_are_clipped_to_the_window_and_merged_first():
    # comm [0,50) and [30,60) overlap (one union [0,60)); the window [20, 55) keeps [20,55)
    t = comm_times(a(0, 30), a(50, 60), a(), a(), window_start_ns=20, window_end_ns=55, steps=1, backend_kind="gloo")
    assert t.comm_s == pytest.approx((55 - 20) * 1e-9) and t.compute_s == 0 and t.overlap_s == 0


def test_wait_time_leaves_compute():
    # compute [0,100) less the host time inside a collective call [30,70): 30 + 30
    t = comm_times(a(40), a(60), a(0), a(100), window_start_ns=0, window_end_ns=100, steps=1, backend_kind="gloo",
                   wait_start_ns=a(30), wait_end_ns=a(70))
    assert t.compute_s == pytest.approx((30 + 30) * 1e-9) and t.overlap_s == 0


def test_a_window_without_length_is_an_error():
    with pytest.raises(ValueError):
        _times(window_end_ns=0)


def test_difference():
    s, e = difference(a(0, 50), a(40, 60), a(10, 45, 100), a(20, 55, 120))
    # A = [0,40) [50,60); B = [10,20) [45,55) [100,120): A - B = [0,10) [20,40) [55,60)
    assert s.tolist() == [0, 20, 55] and e.tolist() == [10, 40, 60]
    s, e = difference(a(0), a(10), a(), a())
    assert s.tolist() == [0] and e.tolist() == [10]
    s, e = difference(a(0), a(10), a(0), a(10))
    assert s.size == 0


def _profile(throughput: float | None = 100.0, unit: str = "samples/s", times=(0.1, 0.3, 0.2)) -> Profile:
    memory = Memory(weights=None, gradients=None, feature_maps=None, workspace=None, dynamic=None,
                    allocator_peak=4096, at_peak={}, reasons={})
    flop = FlopUtil(20.0, None, "analytic", 1e12, "gpu_table", 1e12, None, None, None, None, None)
    metrics = Metrics(throughput=Throughput(throughput, unit, reason=None if throughput else "no samples per step"),
                      gpu_busy_pct=Value(50.0), gpu_busy_nvml_pct=Value.null("no NVML"), flop_util_pct=flop,
                      cpu_util_pct=Value.null("a trace"), memory_bytes=memory)
    its = Iterations(warmup=0, warmup_s=0.0, warmup_detected=False, stable=None, timing_window=[0, len(times) - 1],
                     trace_window=[0, len(times) - 1], times_s=list(times))
    return Profile(status="complete", spec={"model": "m", "framework": "pytorch", "batch": 8, "device": "cuda"},
                   environment={"gpu": {"name": "GPU"}}, iterations=its, metrics=metrics, kernels=[],
                   low_util_kernels=[], notes=[])


def _rank(rank: int, compute_ns: int, comm_ns: int = 100, throughput: float | None = 100.0) -> RankInput:
    # window [0, 1000) ns, 2 steps; comm [0, comm_ns), compute [comm_ns - 20, comm_ns - 20 + compute_ns)
    t = comm_times(a(0), a(comm_ns), a(comm_ns - 20), a(comm_ns - 20 + compute_ns), window_start_ns=0,
                   window_end_ns=1000, steps=2, backend_kind="nccl")
    return RankInput(rank, "host", f"rank-{rank}", _profile(throughput), t, None)


def _cluster(**kw):
    ranks = kw.pop("ranks", [_rank(0, 400), _rank(1, 600, comm_ns=200), _rank(2, 500)])
    args = dict(world_size=3, nnodes=1, backend="nccl")
    args.update(kw)
    return cluster_summary(ranks, **args)


def test_per_rank_figures_per_step_and_shares():
    c = _cluster()
    r0 = c.ranks[0]
    assert r0.comm_s == pytest.approx(100e-9 / 2) and r0.compute_s == pytest.approx(400e-9 / 2)
    assert r0.overlap_s == pytest.approx(20e-9 / 2)
    assert r0.comm_share_pct == pytest.approx(100 * 100 / 1000)
    assert r0.overlap_pct == pytest.approx(100 * 20 / 100)
    assert r0.exposed_comm_share_pct == pytest.approx(100 * (100 - 20) / 1000)
    assert r0.iteration_s == pytest.approx(0.2)  # median of 0.1, 0.3, 0.2
    assert r0.busy_pct == 50.0 and r0.flop_util_pct == 20.0 and r0.allocator_peak_bytes == 4096
    assert r0.reasons["cpu_util_pct"] == "a trace"


def test_cluster_figures():
    c = _cluster()
    assert c.world_size == 3 and c.nnodes == 1 and c.backend == "nccl" and c.ranks_measured == 3
    assert c.global_throughput == pytest.approx(300.0) and c.throughput_unit == "samples/s"
    assert c.comm_share_mean_pct == pytest.approx((10 + 20 + 10) / 3)
    assert c.comm_share_max_pct == pytest.approx(20.0)
    assert c.overlap_mean_pct == pytest.approx((20 + 10 + 20) / 3)  # 20/100, 20/200, 20/100
    # straggler: rank 1 computes 600 ns in 2 steps; the others' median is median(400, 500) / 2
    assert c.straggler_rank == 1 and c.straggler_source == "rank-1"
    assert c.straggler_lag_s == pytest.approx((600 - (400 + 500) / 2) * 1e-9 / 2)
    assert c.scaling == [] and c.scaling_reason == "not measured"


def test_nulls_carry_reasons():
    one = _cluster(ranks=[_rank(0, 400)], world_size=1)
    assert one.straggler_rank is None and "one rank" in one.reasons["straggler_lag_s"]
    missing = _cluster(ranks=[_rank(0, 400), _rank(1, 500, throughput=None)])
    assert missing.global_throughput is None
    assert missing.reasons["global_throughput"].startswith("rank 1 has no throughput: no samples per step")
    partial = _cluster(ranks=[_rank(0, 400), _rank(1, 500)], world_size=128)
    assert partial.global_throughput is None and "only 2 of the job's 128" in partial.reasons["global_throughput"]
    silent = comm_times(a(), a(), a(0), a(10), window_start_ns=0, window_end_ns=100, steps=0, backend_kind="none")
    r = cluster_summary([RankInput(None, None, "t.json", _profile(), silent, None)], world_size=None, nnodes=None,
                        backend=None).ranks[0]
    assert r.overlap_pct is None and r.reasons["overlap_pct"] == "no communication in the trace window"
    assert r.comm_s is None and "no ProfilerStep" in r.reasons["comm_s"] and r.comm_share_pct == 0.0
    unread = cluster_summary([RankInput(0, None, "x", _profile(), None, "trace unreadable: boom")], world_size=1,
                             nnodes=None, backend=None)
    assert unread.ranks[0].reasons["comm_s"] == "trace unreadable: boom"
    assert unread.comm_share_mean_pct is None and unread.reasons["comm_share_mean_pct"]


def test_scaling_efficiency():
    points = [ScalingInput(4, 360.0, "samples/s", "n4"), ScalingInput(1, 100.0, "samples/s", "n1"),
              ScalingInput(2, 190.0, "samples/s", "n2"), ScalingInput(8, None, "", "n8", "the 8-process run failed")]
    c = _cluster(scaling=points)
    assert [r.processes for r in c.scaling] == [1, 2, 4, 8]
    assert [r.efficiency_pct for r in c.scaling[:3]] == [pytest.approx(100.0), pytest.approx(100 * 190 / (2 * 100)),
                                                         pytest.approx(100 * 360 / (4 * 100))]
    assert c.scaling[3].efficiency_pct is None and c.scaling[3].reason == "the 8-process run failed"
    no_base = _cluster(scaling=points[:1])
    assert no_base.scaling[0].efficiency_pct is None and "one-process" in no_base.scaling_reason


def test_profile_json_round_trip_and_validation():
    c = _cluster(scaling=[ScalingInput(1, 100.0, "samples/s", "n1"), ScalingInput(2, 190.0, "samples/s", "n2")])
    p = replace(_profile(), cluster=c)
    data = json.loads(json.dumps(p.to_dict()))
    assert data["cluster"]["straggler_rank"] == 1
    assert Profile.from_dict(data) == p
    assert Profile.from_dict({k: v for k, v in data.items() if k != "cluster"}).cluster is None
    data["cluster"]["ranks"][1]["comm_share_pct"] = 130.0
    with pytest.raises(ResultFormatError, match=r"cluster\.ranks\[1\]\.comm_share_pct"):
        Profile.from_dict(data)
    data["cluster"]["ranks"][1]["comm_share_pct"] = 20.0
    data["cluster"]["scaling"][0]["processes"] = 0
    with pytest.raises(ResultFormatError, match=r"cluster\.scaling\[0\]\.processes"):
        Profile.from_dict(data)


def test_renderings():
    c = _cluster(scaling=[ScalingInput(1, 100.0, "samples/s", "n1"), ScalingInput(2, 190.0, "samples/s", "n2")])
    text = render_cluster(c, width=120)
    assert "world size         3 ranks (3 measured of 3, 1 node)" in text
    assert "global throughput  300 samples/s" in text
    assert "rank 1: 75.0 ns more compute per step" in text  # (600 - (400 + 500) / 2) / 2 ns
    assert "Scaling" in text and "95.0" in text  # 190 / (2 x 100)
    assert " 1 *" in text
    p = replace(_profile(), cluster=c)
    assert render_profile(p, width=120).endswith(text)
    assert render_profile(_profile(), width=120) + "\n" + text == render_profile(p, width=120)
    html = profile_html(p)
    assert 'id="cluster"' in html and "Scaling efficiency" in html
    assert 'id="cluster"' not in profile_html(_profile())


def test_compare_rows_only_with_a_cluster():
    plain, clustered = _profile(), replace(_profile(), cluster=_cluster(
        scaling=[ScalingInput(1, 100.0, "samples/s", "n1"), ScalingInput(2, 190.0, "samples/s", "n2")]))
    keys = [m.key for m in compare_profiles([Side("a", plain), Side("b", plain)]).metrics]
    assert not [k for k in keys if k.startswith("cluster.")]
    comparison = compare_profiles([Side("a", plain), Side("b", clustered)])
    rows = {m.key: m for m in comparison.metrics if m.key.startswith("cluster.")}
    assert list(rows) == ["cluster.world_size", "cluster.global_throughput", "cluster.comm_share_pct",
                          "cluster.scaling_efficiency_pct"]
    assert rows["cluster.world_size"].values == [None, 3.0] and rows["cluster.world_size"].reasons[0] == NO_CLUSTER
    assert rows["cluster.scaling_efficiency_pct"].values[1] == pytest.approx(95.0)
    both = compare_profiles([Side("a", clustered), Side("b", clustered)])
    assert next(m for m in both.metrics if m.key == "cluster.global_throughput").ratios == [1.0, 1.0]
    text = render_comparison(comparison, width=120, color=False)
    assert "World size" in text and "3 ranks" in text
