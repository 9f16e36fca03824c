"""`tbd analyze FOLDER`: one trace per rank, each analysed on its own, side by side, then the cluster summary."""

from __future__ import annotations

import gzip
import json

import pytest
from testpaths import FIXTURES, real_trace

from tbd.cli.main import main
from tbd.cli.run_analysis import cluster_of_ranks, comm_times_from_trace, profiles_from_trace_folder
from tbd.core.profile_cluster import load_cluster

CUDA = FIXTURES / "kineto_cuda_synthetic.json"


def _rank_copy(folder, name, rank):
    trace = json.loads(CUDA.read_text())
    if rank is not None:
        trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    (folder / name).write_text(json.dumps(trace))


def test_ranks_side_by_side_by_distributed_info_then_file_name(tmp_path, capsys):
    folder = tmp_path / "traces"
    folder.mkdir()
    _rank_copy(folder, "a.pt.trace.json", 1)  # rank from distributedInfo, not the name's order
    _rank_copy(folder, "worker_rank0.json", None)  # no distributedInfo: the number after "rank"
    out = tmp_path / "ranks.json"
    assert main(["analyze", str(folder), "--sm-clock-mhz", "1410", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["schema"] == "tbd.ranks/1"
    assert [(r["rank"], r["trace"].rsplit("/", 1)[-1]) for r in data["ranks"]] == [(0, "worker_rank0.json"),
                                                                                      (1, "a.pt.trace.json")]
    # Both are the fixture: busy 25.6 µs of a 190 µs window (tests/fixtures/README.md).
    for r in data["ranks"]:
        assert abs(r["profile"]["metrics"]["gpu_busy_pct"]["value"] - 100 * 25.6 / 190) < 1e-9
    text = capsys.readouterr().out
    assert "2 traces, side by side" in text and "worker_rank0.json" in text


def test_a_folder_without_traces_says_so(tmp_path, capsys):
    assert main(["analyze", str(tmp_path)]) == 2
    assert "no trace files" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The cluster summary on real multi-rank traces (tests/fixtures/README.md, "multirank/"), against
# tests/fixtures/multirank/expected.json, which recompute.py writes with plain json and no tbd code.

MULTIRANK = FIXTURES / "multirank"
EXPECTED = json.loads((MULTIRANK / "expected.json").read_text())


HTA = real_trace("multirank/hta_sendrecv_2of128")
needs_hta = pytest.mark.skipif(not (HTA / "rank-0.json.gz").is_file(),
                               reason="hta_sendrecv_2of128 not fetched (see tests/fixtures/README.md, 'multirank/')")


def _present(folder):
    return pytest.param(folder, marks=needs_hta) if folder.startswith("hta_") else folder


@pytest.mark.parametrize("folder", [_present(f) for f in sorted(EXPECTED)])
def test_comm_times_match_the_independent_recompute(folder):
    ranks = profiles_from_trace_folder(real_trace(f"multirank/{folder}"))
    assert [r.trace.name for r in ranks] == sorted(EXPECTED[folder])
    for r in ranks:
        want, got = EXPECTED[folder][r.trace.name], r.comm
        assert r.rank == want["rank"] and got.steps == want["steps"]
        for key in ("window", "comm", "compute", "overlap"):
            assert getattr(got, f"{key}_s") == pytest.approx(want[f"{key}_ns"] / 1e9, rel=1e-9, abs=0), key
        if want["kind"] == "gpu":
            # communication and compute are the kernels split in two: their union is GPU busy time
            assert got.backend_kind == "nccl"
            assert r.profile.metrics.flop_util_pct.busy_s == pytest.approx(want["busy_ns"] / 1e9, rel=1e-9)
            assert want["comm_ns"] + want["compute_ns"] - want["overlap_ns"] == want["busy_ns"]
        else:
            assert got.backend_kind == "gloo"


@needs_hta
def test_hand_checked_nccl_share():
    # HTA's rank 0 (of 128): ten ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t kernels in the window
    # (steps 551-552), 30 669 + 62 783 + 11 727 + 67 827 + 21 124 + 12 119 + 36 158 + 63 644
    # + 47 652 + 42 496 = 396 199 µs; none overlaps another (the sum is their union). The window runs
    # from ProfilerStep#551's start to the end of step 552's last kernel: 1 230 289 µs.
    want = EXPECTED["hta_sendrecv_2of128"]["rank-0.json.gz"]
    assert sorted(float(d) for d in want["comm_durations_us"]) == sorted(
        [30669, 62783, 11727, 67827, 21124, 12119, 36158, 63644, 47652, 42496])
    comm, why = comm_times_from_trace(HTA / "rank-0.json.gz")
    assert why is None and comm.comm_s == pytest.approx(396_199e-6, rel=1e-12)
    row = cluster_of_ranks(profiles_from_trace_folder(HTA)).ranks[0]
    assert row.comm_share_pct == pytest.approx(100 * 396_199 / 1_230_289, rel=1e-12)  # 32.2 %
    assert row.comm_s == pytest.approx(396_199e-6 / 2, rel=1e-12)  # per step, 2 steps


def _expected_cluster(folder):
    rows = [(w["rank"], w["compute_ns"] / w["steps"], 100 * w["comm_ns"] / w["window_ns"]) for w in
            EXPECTED[folder].values()]
    straggler = max(rows, key=lambda r: r[1])
    others = sorted(c for rank, c, _ in rows if rank != straggler[0])
    median = others[len(others) // 2] if len(others) % 2 else (others[len(others) // 2 - 1] + others[len(others) // 2]) / 2
    return straggler[0], (straggler[1] - median) / 1e9, sum(s for *_, s in rows) / len(rows)


@needs_hta
def test_analyze_folder_writes_and_prints_the_cluster(tmp_path, capsys):
    out = tmp_path / "ranks.json"
    assert main(["analyze", str(HTA), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    cluster = load_cluster(data["cluster"])
    straggler, lag_s, share = _expected_cluster("hta_sendrecv_2of128")
    assert cluster.world_size == 128 and cluster.backend == "nccl" and cluster.ranks_measured == 2
    assert cluster.straggler_rank == straggler == 1
    assert cluster.straggler_lag_s == pytest.approx(lag_s, rel=1e-9)
    assert cluster.comm_share_mean_pct == pytest.approx(share, rel=1e-9)
    # 2 of 128 ranks traced: their sum is not the job's throughput
    assert cluster.global_throughput is None and "rank 0 has no throughput" in cluster.reasons["global_throughput"]
    text = capsys.readouterr().out
    assert "2 traces, side by side" in text and "Cluster" in text and "128 ranks (2 measured of 128)" in text


def test_gloo_cluster_with_throughput(tmp_path, capsys):
    out = tmp_path / "ranks.json"
    assert main(["analyze", str(MULTIRANK / "gloo_cpu_ddp"), "--samples-per-step", "32", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    cluster = load_cluster(data["cluster"])
    assert cluster.world_size == 2 and cluster.backend == "gloo" and cluster.nnodes == 1
    # the global throughput is the sum of each rank's: 32 samples x 2 steps over its own step span
    assert cluster.global_throughput == pytest.approx(
        sum(r["profile"]["metrics"]["throughput"]["value"] for r in data["ranks"]), rel=1e-12)
    straggler, lag_s, share = _expected_cluster("gloo_cpu_ddp")
    assert cluster.straggler_rank == straggler and cluster.straggler_lag_s == pytest.approx(lag_s, rel=1e-9)
    assert cluster.comm_share_mean_pct == pytest.approx(share, rel=1e-9)
    assert all(r.backend_kind == "gloo" for r in cluster.ranks)


def test_comm_times_from_a_plain_json_trace_too(tmp_path):
    plain = tmp_path / "rank-1.json"
    plain.write_bytes(gzip.decompress((MULTIRANK / "gloo_cpu_ddp" / "rank-1.json.gz").read_bytes()))
    assert comm_times_from_trace(plain) == comm_times_from_trace(MULTIRANK / "gloo_cpu_ddp" / "rank-1.json.gz")
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [')
    comm, why = comm_times_from_trace(broken)
    assert comm is None and why.startswith("trace unreadable:") and "broken.json" in why


def test_a_corrupt_rank_gives_one_line_naming_it(tmp_path, capsys):
    folder = tmp_path / "job"
    folder.mkdir()
    good = (MULTIRANK / "gloo_cpu_ddp" / "rank-0.json.gz").read_bytes()
    (folder / "rank-0.json.gz").write_bytes(good)
    (folder / "rank-1.json.gz").write_bytes(gzip.compress(gzip.decompress(good)[:5000]))  # truncated
    assert main(["analyze", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rank-1.json.gz" in err and "Traceback" not in err


def _nccl_rank(folder, rank, renamed_kernel_ts):
    """The synthetic CUDA fixture as rank `rank` of 2, the kernel starting at `renamed_kernel_ts` µs
    renamed to an NCCL kernel."""
    trace = json.loads(CUDA.read_text())
    trace["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel" and float(e["ts"]) == renamed_kernel_ts:
            e["name"] = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    (folder / f"rank-{rank}.json").write_text(json.dumps(trace))


def test_nccl_kernels_of_a_hand_written_pair(tmp_path):
    # Window [1000, 1190] µs, 2 steps; kernels (tests/fixtures/README.md): [1010.4, 1017.0) on
    # stream 7 with the copy [1011, 1013) on stream 20 inside it; [1109, 1116) with dgrad
    # [1112.5, 1115.5) inside; the gemm [1178, 1190).
    # Rank 0: the copy is the NCCL kernel: comm 2.0 µs, all of it beside compute 6.6 + 7 + 12 = 25.6.
    # Rank 1: the gemm is: comm 12 µs, none beside compute 6.6 + 7 = 13.6.
    _nccl_rank(tmp_path, 0, 1011.0)
    _nccl_rank(tmp_path, 1, 1178.0)
    cluster = cluster_of_ranks(profiles_from_trace_folder(tmp_path))
    r0, r1 = cluster.ranks
    assert r0.comm_s == pytest.approx(2.0e-6 / 2) and r0.compute_s == pytest.approx(25.6e-6 / 2)
    assert r0.overlap_pct == pytest.approx(100.0) and r0.exposed_comm_share_pct == pytest.approx(0.0, abs=1e-12)
    assert r0.comm_share_pct == pytest.approx(100 * 2.0 / 190)
    assert r1.comm_s == pytest.approx(12e-6 / 2) and r1.compute_s == pytest.approx(13.6e-6 / 2)
    assert r1.overlap_pct == 0.0 and r1.exposed_comm_share_pct == pytest.approx(100 * 12 / 190)
    assert r0.backend_kind == r1.backend_kind == "nccl"
    assert cluster.comm_share_mean_pct == pytest.approx((100 * 2 / 190 + 100 * 12 / 190) / 2)
    # rank 0 computes 12.8 µs a step, rank 1 6.8 µs: rank 0 is the straggler by 6.0 µs
    assert cluster.straggler_rank == 0 and cluster.straggler_lag_s == pytest.approx(6.0e-6)
    assert cluster.world_size == 2 and cluster.backend == "nccl" and cluster.nnodes is None  # no host_name
