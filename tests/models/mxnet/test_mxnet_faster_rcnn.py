"""MXNet Gluon Faster R-CNN: parameter counts against PyTorch's, detection pieces on hand examples, training.

Runs only where mxnet imports (its own venv):
    .venv-mxnet/bin/python -m pytest -q tests/models/mxnet/test_mxnet_faster_rcnn.py
Also covers models/host_data/detection.py (synthetic VOC images, anchor grid), shared with TensorFlow.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from mxnet import autograd  # noqa: E402

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.base import Workload  # noqa: E402
from tbd.models.host_data import detection as det
from tbd.models.mxnet import faster_rcnn  # noqa: E402
from tbd.models.mxnet.faster_rcnn import FasterRCNN  # noqa: E402

nd = mx.nd

#: models/pytorch/faster_rcnn.py FULL: every parameter (tests/models/pytorch/test_pytorch_faster_rcnn.py
#: test_full_parameter_count_closed_form compares model.parameters(), frozen ones included).
PYTORCH_PARAMETERS = 47_457_494


def _values(params) -> int:
    return sum(int(np.prod(p.shape)) for p in params)


def _bn_channels(depths, width) -> int:
    """BatchNorm channels of a bottleneck ResNet: stem, then per stage depth x (w + w + 4w) plus 4w (projection)."""
    widths = [width * 2 ** i for i in range(4)]
    return width + sum(d * 6 * w + 4 * w for d, w in zip(depths, widths))


# --- Architecture ---------------------------------------------------------------------------

def test_full_parameter_counts_closed_form_and_match_pytorch():
    model = FasterRCNN(det.FULL)  # shapes only: nothing is allocated before initialize()
    faster_rcnn.freeze(model)
    params = model.collect_params()
    running = [p for name, p in params.items() if name.endswith(("running_mean", "running_var"))]
    weights = [p for name, p in params.items() if not name.endswith(("running_mean", "running_var"))]
    trainable = [p for p in params.values() if p.grad_req != "null"]

    convs = 3 * 64 * 7 * 7  # conv1
    in_ch = 64
    for stage, blocks in enumerate((3, 4, 23, 3)):  # res2..res5
        w = 64 * 2 ** stage
        for block in range(blocks):
            convs += in_ch * w + 9 * w * w + w * 4 * w + (in_ch * 4 * w if block == 0 else 0)
            in_ch = 4 * w
    bn = _bn_channels((3, 4, 23, 3), 64)
    resnet101_without_fc = convs + 2 * bn  # gamma and beta per channel
    assert resnet101_without_fc == 44_549_160 - (2048 * 1000 + 1000)  # torchvision resnet101 minus fc
    anchors = 3 * 3
    rpn = (1024 * 512 * 3 * 3 + 512) + (512 * anchors + anchors) + (512 * 4 * anchors + 4 * anchors)
    head = (2048 * 21 + 21) + (2048 * 4 * 21 + 4 * 21)
    assert _values(weights) == resnet101_without_fc + rpn + head
    assert _values(weights) == PYTORCH_PARAMETERS  # exact, so within 1%
    assert _values(running) == 2 * bn  # running mean and variance: PyTorch buffers, not parameters

    conv1 = 64 * 3 * 7 * 7
    res2 = (64 * 64 + 64 * 64 * 9 + 64 * 256 + 64 * 256) + 2 * (256 * 64 + 64 * 64 * 9 + 64 * 256)
    frozen = conv1 + res2 + 2 * bn
    assert _values(trainable) == PYTORCH_PARAMETERS - frozen  # PyTorch's requires_grad count


def test_res5_halves_14x14_roi_features_to_7x7():
    model = FasterRCNN(det.FULL)
    _, out_shapes, _ = model.res5(mx.sym.var("x")).infer_shape(x=(2, 1024, 14, 14))
    assert out_shapes == [(2, 2048, 7, 7)]


def test_calibration_sets_each_bn_to_its_input_statistics():
    model = FasterRCNN(det.TEST)
    model.initialize()
    image = nd.array(det.normalised_pixels((1, 3, 32, 32), np.random.RandomState(0)))
    faster_rcnn.calibrate(model, image)
    conv1, norm = model.stem[0], model.stem[1]
    x = conv1(image).asnumpy()
    np.testing.assert_allclose(norm.running_mean.data().asnumpy(), x.mean(axis=(0, 2, 3)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(norm.running_var.data().asnumpy(), x.var(axis=(0, 2, 3)), rtol=1e-4, atol=1e-5)
    out = norm(conv1(image)).asnumpy()  # gamma 1, beta 0: unit-scale output
    np.testing.assert_allclose(out.std(axis=(0, 2, 3)), 1.0, rtol=1e-3)


# --- Detection pieces on hand examples -------------------------------------------------------

def test_anchor_grid_hand_values():
    np.testing.assert_allclose(det.anchor_grid(1, 2, stride=16, sizes=(16.0,), ratios=(1.0,)),
                               [[0.0, 0, 16, 16], [16, 0, 32, 16]])
    tall, wide = 32 * math.sqrt(0.5), 32 / math.sqrt(0.5)  # ratio 0.5 = height / width, area 32^2
    anchors = det.anchor_grid(2, 1, stride=16, sizes=(32.0, 64.0), ratios=(0.5, 1.0))
    assert anchors.shape == (2 * 1 * 4, 4) and anchors.dtype == np.float32
    np.testing.assert_allclose(anchors[0], [8 - wide / 2, 8 - tall / 2, 8 + wide / 2, 8 + tall / 2], rtol=1e-6)
    np.testing.assert_allclose(anchors[7], [8 - 32.0, 24 - 32, 8 + 32, 24 + 32])  # cell (1, 0), size 64, ratio 1
    with pytest.raises(UsageError):
        det.anchor_grid(0, 2)


def test_feature_side_is_four_halvings_rounded_up():
    assert [det.feature_side(n) for n in (96, 144, 600, 901)] == [96 // 16, 144 // 16, 38, 57]  # ceil(n / 16)


def test_box_iou_hand_values():
    a = np.array([[0.0, 0, 2, 2]], dtype=np.float32)
    b = np.array([[1.0, 1, 3, 3], [0, 0, 2, 2], [5, 5, 6, 6], [0, 0, 1, 2]], dtype=np.float32)
    expected = [[1 / (4 + 4 - 1), 1.0, 0.0, 2 / 4]]
    np.testing.assert_allclose(det.box_iou(a, b), expected, rtol=1e-6)
    np.testing.assert_allclose(nd.contrib.box_iou(nd.array(a), nd.array(b), format="corner").asnumpy(), expected,
                               rtol=1e-6)  # MXNet's op, used in the graph: the same no-"+1" convention


def test_roi_align_as_the_graph_calls_it_hand_values():
    # f(y, x) = 2y + x + 1 on a 2x2 map (as tests/models/pytorch/test_pytorch_faster_rcnn.py): aligned RoI [0.5, 1.5]
    # shifts to [0, 1]; 2x2 bins, samples at 1/8 and 3/8 of a cell, so bin means are 0.25 and 0.75.
    features = nd.array([[[[1.0, 2.0], [3.0, 4.0]]]])
    out = nd.contrib.ROIAlign(features, nd.array([[0, 8.0, 8, 24, 24]]), pooled_size=(2, 2),
                              spatial_scale=1.0 / 16, sample_ratio=2, aligned=True)
    expected = [[2 * 0.25 + 0.25 + 1, 2 * 0.25 + 0.75 + 1], [2 * 0.75 + 0.25 + 1, 2 * 0.75 + 0.75 + 1]]
    np.testing.assert_allclose(out.asnumpy()[0, 0], expected, rtol=1e-6)


def test_proposals_are_the_first_nms_survivors_in_score_order():
    anchors = nd.array([[0.0, 0, 10, 10], [1, 0, 11, 10], [20, 20, 30, 30], [0, 0, 2, 2]])
    objectness = nd.array([0.9, 0.8, 0.7, 5.0])  # the best one is under min_size and dropped
    cfg = det.DetectorConfig((1, 1, 1, 1), 8, 8, (16.0,), 50, 60, 4, 3, 8, 8, 8, 32)
    side = nd.array([[40.0]])
    boxes, valid = faster_rcnn._proposals(nd, anchors, objectness, nd.zeros((4, 4)), side, side, nd.array([[4.0]]),
                                          cfg)
    # Anchor 1 overlaps anchor 0 by 90 / 110 > 0.7: suppressed. Survivors 0 and 2 fill 2 of 3 rows.
    assert valid.asnumpy().tolist() == [1, 1, 0]
    np.testing.assert_allclose(boxes.asnumpy()[:2], anchors.asnumpy()[[0, 2]])


def test_nms_is_greedy_not_one_pass():
    # A, B, C slide right by 3 px: IoU(A, B) = IoU(B, C) = 70 / 130 > 0.5, IoU(A, C) = 40 / 160 < 0.5:
    # greedy keeps A, drops B, then keeps C; D overlaps nothing. Rows: score, x1, y1, x2, y2.
    a, b, c, d = [0.9, 0, 0, 10, 10], [0.8, 3, 0, 13, 10], [0.7, 6, 0, 16, 10], [0.6, 20, 20, 30, 30]
    kept = nd.contrib.box_nms(nd.array([b, d, c, a]), overlap_thresh=0.5, valid_thresh=0.0, topk=-1, coord_start=1,
                              score_index=0, id_index=-1, force_suppress=True).asnumpy()
    np.testing.assert_allclose(kept[:3], [a, c, d], rtol=1e-6)
    assert (kept[3] == -1).all()


def test_balanced_sample_quota_fill_and_unfilled_slots():
    mx.random.seed(0)
    positive = np.zeros(20, dtype=np.float32)
    positive[[1, 4, 7]] = 1
    index, is_pos, valid = faster_rcnn._balanced_sample(nd, nd.array(positive), nd.array(1 - positive), 8, 0.5)
    index = index.asnumpy().astype(int)
    assert is_pos.asnumpy().tolist() == [1] * 3 + [0] * 5 and valid.asnumpy().all()
    assert sorted(index[:3]) == [1, 4, 7] and (positive[index[3:]] == 0).all() and len(set(index)) == 8
    positive[[10, 11, 12]] = 1  # 6 positives, at most 8 x 0.25 = 2 taken
    index, is_pos, valid = faster_rcnn._balanced_sample(nd, nd.array(positive), nd.array(1 - positive), 8, 0.25)
    assert is_pos.asnumpy().sum() == 2 and valid.asnumpy().all()
    assert (positive[index.asnumpy().astype(int)[:2]] == 1).all()
    # One positive, two negatives: 3 of 8 slots filled.
    pos, neg = nd.array([1, 0, 0, 0, 0, 0, 0, 0]), nd.array([0, 1, 1, 0, 0, 0, 0, 0])
    _, is_pos, valid = faster_rcnn._balanced_sample(nd, pos, neg, 8, 0.5)
    assert is_pos.asnumpy().sum() == 1 and valid.asnumpy().sum() == 1 + 2


def test_roi_sampling_with_no_valid_proposals_keeps_the_gt_box_and_stays_finite():
    # Degenerate (zero-width) proposals, all invalid; at least as many candidates as slots, as
    # build guarantees (post_nms >= roi_batch), because the graph's top-k takes a fixed count.
    gt = nd.array([[10.0, 10, 50, 40]])
    rois, labels, targets, fg_ok, ok = faster_rcnn._sample_rois(nd, nd.zeros((16, 4)), nd.zeros(16), gt,
                                                                 nd.array([7.0]), 16)
    assert rois.shape == (16, 4) and ok.asnumpy().sum() == 1 and fg_ok.asnumpy().tolist() == [1] + [0] * 15
    assert labels.asnumpy()[0] == 7 and (rois.asnumpy()[0] == gt.asnumpy()[0]).all()
    assert np.isfinite(targets.asnumpy()).all() and (targets.asnumpy()[0] == 0).all()  # GT onto itself


# --- Synthetic VOC data (models/host_data/detection.py) --------------------------------------------

def test_voc_like_images_match_voc2007_statistics():
    rng = np.random.RandomState(0)
    draws = [det.voc_like_image(det.TEST, rng) for _ in range(400)]
    counts = np.array([len(labels) for _, _, labels, _ in draws])
    assert counts.min() == 1 and counts.max() == 4
    assert abs(counts.mean() - 12_608 / 5_011) < 0.2  # VOC 2007 trainval: objects / images
    landscape = np.mean([image.shape[-1] > image.shape[-2] for image, *_ in draws])
    assert 0.65 < landscape < 0.85
    lo = (0 - np.array(det.IMAGENET_MEAN)) / np.array(det.IMAGENET_STD)
    hi = (1 - np.array(det.IMAGENET_MEAN)) / np.array(det.IMAGENET_STD)
    for image, boxes, labels, scale in draws:
        assert image.dtype == boxes.dtype == np.float32 and labels.dtype == np.int32
        height, width = image.shape[-2:]
        assert min(height, width) == det.TEST.short_side or max(height, width) == det.TEST.max_side
        assert round(500 * scale) == max(height, width)  # VOC's long side is 500 px
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= width).all() and (boxes[:, 3] <= height).all()
        assert (boxes[:, 2:] - boxes[:, :2] >= 0.1 * np.array([width, height]) - 0.5).all()
        assert labels.min() >= 1 and labels.max() <= 20
        per_channel = image[0].reshape(3, -1)
        np.testing.assert_allclose(per_channel.min(1), lo, atol=1e-5)
        np.testing.assert_allclose(per_channel.max(1), hi, atol=1e-5)


def test_full_size_images_are_reference_scaled():
    rng = np.random.RandomState(0)
    for _ in range(3):
        image, _, _, scale = det.voc_like_image(det.FULL, rng)
        short, long = sorted(image.shape[-2:])
        # VOC's short side 333..375 -> 600, long side 500 -> 500 x 600 / short in [800, 901].
        assert short == 600 and 800 <= long <= 901 and scale == pytest.approx(long / 500, abs=1e-3)


# --- Workload ------------------------------------------------------------------------------------

def _pool_inputs(work: Workload, seed: int = 0):
    """The first pool image's graph inputs, redrawn as build draws them (calibration image first)."""
    rng = np.random.RandomState(seed)
    det.normalised_pixels((1, 3, det.TEST.calibration_side, det.TEST.calibration_side), rng)
    inputs = faster_rcnn._to_device(det.TEST, *det.voc_like_image(det.TEST, rng), mx.cpu())
    np.testing.assert_array_equal(inputs[0].asnumpy(), work.inputs()[0].asnumpy())
    return inputs


