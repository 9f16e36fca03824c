"""Faster R-CNN with a ResNet-101 C4 backbone on synthetic Pascal VOC 2007-shaped images, in MXNet Gluon.

The TBD paper's object-detection workload (Ren, He, Girshick and Sun, "Faster R-CNN", NeurIPS
2015; ResNet-101 trunk, He et al. 2016 "C4" layout), ported layer for layer from
models/pytorch/faster_rcnn.py (read its docstring for the configuration and sources; the MXNet
reference it follows is apache/mxnet example/rcnn, symnet/symbol_resnet.py and train.py):
ResNet v1.5 bottlenecks conv1..res4 as the stride-16 trunk, RPN (3x3 conv to 512, 9 anchors),
anchor targets (IoU 0.7 / 0.3, 256 sampled, half positive), proposals (12,000 best, NMS 0.7,
2,000 kept), head sampling (128 RoIs, 25% foreground at IoU 0.5), RoI Align 14x14, res5 to
7x7, average pool, 21-way classifier and per-class box regression; four losses (RPN binary
cross-entropy and smooth-L1 sigma 3, head cross-entropy and smooth-L1 sigma 1); SGD lr 0.001,
momentum 0.9, wd 0.0005; batch fixed at one image. Sizes, thresholds, synthetic data and the
anchor grid come from models/host_data/detection.py (shared with the TensorFlow port); the
backbone's stages (ResNet-50's bottleneck with frozen BatchNorm), BN calibration and freezing from
models/mxnet/faster_rcnn_backbone.py.

Parameters: 47,457,494 as in PyTorch, counting every Gluon parameter except BatchNorm's running
mean and variance (PyTorch keeps those as buffers); of these, conv1, res2 and every BatchNorm's
gamma and beta are frozen (grad_req 'null'), as in the PyTorch version and the reference's
FIXED_PARAMS, leaving the same trainable count as PyTorch.

MXNet-specific choices, each for a reason:
- the whole training forward (trunk, RPN, anchor targets, proposals, RoI sampling, RoI Align,
  head, losses) is one HybridBlock, hybridized (static_alloc=True) into one cached graph, as
  the reference's symbolic executor ran it; every shape in it is fixed by the config (top-k of
  pre_nms / post_nms / sample sizes), none is read on the host, so the step never syncs;
- detection ops are MXNet's own: contrib.box_iou, contrib.box_nms (greedy NMS on the pre_nms
  best proposals; scores are the sigmoid objectness, as the reference's softmax probability)
  and contrib.ROIAlign(sample_ratio=2, aligned=True), which match detection_ops on the same
  examples (tests/models/mxnet/test_mxnet_faster_rcnn.py);
- frozen BatchNorm is nn.BatchNorm(use_global_stats=True) with gamma/beta grad_req 'null' (the
  reference's setting); its statistics are set once at build from one forward pass of a
  synthetic image, each BN taking its own input's mean and (biased) variance, as in PyTorch;
- random anchor/RoI sampling draws uniform keys with random.uniform_like inside the graph from
  MXNet's per-device generator, which is global (PyTorch's step owns a torch.Generator): build
  seeds it, so a workload stepped right after its build repeats; draws differ from PyTorch's,
  the distributions do not;
- every top-k in the graph takes a fixed count (MXNet's symbolic shapes cannot take a
  min(k, n)), so build checks each image has at least pre_nms anchors; the head's candidates
  (post_nms proposals + GT) always outnumber roi_batch;
- the images in the pool have different sizes (VOC aspect ratios), so static_shape is off.
"""

from __future__ import annotations

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

from tbd.core.errors import UsageError
from tbd.models.base import Workload, pool_workload
from tbd.models.host_data import detection as det
from tbd.models.host_data.detection import NUM_CLASSES, DetectorConfig
from tbd.models.host_data.synthetic import POOL_SIZE
from tbd.models.mxnet.faster_rcnn_backbone import calibrate, freeze, norm, stage
from tbd.models.mxnet.resnet50 import conv

