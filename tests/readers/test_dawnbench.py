"""DAWNBench entries: the README's format, every bend real entries show, hostile files, and the real entries.

The fixtures (tests/fixtures/dawnbench/README.md) are hand-written; each test says what it expects
and why. The last tests read the real entries of github.com/stanford-futuredata/dawn-bench-entries
from a local mirror where there is one (skipped elsewhere, CI included).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path, PurePosixPath

import pytest
from testpaths import FIXTURES

from tbd.analysis.dawnbench_scoring import score_entry
from tbd.core.errors import TraceFormatError
from tbd.profilers.dawnbench.reader import MAX_ENTRY_BYTES, DawnbenchRow, read_entry

HERE = FIXTURES / "dawnbench"
MIRROR = Path("/work/.mirror/stanford-futuredata+dawn-bench-entries/repo/.git")


def _rows(entry) -> list[tuple[float, float, dict[str, float]]]:
    return [(row.epoch, row.hours, row.metrics) for row in entry.rows]


# --- the README's format and the bends of real entries ---------------------------------------------------


def test_a_readme_entry_reads_the_same_from_its_json_or_its_tsv():
    stem = HERE / "CIFAR10/train/example_resnet9_1v100_pytorch"
    by_json, by_tsv = read_entry(f"{stem}.json"), read_entry(Path(f"{stem}.tsv"))
    assert by_json == by_tsv
    assert (by_json.json_path, by_json.tsv_path) == (f"{stem}.json", f"{stem}.tsv")
    assert (by_json.task, by_json.phase) == ("CIFAR10", "train")
    assert (by_json.author, by_json.model, by_json.hardware, by_json.framework, by_json.version, by_json.timestamp) \
        == ("Example Lab", "ResNet 9", "1 V100 (example cloud)", "PyTorch 1.0", "v1.0", "2019-01-02")
    assert (by_json.cost_per_hour, by_json.latency_ms, by_json.cost_per_item, by_json.reported) == (2.5, None, None, {})
    assert _rows(by_json) == [(1, 0.1, {"top1Accuracy": 60.5}), (2, 0.2, {"top1Accuracy": 80.25}),
                              (3, 0.3, {"top1Accuracy": 93.99}), (4, 0.4, {"top1Accuracy": 94.0}),
                              (5, 0.5, {"top1Accuracy": 95.5}), (6, 0.6, {"top1Accuracy": 93.0})]
    assert by_json.notes == ()
    assert isinstance(by_json.rows[0], DawnbenchRow)


def test_a_byte_order_mark_and_crlf_line_ends_are_read_through():
    """As KRes34_1GTX1080Ti_pytorch.tsv: BOM + CRLF; epochs from 0 as fastai_pytorch.tsv; no costPerHour."""
    stem = HERE / "CIFAR10/train/example_bom-crlf_1gtx1080ti_pytorch"
    for suffix in (".tsv", ".json"):  # the fixture itself still holds the bend (no checkout rewrote it)
        raw = Path(f"{stem}{suffix}").read_bytes()
        assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw
    entry = read_entry(f"{stem}.tsv")
    assert _rows(entry) == [(0, 0.05, {"top1Accuracy": 50}), (1, 0.10, {"top1Accuracy": 94.5}),
                            (2, 0.15, {"top1Accuracy": 95})]
    assert (entry.author, entry.model, entry.cost_per_hour) == ("Example Lab", "KRes 18", None)
    assert entry.notes == ()


def test_columns_are_found_by_name_not_position():
    """hours before epoch, as dawn_resnet152_b_4M60_ec2_tensorflow.tsv."""
    entry = read_entry(HERE / "ImageNet/train/example_resnet50_4m60_tensorflow.json")
    assert [(r.epoch, r.hours) for r in entry.rows] == [(1, 2.0), (2, 4.0), (3, 6.0), (4, 8.0)]
    assert entry.rows[2].metrics == {"top1Accuracy": 75.0, "top5Accuracy": 93.01}
    assert (entry.task, entry.cost_per_hour, entry.notes) == ("ImageNet", 8.0, ())


def test_spaces_after_tabs_trailing_spaces_and_no_final_newline():
    """f1Score before hours, as dawn_drqa_1k80-ec2.tsv, whose hours are padded with spaces."""
    entry = read_entry(HERE / "SQuAD/train/example_drqa_1k80.tsv")
    assert _rows(entry) == [(1, 0.25, {"f1Score": 0.61}), (2, 0.50, {"f1Score": 0.72}),
                            (3, 0.75, {"f1Score": 0.74}), (4, 1.00, {"f1Score": 0.76})]
    assert (entry.task, entry.phase, entry.cost_per_hour, entry.notes) == ("SQuAD", "train", 0.9, ())


def test_blank_lines_trailing_tabs_hours_zero_and_repeated_epochs():
    """Blank lines as Intel_Resnet50_ec2_Xeon_8124M_intelcaffe.tsv, epoch repeated as
    google_resnet50_tpu_tensorflow111_fastai.tsv, hours 0 as huaweicloud_..._tensorflow18.tsv: all kept, in order."""
    entry = read_entry(HERE / "ImageNet/train/example_resnet50_tpu_tensorflow.tsv")
    assert _rows(entry) == [(0, 0, {"top1Accuracy": 0.1, "top5Accuracy": 0.5}),
                            (1.5, 0.5, {"top1Accuracy": 60, "top5Accuracy": 85}),
                            (2, 1.0, {"top1Accuracy": 70, "top5Accuracy": 93.2}),
                            (2, 1.1, {"top1Accuracy": 70.5, "top5Accuracy": 93.4})]
    assert entry.cost_per_hour is None  # null in the JSON, as dawn_resnet164_b_1p100-dawn_pytorch.json
    assert entry.notes == ("line 6: epoch 2 does not follow epoch 2; rows stay in file order",)


def test_space_aligned_columns_and_a_number_written_as_a_string():
    entry = read_entry(HERE / "CIFAR10/train/example_space-aligned_1k80_tensorflow.tsv")
    assert _rows(entry) == [(1, 0.25, {"top1Accuracy": 90.0}), (2, 0.50, {"top1Accuracy": 94.25})]
    assert entry.cost_per_hour == 0.9
    assert entry.notes == ("JSON costPerHour is the string '0.90'; read as 0.9",)


def test_rows_that_cannot_be_read_are_skipped_each_with_a_note():
    entry = read_entry(HERE / "CIFAR10/train/example_bad-rows_1v100_pytorch.tsv")
    assert _rows(entry) == [(1, 0.1, {"top1Accuracy": 80, "lr": 0.4}), (6, 0.6, {"lr": 0.05}),
                            (9, 0.9, {"top1Accuracy": 94.1, "lr": 0.02}), (10, 1.0, {"top1Accuracy": 96})]
    assert entry.notes == (
        "line 3 skipped: hours is 'n/a', not a number",
        "line 4 skipped: hours is not a finite number",
        "line 5 skipped: hours is -0.4, negative",
        "line 6 skipped: hours is not a finite number",
        "line 7: top1Accuracy is not a finite number; left out of that row",
        "line 8 skipped: 5 values under 4 column names",
        "line 9 skipped: hours is empty",
        "line 11: lr is empty; left out of that row",
    )


def test_inference_entries_keep_latency_cost_and_quality_as_given():
    given = read_entry(HERE / "CIFAR10/inference/example_resnet9_1v100_pytorch.json")
    assert (given.task, given.phase, given.tsv_path, given.rows) == ("CIFAR10", "inference", None, ())
    assert (given.latency_ms, given.cost_per_item, given.cost_per_hour) == (2.0, 5e-7, None)
    assert given.reported == {"top1Accuracy": 94.5}
    readme = read_entry(HERE / "CIFAR10/inference/example_readme-accuracy_1k80_tensorflow.json")
    assert readme.reported == {"accuracy": 93.5}  # the README's example JSON spells it so
    assert (readme.cost_per_hour, readme.cost_per_item) == (1.8, None)
    strings = read_entry(HERE / "ImageNet/inference/example_resnet50_1t4_tensorrt.json")
    assert (strings.latency_ms, strings.cost_per_item, strings.reported) == (2.0, 1e-5, {"top5Accuracy": 93.0})
    assert strings.notes == ("JSON latency is the string '2.0'; read as 2.0",)
    percent = read_entry(HERE / "SQuAD/inference/example_fastfusionnet_1080ti.json")
    assert (percent.reported, percent.cost_per_item, percent.notes) == ({"f1Score": 82.5}, None, ())


# --- task and phase without the README's folders ---------------------------------------------------------


@pytest.mark.parametrize(("header", "task"), [
    ("epoch\thours\ttop1Accuracy\ttop5Accuracy", "ImageNet"),
    ("epoch\thours\ttop1Accuracy", "CIFAR10"),
    ("epoch\thours\tf1Score", "SQuAD"),
    ("epoch\thours\tf1Score\ttop5Accuracy", None),  # two tasks' metrics: no guess
    ("epoch\thours\tloss", None),
])
def test_outside_the_folders_the_task_comes_from_the_metric_names_where_they_name_one(tmp_path, header, task):
    path = tmp_path / "run.tsv"
    path.write_text(header + "\n" + "\t".join(["1", "0.5"] + ["0.9"] * (header.count("\t") - 1)) + "\n")
    entry = read_entry(path)
    assert (entry.task, entry.phase, entry.json_path) == (task, "train", None)
    assert entry.notes[0] == f"no JSON beside {path}: author, hardware and costPerHour unknown"
    assert any(n.startswith(f"task {task} inferred from the metric names") for n in entry.notes) == (task is not None)


def test_an_inference_json_outside_the_folders(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"latency": 3.5, "top5Accuracy": 93.2}))
    entry = read_entry(path)
    assert (entry.task, entry.phase, entry.latency_ms) == ("ImageNet", "inference", 3.5)


def test_the_folder_wins_over_the_metric_names_with_a_note(tmp_path):
    folder = tmp_path / "CIFAR10" / "train"
    folder.mkdir(parents=True)
    (folder / "x.tsv").write_text("epoch\thours\ttop5Accuracy\n1\t0.5\t90\n")
    entry = read_entry(folder / "x.tsv")
    assert entry.task == "CIFAR10"
    assert "the folder says CIFAR10 but the metric names (top5Accuracy) are ImageNet's; the folder is kept" \
        in entry.notes


def test_header_names_match_case_insensitively_and_take_the_readme_spelling(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("EPOCH\tHours\tTOP1ACCURACY\tLR\n1\t0.5\t90\t0.1\n")
    assert read_entry(path).rows == (DawnbenchRow(1, 0.5, {"top1Accuracy": 90, "LR": 0.1}),)


def test_utf16_text_is_read_with_a_note(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_bytes("epoch\thours\ttop1Accuracy\r\n1\t0.5\t94.5\r\n".encode("utf-16"))
    entry = read_entry(path)
    assert entry.rows == (DawnbenchRow(1, 0.5, {"top1Accuracy": 94.5}),)
    assert f"{path} is UTF-16 text; read as such" in entry.notes


def test_json_fields_that_are_not_what_the_readme_says_are_ignored_with_a_note(tmp_path):
    path = tmp_path / "CIFAR10" / "inference" / "x.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"latency": 2, "latency": 3, "costPerHour": NaN, "cost": -1, "version": 1.0, "model": [1],'
                    ' "Top1Accuracy": "94.5 %", "hardware": true}')
    entry = read_entry(path)
    assert (entry.latency_ms, entry.cost_per_hour, entry.cost_per_item) == (3.0, None, None)
    assert (entry.version, entry.model, entry.hardware, entry.reported) == ("1.0", None, None, {})
    assert entry.notes == (
        "JSON key 'latency' appears more than once; its last value is used",
        "JSON model is a list, not text; ignored",
        "JSON hardware is a bool, not text; ignored",
        "JSON version is the number 1.0; kept as the text '1.0'",
        "JSON costPerHour is not a finite number; ignored",
        "JSON cost is -1.0, not a non-negative finite number; ignored",
        "JSON key 'Top1Accuracy' read as top1Accuracy",
        "JSON top1Accuracy is '94.5 %', not a number; ignored",
    )


def test_a_zero_latency_is_not_a_time(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"latency": 0, "cost": 1e-6}')
    entry = read_entry(path)
    assert (entry.phase, entry.latency_ms, entry.cost_per_item) == ("inference", None, 1e-6)
    assert entry.notes == ("JSON latency is 0.0, not a positive finite number; ignored",)


# --- what is refused: one line naming the file -----------------------------------------------------------


def _refused(path: Path, match: str) -> None:
    with pytest.raises(TraceFormatError, match=match) as caught:
        read_entry(path)
    line = caught.value.one_line()
    assert "\n" not in line and str(path) in line


@pytest.mark.parametrize(("name", "text", "match"), [
    ("x.json", '{"version": "v1.0",,}', r"not JSON \(Expecting property name"),
    ("x.json", "[1, 2]", "the JSON is a list, not an object"),
    ("x.json", '"v1.0"', "the JSON is a string, not an object"),
    ("x.json", "[" * 100_000, "nested too deeply"),
    ("x.tsv", "", "an empty TSV"),
    ("x.tsv", "\n \n", "an empty TSV"),
    ("x.tsv", "step\ttime\tacc\n1\t0.1\t50\n", "is not a header with epoch and hours columns"),
    ("x.tsv", "1\t0.1\t50\n2\t0.2\t60\n", "is not a header with epoch and hours columns"),
    ("x.tsv", "epoch\thours\ttop1Accuracy\tTop1accuracy\n1\t0.1\t50\t50\n", "names top1Accuracy more than once"),
    ("x.tsv", "epoch\t\thours\n1\t2\t3\n", "has an empty column name"),
    ("x.tsv", "epoch\thours\ttop1Accuracy\n", "no numeric rows under the header$"),
    ("x.tsv", "epoch\thours\ttop1Accuracy\n1\tx\t50\n", r"no numeric rows under the header \(line 2 skipped: hours"),
    ("x.csv", "epoch,hours\n1,0.1\n", "not a DAWNBench entry"),
])
def test_what_is_not_an_entry_is_refused(tmp_path, name, text, match):
    path = tmp_path / name
    path.write_text(text)
    _refused(path, match)


def test_a_json_with_neither_tsv_nor_latency_is_refused(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"author": "a", "costPerHour": 1.0}')
    _refused(path, r"no TSV beside it \(x.tsv\) and no latency or cost")
    inference = tmp_path / "SQuAD" / "inference" / "y.json"
    inference.parent.mkdir(parents=True)
    inference.write_text('{"f1Score": 0.8}')
    _refused(inference, "an inference entry with neither latency nor cost")
    training = tmp_path / "ImageNet" / "train" / "z.json"
    training.parent.mkdir(parents=True)
    training.write_text('{"latency": 2.0}')
    _refused(training, r"a training entry without its TSV \(z.tsv\)")


def test_files_that_are_not_regular_or_too_large_are_refused_before_a_byte_is_read(tmp_path):
    _refused(tmp_path / "absent.json", "cannot read")
    (tmp_path / "folder.json").mkdir()
    _refused(tmp_path / "folder.json", "a directory, not a DAWNBench file")
    big = tmp_path / "big.tsv"
    big.write_bytes(b"epoch\thours\n" + b"1\t0.1\n" * (MAX_ENTRY_BYTES // 6))
    _refused(big, "too large for a DAWNBench entry")
    if os.path.exists("/dev/zero"):
        (tmp_path / "zero.tsv").symlink_to("/dev/zero")
        _refused(tmp_path / "zero.tsv", "a character device")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.tsv")  # an open() would wait for a writer forever
        _refused(tmp_path / "pipe.tsv", "a FIFO")


# --- the real entries ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> Path:
    """The entries of the local mirror's HEAD, written out (the mirror is a bare repository)."""
    if not MIRROR.is_dir() or shutil.which("git") is None:
        pytest.skip(f"no DAWNBench mirror at {MIRROR}")
    tar = subprocess.run(["git", f"--git-dir={MIRROR}", "archive", "--format=tar", "HEAD"],
                         capture_output=True, check=True, timeout=120).stdout
    out = tmp_path_factory.mktemp("dawn-bench-entries")
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        for member in archive.getmembers():
            parts = PurePosixPath(member.name).parts
            if member.isfile() and parts[0] in ("CIFAR10", "ImageNet", "SQuAD") and ".." not in parts:
                target = out.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.extractfile(member).read())
    return out


