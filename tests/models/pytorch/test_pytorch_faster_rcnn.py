"""Faster R-CNN workload: architecture size, detection ops on hand examples, synthetic VOC data, training."""

from __future__ import annotations

import math

import pytest
import torch

from tbd.core.errors import UsageError
from tbd.models.base import Workload
from tbd.models.host_data.detection import FULL, TEST
from tbd.models.pytorch import detection_ops as ops
from tbd.models.pytorch import faster_rcnn
from tbd.models.pytorch.faster_rcnn import FasterRCNN, FrozenBatchNorm2d


def _count(params) -> int:
    return sum(p.numel() for p in params)


# --- Architecture ---------------------------------------------------------------------------

def test_full_parameter_count_closed_form():
    with torch.device("meta"):
        model = FasterRCNN(FULL)
    # torchvision's resnet101 has 44,549,160 parameters (ResNet101_Weights.IMAGENET1K_V1
    # "num_params"); its fc is 2048 x 1000 + 1000. conv1..conv5 are the C4 trunk plus res5.
    resnet101_without_fc = 44_549_160 - (2048 * 1000 + 1000)
    assert resnet101_without_fc == 42_500_160
    assert _count(model.trunk.parameters()) + _count(model.res5.parameters()) == resnet101_without_fc
    anchors = 3 * 3  # sizes (128, 256, 512) x ratios (0.5, 1, 2)
    rpn = (1024 * 512 * 3 * 3 + 512) + (512 * anchors + anchors) + (512 * 4 * anchors + 4 * anchors)
    head = (2048 * 21 + 21) + (2048 * 4 * 21 + 4 * 21)  # cls_score, bbox_pred (per class)
    assert _count(model.parameters()) == resnet101_without_fc + rpn + head == 47_457_494


def test_frozen_parameters_are_conv1_res2_and_every_batchnorm():
    with torch.device("meta"):
        model = FasterRCNN(FULL)
    faster_rcnn.freeze(model)
    conv1 = 64 * 3 * 7 * 7
    res2 = (64 * 64 + 64 * 64 * 9 + 64 * 256 + 64 * 256) + 2 * (256 * 64 + 64 * 64 * 9 + 64 * 256)  # 1st block projects
    # BN channels: stem 64, then per stage depth x (w + w + 4w) plus 4w in the projection.
    bn_channels = 64 + sum(d * 6 * w + 4 * w for d, w in zip((3, 4, 23, 3), (64, 128, 256, 512)))
    frozen = conv1 + res2 + 2 * bn_channels  # BN weight and bias
    assert _count(p for p in model.parameters() if not p.requires_grad) == frozen
    assert _count(p for p in model.parameters() if p.requires_grad) == 47_457_494 - frozen


def test_res5_halves_14x14_roi_features_to_7x7():
    with torch.device("meta"):
        model = FasterRCNN(FULL)
        out = model.res5(torch.empty(2, 1024, 14, 14))
    assert tuple(out.shape) == (2, 2048, 7, 7)


def test_frozen_batchnorm_calibrates_to_its_input_statistics():
    norm = FrozenBatchNorm2d(2, eps=0.0)
    x = torch.tensor([[[[1.0, 3.0]], [[2.0, 6.0]]]])  # channel 0: mean 2, var 1; channel 1: mean 4, var 4
    norm.calibrating = True
    norm(x)
    norm.calibrating = False
    torch.testing.assert_close(norm.running_mean, torch.tensor([2.0, 4.0]))
    torch.testing.assert_close(norm.running_var, torch.tensor([1.0, 4.0]))
    torch.testing.assert_close(norm(x), torch.tensor([[[[-1.0, 1.0]], [[-1.0, 1.0]]]]))


# --- Detection ops on hand examples ------------------------------------------------------------

def test_box_iou_hand_values():
    a = torch.tensor([[0.0, 0, 2, 2]])
    b = torch.tensor([[1.0, 1, 3, 3], [0, 0, 2, 2], [5, 5, 6, 6], [0, 0, 1, 2]])
    expected = torch.tensor([[1 / (4 + 4 - 1), 1.0, 0.0, 2 / 4]])
    torch.testing.assert_close(ops.box_iou(a, b), expected)