def test_workload_fields_and_trainer_holds_the_trainable_parameters():
    work = faster_rcnn.build(1, mx.cpu(), "test", seed=0, pool_size=2)
    assert isinstance(work, Workload)
    assert (work.name, work.samples_per_step, work.throughput_unit) == ("faster_rcnn", 1, "images/s")
    assert len(work.inputs()) == 2 * 3  # image, boxes, labels per pool image
    trainable = {id(p) for p in work.model.collect_params().values() if p.grad_req != "null"}
    assert {id(p) for p in work.optimizer._params} == trainable


def test_losses_finite_positive_falling_and_frozen_weights_stay():
    work = faster_rcnn.build(1, mx.cpu(), "test", seed=0, pool_size=1)
    inputs = _pool_inputs(work)
    with autograd.record():  # the training-mode forward, sampling included
        terms = [float(t.asscalar()) for t in work.model(*inputs)]
    assert all(math.isfinite(t) and t > 0 for t in terms)  # rpn_cls, rpn_box, head_cls, head_box
    params = work.model.collect_params()
    frozen = params[work.model.stem[0].weight.name]
    trained = params[work.model.res3[0].conv1.weight.name]
    frozen_before, trained_before = frozen.data().asnumpy().copy(), trained.data().asnumpy().copy()
    losses = []
    for _ in range(8):
        loss = work.step()
        assert isinstance(loss, nd.NDArray) and loss.shape == (1,)
        losses.append(float(loss.asscalar()))
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]
    np.testing.assert_array_equal(frozen.data().asnumpy(), frozen_before)
    assert not np.array_equal(trained.data().asnumpy(), trained_before)


