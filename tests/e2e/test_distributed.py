"""`tbd profile --nproc-per-node 2` on the CPU: torchrun, Gloo, DistributedDataParallel, checked by value.

Two ranks of a test-size ResNet-50 and of Seq2Seq (with --scaling: a 1-process run first); the
failure paths (a rank that exits, one that hangs, a rendezvous that never forms) in a subprocess,
as a user meets them: one line, the rank named, the records kept.
"""

import gzip
import json
import os
import subprocess
import sys

import pytest

from tbd.cli.distributed_run import free_port
from tbd.cli.main import main

FAST = ["--size", "test", "--device", "cpu", "--iterations", "4", "--trace-iterations", "2", "--repeat", "2",
        "--window-seconds", "0", "--quiet"]


def _json(path):
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist") / "resnet"
    assert main(["profile", "resnet50", "--batch", "4", *FAST, "--nproc-per-node", "2", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def seq2seq(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist") / "seq2seq"
    assert main(["profile", "seq2seq", "--batch", "8", *FAST, "--nproc-per-node", "2", "--scaling",
                 "--out", str(out)]) == 0
    return out


def _ranks(run_dir):
    return [_json(run_dir / "ranks" / f"rank-{r}" / "profile.json") for r in (0, 1)]


@pytest.mark.parametrize("which", ["resnet", "seq2seq"])
def test_cluster_throughput_is_the_sum_of_the_ranks(which, request):
    run_dir = request.getfixturevalue(which)
    profile, ranks = _json(run_dir / "profile.json"), _ranks(run_dir)
    own = [r["metrics"]["throughput"]["value"] for r in ranks]
    assert all(v and v > 0 for v in own)
    assert profile["metrics"]["throughput"]["value"] == pytest.approx(sum(own), rel=1e-12)
    cluster = profile["cluster"]
    assert cluster["world_size"] == 2 and cluster["backend"] == "gloo"
    assert cluster["global_throughput"] == pytest.approx(sum(own), rel=1e-12)
    assert [row["throughput"] for row in cluster["ranks"]] == pytest.approx(own, rel=1e-12)
    # Each timing window r of the cluster is the sum of the ranks' window r.
    repeats = [r["metrics"]["throughput"]["repeats"] for r in ranks]
    assert profile["metrics"]["throughput"]["repeats"] == pytest.approx([a + b for a, b in zip(*repeats)])
    assert profile["spec"]["world_size"] == 2 and profile["spec"]["nproc_per_node"] == 2


@pytest.mark.parametrize("which", ["resnet", "seq2seq"])
def test_every_rank_ran_the_same_iterations(which, request):
    """Warm-up ends when every rank is stable, and the windows cover the same iterations on each."""
    its = [r["iterations"] for r in _ranks(request.getfixturevalue(which))]
    assert its[0]["warmup"] == its[1]["warmup"]
    assert its[0]["timing_window"] == its[1]["timing_window"]
    assert its[0]["trace_window"] == its[1]["trace_window"]
    assert len(its[0]["times_s"]) == len(its[1]["times_s"])


def _gloo_spans_s(trace_path):
    """Independent recount: summed length of the union of `gloo:*` spans (Gloo's worker threads)."""
    with gzip.open(trace_path, "rt") as f:
        events = json.load(f)["traceEvents"]
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:"))
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b > end:
            total += b - max(a, end)
            end = b
    return total / 1e6, len(spans)


def test_communication_is_the_gloo_collectives_of_each_rank(resnet):
    profile = _json(resnet / "profile.json")
    for row in profile["cluster"]["ranks"]:
        trace = resnet / "ranks" / f"rank-{row['rank']}" / "trace.pt.trace.json.gz"
        with gzip.open(trace, "rt") as f:
            dist = json.load(f)["distributedInfo"]
        assert (dist["backend"], dist["rank"], dist["world_size"]) == ("gloo", row["rank"], 2)
        spans_s, count = _gloo_spans_s(trace)
        assert count >= 2  # DDP's all-reduce in each traced step, at least
        # The cluster's figure is clipped to the trace window; the recount is not: never more.
        assert 0 < row["comm_s"] * row["steps"] <= spans_s * (1 + 1e-6)  # µs decimals vs integer ns
        assert row["backend_kind"] == "gloo"
        assert 0 < row["comm_share_pct"] < 100


def test_ranks_are_not_another_load_on_their_own_machine(resnet):
    """The census counts torchrun's tree (its agent and both ranks) as the workload of each rank."""
    for window in range(2):
        trees = [_json(resnet / "ranks" / f"rank-{r}" / "raw" / "quality.json")["repeats"][window]["load"]
                 for r in (0, 1)]
        assert trees[0]["workload_pids"] == trees[1]["workload_pids"]
        assert len(trees[0]["workload_pids"]) >= 3
        assert not {o["pid"] for o in trees[0]["others_top"]} & set(trees[0]["workload_pids"])


def test_scaling_efficiency_from_the_runs_it_made(seq2seq):
    profile = _json(seq2seq / "profile.json")
    one = _json(seq2seq / "scaling" / "p1" / "profile.json")["metrics"]["throughput"]["value"]
    two = profile["metrics"]["throughput"]["value"]
    rows = {row["processes"]: row for row in profile["cluster"]["scaling"]}
    assert set(rows) == {1, 2}
    assert rows[1]["throughput"] == pytest.approx(one) and rows[2]["throughput"] == pytest.approx(two)
    assert rows[1]["efficiency_pct"] == pytest.approx(100.0)
    assert rows[2]["efficiency_pct"] == pytest.approx(two / (2 * one) * 100)


def _tbd(args, env=None, timeout=240):
    return subprocess.run([sys.executable, "-m", "tbd.cli", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_a_rank_that_exits_is_named_with_its_code_and_log(tmp_path):
    out = tmp_path / "run"
    done = _tbd(["profile", "resnet50", "--batch", "2", *FAST, "--nproc-per-node", "2", "--out", str(out)],
                env={"TBD_TEST_RANK_FAULT": "1:4:exit=7"})
    assert done.returncode == 4, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr
    assert "rank 1 exited with code 7 during warmup" in line, line
    assert str(out / "ranks" / "rank-1" / "workload.log") in line
    assert (out / "ranks" / "rank-0" / "raw" / "status.json").is_file()  # the other rank's records are kept


def test_a_rank_that_hangs_is_named_after_the_timeout(tmp_path):
    out = tmp_path / "run"
    done = _tbd(["profile", "resnet50", "--batch", "2", *FAST, "--nproc-per-node", "2", "--rank-timeout", "5",
                 "--out", str(out)], env={"TBD_TEST_RANK_FAULT": "1:4:hang"})
    assert done.returncode == 4, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "rank 1 stopped responding during warmup" in line, line
    assert "waited 5 s (--rank-timeout)" in line


def test_a_rendezvous_that_does_not_form_times_out_in_one_line(tmp_path):
    done = _tbd(["profile", "resnet50", "--batch", "2", *FAST, "--nnodes", "2", "--node-rank", "0",
                 "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-timeout", "3", "--out", str(tmp_path / "r")])
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr
    assert "did not form within 3 s: 1 of 2 machines joined" in lines[-1], lines[-1]
    # Node 1 with no node 0 to reach: said as such, with torchrun's log.
    done = _tbd(["profile", "resnet50", "--batch", "2", *FAST, "--nnodes", "2", "--node-rank", "1",
                 "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-timeout", "3", "--out", str(tmp_path / "n1")])
    assert done.returncode == 4 and "Traceback" not in done.stderr, done.stderr
    assert "did not form within 3 s: node 0 could not be reached there" in done.stderr.strip().splitlines()[-1]


def test_a_model_without_fsdp_is_a_usage_error_from_the_ranks(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["profile", "transformer", "--batch", "2", *FAST, "--nproc-per-node", "2", "--data-parallel", "fsdp",
                 "--out", str(out)]) == 2
    assert "transformer does not run under --data-parallel fsdp; it runs under ddp" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("args, says", [
    (["--framework", "mxnet", "--nproc-per-node", "2"], "torch.distributed"),
    (["--nnodes", "2"], "--rdzv-endpoint"),
    (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"], "--node-rank 2"),
    (["--nnodes", "2", "--rdzv-endpoint", "nohostport"], "HOST:PORT"),
    (["--scaling"], "--scaling needs --nproc-per-node 2"),
    (["--nproc-per-node", "2", "--ncu", "3"], "--ncu measures the kernels of one process"),
    (["--nproc-per-node", "2", "--rdzv-endpoint", "h:99999"], "HOST:PORT"),
])
def test_multi_process_options_are_checked_before_any_work(args, says, tmp_path, capsys):
    model = ["resnet50"]
    assert main(["profile", *model, "--size", "test", "--device", "cpu", *args, "--out", str(tmp_path / "r")]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_the_cluster_in_report_csv_and_again_from_the_rank_folders(resnet, capsys):
    """`tbd report --csv` carries the cluster's figures; `tbd analyze RUN` reassembles the same from ranks/."""
    profile = _json(resnet / "profile.json")
    assert main(["report", str(resnet), "--csv"]) == 0
    rows = {line.split(",")[0]: line.split(",")[1] for line in capsys.readouterr().out.splitlines()[1:]}
    cluster = profile["cluster"]
    assert float(rows["cluster.global_throughput"]) == cluster["global_throughput"]
    assert float(rows["cluster.comm_share_mean_pct"]) == cluster["comm_share_mean_pct"]
    assert float(rows["cluster.rank1.comm_s"]) == cluster["ranks"][1]["comm_s"]
    out = resnet.parent / "again.json"
    assert main(["analyze", str(resnet), "--json", str(out)]) == 0
    again = _json(out)
    assert again["cluster"] == cluster
    assert again["metrics"]["throughput"] == profile["metrics"]["throughput"]


@pytest.fixture(scope="module")
def resnet_fsdp(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist") / "resnet-fsdp"
    assert main(["profile", "resnet50", "--batch", "4", *FAST, "--nproc-per-node", "2", "--data-parallel", "fsdp",
                 "--out", str(out)]) == 0
    return out


def test_fsdp_shards_the_weights_between_the_ranks(resnet, resnet_fsdp):
    """Each FSDP rank holds about half the weights (its shards), and gradients likewise, where a
    DDP rank holds them all; the cluster's throughput is still the ranks' sum."""
    whole = _ranks(resnet)[0]["metrics"]["memory_bytes"]
    shards = [r["metrics"]["memory_bytes"] for r in _ranks(resnet_fsdp)]
    for category in ("weights", "gradients"):
        # fully_shard splits each parameter in two along dim 0, padding an odd row count: the halves
        # add up to the whole, plus at most a row per parameter.
        assert sum(s[category] for s in shards) == pytest.approx(whole[category], rel=0.02)
        assert all(s[category] < 0.55 * whole[category] for s in shards)
    profile = _json(resnet_fsdp / "profile.json")
    assert profile["spec"]["data_parallel"] == "fsdp"
    own = [r["metrics"]["throughput"]["value"] for r in _ranks(resnet_fsdp)]
    assert profile["metrics"]["throughput"]["value"] == pytest.approx(sum(own), rel=1e-12)
    assert all(row["comm_s"] > 0 for row in profile["cluster"]["ranks"])  # all-gathers and reduce-scatters
