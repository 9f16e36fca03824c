"""TensorFlow (Keras 3) Faster R-CNN: parameter counts against PyTorch's, detection ops on hand examples, training.

Runs only where tensorflow imports (its own venv, .venv-tensorflow):
    .venv-tensorflow/bin/python -m pytest -q -p no:cacheprovider tests/models/tensorflow/test_tensorflow_faster_rcnn.py
"""

from __future__ import annotations

import math

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.base import Workload  # noqa: E402
from tbd.models.host_data import detection as nd
from tbd.models.tensorflow import faster_rcnn  # noqa: E402
from tbd.models.tensorflow.faster_rcnn import FasterRCNN  # noqa: E402
from tbd.models.tensorflow.faster_rcnn_backbone import FrozenBatchNorm  # noqa: E402

CPU = "/CPU:0"


def _count(variables) -> int:
    return sum(int(np.prod(v.shape)) for v in variables)


def _scalar(x) -> float:
    return float(np.asarray(x))


# --- Architecture ---------------------------------------------------------------------------

def test_full_parameter_counts_closed_form_and_pytorch():
    model = FasterRCNN(nd.FULL)
    # ResNet-101 v1.5 without fc, term by term: per stage d blocks of 1x1 (in -> w), 3x3 (w -> w),
    # 1x1 (w -> 4w), the first block with a 1x1 projection (in -> 4w); BN gamma + beta per channel.
    convs, bn_channels, in_ch = 3 * 64 * 7 * 7, 64, 64
    for depth, w in zip((3, 4, 23, 3), (64, 128, 256, 512)):
        convs += (in_ch * w + w * w * 9 + w * 4 * w + in_ch * 4 * w) + (depth - 1) * (4 * w * w + w * w * 9 + w * 4 * w)
        bn_channels += depth * (w + w + 4 * w) + 4 * w
        in_ch = 4 * w
    anchors = 3 * 3  # sizes (128, 256, 512) x ratios (0.5, 1, 2)
    rpn = (1024 * 512 * 3 * 3 + 512) + (512 * anchors + anchors) + (512 * 4 * anchors + 4 * anchors)
    head = (2048 * 21 + 21) + (2048 * 4 * 21 + 4 * 21)  # cls_score, bbox_pred (per class)
    pytorch_definition = convs + 2 * bn_channels + rpn + head  # nn.Parameters, trainable or frozen
    # PyTorch's _count(model.parameters()), tests/models/pytorch/test_pytorch_faster_rcnn.py / models/pytorch/faster_rcnn.py.
    assert pytorch_definition == 47_457_494
    moving = [v for v in model.non_trainable_weights if "moving_" in v.path]
    assert _count(moving) == 2 * bn_channels  # PyTorch's running_mean/running_var buffers
    assert _count(model.weights) - _count(moving) == pytorch_definition
    # Frozen: conv1, res2 (3 blocks, the first projecting 64 -> 256) and every BN's gamma and beta.
    conv1 = 64 * 3 * 7 * 7
    res2 = (64 * 64 + 64 * 64 * 9 + 64 * 256 + 64 * 256) + 2 * (256 * 64 + 64 * 64 * 9 + 64 * 256)
    frozen = conv1 + res2 + 2 * bn_channels
    assert _count(model.trainable_weights) == pytorch_definition - frozen == 47_457_494 - frozen
    assert _count(model.non_trainable_weights) == frozen + 2 * bn_channels
    assert tuple(model.res5.compute_output_shape((2, 14, 14, 1024))) == (2, 7, 7, 2048)  # 14x14 RoIs -> 7x7


def test_trunk_map_matches_the_host_anchor_grid():
    model = FasterRCNN(nd.TEST)
    out = model.trunk(tf.zeros([1, 97, 131, 3]))
    assert tuple(out.shape) == (1, nd.feature_side(97), nd.feature_side(131), 16 * nd.TEST.width)
    assert (nd.feature_side(97), nd.feature_side(131)) == (math.ceil(97 / 16), math.ceil(131 / 16))


def test_frozen_batchnorm_calibrates_to_its_input_statistics():
    norm = FrozenBatchNorm(epsilon=0.0)
    x = tf.constant([[[[1.0, 2.0], [3.0, 6.0]]]])  # NHWC: channel 0 mean 2 var 1; channel 1 mean 4 var 4
    norm.calibrating = True
    norm(x)
    norm.calibrating = False
    np.testing.assert_allclose(norm.moving_mean.numpy(), [2.0, 4.0])
    np.testing.assert_allclose(norm.moving_variance.numpy(), [1.0, 4.0])
    np.testing.assert_allclose(norm(x).numpy(), [[[[-1.0, -1.0], [1.0, 1.0]]]])
    assert norm.trainable_weights == []


