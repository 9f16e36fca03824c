"""Two machines simulated on this host (tools/netns_link.py): network namespaces joined by a veth pair.

`tbd profile --nnodes 2` runs one rank in each namespace, over the veth link, unshaped and then
narrowed to 20 Mbit/s: the communication share must rise, the cluster's throughput and its scaling
efficiency against one process must fall, and node 0 must hold both ranks' records (rank 1's came
over the process group; the namespaces share the disk, but each node writes its own --out).
Skips, saying why, where namespaces cannot be made (not root, no iproute2).
"""

import json
import subprocess
import sys

import pytest
from testpaths import load_tool

from tbd.analysis.cluster import ScalingInput, scaling_rows

netns_link = load_tool("netns_link")
REFUSED = netns_link.refusal()
pytestmark = pytest.mark.skipif(REFUSED is not None, reason=f"two simulated machines need namespaces: {REFUSED}")

RUN = ["resnet50", "--size", "test", "--batch", "4", "--device", "cpu", "--threads", "1", "--iterations", "6",
       "--trace-iterations", "2", "--repeat", "1", "--window-seconds", "0", "--quiet"]
NARROW_MBIT = 20.0


def _two_nodes(pair, out):
    procs = []
    for node in (0, 1):
        argv = [sys.executable, "-m", "tbd.cli", "profile", *RUN, "--nnodes", "2", "--node-rank", str(node),
                "--rdzv-endpoint", f"{pair.addresses[0]}:29631", "--rdzv-timeout", "60", "--rank-timeout", "60",
                "--out", str(out / f"node{node}")]
        procs.append(subprocess.Popen(pair.command(node, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    return json.loads((out / "node0" / "profile.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("netns")
    one = base / "one"
    subprocess.run([sys.executable, "-m", "tbd.cli", "profile", *RUN, "--out", str(one)], check=True,
                   capture_output=True)
    with netns_link.link_pair() as pair:
        wide = _two_nodes(pair, base / "wide")
        shaping = netns_link.shape(pair, NARROW_MBIT, 2.0)
        narrow = _two_nodes(pair, base / "narrow")
    single = json.loads((one / "profile.json").read_text())["metrics"]["throughput"]["value"]
    return {"base": base, "single": single, "wide": wide, "narrow": narrow, "shaping": shaping}


def test_communication_share_rises_as_the_link_narrows(runs):
    wide, narrow = runs["wide"]["cluster"], runs["narrow"]["cluster"]
    assert wide["nnodes"] == 2 and wide["world_size"] == 2
    assert narrow["comm_share_mean_pct"] > wide["comm_share_mean_pct"] + 10, (runs["shaping"], wide, narrow)
    for row in narrow["ranks"]:
        assert row["backend_kind"] == "gloo"


def test_throughput_and_scaling_efficiency_fall_as_the_link_narrows(runs):
    wide = runs["wide"]["metrics"]["throughput"]["value"]
    narrow = runs["narrow"]["metrics"]["throughput"]["value"]
    assert narrow < wide
    eff = {}
    for name, value in (("wide", wide), ("narrow", narrow)):
        rows, _ = scaling_rows([ScalingInput(1, runs["single"], "images/s", None),
                                ScalingInput(2, value, "images/s", None)], None)
        eff[name] = rows[-1].efficiency_pct
        assert eff[name] == pytest.approx(value / (2 * runs["single"]) * 100)
    assert eff["narrow"] < eff["wide"]


def test_node0_holds_every_rank_and_node1_its_own(runs):
    for link in ("wide", "narrow"):
        node0, node1 = runs["base"] / link / "node0", runs["base"] / link / "node1"
        assert sorted(p.name for p in (node0 / "ranks").iterdir()) == ["rank-0", "rank-1"]
        assert sorted(p.name for p in (node1 / "ranks").iterdir()) == ["rank-1"]
        gathered = json.loads((node0 / "ranks" / "rank-1" / "iterations.json").read_text())
        own = json.loads((node1 / "ranks" / "rank-1" / "iterations.json").read_text())
        assert gathered == own  # rank 1's records reached node 0 unchanged
        total = json.loads((node0 / "profile.json").read_text())["metrics"]["throughput"]["value"]
        ranks = [json.loads((node0 / "ranks" / f"rank-{r}" / "profile.json").read_text())
                 for r in (0, 1)]
        assert total == pytest.approx(sum(r["metrics"]["throughput"]["value"] for r in ranks), rel=1e-12)