def test_encode_hand_values_and_decode_round_trip():
    anchor = torch.tensor([[0.0, 0, 10, 10]])  # centre (5, 5), 10 x 10
    gt = torch.tensor([[5.0, 5, 15, 25]])  # centre (10, 15), 10 x 20
    expected = torch.tensor([[(10 - 5) / 10, (15 - 5) / 10, math.log(10 / 10), math.log(20 / 10)]])
    torch.testing.assert_close(ops.encode_boxes(gt, anchor), expected)
    torch.testing.assert_close(ops.encode_boxes(gt, anchor, (10, 10, 5, 5)), expected * torch.tensor([10, 10, 5, 5]))
    gen = torch.Generator().manual_seed(0)
    refs = torch.tensor([[10.0, 20, 50, 40], [0, 0, 16, 16], [100, 50, 300, 400]])
    boxes = refs + torch.rand(3, 4, generator=gen) * 8
    for weights in ((1.0, 1.0, 1.0, 1.0), (10.0, 10.0, 5.0, 5.0)):
        torch.testing.assert_close(ops.decode_boxes(ops.encode_boxes(boxes, refs, weights), refs, weights), boxes)


def test_decode_caps_the_scale_change():
    decoded = ops.decode_boxes(torch.tensor([[0.0, 0, 100, 0]]), torch.tensor([[0.0, 0, 16, 16]]))
    torch.testing.assert_close(decoded[0, 2] - decoded[0, 0], torch.tensor(16 * 1000 / 16))


def test_clip_boxes():
    clipped = ops.clip_boxes(torch.tensor([[-5.0, 3, 120, 90]]), height=80, width=100)
    torch.testing.assert_close(clipped, torch.tensor([[0.0, 3, 100, 80]]))


def test_anchor_grid_hand_values():
    anchors = ops.anchor_grid(1, 2, stride=16, sizes=(16.0,), ratios=(1.0,))
    torch.testing.assert_close(anchors, torch.tensor([[0.0, 0, 16, 16], [16, 0, 32, 16]]))
    # ratio 0.5 (height / width) keeps the area 32^2: width 32 / sqrt(0.5), height 32 sqrt(0.5), centre (8, 8).
    tall, wide = 32 * math.sqrt(0.5), 32 / math.sqrt(0.5)
    anchors = ops.anchor_grid(2, 1, stride=16, sizes=(32.0, 64.0), ratios=(0.5, 1.0))
    assert anchors.shape == (2 * 1 * 4, 4)
    torch.testing.assert_close(anchors[0], torch.tensor([8 - wide / 2, 8 - tall / 2, 8 + wide / 2, 8 + tall / 2]))
    torch.testing.assert_close(anchors[5], torch.tensor([8 - 64 / 2 * math.sqrt(2), 24 - 64 / 2 / math.sqrt(2),
                                                         8 + 64 / 2 * math.sqrt(2), 24 + 64 / 2 / math.sqrt(2)]))
    torch.testing.assert_close(anchors[7], torch.tensor([8 - 32.0, 24 - 32, 8 + 32, 24 + 32]))  # cell (1, 0), 64, r=1


@pytest.mark.parametrize("method", ["scan", "rounds"])
def test_nms_hand_example_is_greedy_not_one_pass(method):
    # A, B, C slide right by 3 px: IoU(A, B) = IoU(B, C) = 70 / 130 > 0.5, IoU(A, C) = 40 / 160 < 0.5.
    # Greedy keeps A, drops B, then keeps C (its only suppressor B is gone); D overlaps nothing.
    a, b, c, d = [0.0, 0, 10, 10], [3.0, 0, 13, 10], [6.0, 0, 16, 10], [20.0, 20, 30, 30]
    boxes = torch.tensor([b, d, c, a])
    scores = torch.tensor([0.8, 0.6, 0.7, 0.9])
    assert ops.nms(boxes, scores, 0.5, method).tolist() == [3, 2, 1]  # A, C, D by descending score
    assert ops.nms(boxes, scores, 0.55, method).tolist() == [3, 0, 2, 1]  # 70 / 130 < 0.55: none overlaps enough


