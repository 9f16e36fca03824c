"""`tbd analyze FOLDER`: one trace per rank, each analysed on its own, side by side."""

from __future__ import annotations

import json

from testpaths import FIXTURES

from tbd.cli import main

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