# --- Detection ops on hand examples ------------------------------------------------------------

def test_box_iou_encode_decode_hand_values():
    a = tf.constant([[0.0, 0, 2, 2]])
    b = tf.constant([[1.0, 1, 3, 3], [0, 0, 2, 2], [5, 5, 6, 6], [0, 0, 1, 2]])
    np.testing.assert_allclose(faster_rcnn.box_iou(a, b).numpy(), [[1 / (4 + 4 - 1), 1.0, 0.0, 2 / 4]])
    anchor, gt = tf.constant([[0.0, 0, 10, 10]]), tf.constant([[5.0, 5, 15, 25]])  # centres (5, 5), (10, 15)
    expected = np.array([[(10 - 5) / 10, (15 - 5) / 10, math.log(10 / 10), math.log(20 / 10)]])
    np.testing.assert_allclose(faster_rcnn.encode_boxes(gt, anchor).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(faster_rcnn.encode_boxes(gt, anchor, (10, 10, 5, 5)).numpy(),
                               expected * [10, 10, 5, 5], rtol=1e-6)
    np.testing.assert_allclose(faster_rcnn.decode_boxes(tf.constant(expected, tf.float32), anchor).numpy(),
                               gt.numpy(), rtol=1e-5)
    capped = faster_rcnn.decode_boxes(tf.constant([[0.0, 0, 100, 0]]), tf.constant([[0.0, 0, 16, 16]])).numpy()
    assert capped[0, 2] - capped[0, 0] == pytest.approx(16 * 1000 / 16, rel=1e-5)


# f(y, x) = 2y + x + 1 on a 2x2 map (NHWC): bilinear sampling reproduces it exactly inside [0, 1]^2.
_MAP = tf.constant([[[[1.0], [2.0]], [[3.0], [4.0]]]])


def test_roi_align_interior_hand_values():
    # aligned: [0.5, 1.5] shifts to [0, 1]; bins of 0.5 with samples at 1/8 and 3/8 of a cell.
    out = faster_rcnn.roi_align(_MAP, tf.constant([[0.5, 0.5, 1.5, 1.5]]), 2, 1.0)
    expected = [[2 * 0.25 + 0.25 + 1, 2 * 0.25 + 0.75 + 1], [2 * 0.75 + 0.25 + 1, 2 * 0.75 + 0.75 + 1]]
    np.testing.assert_allclose(out.numpy()[0, :, :, 0], expected, rtol=1e-5)
    same = faster_rcnn.roi_align(_MAP, tf.constant([[8.0, 8, 24, 24]]), 2, 1 / 16)  # image pixels, stride 16
    np.testing.assert_allclose(same.numpy(), out.numpy(), rtol=1e-5)


def test_roi_align_edges_clamp_within_one_cell_and_zero_beyond():
    rois = tf.constant([
        [-0.5, 0.5, 0.5, 1.5],  # x in [-1, 0]: samples -0.75, -0.25 clamp to column 0 -> 2 * 0.5 + 0 + 1
        [1.5, 0.5, 2.5, 1.5],  # x in [1, 2]: samples 1.25, 1.75 clamp to column 1 -> 2 * 0.5 + 1 + 1
        [-2.5, 0.5, 1.5, 1.5],  # x in [-3, 1]: samples -2 (< -1: zero) and 0 -> (0 + 0 + 1.5 + 2.5) / 4
    ])
    out = faster_rcnn.roi_align(_MAP, rois, 1, 1.0)
    np.testing.assert_allclose(out.numpy().reshape(-1), [2.0, 3.0, (1.5 + 2.5) / 4], rtol=1e-5)


def test_roi_align_gradient_spreads_each_bin_over_unit_weight():
    features = tf.random.stateless_normal([1, 5, 6, 3], seed=[0, 1])
    with tf.GradientTape() as tape:
        tape.watch(features)
        out = tf.reduce_sum(faster_rcnn.roi_align(features, tf.constant([[1.0, 1, 4, 3], [0.5, 0.5, 5.5, 4.5]]),
                                                  3, 1.0))
    # Each output averages bilinear samples whose weights sum to 1: 2 RoIs x 3 channels x 3 x 3 bins.
    assert _scalar(tf.reduce_sum(tape.gradient(out, features))) == pytest.approx(2 * 3 * 3 * 3, rel=1e-5)


def test_proposals_are_the_first_nms_survivors_in_score_order():
    anchors = tf.constant([[0.0, 0, 10, 10], [1, 0, 11, 10], [20, 20, 30, 30], [0, 0, 2, 2]])
    objectness = tf.constant([0.9, 0.8, 0.7, 5.0])  # the best one is under min_size and dropped
    cfg = nd.DetectorConfig((1, 1, 1, 1), 8, 8, (16.0,), 50, 60, 4, 3, 8, 8, 8, 32)
    boxes, valid = faster_rcnn._proposals(anchors, objectness, tf.zeros([4, 4]), 40.0, 40.0, 4.0, cfg)
    # Anchor 1 overlaps anchor 0 by 90 / 110 > 0.7: suppressed. Survivors 0 and 2 fill 2 of 3 rows.
    assert valid.numpy().tolist() == [True, True, False]
    np.testing.assert_allclose(boxes.numpy()[:2], anchors.numpy()[[0, 2]])


def test_balanced_sample_takes_positives_up_to_the_quota_then_negatives():
    positive = np.zeros(20, dtype=bool)
    positive[[1, 4, 7]] = True
    gen = tf.random.Generator.from_seed(0)
    index, is_pos, valid = (t.numpy() for t in faster_rcnn.balanced_sample(positive, ~positive, 8, 0.5, gen))
    assert is_pos.tolist() == [True] * 3 + [False] * 5 and valid.all()
    assert sorted(index[:3].tolist()) == [1, 4, 7]
    assert (~positive[index[3:]]).all() and len(set(index.tolist())) == 8
    positive[[10, 11, 12]] = True  # 6 positives, at most 8 x 0.25 = 2 taken
    index, is_pos, valid = (t.numpy() for t in faster_rcnn.balanced_sample(positive, ~positive, 8, 0.25, gen))
    assert is_pos.sum() == 2 and valid.all() and positive[index[:2]].all()
    _, is_pos, valid = faster_rcnn.balanced_sample(np.array([True, False, False, False]),
                                                   np.array([False, True, True, False]), 8, 0.5, gen)
    assert int(is_pos.numpy().sum()) == 1 and int(valid.numpy().sum()) == 1 + 2  # unfillable slots invalid


def test_roi_sampling_with_no_valid_proposals_keeps_the_gt_box_and_stays_finite():
    gt = tf.constant([[10.0, 10, 50, 40]])
    rois, labels, targets, is_fg, ok = (t.numpy() for t in faster_rcnn._sample_rois(
        tf.zeros([5, 4]), tf.zeros([5], tf.bool), gt, tf.constant([7]), 16, tf.random.Generator.from_seed(0)))
    assert rois.shape == (16, 4) and ok.sum() == 1 and is_fg.tolist() == [True] + [False] * 15
    assert labels[0] == 7 and (rois[0] == gt.numpy()[0]).all()
    assert np.isfinite(targets).all() and (targets[0] == 0).all()  # GT onto itself


# --- Workload ------------------------------------------------------------------------------------

def _model_inputs(work: Workload, index: int = 0):
    """(image, boxes, labels, anchors, min_size) of pool image `index`, as the train step gets them."""
    image, boxes, labels = work.inputs()[3 * index:3 * index + 3]
    height, width = image.shape[1:3]
    anchors = nd.anchor_grid(nd.feature_side(height), nd.feature_side(width), nd.STRIDE, nd.TEST.anchor_sizes)
    scale = max(height, width) / nd.VOC_LONG_SIDE
    return image, boxes, labels, tf.constant(anchors), tf.constant(nd.RPN_MIN_SIZE * scale, tf.float32)


def test_workload_fields_and_synthetic_data():
    work = faster_rcnn.build(1, CPU, "test", seed=0, pool_size=3)
    assert isinstance(work, Workload)
    assert (work.name, work.samples_per_step, work.throughput_unit) == ("faster_rcnn", 1, "images/s")
    assert len(work.inputs()) == 3 * 3  # image, boxes, labels per pool image
    assert {id(v) for v in work.optimizer._trainable_variables} == {id(v) for v in work.model.trainable_variables}
    lo = (0 - np.array(nd.IMAGENET_MEAN)) / np.array(nd.IMAGENET_STD)
    hi = (1 - np.array(nd.IMAGENET_MEAN)) / np.array(nd.IMAGENET_STD)
    for i in range(3):
        image, boxes, labels = (t.numpy() for t in work.inputs()[3 * i:3 * i + 3])
        _, height, width, channels = image.shape  # NHWC
        assert channels == 3 and (min(height, width) == nd.TEST.short_side or max(height, width) == nd.TEST.max_side)
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= width).all() and (boxes[:, 3] <= height).all()
        assert labels.dtype == np.int32 and 1 <= labels.min() and labels.max() <= 20 and 1 <= len(labels) <= 4
        np.testing.assert_allclose(image.reshape(-1, 3).min(0), lo, atol=1e-5)
        np.testing.assert_allclose(image.reshape(-1, 3).max(0), hi, atol=1e-5)
    shapes = {(t.shape[1], t.shape[2], len(b)) for t, b in zip(work.inputs()[0::3], work.inputs()[1::3])}
    for _ in range(2 * 3):  # one trace per distinct image shape, in the first pass over the pool only
        work.step()
    fn = work.step.train_step
    assert fn.experimental_get_tracing_count() == len(shapes)
    names = [{op.name for op in c.graph.get_operations() if op.type == "Conv2D"}
             for c in fn._list_all_concrete_functions()]
    assert len(names) == len(shapes) and all(not a & b for a in names for b in names if a is not b)
    static = [op for c in fn._list_all_concrete_functions() for op in c.graph.get_operations()
              if op.type in ("Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput")]
    assert static and all(t.shape.is_fully_defined() for op in static for t in op.inputs if t.dtype == tf.float32)