@pytest.mark.parametrize("method", ["scan", "rounds"])
def test_nms_sorted_candidates_neither_kept_nor_suppress(method):
    # Each box overlaps the next by 90 / 110 > 0.7 and the one after by 80 / 120 < 0.7.
    boxes = torch.tensor([[0.0, 0, 10, 10], [1, 0, 11, 10], [2, 0, 12, 10]])
    candidates = torch.tensor([False, True, True])
    kept = ops.nms_sorted(boxes, 0.7, candidates, method=method, rounds_per_check=1)
    assert kept.tolist() == [False, True, False]
    assert candidates.tolist() == [False, True, True]  # not consumed


@pytest.mark.parametrize("method", ["scan", "rounds"])
def test_nms_matches_a_plain_greedy_loop(method):
    gen = torch.Generator().manual_seed(0)
    corner = torch.rand(60, 2, generator=gen) * 40
    boxes = torch.cat([corner, corner + 5 + torch.rand(60, 2, generator=gen) * 20], dim=1)
    scores = torch.rand(60, generator=gen)
    order = scores.argsort(descending=True)
    iou = ops.box_iou(boxes, boxes)
    keep: list[int] = []
    for i in order.tolist():
        if all(iou[j, i] <= 0.3 for j in keep):
            keep.append(i)
    assert ops.nms(boxes, scores, 0.3, method).tolist() == keep


def test_nms_methods_agree_on_dense_rpn_like_boxes():
    gen = torch.Generator().manual_seed(0)
    anchors = ops.anchor_grid(6, 8, 16, (32.0, 64.0, 128.0), (0.5, 1.0, 2.0))  # 432 boxes, many overlapping
    boxes = ops.clip_boxes(ops.decode_boxes(torch.randn(anchors.shape, generator=gen) * 0.1, anchors), 96, 128)
    boxes = boxes[torch.randn(len(boxes), generator=gen).argsort()]  # a random score order
    scan = ops.nms_sorted(boxes, 0.7, method="scan")
    assert 0 < int(scan.sum()) < len(boxes)
    assert torch.equal(ops.nms_sorted(boxes, 0.7, method="rounds", rounds_per_check=1), scan)


def test_nms_unknown_method():
    with pytest.raises(UsageError):
        ops.nms_sorted(torch.zeros(1, 4), 0.5, method="fast")


# f(y, x) = 2y + x + 1 on a 2x2 map: bilinear sampling reproduces it exactly inside [0, 1]^2.
_MAP = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])


def test_roi_align_interior_hand_values():
    # aligned: [0.5, 1.5] shifts to [0, 1]; 2x2 bins of 0.5 with samples at 1/8 and 3/8 of a cell
    # (bin 0: mean 0.25; bin 1: mean 0.75), so bin (py, px) averages 2 ymean + xmean + 1.
    out = ops.roi_align(_MAP, torch.tensor([[0.5, 0.5, 1.5, 1.5]]), 2, 1.0)
    expected = torch.tensor([[2 * 0.25 + 0.25 + 1, 2 * 0.25 + 0.75 + 1], [2 * 0.75 + 0.25 + 1, 2 * 0.75 + 0.75 + 1]])
    torch.testing.assert_close(out, expected.view(1, 1, 2, 2))
    # The same RoI in image pixels at stride 16.
    torch.testing.assert_close(ops.roi_align(_MAP, torch.tensor([[8.0, 8, 24, 24]]), 2, 1 / 16), out)
    # aligned=False skips the half-pixel shift: [0.5, 1.5] samples at 0.75 and 1.25 -> clamped to 1 -> mean 1.
    legacy = ops.roi_align(_MAP, torch.tensor([[0.5, 0.5, 1.5, 1.5]]), 1, 1.0, aligned=False)
    torch.testing.assert_close(legacy, torch.tensor([[[[2 * 0.875 + 0.875 + 1]]]]))


def test_roi_align_edges_clamp_within_one_cell_and_zero_beyond():
    rois = torch.tensor([
        [-0.5, 0.5, 0.5, 1.5],  # x in [-1, 0]: samples -0.75, -0.25 clamp to column 0 -> 2 * 0.5 + 0 + 1
        [1.5, 0.5, 2.5, 1.5],  # x in [1, 2]: samples 1.25, 1.75 clamp to column 1 -> 2 * 0.5 + 1 + 1
        [-2.5, 0.5, 1.5, 1.5],  # x in [-3, 1]: samples -2 (< -1: zero) and 0 -> (0 + 0 + 1.5 + 2.5) / 4
    ])
    out = ops.roi_align(_MAP, rois, 1, 1.0)
    torch.testing.assert_close(out.view(-1), torch.tensor([2.0, 3.0, (1.5 + 2.5) / 4]))


