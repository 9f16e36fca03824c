"""Faster R-CNN with a ResNet-101 C4 backbone on synthetic Pascal VOC 2007-shaped images, in TensorFlow 2 / Keras 3.

Layer for layer, threshold for threshold the model of models/pytorch/faster_rcnn.py (Ren et al.,
"Faster R-CNN", NeurIPS 2015; ResNet-101 C4 of He et al. 2016; read that docstring for the whole
recipe): the v1.5 ResNet-101 trunk conv1..conv4 (stride 16, 1024 channels), an RPN (3x3 conv to
512 + ReLU, 1x1 convs to 9 objectness logits and 9 x 4 deltas; anchors 128/256/512 x 0.5/1/2),
anchor labelling (IoU 0.7 / 0.3, best match, border anchors ignored), 256 sampled anchors at most
half positive, proposals (decode, clip, min size, 12,000 best, NMS 0.7, 2,000 kept), 128 RoIs at
most 25% foreground, a 14x14 RoI crop, res5 (to 7x7) + average pool, a 21-way classifier and
per-class box regression; losses sigmoid cross-entropy + smooth-L1 (beta 1/9) for the RPN,
softmax cross-entropy + smooth-L1 (beta 1) for the head. Frozen BatchNorm (a fixed per-channel
affine whose statistics are set from one forward pass at build), conv1 and res2 frozen, SGD lr
0.001, momentum 0.9, L2 weight decay 0.0005, one image per step. Sizes, constants, the synthetic
VOC images and the anchor grid come from models/host_data/detection.py (shared with the MXNet port);
the backbone is models/tensorflow/faster_rcnn_backbone.py, the box ops models/tensorflow/detection_ops.py.

Parameters: 47,457,494 conv/dense/BN-affine values as PyTorch's model.parameters() (trainable or
not); of them 47,129,750 are trainable (conv1, res2 and every BN gamma/beta frozen: 327,744).
Keras also holds each frozen BN's mean and variance as non-trainable variables (2 x 52,672
values, PyTorch's buffers), so `model.weights` (what tbd's hook counts) has 47,562,838 values.

TensorFlow-specific choices, none changing a parameter count:
- layout NHWC (TF's CPU convolutions take no NCHW); a strided conv/pool gets an explicit
  symmetric ZeroPadding2D and "valid" (PyTorch's padding k // 2; Keras "same" pads bottom/right);
- detection ops are TensorFlow's own, as tf-faster-rcnn uses them: tf.image.non_max_suppression
  (NonMaxSuppressionV3, suppresses at IoU > 0.7, no "+1" in box sides) and
  tf.image.crop_and_resize for the RoI crop. tf-faster-rcnn crops 2P x 2P corner-aligned samples
  and max-pools; here the crop boxes are placed so the 2P x 2P bilinear samples sit exactly at
  RoI Align's (aligned, sampling ratio 2) positions and a 2x2 average pool makes the P x P bins,
  i.e. torchvision's roi_align. A 1-cell edge-replicating (SYMMETRIC) pad of the feature map
  reproduces RoI Align's border rule (clamp within one cell of the map, zero beyond);
- fixed shapes: proposals are padded to post_nms rows with a validity mask (NMS returns a
  variable count), sampling is top-k over random keys (detection_ops.balanced_sample). Image
  sizes differ across the pool (as in PyTorch), so the train step traces once per distinct pool
  image shape (at most pool_size traces, during the first pass over the pool; never per step)
  with static shapes, under a name scope naming the shapes: a None H/W input_signature would
  leave every trunk conv without a FLOP formula in tbd's hook. Anchors are computed on the host;
- the step's sampling draws from a tf.random.Generator seeded at build (fixed per seed).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tbd.models.base import Workload, pool_workload
from tbd.models.host_data import detection as nd
from tbd.models.host_data.synthetic import POOL_SIZE
from tbd.models.tensorflow.detection_ops import (
    balanced_sample,
    box_iou,
    decode_boxes,
    encode_boxes,
    roi_align,
    smooth_l1,
)
from tbd.models.tensorflow.faster_rcnn_backbone import FrozenBatchNorm, res5, trunk


class FasterRCNN(keras.Model):
    """ResNet C4 trunk, RPN, RoI crop, res5 head; call() returns the four training losses."""

    def __init__(self, cfg: nd.DetectorConfig, sampler: tf.random.Generator | None = None, **kwargs):
        super().__init__(**kwargs)
        self.cfg = cfg
        self.trunk, self.res5 = trunk(cfg), res5(cfg)
        anchors, c4 = len(cfg.anchor_sizes) * len(nd.ANCHOR_RATIOS), 16 * cfg.width

        def normal(std: float):  # the reference's N(0, std) weights, zero biases
            return {"kernel_initializer": keras.initializers.RandomNormal(0.0, std), "bias_initializer": "zeros"}

        self.rpn_conv = keras.layers.Conv2D(cfg.rpn_channels, 3, padding="same", name="rpn_conv", **normal(0.01))
        self.rpn_objectness = keras.layers.Conv2D(anchors, 1, name="rpn_objectness", **normal(0.01))
        self.rpn_deltas = keras.layers.Conv2D(4 * anchors, 1, name="rpn_deltas", **normal(0.01))
        self.cls_score = keras.layers.Dense(nd.NUM_CLASSES, name="cls_score", **normal(0.01))
        self.bbox_pred = keras.layers.Dense(4 * nd.NUM_CLASSES, name="bbox_pred", **normal(0.001))
        self.rpn_conv.build((1, None, None, c4))
        self.rpn_objectness.build((1, None, None, cfg.rpn_channels))
        self.rpn_deltas.build((1, None, None, cfg.rpn_channels))
        self.cls_score.build((None, 2 * c4))
        self.bbox_pred.build((None, 2 * c4))
        # Outside Keras's tracking: the sampler's state is no model weight.
        object.__setattr__(self, "sampler", sampler)
        self.built = True

    def call(self, inputs, training=False):
        """Losses {rpn_cls, rpn_box, head_cls, head_box} (scalars) for one image and its GT.

        inputs: (image float32 [1, H, W, 3], gt boxes float32 [G, 4] (pixels), gt labels int32 [G]
        in 1..20, anchors float32 [h * w * 9, 4] for the trunk's h x w map, smallest proposal side
        in pixels (float32 scalar)).
        """
        image, gt_boxes, gt_labels, anchors, min_size = inputs
        cfg, gen = self.cfg, self.sampler
        shape = tf.shape(image)
        height, width = tf.cast(shape[1], tf.float32), tf.cast(shape[2], tf.float32)
        features = self.trunk(image, training=training)  # [1, h, w, 16 width]
        hidden = tf.nn.relu(self.rpn_conv(features))
        objectness = tf.reshape(self.rpn_objectness(hidden), [-1])  # NHWC: (y, x, anchor) order
        deltas = tf.reshape(self.rpn_deltas(hidden), [-1, 4])  # channel a * 4 + k -> row (y, x, a), column k

        losses = _rpn_losses(anchors, objectness, deltas, gt_boxes, height, width, cfg.rpn_batch, gen)
        proposals, valid = _proposals(anchors, tf.stop_gradient(objectness), tf.stop_gradient(deltas),
                                      height, width, min_size, cfg)
        rois, labels, targets, is_fg, ok = _sample_rois(proposals, valid, gt_boxes, gt_labels, cfg.roi_batch, gen)
        pooled = roi_align(features, rois, cfg.pooled, 1.0 / nd.STRIDE)
        top = tf.reduce_mean(self.res5(pooled, training=training), axis=[1, 2])  # [R, 32 width]
        scores = self.cls_score(top)
        box_deltas = tf.reshape(self.bbox_pred(top), [-1, nd.NUM_CLASSES, 4])

        ok_f = tf.cast(ok, tf.float32)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=scores)
        losses["head_cls"] = tf.reduce_sum(ce * ok_f) / tf.maximum(tf.reduce_sum(ok_f), 1.0)
        chosen = tf.gather(box_deltas, labels, batch_dims=1)  # [R, 4], the labelled class's deltas
        l1 = tf.reduce_sum(smooth_l1(chosen - targets, nd.HEAD_SMOOTH_L1_BETA), axis=1)
        losses["head_box"] = tf.reduce_sum(l1 * tf.cast(is_fg & ok, tf.float32)) / cfg.roi_batch
        return losses

    def calibrate(self, image: np.ndarray) -> None:
        """Set every frozen BN's statistics from one eager pass of `image` [1, S, S, 3] through conv1..conv5."""
        norms = [layer for model in (self.trunk, self.res5) for layer in model.layers
                 if isinstance(layer, FrozenBatchNorm)]
        for norm in norms:
            norm.calibrating = True
        try:
            self.res5(self.trunk(tf.constant(image)))
        finally:
            for norm in norms:
                norm.calibrating = False