_NEG = -1e30  # "minus infinity" for masked top-k keys (finite, so arithmetic on it stays finite)


class FasterRCNN(nn.HybridBlock):
    """ResNet C4 trunk, RPN, RoI Align, res5 head; forward returns the four training losses.

    forward(image [1, 3, H, W], gt_boxes [G, 4] (pixels), gt_labels [G] (1..20, float32),
    anchors [h * w * A, 4] (numpy_detection.anchor_grid of the feature map), im_info [3] =
    (H, W, smallest proposal side in pixels)) -> (rpn_cls, rpn_box, head_cls, head_box), each [1].
    """

    def __init__(self, config: DetectorConfig, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        w = config.width
        c4 = 16 * w
        self.num_anchors = len(config.anchor_sizes) * len(det.ANCHOR_RATIOS)
        with self.name_scope():
            # conv1 + res2 (frozen), res3, res4: the stride-16 trunk; res5 runs on the pooled RoIs.
            self.stem = nn.HybridSequential(prefix="stem_")
            with self.stem.name_scope():
                self.stem.add(conv(w, 7, 2, 3, 3), norm(w), nn.Activation("relu"),
                              nn.MaxPool2D(3, strides=2, padding=1))
            self.res2 = stage(config.depths[0], w, w, 1, "res2_")
            self.res3 = stage(config.depths[1], 4 * w, 2 * w, 2, "res3_")
            self.res4 = stage(config.depths[2], 8 * w, 4 * w, 2, "res4_")
            self.res5 = stage(config.depths[3], 16 * w, 8 * w, 2, "res5_")
            self.rpn_conv = nn.Conv2D(config.rpn_channels, 3, padding=1, in_channels=c4,
                                      weight_initializer=mx.init.Normal(0.01))
            self.rpn_objectness = nn.Conv2D(self.num_anchors, 1, in_channels=config.rpn_channels,
                                            weight_initializer=mx.init.Normal(0.01))
            self.rpn_deltas = nn.Conv2D(4 * self.num_anchors, 1, in_channels=config.rpn_channels,
                                        weight_initializer=mx.init.Normal(0.01))
            self.cls_score = nn.Dense(NUM_CLASSES, in_units=2 * c4, weight_initializer=mx.init.Normal(0.01))
            self.bbox_pred = nn.Dense(4 * NUM_CLASSES, in_units=2 * c4, weight_initializer=mx.init.Normal(0.001))

    def trunk(self, x):
        """C4 features [1, 16 width, H/16, W/16] of images x [1, 3, H, W]."""
        return self.res4(self.res3(self.res2(self.stem(x))))

    def hybrid_forward(self, F, image, gt_boxes, gt_labels, anchors, im_info):
        """The four losses, each [1], of one image; see the class docstring for the inputs."""
        cfg = self.config
        features = self.trunk(image)
        hidden = F.relu(self.rpn_conv(features))
        objectness = F.reshape(F.transpose(self.rpn_objectness(hidden), axes=(0, 2, 3, 1)), shape=(-1,))
        deltas = F.reshape(self.rpn_deltas(hidden), shape=(0, -4, self.num_anchors, 4, -2))  # [1, A, 4, h, w]
        deltas = F.reshape(F.transpose(deltas, axes=(0, 3, 4, 1, 2)), shape=(-1, 4))  # (y, x, anchor) order

        im_info = F.reshape(im_info, shape=(1, 3))  # [1, 1] slices broadcast against [N, 1] columns
        height = F.slice_axis(im_info, axis=1, begin=0, end=1)
        width = F.slice_axis(im_info, axis=1, begin=1, end=2)
        min_size = F.slice_axis(im_info, axis=1, begin=2, end=3)
        rpn_cls, rpn_box = _rpn_losses(F, anchors, objectness, deltas, gt_boxes, height, width, cfg.rpn_batch)
        proposals, valid = _proposals(F, anchors, F.BlockGrad(objectness), F.BlockGrad(deltas), height, width,
                                      min_size, cfg)
        rois, labels, targets, fg_ok, ok = _sample_rois(F, proposals, valid, gt_boxes, gt_labels, cfg.roi_batch)

        batch_index = F.zeros_like(F.slice_axis(rois, axis=1, begin=0, end=1))
        pooled = F.contrib.ROIAlign(features, F.concat(batch_index, rois, dim=1), pooled_size=(cfg.pooled, cfg.pooled),
                                    spatial_scale=1.0 / det.STRIDE, sample_ratio=2, aligned=True)
        top = F.mean(self.res5(pooled), axis=(2, 3))  # [R, 32 width]
        scores = self.cls_score(top)
        box_deltas = F.reshape(self.bbox_pred(top), shape=(-1, NUM_CLASSES, 4))

        ce = -F.pick(F.log_softmax(scores, axis=1), labels, axis=1)
        head_cls = F.sum(ce * ok) / F.maximum(F.sum(ok), 1.0)
        chosen = F.sum(F.broadcast_mul(box_deltas, F.expand_dims(F.one_hot(labels, NUM_CLASSES), axis=2)), axis=1)
        l1 = F.sum(F.smooth_l1(chosen - targets, scalar=1.0 / np.sqrt(det.HEAD_SMOOTH_L1_BETA)), axis=1)
        head_box = F.sum(l1 * fg_ok) / cfg.roi_batch
        return (F.reshape(rpn_cls, shape=(1,)), F.reshape(rpn_box, shape=(1,)),
                F.reshape(head_cls, shape=(1,)), F.reshape(head_box, shape=(1,)))


def _where(F, cond, x, y):
    """x where the float mask `cond` ([N] or [N, 1]) is 1 else y, broadcast over x's trailing axis."""
    return F.where(F.broadcast_like(cond, x), x, y)


def _rpn_losses(F, anchors, objectness, deltas, gt_boxes, height, width, batch):
    """RPN objectness (BCE mean over sampled anchors) and box (smooth-L1 sigma 3 sum / batch) losses.

    Labels as py-faster-rcnn's anchor_target_layer (and PyTorch's _rpn_losses): anchors inside the
    image only; negative below IoU 0.3; positive at >= 0.7 or as a GT box's best match (ties kept).
    """
    x1, y1, x2, y2 = F.split(anchors, num_outputs=4, axis=1)  # each [A, 1]
    inside = (x1 >= 0) * (y1 >= 0) * F.broadcast_lesser_equal(x2, width) * F.broadcast_lesser_equal(y2, height)
    iou = F.contrib.box_iou(anchors, gt_boxes, format="corner")  # [A, G]
    iou = F.broadcast_add(F.broadcast_mul(iou, inside), inside - 1)  # -1 outside the image
    best = F.max(iou, axis=1)
    match = F.argmax(iou, axis=1)
    per_gt = F.max(iou, axis=0, keepdims=True)  # [1, G]
    is_best = F.max(F.broadcast_mul(F.broadcast_equal(iou, per_gt), per_gt > 0), axis=1)
    inside = F.reshape(inside, shape=(-1,))
    positive = inside * ((best >= det.RPN_POSITIVE_IOU) + is_best > 0)
    negative = inside * (best < det.RPN_NEGATIVE_IOU) * (1 - positive)
    index, is_pos, ok = _balanced_sample(F, positive, negative, batch, det.RPN_POSITIVE_FRACTION)

    logits = F.take(objectness, index)
    bce = F.relu(logits) - logits * is_pos + F.log1p(F.exp(-F.abs(logits)))
    rpn_cls = F.sum(bce * ok) / F.maximum(F.sum(ok), 1.0)
    regress = is_pos * ok
    sampled = F.take(anchors, index)
    targets = _where(F, F.expand_dims(regress, axis=1),
                     _encode(F, F.take(gt_boxes, F.take(match, index)), sampled, (1.0, 1.0, 1.0, 1.0)),
                     F.zeros_like(sampled))
    sigma = 1.0 / np.sqrt(det.RPN_SMOOTH_L1_BETA)  # 3
    l1 = F.sum(F.smooth_l1(F.take(deltas, index) - targets, scalar=sigma), axis=1)
    return rpn_cls, F.sum(l1 * regress) / batch


def _balanced_sample(F, positive, negative, num: int, positive_fraction: float):
    """`num` slots: up to num * positive_fraction random positives, then random negatives.

    detection_ops.balanced_sample with fixed shapes, for F = mx.nd or mx.sym.
    positive, negative: float 0/1 masks [N] with N >= num (see _to_device). Uniform keys, top-k
    of each pool; slot k holds the k-th chosen positive while k < positives taken, then the
    chosen negatives in order. Returns (index float [num], is_positive [num], valid [num]) as
    float masks; an invalid slot's index is arbitrary.
    """
    max_positive = int(num * positive_fraction)
    key = F.random.uniform_like(positive)
    pos_key, pos_index = F.topk(F.where(positive, key, F.ones_like(key) * -1), k=max_positive, ret_typ="both")
    neg_key, neg_index = F.topk(F.where(negative, key, F.ones_like(key) * -1), k=num, ret_typ="both")
    taken = F.sum(pos_key >= 0)  # [1]
    slot = F.arange(num)
    is_positive = F.broadcast_lesser(slot, taken)
    neg_slot = F.clip(F.broadcast_sub(slot, taken), 0, num - 1)
    index = F.where(is_positive, F.take(pos_index, F.clip(slot, 0, max_positive - 1)), F.take(neg_index, neg_slot))
    valid = F.maximum(is_positive, (F.take(neg_key, neg_slot) >= 0) * (1 - is_positive))
    return index, is_positive, valid


def _encode(F, targets, references, weights):
    """R-CNN regression deltas [N, 4] moving references [N, 4] onto targets [N, 4] (detection_ops.encode_boxes)."""
    rx1, ry1, rx2, ry2 = F.split(references, num_outputs=4, axis=1)
    tx1, ty1, tx2, ty2 = F.split(targets, num_outputs=4, axis=1)
    rw, rh, tw, th = rx2 - rx1, ry2 - ry1, tx2 - tx1, ty2 - ty1
    wx, wy, ww, wh = weights
    return F.concat(wx * ((tx1 + 0.5 * tw) - (rx1 + 0.5 * rw)) / rw, wy * ((ty1 + 0.5 * th) - (ry1 + 0.5 * rh)) / rh,
                    ww * F.log(tw / rw), wh * F.log(th / rh), dim=1)


def _decode(F, deltas, references):
    """Boxes [N, 4] from deltas [N, 4] on references [N, 4], log-scale capped (detection_ops.decode_boxes)."""
    rx1, ry1, rx2, ry2 = F.split(references, num_outputs=4, axis=1)
    dx, dy, dw, dh = F.split(deltas, num_outputs=4, axis=1)
    rw, rh = rx2 - rx1, ry2 - ry1
    x, y = dx * rw + rx1 + 0.5 * rw, dy * rh + ry1 + 0.5 * rh
    w = F.exp(F.minimum(dw, det.BBOX_XFORM_CLIP)) * rw
    h = F.exp(F.minimum(dh, det.BBOX_XFORM_CLIP)) * rh
    return F.concat(x - 0.5 * w, y - 0.5 * h, x + 0.5 * w, y + 0.5 * h, dim=1)


def _proposals(F, anchors, objectness, deltas, height, width, min_size, cfg: DetectorConfig):
    """The RPN's proposals [post_nms, 4] in score order and which exist (float mask [post_nms]).

    py-faster-rcnn's proposal_layer: decode, clip to the image, drop boxes under min_size, keep
    the pre_nms best, greedy NMS at 0.7 (contrib.box_nms on sigmoid scores), the post_nms best
    survivors. box_nms returns boxes sorted with suppressed rows set to -1 at the end, so
    fewer than post_nms survivors leave rows with score -1, marked invalid.
    """
    x1, y1, x2, y2 = F.split(_decode(F, deltas, anchors), num_outputs=4, axis=1)
    x1, x2 = (F.broadcast_minimum(F.maximum(v, 0.0), width) for v in (x1, x2))
    y1, y2 = (F.broadcast_minimum(F.maximum(v, 0.0), height) for v in (y1, y2))
    big = F.broadcast_greater_equal(x2 - x1, min_size) * F.broadcast_greater_equal(y2 - y1, min_size)  # [N, 1]
    score = F.where(F.reshape(big, shape=(-1,)), F.sigmoid(objectness), F.ones_like(objectness) * -1)
    top_score, order = F.topk(score, k=cfg.pre_nms, ret_typ="both")
    rows = F.concat(F.expand_dims(top_score, axis=1), F.take(F.concat(x1, y1, x2, y2, dim=1), order), dim=1)
    kept = F.contrib.box_nms(rows, overlap_thresh=det.NMS_IOU, valid_thresh=0.0, topk=-1, coord_start=1,
                             score_index=0, id_index=-1, force_suppress=True)
    kept = F.slice_axis(kept, axis=0, begin=0, end=cfg.post_nms)
    valid = F.reshape(F.slice_axis(kept, axis=1, begin=0, end=1) >= 0, shape=(-1,))
    return F.BlockGrad(F.slice_axis(kept, axis=1, begin=1, end=5)), valid


def _sample_rois(F, proposals, valid, gt_boxes, gt_labels, batch: int):
    """The head's R = batch RoIs as py-faster-rcnn's proposal_target_layer picks them (PyTorch's _sample_rois).

    Returns (rois [R, 4], labels [R] (float class ids), box targets [R, 4] (HEAD_BOX_WEIGHTS),
    foreground-and-valid mask [R], valid mask [R]).
    """
    candidates = F.concat(proposals, gt_boxes, dim=0)
    usable = F.concat(valid, F.ones_like(gt_labels), dim=0)
    iou = F.contrib.box_iou(candidates, gt_boxes, format="corner")
    best = F.max(iou, axis=1)
    match = F.argmax(iou, axis=1)
    foreground = usable * (best >= det.HEAD_FOREGROUND_IOU)
    background = usable * (best < det.HEAD_FOREGROUND_IOU)
    index, is_fg, ok = _balanced_sample(F, foreground, background, batch, det.HEAD_FOREGROUND_FRACTION)
    rois = F.BlockGrad(F.take(candidates, index))
    matched = F.take(match, index)
    labels = F.take(gt_labels, matched) * is_fg
    fg_ok = is_fg * ok
    # Zero where unused: an unfilled slot may hold a degenerate box whose encoding is inf.
    targets = _where(F, F.expand_dims(fg_ok, axis=1), _encode(F, F.take(gt_boxes, matched), rois,
                                                              det.HEAD_BOX_WEIGHTS), F.zeros_like(rois))
    return rois, labels, targets, fg_ok, ok


def build(batch: int, device: mx.Context, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """Faster R-CNN training workload: SGD with momentum, one synthetic VOC-like image per step, on `device`.

    Args:
        batch: images per iteration; must be 1 (the paper's setting).
        device: mx.Context where parameters, optimizer state and images live.
        size: "full" (ResNet-101 C4, 600-pixel images) or "test" (tiny, same structure, ~96x128 images).
        seed: fixes weights (mx.random.seed), frozen BN statistics and images (numpy RandomState),
            and the in-graph anchor/RoI sampling (MXNet's generator, seeded here).
        pool_size: synthetic images kept on the device and cycled through by step().
    Returns:
        Workload whose step() runs one iteration and returns the summed loss NDArray [1] without
        waiting for it (no host sync).
    """
    cfg = det.check_detector_build_args(batch, size, pool_size)
    rng = np.random.RandomState(seed)
    mx.random.seed(seed)

    model = FasterRCNN(cfg, prefix="faster_rcnn_")
    model.initialize(ctx=mx.cpu())  # init on the host, then calibrate and move (same values on every device)
    calibrate(model, mx.nd.array(det.normalised_pixels((1, 3, cfg.calibration_side, cfg.calibration_side), rng)))
    model.collect_params().reset_ctx(device)
    freeze(model)
    model.hybridize(static_alloc=True)
    trainable = {name: p for name, p in model.collect_params().items() if p.grad_req != "null"}
    # The reference's recipe: SGD lr 0.001, momentum 0.9, wd 0.0005 (MXNet folds wd into the
    # gradient before momentum: torch.optim.SGD's update for a constant lr).
    trainer = gluon.Trainer(trainable, "sgd", {"learning_rate": det.LEARNING_RATE, "momentum": det.MOMENTUM,
                                               "wd": det.WEIGHT_DECAY})

    pool = [_to_device(cfg, *det.voc_like_image(cfg, rng), device) for _ in range(pool_size)]
    mx.random.seed(seed, ctx=device)  # the step's sampling keys

    def train_step(image, gt_boxes, gt_labels, anchors, im_info) -> mx.nd.NDArray:
        with autograd.record():
            loss = sum(model(image, gt_boxes, gt_labels, anchors, im_info))
        loss.backward()
        trainer.step(1)  # one image: the gradient of the summed losses as it is
        return loss

    sides = sorted({tuple(inputs[0].shape[-2:]) for inputs in pool})
    return pool_workload(
        "faster_rcnn", pool, train_step,
        samples_per_step=1,
        throughput_unit="images/s",
        model=model,
        optimizer=trainer,
        inputs=lambda: [a for inputs in pool for a in inputs[:3]],
        description=(f"Faster R-CNN (Ren et al. 2015), ResNet C4 ({size}: depths {cfg.depths}, width {cfg.width}; "
                     f"RPN {cfg.rpn_channels}, {cfg.post_nms} proposals, {cfg.roi_batch} RoIs, RoI Align "
                     f"{cfg.pooled}x{cfg.pooled}), MXNet Gluon hybridized (static_alloc), SGD momentum 0.9, "
                     f"{pool_size} synthetic VOC images (HxW {sides})"),
    )


def _to_device(cfg: DetectorConfig, image: np.ndarray, boxes: np.ndarray, labels: np.ndarray, scale: float,
               device: mx.Context) -> tuple[mx.nd.NDArray, ...]:
    """(image, gt boxes, labels (float32), anchors, im_info) NDArrays on `device` for one pool image."""
    height, width = image.shape[-2:]
    anchors = det.anchor_grid(det.feature_side(height), det.feature_side(width), det.STRIDE, cfg.anchor_sizes)
    # Every top-k in the graph takes a fixed count; the smallest VOC-shaped image still has more
    # anchors than pre_nms (432 > 300 at test size, 17,100 > 12,000 at full size).
    if len(anchors) < cfg.pre_nms:
        raise UsageError(f"a {height}x{width} image has {len(anchors)} anchors, fewer than pre_nms {cfg.pre_nms}")
    im_info = np.array([height, width, det.RPN_MIN_SIZE * scale], dtype=np.float32)
    arrays = (image, boxes, labels.astype(np.float32), anchors, im_info)
    return tuple(mx.nd.array(a, ctx=device, dtype=np.float32) for a in arrays)