def test_proposals_of_the_rpn_are_at_most_post_nms():
    work = faster_rcnn.build(1, mx.cpu(), "test", seed=0, pool_size=1)
    model = work.model
    image, _, _, anchors, im_info = _pool_inputs(work)
    features = model.trunk(image)
    hidden = nd.relu(model.rpn_conv(features))
    objectness = model.rpn_objectness(hidden).transpose((0, 2, 3, 1)).reshape(-1)
    deltas = model.rpn_deltas(hidden).reshape((0, -4, model.num_anchors, 4, -2)).transpose((0, 3, 4, 1, 2))
    info = im_info.reshape((1, 3))
    boxes, valid = faster_rcnn._proposals(nd, anchors, objectness, deltas.reshape((-1, 4)), info[:, 0:1],
                                          info[:, 1:2], info[:, 2:3], det.TEST)
    assert boxes.shape == (det.TEST.post_nms, 4)
    assert 0 < valid.asnumpy().sum() <= det.TEST.post_nms


def test_same_seed_same_workload():
    # The step's sampling draws from MXNet's per-device generator, which build seeds: the same
    # seed gives the same first steps when each workload runs right after its build.
    a = faster_rcnn.build(1, mx.cpu(), "test", seed=3)
    a_losses = [a.step().asnumpy() for _ in range(2)]
    b = faster_rcnn.build(1, mx.cpu(), "test", seed=3)
    b_losses = [b.step().asnumpy() for _ in range(2)]
    c = faster_rcnn.build(1, mx.cpu(), "test", seed=4)
    assert all(np.array_equal(x.asnumpy(), y.asnumpy()) for x, y in zip(a.inputs(), b.inputs(), strict=True))
    assert all(np.array_equal(x.data().asnumpy(), y.data().asnumpy()) for x, y in
               zip(a.model.collect_params().values(), b.model.collect_params().values(), strict=True))
    assert not all(x.shape == y.shape and np.array_equal(x.asnumpy(), y.asnumpy())
                   for x, y in zip(a.inputs(), c.inputs()))
    np.testing.assert_allclose(np.concatenate(a_losses), np.concatenate(b_losses), rtol=1e-5)


@pytest.mark.parametrize("kwargs", [{"batch": 2}, {"batch": 0}, {"batch": None}, {"size": "huge"},
                                    {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 1, "device": mx.cpu(), "size": "test", **kwargs}
    with pytest.raises(UsageError):
        faster_rcnn.build(**args)


def test_batch_other_than_one_says_why():
    with pytest.raises(UsageError, match="1 image per iteration") as err:
        faster_rcnn.build(4, mx.cpu(), "test")
    assert err.value.hint == "drop --batch"
