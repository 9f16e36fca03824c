"""CLI behaviour: bad input gets one line and a non-zero exit, no traceback."""

import gzip
import json

import pytest

from tbd.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, needle", [
    (["profile", "alexnet"], "unknown model 'alexnet'"),
    (["profile", "resnet50", "--framework", "caffe"], "unknown framework 'caffe'"),
    (["profile", "resnet50", "--batch", "0"], "argument --batch: must be at least 1 and at most 16,777,216 samples, got 0"),
])
def test_bad_profile_arguments(capsys, argv, needle, tmp_path):
    code, out, err = run(capsys, *argv, "--out", str(tmp_path / "r"))
    assert code == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_unknown_model_lists_choices(capsys):
    code, _, err = run(capsys, "profile", "alexnet")
    assert "resnet50" in err and "seq2seq" in err


def test_kernels_on_corrupt_profile(capsys, tmp_path):
    (tmp_path / "profile.json").write_text('{"schema": "tbd.profile/1", "status": "complete"')
    code, _, err = run(capsys, "kernels", str(tmp_path))
    assert code == 2 and "not valid JSON" in err and err.count("\n") == 1


def test_kernels_on_foreign_json(capsys, tmp_path):
    (tmp_path / "profile.json").write_text('{"hello": 1}')
    code, _, err = run(capsys, "kernels", str(tmp_path / "profile.json"))
    assert code == 2 and "unknown profile schema" in err


def test_analyze_missing_and_corrupt(capsys, tmp_path):
    code, _, err = run(capsys, "analyze", str(tmp_path / "nope.json"))
    assert code == 2 and "no such file" in err
    bad = tmp_path / "t.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [')[:-8])
    code, _, err = run(capsys, "analyze", str(bad))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    foreign = tmp_path / "f.json"
    foreign.write_text(json.dumps({"some": "thing"}))
    code, _, err = run(capsys, "analyze", str(foreign))
    assert code == 2 and err.count("\n") == 1


def test_debug_shows_traceback(capsys):
    code, _, err = run(capsys, "--debug", "profile", "alexnet")
    assert code == 2 and "Traceback" in err


def test_suite_lists_every_model_and_framework(capsys):
    from tbd.cli import registry
    from tbd.cli.commands.suite import suite_rows

    rows = suite_rows()
    assert len(rows) == len(registry.MODELS) * len(registry.FRAMEWORKS)
    resnet = [r for r in rows if r["model"] == "resnet50" and r["framework"] == "pytorch"][0]
    assert resnet["available"] and resnet["unit"] == "images/s" and resnet["dominant_layer"] == "CONV"
    tf = [r for r in rows if r["model"] == "resnet101" and r["framework"] == "tensorflow"][0]
    assert not tf["available"] and tf["why"] == "not implemented yet"
    code, out, _ = run(capsys, "suite", "--framework", "pytorch")
    assert code == 0 and "resnet50" in out and "sentences/s" in out and "tensorflow" not in out


def test_fixed_batch_model_rejects_another_batch(capsys):
    code, _, err = run(capsys, "profile", "faster_rcnn", "--batch", "4")
    assert code == 2 and "fixes its batch at 1" in err and err.count("\n") == 1