def _rpn_losses(anchors, objectness, deltas, gt_boxes, height, width, batch: int, generator) -> dict:
    """RPN objectness (BCE, mean over sampled anchors) and box (smooth-L1 sum / batch) losses.

    py-faster-rcnn's anchor_target_layer: anchors wholly inside the image only; negative below IoU
    0.3, positive at >= 0.7 or as some GT box's best match (ties included).
    """
    inside = ((anchors[:, 0] >= 0) & (anchors[:, 1] >= 0) & (anchors[:, 2] <= width) & (anchors[:, 3] <= height))
    iou = tf.where(inside[:, None], box_iou(anchors, gt_boxes), -1.0)  # [A, G]
    best, match = tf.reduce_max(iou, axis=1), tf.argmax(iou, axis=1, output_type=tf.int32)
    per_gt = tf.reduce_max(iou, axis=0)
    is_best = tf.reduce_any((iou == per_gt[None, :]) & (per_gt[None, :] > 0), axis=1)
    positive = inside & ((best >= nd.RPN_POSITIVE_IOU) | is_best)
    negative = inside & (best < nd.RPN_NEGATIVE_IOU) & ~positive
    index, is_pos, ok = balanced_sample(positive, negative, batch, nd.RPN_POSITIVE_FRACTION, generator)
    ok_f = tf.cast(ok, tf.float32)
    bce = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(is_pos, tf.float32),
                                                  logits=tf.gather(objectness, index))
    regress = is_pos & ok
    targets = tf.where(regress[:, None], encode_boxes(tf.gather(gt_boxes, tf.gather(match, index)),
                                                      tf.gather(anchors, index)), 0.0)
    l1 = tf.reduce_sum(smooth_l1(tf.gather(deltas, index) - targets, nd.RPN_SMOOTH_L1_BETA), axis=1)
    return {"rpn_cls": tf.reduce_sum(bce * ok_f) / tf.maximum(tf.reduce_sum(ok_f), 1.0),
            "rpn_box": tf.reduce_sum(l1 * tf.cast(regress, tf.float32)) / batch}