def test_roi_align_gradient_spreads_each_bin_over_unit_weight():
    features = torch.randn(1, 3, 5, 6, requires_grad=True)
    ops.roi_align(features, torch.tensor([[1.0, 1, 4, 3], [0.5, 0.5, 5.5, 4.5]]), 3, 1.0).sum().backward()
    # Each output is the mean of bilinear samples whose weights sum to 1: 2 RoIs x 3 channels x 3 x 3 bins.
    torch.testing.assert_close(features.grad.sum(), torch.tensor(2 * 3 * 3 * 3.0))


def test_balanced_sample_takes_all_positives_up_to_the_quota_then_negatives():
    positive = torch.zeros(20, dtype=torch.bool)
    positive[[1, 4, 7]] = True
    negative = ~positive
    index, is_pos, valid = ops.balanced_sample(positive, negative, 8, 0.5, torch.Generator().manual_seed(0))
    assert is_pos.tolist() == [True] * 3 + [False] * 5 and bool(valid.all())
    assert sorted(index[:3].tolist()) == [1, 4, 7]
    assert bool(negative[index[3:]].all()) and len(set(index.tolist())) == 8
    # Quota: 6 positives but at most 8 x 0.25 = 2 taken.
    positive[[10, 11, 12]] = True
    index, is_pos, valid = ops.balanced_sample(positive, ~positive, 8, 0.25, torch.Generator().manual_seed(1))
    assert int(is_pos.sum()) == 2 and bool(valid.all()) and bool(positive[index[:2]].all())


def test_balanced_sample_marks_slots_it_cannot_fill():
    positive = torch.tensor([True, False, False, False])
    negative = torch.tensor([False, True, True, False])
    _, is_pos, valid = ops.balanced_sample(positive, negative, 8, 0.5)
    assert int(is_pos.sum()) == 1 and int(valid.sum()) == 1 + 2


# --- Synthetic VOC data -------------------------------------------------------------------------

def test_voc_like_images_match_voc2007_statistics():
    gen = torch.Generator().manual_seed(0)
    draws = [faster_rcnn.voc_like_image(TEST, gen) for _ in range(400)]
    counts = torch.tensor([len(labels) for _, _, labels, _ in draws], dtype=torch.float32)
    assert int(counts.min()) == 1 and int(counts.max()) == 4
    assert abs(float(counts.mean()) - 12_608 / 5_011) < 0.2  # VOC 2007 trainval: objects / images
    landscape = sum(image.shape[-1] > image.shape[-2] for image, *_ in draws) / len(draws)
    assert 0.65 < landscape < 0.85
    lo = (0 - torch.tensor(faster_rcnn.IMAGENET_MEAN)) / torch.tensor(faster_rcnn.IMAGENET_STD)
    hi = (1 - torch.tensor(faster_rcnn.IMAGENET_MEAN)) / torch.tensor(faster_rcnn.IMAGENET_STD)
    for image, boxes, labels, scale in draws:
        height, width = image.shape[-2:]
        assert min(height, width) == TEST.short_side or max(height, width) == TEST.max_side
        assert round(500 * scale) == max(height, width)  # VOC's long side is 500 px
        assert bool((boxes[:, :2] >= 0).all()) and bool((boxes[:, 2] <= width).all())
        assert bool((boxes[:, 3] <= height).all())
        sides = boxes[:, 2:] - boxes[:, :2]
        assert bool((sides >= 0.1 * torch.tensor([width, height]) - 0.5).all())
        assert int(labels.min()) >= 1 and int(labels.max()) <= 20
        per_channel = image[0].flatten(1)
        assert torch.allclose(per_channel.min(1).values, lo, atol=1e-5)
        assert torch.allclose(per_channel.max(1).values, hi, atol=1e-5)


def test_full_size_images_are_reference_scaled():
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        image, boxes, _, scale = faster_rcnn.voc_like_image(FULL, gen)
        short, long = sorted(image.shape[-2:])
        # VOC's short side 333..375 -> 600, long side 500 -> 500 x 600 / short in [800, 901].
        assert short == 600 and 800 <= long <= 901 and scale == pytest.approx(long / 500, abs=1e-3)