def test_every_real_entry_reads_and_every_training_entry_reaches_its_target(real):
    jsons, tsvs = sorted(real.glob("*/*/*.json")), sorted(real.glob("*/*/*.tsv"))
    assert len(jsons) >= 118 and len(tsvs) >= 69  # the mirror's HEAD in 2024: 118 JSON, 69 TSV
    for path in jsons + tsvs:
        entry = read_entry(path)
        assert entry.task == path.parent.parent.name and entry.phase == path.parent.name
        assert bool(entry.rows) == (entry.phase == "train")
    for path in jsons:  # the repository's CI admits only entries that pass the target
        score = score_entry(read_entry(path))
        assert (score.time.reached if score.time else score.quality.meets), path


# Expected by reading each TSV with awk (tr -d '\r' first where CRLF), e.g. for the first:
#   awk -F'\t' 'NR>1 && $3>=94 {print; exit}' CIFAR10/train/dawn_resnet164_b_1k80-ec2_pytorch.tsv
#   -> 137  9.27540265667  94.14      (the hours column is $1 in the 4M60 file, top5 $4 in ImageNet's, f1 $2 in drqa's)
# and costPerHour from the JSON by eye.
@pytest.mark.parametrize(("name", "epoch", "hours", "value", "cost"), [
    # 9.27540265667 h x 0.9 USD/h = 8.347862391003
    ("CIFAR10/train/dawn_resnet164_b_1k80-ec2_pytorch", 137, 9.27540265667, 94.14, 8.347862391003),
    # exactly 94.0 counts ("at least"); 9.63098283111 x 0.967 = 9.31316039768337
    ("CIFAR10/train/dawn_resnet164_nb_1k80-gc_pytorch", 142, 9.63098283111, 94.0, 9.31316039768337),
    # fractional epochs; 11.006102284391723 x 0.967 = 10.642900909006796
    ("CIFAR10/train/dawn_resnet164_b_1k80-gc_tensorflow", 139.13344, 11.006102284391723, 94.01, 10.642900909006796),
    # BOM + CRLF, no costPerHour
    ("CIFAR10/train/KRes34_1GTX1080Ti_pytorch", 55, 0.593383, 94.05, None),
    # hours before epoch; 322.6934347160657 x 7.2 = 2323.392729955673
    ("ImageNet/train/dawn_resnet152_b_4M60_ec2_tensorflow", 91, 322.6934347160657, 93.03, 2323.392729955673),
    # epoch 41 twice: the first; 2.741805000311111 x 4.595 = 12.598593976429553
    ("ImageNet/train/google_resnet50_tpu_tensorflow111_fastai", 41, 2.741805000311111, 93.18, 12.598593976429553),
    # CRLF, exactly 93.00, no costPerHour
    ("ImageNet/train/google_resnet50_tpupod_tensorflow18", 87, 0.5119444444444444, 93.0, None),
    # f1Score before hours, padded with spaces; 0.8194695636111111 x 0.9 = 0.73752260725
    ("SQuAD/train/dawn_drqa_1k80-ec2", 6, 0.8194695636111111, 0.7351785157058065, 0.73752260725),
])
def test_known_real_entries_score_as_read_by_hand(real, name, epoch, hours, value, cost):
    score = score_entry(read_entry(real / f"{name}.json"))
    assert (score.time.epoch, score.time.hours, score.time.value) == (epoch, hours, value)
    assert score.time.note is None
    assert score.cost.value == (None if cost is None else pytest.approx(cost, rel=1e-12))


def test_real_inference_entries(real):
    # latency and cost as given: 28.688002700200006 ms, and cost = 0.9 USD/h x 28.688 ms / 3.6e6 = 7.172e-06
    ec2 = score_entry(read_entry(real / "CIFAR10/inference/dawn_resnet164_b_1k80-ec2_pytorch.json"))
    assert (ec2.latency.value, ec2.cost.value, ec2.cost.derived) == (28.688002700200006, 7.172000675050001e-06, False)
    assert (ec2.quality.value, ec2.quality.meets) == (94.97, True)
    # f1Score 82.52 is in percent where the README says a fraction: compared with 0.73 x 100 = 73
    fusion = score_entry(read_entry(real / "SQuAD/inference/dawn_fastfusionnet-1080ti.json"))
    assert (fusion.quality.value, fusion.quality.threshold, fusion.quality.meets) == (82.52085997573373, 73.0, True)
    assert "read as percent" in fusion.quality.note
    assert fusion.cost.value is None and fusion.cost.reason == "no cost in the JSON, and no costPerHour to derive it from"