def _proposals(anchors, objectness, deltas, height, width, min_size, cfg: nd.DetectorConfig):
    """The RPN's proposals [post_nms, 4] in score order and which exist (bool [post_nms]).

    py-faster-rcnn's proposal_layer: decode, clip, drop boxes under min_size, keep the pre_nms
    best, NMS (tf.image.non_max_suppression), keep the post_nms best; rows past the survivors
    are padding (box 0, invalid).
    """
    boxes = decode_boxes(deltas, anchors)
    boxes = tf.stack([tf.clip_by_value(boxes[:, 0], 0.0, width), tf.clip_by_value(boxes[:, 1], 0.0, height),
                      tf.clip_by_value(boxes[:, 2], 0.0, width), tf.clip_by_value(boxes[:, 3], 0.0, height)], 1)
    big = ((boxes[:, 2] - boxes[:, 0]) >= min_size) & ((boxes[:, 3] - boxes[:, 1]) >= min_size)
    scores = tf.where(big, objectness, float("-inf"))
    top_scores, order = tf.math.top_k(scores, tf.minimum(cfg.pre_nms, tf.shape(scores)[0]))
    boxes = tf.gather(boxes, order)
    # Only scores > score_threshold are candidates, so -inf (too small) boxes neither stay nor suppress.
    kept = tf.image.non_max_suppression(boxes, top_scores, cfg.post_nms, iou_threshold=nd.NMS_IOU,
                                        score_threshold=float(np.finfo(np.float32).min))
    count = tf.shape(kept)[0]
    kept = tf.pad(kept, [[0, cfg.post_nms - count]])
    return tf.gather(boxes, kept), tf.range(cfg.post_nms) < count


def _sample_rois(proposals, valid, gt_boxes, gt_labels, batch: int, generator):
    """The head's R = batch RoIs (py-faster-rcnn's proposal_target_layer) from proposals + GT boxes.

    Returns (rois [R, 4], labels int32 [R] (0 = background), targets [R, 4] (HEAD_BOX_WEIGHTS; 0
    where unused), is_foreground bool [R], valid bool [R]).
    """
    candidates = tf.concat([proposals, gt_boxes], axis=0)
    usable = tf.concat([valid, tf.ones_like(gt_labels, dtype=tf.bool)], axis=0)
    iou = box_iou(candidates, gt_boxes)
    best, match = tf.reduce_max(iou, axis=1), tf.argmax(iou, axis=1, output_type=tf.int32)
    foreground = usable & (best >= nd.HEAD_FOREGROUND_IOU)
    background = usable & (best < nd.HEAD_FOREGROUND_IOU)
    index, is_fg, ok = balanced_sample(foreground, background, batch, nd.HEAD_FOREGROUND_FRACTION, generator)
    rois, matched = tf.gather(candidates, index), tf.gather(match, index)
    labels = tf.where(is_fg, tf.gather(gt_labels, matched), 0)
    # Zero where unused: a padding row is a degenerate box whose encoding is inf (inf x 0 = NaN).
    targets = tf.where((is_fg & ok)[:, None],
                       encode_boxes(tf.gather(gt_boxes, matched), rois, nd.HEAD_BOX_WEIGHTS), 0.0)
    return rois, labels, targets, is_fg, ok