def test_same_seed_same_workload():
    a, b = faster_rcnn.build(1, "cpu", "test", seed=3), faster_rcnn.build(1, "cpu", "test", seed=3)
    c = faster_rcnn.build(1, "cpu", "test", seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.inputs(), b.inputs(), strict=True))
    assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
    assert not all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a.inputs(), c.inputs()))
    torch.testing.assert_close(a.step(), b.step())  # the step's sampling is seeded too


# --- Workload ------------------------------------------------------------------------------------

def test_workload_fields():
    work = faster_rcnn.build(1, "cpu", "test", seed=0, pool_size=2)
    assert isinstance(work, Workload)
    assert (work.name, work.samples_per_step, work.throughput_unit) == ("faster_rcnn", 1, "images/s")
    assert len(work.inputs()) == 2 * 3  # image, boxes, labels per pool image
    trainable = {id(p) for p in work.model.parameters() if p.requires_grad}
    assert {id(p) for group in work.optimizer.param_groups for p in group["params"]} == trainable


def test_losses_finite_and_falling_on_a_fixed_image():
    work = faster_rcnn.build(1, "cpu", "test", seed=0, pool_size=1)
    losses = []
    for _ in range(8):
        loss = work.step()
        assert isinstance(loss, torch.Tensor) and loss.ndim == 0
        losses.append(float(loss.detach()))
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


def test_each_loss_term_is_finite_and_the_head_sees_foreground():
    work = faster_rcnn.build(1, "cpu", "test", seed=0, pool_size=1)
    image, boxes, labels = work.inputs()
    scale = max(image.shape[-2:]) / 500
    losses = work.model(image, boxes, labels, faster_rcnn.RPN_MIN_SIZE * scale, torch.Generator().manual_seed(0))
    assert set(losses) == {"rpn_cls", "rpn_box", "head_cls", "head_box"}
    assert all(math.isfinite(float(v.detach())) for v in losses.values())
    # GT boxes join the RoI candidates, so the head always has foreground to regress.
    assert float(losses["head_box"].detach()) > 0 and float(losses["rpn_box"].detach()) > 0


@pytest.mark.parametrize("kwargs", [{"batch": 2}, {"batch": 0}, {"batch": None}, {"size": "huge"},
                                    {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 1, "device": "cpu", "size": "test", **kwargs}
    with pytest.raises(UsageError):
        faster_rcnn.build(**args)


def test_batch_other_than_one_says_why():
    with pytest.raises(UsageError, match="1 image per iteration") as err:
        faster_rcnn.build(4, "cpu", "test")
    assert err.value.hint == "drop --batch"


def test_roi_sampling_with_no_valid_proposals_keeps_the_gt_box_and_stays_finite():
    proposals = torch.zeros(5, 4)  # degenerate boxes (zero width), all marked invalid
    gt = torch.tensor([[10.0, 10, 50, 40]])
    rois, labels, targets, is_fg, ok = faster_rcnn._sample_rois(
        proposals, torch.zeros(5, dtype=torch.bool), gt, torch.tensor([7]), 16, torch.Generator().manual_seed(0))
    assert rois.shape == (16, 4) and int(ok.sum()) == 1 and is_fg.tolist() == [True] + [False] * 15
    assert labels[0] == 7 and torch.equal(rois[0], gt[0])
    assert bool(torch.isfinite(targets).all()) and torch.equal(targets[0], torch.zeros(4))  # GT onto itself


def test_proposals_are_the_first_kept_boxes_in_score_order():
    anchors = torch.tensor([[0.0, 0, 10, 10], [1, 0, 11, 10], [20, 20, 30, 30], [0, 0, 2, 2]])
    objectness = torch.tensor([0.9, 0.8, 0.7, 5.0])  # the best one is under min_size and dropped
    cfg = faster_rcnn.DetectorConfig((1, 1, 1, 1), 8, 8, (16.0,), 50, 60, 4, 3, 8, 8, 8, 32)
    boxes, valid = faster_rcnn.region_proposals(anchors, objectness, torch.zeros(4, 4), 40, 40, 4.0, cfg)
    # Anchor 1 overlaps anchor 0 by 90 / 110 > 0.7: suppressed. Survivors 0 and 2 fill 2 of 3 rows.
    assert valid.tolist() == [True, True, False]
    torch.testing.assert_close(boxes[:2], anchors[[0, 2]])
