"""The digit-canvas detection task: fixed disjoint canvases of real digits, mAP@0.5 by pycocotools, and training."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("sklearn")
pytest.importorskip("pycocotools")

from tbd.models.tasks import canvas_detection as cd  # noqa: E402
from tbd.models.tasks import digits  # noqa: E402


@pytest.fixture(scope="module")
def canvases():
    return cd.make_canvases("train"), cd.make_canvases("test")


def test_split_is_the_digits_tasks_and_every_digit_is_on_one_canvas(canvases):
    train, test = canvases
    train_i, test_i = cd.split_indices()
    assert not set(train_i) & set(test_i) and len(train_i) == 1437 and len(test_i) == 360
    assert sorted(i for group in train.digits for i in group) == sorted(train_i)
    assert sorted(i for group in test.digits for i in group) == sorted(test_i)
    assert all(1 <= len(group) <= cd.MAX_DIGITS for group in train.digits + test.digits)
    # The same held-out digits as models/tasks/digits.py: its labels, in its order.
    _, d_train_y, _, d_test_y = digits.load_split()
    from sklearn.datasets import load_digits

    target = torch.tensor(load_digits().target)
    assert torch.equal(target[torch.tensor(test_i)], d_test_y) and torch.equal(target[torch.tensor(train_i)], d_train_y)


def test_canvases_are_fixed_and_hold_the_real_digits(canvases):
    from sklearn.datasets import load_digits

    data = load_digits()
    train, test = canvases
    again = cd.make_canvases("test")
    assert torch.equal(again.images, test.images) and again.digits == test.digits
    # Each box is the tight box of a digit's ink; its label is the digit + 1; digits never overlap.
    for images, boxes, labels, group in zip(test.images[:30], test.boxes, test.labels, test.digits):
        assert labels.tolist() == [int(data.target[i]) + 1 for i in group]
        iou = cd.ops.box_iou(boxes, boxes)
        assert torch.equal(iou, torch.diag(torch.diagonal(iou)))
        for (x1, y1, x2, y2) in boxes.tolist():
            assert 0 <= x1 < x2 <= cd.CANVAS and 0 <= y1 < y2 <= cd.CANVAS
            inside = images[0, int(y1):int(y2) + 1, int(x1):int(x2) + 1]
            assert float(inside.max()) > 0.5  # ink inside the box
    ink = test.images.clone()
    for n, boxes in enumerate(test.boxes):
        for (x1, y1, x2, y2) in boxes.tolist():
            ink[n, 0, max(0, int(y1) - 6):int(y2) + 7, max(0, int(x1) - 6):int(x2) + 7] = 0
    # Outside the boxes and the bilinear fringe (one 8x8 cell, at most 5 px), the canvas is blank.
    assert float(ink.max()) == 0.0
    # A known digit: load_digits' first image (a 0) is a training digit; its canvas shows it.
    n = next(k for k, group in enumerate(train.digits) if 0 in group)
    box = train.boxes[n][train.digits[n].index(0)]
    assert train.labels[n][train.digits[n].index(0)] == 1
    w, h = float(box[2] - box[0]), float(box[3] - box[1])
    assert w / h == pytest.approx(6 / 8)  # its ink spans 6 of 8 columns and all 8 rows


def test_map50_matches_a_hand_computed_value():
    gt = [{"boxes": torch.tensor([[10., 10, 30, 30]]), "labels": torch.tensor([1])},
          {"boxes": torch.tensor([[50., 50, 70, 80]]), "labels": torch.tensor([2])}]
    # Class 1: a false positive (score 0.9) ranks above the hit (IoU 18x20 / 20x20 = 0.9): precision 1/2 at
    # recall 1, so every interpolated precision is 1/2 and AP = 0.5. Class 2: one exact hit, AP = 1.
    preds = [{"boxes": torch.tensor([[60., 60, 70, 70], [12, 10, 30, 30]]), "scores": torch.tensor([0.9, 0.8]),
              "labels": torch.tensor([1, 1])},
             {"boxes": torch.tensor([[50., 50, 70, 80]]), "scores": torch.tensor([0.7]), "labels": torch.tensor([2])}]
    assert cd.mean_average_precision(preds, gt) == pytest.approx(0.75)
    # IoU 0.45 (box [21, 10, 30, 30] against [10, 10, 30, 30]: 180 / 400) misses at 0.5: class 1 gets AP 0.
    preds[0]["boxes"] = torch.tensor([[60., 60, 70, 70], [21, 10, 30, 30]])
    assert cd.mean_average_precision(preds, gt) == pytest.approx(0.5)
    empty = {"boxes": torch.zeros(0, 4), "scores": torch.zeros(0), "labels": torch.zeros(0, dtype=torch.long)}
    assert cd.mean_average_precision([empty, empty], gt) == 0.0


def test_map50_is_torchmetrics_map_50():
    try:
        from torchmetrics.detection import MeanAveragePrecision

        MeanAveragePrecision(backend="pycocotools")
    except (ImportError, RuntimeError):
        pytest.skip("torchmetrics' MeanAveragePrecision needs an importable torchvision")
    gen = torch.Generator().manual_seed(0)
    gt, preds = [], []
    for _ in range(8):
        corner = torch.rand(3, 2, generator=gen) * 60
        boxes = torch.cat([corner, corner + 10 + torch.rand(3, 2, generator=gen) * 30], dim=1)
        gt.append({"boxes": boxes, "labels": torch.randint(1, 4, (3,), generator=gen)})
        preds.append({"boxes": boxes + torch.randn(3, 4, generator=gen) * 3, "scores": torch.rand(3, generator=gen),
                      "labels": torch.randint(1, 4, (3,), generator=gen)})
    metric = MeanAveragePrecision(box_format="xyxy", iou_type="bbox", backend="pycocotools")
    metric.update(preds, gt)
    assert cd.mean_average_precision(preds, gt) == pytest.approx(float(metric.compute()["map_50"]))


def test_short_training_finds_digits_and_counts_samples():
    task = cd.build("faster_rcnn", 1, 0, "test")
    assert task.train_samples == 727 and task.eval_samples == 186
    assert task.train_x.shape == (727, 1, 96, 96) and task.side == 96
    # A third of an epoch, then mAP@0.5 on 40 held-out canvases (a detector at chance scores ~0).
    task.train_labels, task.train_boxes = task.train_labels[:240], task.train_boxes[:240]
    assert task.train_epoch() == 240
    task.test_labels, task.test_boxes = task.test_labels[:40], task.test_boxes[:40]
    value = task.evaluate()
    assert 0.02 < value <= 1.0
    boxes, scores, labels = cd.detect(task.model, cd.network_input(task.test_x[:1], 96), task.min_size)
    assert boxes.shape[1] == 4 and bool(((labels >= 1) & (labels <= 10)).all())
    assert bool((scores > cd.SCORE_THRESHOLD).all()) and len(scores) <= cd.MAX_DETECTIONS