def build(batch: int, device: str, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """Faster R-CNN training workload: SGD with momentum, one synthetic VOC-like image per step, on `device`.

    Args:
        batch: images per iteration; must be 1 (the paper's setting).
        device: TensorFlow device string for variables, optimizer state and images ("/CPU:0", "/GPU:0").
        size: "full" (ResNet-101 C4, 600-pixel images) or "test" (tiny, same structure, ~96x128 images).
        seed: fixes weights (keras.utils.set_random_seed), frozen BN statistics and images (numpy
            RandomState) and the step's anchor/RoI sampling (tf.random.Generator).
        pool_size: synthetic images kept on the device and cycled through by step().
    Returns:
        Workload whose step() runs one iteration (a tf.function) and returns the summed loss
        tensor without reading it.
    """
    cfg = nd.check_detector_build_args(batch, size, pool_size)
    rng = np.random.RandomState(seed)
    keras.utils.set_random_seed(seed)
    side = cfg.calibration_side
    calibration = nd.normalised_pixels((1, 3, side, side), rng).transpose(0, 2, 3, 1)
    host_pool = [nd.voc_like_image(cfg, rng) for _ in range(pool_size)]

    with tf.device(device):
        model = FasterRCNN(cfg, tf.random.Generator.from_seed(seed), name="faster_rcnn")
        model.calibrate(calibration)
        optimizer = keras.optimizers.SGD(learning_rate=nd.LEARNING_RATE, momentum=nd.MOMENTUM)
        optimizer.build(model.trainable_variables)
        pool = [_to_tensors(cfg, *arrays) for arrays in host_pool]

    sides = sorted({tuple(image.shape[2:]) for image, *_ in host_pool})
    return pool_workload(
        "faster_rcnn", pool, _train_step(model, optimizer),
        scope=lambda: tf.device(device),
        samples_per_step=1,
        throughput_unit="images/s",
        model=model,
        optimizer=optimizer,
        inputs=lambda: [t for image, boxes, labels, *_ in pool for t in (image, boxes, labels)],
        description=(f"Faster R-CNN (Ren et al. 2015), ResNet C4 ({size}: depths {cfg.depths}, width {cfg.width}; "
                     f"RPN {cfg.rpn_channels}, {cfg.post_nms} proposals, {cfg.roi_batch} RoIs, RoI Align "
                     f"{cfg.pooled}x{cfg.pooled} via crop_and_resize), Keras 3 on TensorFlow (tf.function, no XLA), "
                     f"SGD momentum 0.9, {pool_size} synthetic VOC images (HxW {sides})"),
    )


def _to_tensors(cfg: nd.DetectorConfig, image: np.ndarray, boxes: np.ndarray, labels: np.ndarray,
                scale: float) -> tuple[tf.Tensor, ...]:
    """(image NHWC, gt boxes, gt labels, anchors, smallest proposal side) of one pool image, on the current device."""
    cells = nd.feature_side(image.shape[2]), nd.feature_side(image.shape[3])
    anchors = nd.anchor_grid(*cells, nd.STRIDE, cfg.anchor_sizes, nd.ANCHOR_RATIOS)
    return (tf.constant(image.transpose(0, 2, 3, 1)), tf.constant(boxes), tf.constant(labels),
            tf.constant(anchors), tf.constant(nd.RPN_MIN_SIZE * scale, tf.float32))


def _train_step(model: FasterRCNN, optimizer: keras.optimizers.Optimizer) -> tf.types.experimental.PolymorphicFunction:
    """The training iteration as a tf.function: summed losses, their gradient, SGD with L2 weight decay.

    No input_signature and no reduce_retracing: each image shape of the pool gets its own trace
    with static shapes (at most pool_size traces, all in the first pass over the pool, never
    again), so the hook reads every conv's operand shapes (a None dim would leave the trunk's
    FLOPs unknown). Each trace runs under a name scope naming its shapes, so op names stay unique
    across the traces and the hook matches each op event to its own graph's shapes.
    """
    @tf.function(jit_compile=False, reduce_retracing=False)
    def train_step(image, boxes, labels, anchors, min_size):
        with tf.name_scope(f"image{image.shape[1]}x{image.shape[2]}_gt{boxes.shape[0]}"):
            with tf.GradientTape() as tape:
                loss = tf.add_n(list(model((image, boxes, labels, anchors, min_size), training=True).values()))
            variables = model.trainable_variables
            grads = tape.gradient(loss, variables)
            # L2 in the gradient before momentum = torch.optim.SGD(weight_decay=5e-4) (see resnet50.py).
            optimizer.apply_gradients([(g + nd.WEIGHT_DECAY * v, v) for g, v in zip(grads, variables)])
            return loss

    return train_step