def test_loss_terms_finite_positive_and_proposals_within_post_nms():
    work = faster_rcnn.build(1, CPU, "test", seed=0, pool_size=1)
    image, boxes, labels, anchors, min_size = _model_inputs(work)
    losses = work.model((image, boxes, labels, anchors, min_size), training=True)
    assert set(losses) == {"rpn_cls", "rpn_box", "head_cls", "head_box"}
    assert all(math.isfinite(_scalar(v)) and _scalar(v) > 0 for v in losses.values())
    model = work.model
    features = model.trunk(image)
    hidden = tf.nn.relu(model.rpn_conv(features))
    height, width = float(image.shape[1]), float(image.shape[2])
    proposals, valid = faster_rcnn._proposals(anchors, tf.reshape(model.rpn_objectness(hidden), [-1]),
                                              tf.reshape(model.rpn_deltas(hidden), [-1, 4]), height, width,
                                              min_size, nd.TEST)
    assert proposals.shape == (nd.TEST.post_nms, 4) and 0 < int(tf.reduce_sum(tf.cast(valid, tf.int32))) <= 100
    assert bool(tf.reduce_all(proposals >= 0)) and bool(tf.reduce_all(proposals[:, 2] <= width))


def test_loss_falls_on_a_fixed_image_and_only_trainable_weights_move():
    work = faster_rcnn.build(1, CPU, "test", seed=0, pool_size=1)
    model = work.model
    frozen = model.trunk.get_layer("conv1")  # the reference's FIXED_PARAMS 'conv0'
    frozen_bn = model.trunk.get_layer("res3_block1_conv1_bn")
    before = [frozen.kernel.numpy(), frozen_bn.gamma.numpy(), model.rpn_conv.kernel.numpy(),
              model.trunk.get_layer("res3_block1_conv1").kernel.numpy()]
    losses = [_scalar(work.step()) for _ in range(8)]
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
    np.testing.assert_array_equal(frozen.kernel.numpy(), before[0])
    np.testing.assert_array_equal(frozen_bn.gamma.numpy(), before[1])
    assert not np.array_equal(model.rpn_conv.kernel.numpy(), before[2])
    assert not np.array_equal(model.trunk.get_layer("res3_block1_conv1").kernel.numpy(), before[3])


def test_same_seed_same_workload():
    a, b, c = (faster_rcnn.build(1, CPU, "test", seed=seed, pool_size=1) for seed in (3, 3, 4))
    assert all(np.array_equal(x, y) for x, y in zip(a.inputs(), b.inputs(), strict=True))
    assert all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a.model.weights, b.model.weights, strict=True))
    assert not all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a.inputs(), c.inputs()))
    assert _scalar(a.step()) == _scalar(b.step())  # the step's sampling is seeded too


@pytest.mark.parametrize("kwargs", [{"batch": 2}, {"batch": 0}, {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    with pytest.raises(UsageError):
        faster_rcnn.build(**{"batch": 1, "device": CPU, "size": "test", **kwargs})


def test_batch_other_than_one_says_why():
    with pytest.raises(UsageError, match="1 image per iteration") as err:
        faster_rcnn.build(4, CPU, "test")
    assert err.value.hint == "drop --batch"
