"""TensorFlow box and sampling ops of the Faster R-CNN port: models/pytorch/detection_ops.py's, with fixed shapes.

Boxes are (x1, y1, x2, y2) in image pixels. Sampling is top-k over uniform keys from a
tf.random.Generator, so every shape in the traced graph is static; RoI Align is built from
tf.image.crop_and_resize so its samples sit where torchvision's roi_align puts them.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tbd.models.host_data import detection as nd


def smooth_l1(x: tf.Tensor, beta: float) -> tf.Tensor:
    """Elementwise smooth-L1 (Huber / beta): 0.5 x^2 / beta below beta, |x| - beta / 2 above (torch's)."""
    ax = tf.abs(x)
    return tf.where(ax < beta, 0.5 * x * x / beta, ax - 0.5 * beta)


def box_iou(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """IoU float32 [N, M] of boxes a [N, 4] against b [M, 4] (x1, y1, x2, y2); 0 for disjoint or empty pairs."""
    top_left = tf.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = tf.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = tf.maximum(bottom_right - top_left, 0.0)
    inter = wh[..., 0] * wh[..., 1]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / tf.maximum(area_a[:, None] + area_b[None, :] - inter, np.finfo(np.float32).tiny)


def encode_boxes(targets: tf.Tensor, refs: tf.Tensor, weights=(1.0, 1.0, 1.0, 1.0)) -> tf.Tensor:
    """R-CNN deltas [N, 4] moving refs [N, 4] onto targets [N, 4] (detection_ops.encode_boxes)."""
    wx, wy, ww, wh = weights
    rw, rh = refs[:, 2] - refs[:, 0], refs[:, 3] - refs[:, 1]
    tw, th = targets[:, 2] - targets[:, 0], targets[:, 3] - targets[:, 1]
    dx = wx * ((targets[:, 0] + 0.5 * tw) - (refs[:, 0] + 0.5 * rw)) / rw
    dy = wy * ((targets[:, 1] + 0.5 * th) - (refs[:, 1] + 0.5 * rh)) / rh
    return tf.stack([dx, dy, ww * tf.math.log(tw / rw), wh * tf.math.log(th / rh)], axis=1)


def decode_boxes(deltas: tf.Tensor, refs: tf.Tensor) -> tf.Tensor:
    """Boxes [N, 4] from deltas [N, 4] on refs [N, 4], log-scale changes capped at BBOX_XFORM_CLIP."""
    rw, rh = refs[:, 2] - refs[:, 0], refs[:, 3] - refs[:, 1]
    x = deltas[:, 0] * rw + refs[:, 0] + 0.5 * rw
    y = deltas[:, 1] * rh + refs[:, 1] + 0.5 * rh
    w = tf.exp(tf.minimum(deltas[:, 2], nd.BBOX_XFORM_CLIP)) * rw
    h = tf.exp(tf.minimum(deltas[:, 3], nd.BBOX_XFORM_CLIP)) * rh
    return tf.stack([x - 0.5 * w, y - 0.5 * h, x + 0.5 * w, y + 0.5 * h], axis=1)


def balanced_sample(positive: tf.Tensor, negative: tf.Tensor, num: int, positive_fraction: float,
                    generator: tf.random.Generator) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`num` slots: up to num * positive_fraction random positives, then random negatives (detection_ops').

    Fixed shapes via top-k over uniform keys. Returns (index int32 [num], is_positive bool [num],
    valid bool [num]); a slot is invalid when the pools run out.
    """
    n = tf.shape(positive)[0]
    key = generator.uniform([n])
    pos_key, pos_index = tf.math.top_k(tf.where(positive, key, -1.0), tf.minimum(int(num * positive_fraction), n))
    neg_key, neg_index = tf.math.top_k(tf.where(negative, key, -1.0), tf.minimum(num, n))
    taken = tf.reduce_sum(tf.cast(pos_key >= 0, tf.int32))
    slot = tf.range(num)
    is_positive = slot < taken
    neg_count = tf.shape(neg_index)[0]
    neg_slot = slot - taken
    neg_ok = neg_slot < neg_count
    neg_slot = tf.clip_by_value(neg_slot, 0, neg_count - 1)
    index = tf.where(is_positive, tf.gather(pos_index, tf.minimum(slot, tf.shape(pos_index)[0] - 1)),
                     tf.gather(neg_index, neg_slot))
    return index, is_positive, is_positive | (neg_ok & (tf.gather(neg_key, neg_slot) >= 0))


def roi_align(features: tf.Tensor, rois: tf.Tensor, output_size: int, spatial_scale: float,
              sampling_ratio: int = 2) -> tf.Tensor:
    """RoI Align (aligned) of features [1, H, W, C] over rois [R, 4] (image pixels) -> [R, P, P, C].

    torchvision.ops.roi_align(aligned=True) with a fixed sampling_ratio, built from
    tf.image.crop_and_resize: sample k of n = P * sampling_ratio along an axis sits at
    x1' + (k + 0.5) (x2' - x1') / n (x' = x * scale - 0.5, in cell-centre coordinates), so the
    crop box runs from the first to the last sample (crop_and_resize spaces n samples evenly
    from box edge to box edge over (size - 1)); a 2x2 average pool makes the bins. The map is
    first padded by one edge-replicated cell, so a sample within one cell outside the map takes
    the edge value and one beyond is 0 (extrapolation_value), torchvision's border rule.
    Gradients reach `features`, not the RoI coordinates.
    """
    n = output_size * sampling_ratio
    padded = tf.pad(features, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="SYMMETRIC")
    shape = tf.shape(padded)
    last_y, last_x = tf.cast(shape[1] - 1, tf.float32), tf.cast(shape[2] - 1, tf.float32)
    boxes = tf.stop_gradient(rois) * spatial_scale - 0.5 + 1.0  # aligned shift, then +1 for the pad
    step = (boxes[:, 2:] - boxes[:, :2]) / n  # [R, 2] (x, y)
    first = boxes[:, :2] + 0.5 * step
    last = boxes[:, :2] + (n - 0.5) * step
    crop = tf.stack([first[:, 1] / last_y, first[:, 0] / last_x, last[:, 1] / last_y, last[:, 0] / last_x], 1)
    samples = tf.image.crop_and_resize(padded, crop, tf.zeros(tf.shape(rois)[:1], tf.int32), [n, n],
                                       method="bilinear", extrapolation_value=0.0)
    return tf.nn.avg_pool2d(samples, sampling_ratio, sampling_ratio, "VALID")
