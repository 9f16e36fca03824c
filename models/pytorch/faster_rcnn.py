"""Faster R-CNN with a ResNet-101 C4 backbone on synthetic Pascal VOC 2007-shaped images, in PyTorch.

The TBD paper's object-detection workload is Faster R-CNN (Ren, He, Girshick and Sun, "Faster
R-CNN: Towards Real-Time Object Detection with Region Proposal Networks", NeurIPS 2015) with a
ResNet-101 (He et al., CVPR 2016) trunk, trained end to end on Pascal VOC 2007 one image per
iteration, as in the MXNet reference (apache/mxnet example/rcnn: symnet/symbol_resnet.py and
train.py defaults) and tf-faster-rcnn. The "C4" layout of He et al. 2016 (appendix A):
- shared trunk: conv1 .. conv4 (res2-res4, 3 + 4 + 23 bottlenecks), stride 16, 1024 channels;
- RPN: 3x3 conv to 512 channels + ReLU, then 1x1 convs to 9 objectness logits and 9 x 4 box
  deltas per cell; 9 anchors = sizes (128, 256, 512) x ratios (0.5, 1, 2) at stride 16;
- RPN training: anchors crossing the image border are ignored (allowed_border 0), an anchor is
  positive at IoU >= 0.7 with a GT box (or as a GT box's best match), negative below 0.3; 256
  sampled, at most half positive; binary cross-entropy on objectness (the reference's 2-way
  softmax is equivalent) and smooth-L1 (sigma 3, i.e. beta 1/9) on box deltas over 256;
- proposals: decode all anchors, clip to the image, drop boxes under 16 px x image scale, keep
  the 12,000 best, NMS at IoU 0.7, keep the 2,000 best (train);
- head sampling: proposals plus the GT boxes, 128 RoIs, at most 25% foreground (IoU >= 0.5),
  background IoU in [0, 0.5); targets normalised by stds (0.1, 0.1, 0.2, 0.2);
- head: RoI Align to 14x14 (the reference pools 14x14 with ROIPooling; Mask R-CNN's RoI Align,
  sampling ratio 2, aligned), conv5 (res5, 3 bottlenecks, the first with stride 2, to 7x7),
  average pool, then a 21-way classifier (20 VOC classes + background) and per-class box
  regression (4 x 21); cross-entropy and smooth-L1 (sigma 1) over 128.
Proposal coordinates carry no gradient (the reference's approximate joint training).

Deliberate departures, each for a stated reason:
- the ResNet is torchvision's v1.5 bottleneck (BatchNorm after each conv, stride on the 3x3), so
  the trunk + res5 hold exactly torchvision's resnet101 parameters minus fc (42,500,160); the
  MXNet reference uses the pre-activation (v2) ResNet-101 of its model zoo, same layer shapes;
- BatchNorm is frozen, as in every reference (MXNet use_global_stats=True with gamma/beta in
  FIXED_PARAMS): each BN is a fixed per-channel affine transform whose scale and shift are
  parameters that are not trained. With no ImageNet weights to load, its statistics are set
  once at build from one forward pass over a synthetic image in training mode (what a
  pretrained model's running statistics stand in for), so activations stay O(1) through the 33
  bottlenecks; conv1 and res2 are frozen as well (the reference's FIXED_PARAMS 'conv0',
  'stage1');
- images are drawn at their network size directly (short side 600, long side <= 1000, the
  reference's resize of VOC's ~500x375 images), with pixels uniform over 0..255 normalised by
  the ImageNet mean and std;
- sampling and post-NMS selection run with fixed shapes on the device (see detection_ops), so
  on a GPU the only host syncs in a step are NMS's loop checks (the reference syncs there too:
  its GPU NMS copies the overlap mask to the host, and its target layers run on the host).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from tbd.core.errors import UsageError
from tbd.models.base import Workload, pool_workload

# Sizes, thresholds and data constants are framework-neutral: one copy, shared with the MXNet and
# TensorFlow ports (models/host_data/detection.py).
from tbd.models.host_data.detection import (
    ANCHOR_RATIOS,
    HEAD_BOX_WEIGHTS,
    HEAD_FOREGROUND_FRACTION,
    HEAD_FOREGROUND_IOU,
    IMAGENET_MEAN,
    IMAGENET_STD,
    NMS_IOU,
    NUM_CLASSES,
    RPN_MIN_SIZE,
    RPN_NEGATIVE_IOU,
    RPN_POSITIVE_FRACTION,
    RPN_POSITIVE_IOU,
    RPN_SMOOTH_L1_BETA,
    STRIDE,
    VOC_LANDSCAPE,
    VOC_LONG_SIDE,
    VOC_MAX_OBJECTS,
    VOC_SHORT_SIDES,
    DetectorConfig,
)
from tbd.models.host_data.detection import SIZES as _SIZES
from tbd.models.pytorch import detection_ops as ops
from tbd.models.pytorch.resnet50 import resnet
from tbd.models.pytorch.synthetic import POOL_SIZE, check_build_args

#: Data-parallel engines this model runs under (tbd profile --data-parallel; checked by 2-rank tests).
DATA_PARALLEL = ("ddp", "fsdp")


class FrozenBatchNorm2d(nn.Module):
    """BatchNorm with fixed statistics and affine terms: y = (x - mean) / sqrt(var + eps) * weight + bias.

    weight and bias are nn.Parameters with requires_grad=False, so parameter counts match a
    trainable BatchNorm (and torchvision's), while nothing about the layer trains — MXNet's
    BatchNorm(use_global_stats=True) with gamma and beta in FIXED_PARAMS.
    """

    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.calibrating = False  # True: normalise by this batch's statistics and keep them (see calibrate)
        self.weight = nn.Parameter(torch.ones(channels), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(channels), requires_grad=False)
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.calibrating:
            self.running_var.copy_(x.var(dim=(0, 2, 3), unbiased=False))
            self.running_mean.copy_(x.mean(dim=(0, 2, 3)))
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)


class FasterRCNN(nn.Module):
    """ResNet C4 trunk, RPN, RoI Align, res5 head; forward returns the four training losses."""

    def __init__(self, config: DetectorConfig):
        super().__init__()
        self.config = config
        layers = list(resnet(config.depths, num_classes=1, width=config.width))
        stem_end = 4  # conv1, bn1, relu, maxpool
        res2, res3, res4, _ = (stem_end + sum(config.depths[:i + 1]) for i in range(4))
        self.trunk = nn.Sequential(*layers[:res4])  # conv1 .. conv4, stride 16
        self.res5 = nn.Sequential(*layers[res4:-3])  # conv5 blocks; avgpool, flatten, fc dropped
        self.frozen_prefix = res2  # conv1 and res2 stay fixed (the reference's FIXED_PARAMS)
        _swap_batchnorm(self)
        c4 = 16 * config.width
        anchors = len(config.anchor_sizes) * len(ANCHOR_RATIOS)
        self.rpn_conv = nn.Conv2d(c4, config.rpn_channels, 3, padding=1)
        self.rpn_objectness = nn.Conv2d(config.rpn_channels, anchors, 1)
        self.rpn_deltas = nn.Conv2d(config.rpn_channels, 4 * anchors, 1)
        self.cls_score = nn.Linear(2 * c4, NUM_CLASSES)
        self.bbox_pred = nn.Linear(2 * c4, 4 * NUM_CLASSES)

    def forward(self, image: torch.Tensor, gt_boxes: torch.Tensor, gt_labels: torch.Tensor, min_size: float,
                generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """Losses (scalars) for one image [1, 3, H, W] with GT boxes [G, 4] (pixels) and labels [G] in 1..20.

        `min_size` is the smallest proposal side kept, in input pixels; `generator` drives the
        random anchor and RoI sampling.
        """
        cfg = self.config
        height, width = image.shape[-2:]
        features = self.trunk(image)  # [1, 16 width, H/16, W/16]
        hidden = F.relu(self.rpn_conv(features))
        objectness = self.rpn_objectness(hidden).permute(0, 2, 3, 1).reshape(-1)  # (y, x, anchor) order
        deltas = self.rpn_deltas(hidden).view(1, self.rpn_objectness.out_channels, 4, *hidden.shape[-2:])
        deltas = deltas.permute(0, 3, 4, 1, 2).reshape(-1, 4)
        anchors = ops.anchor_grid(*features.shape[-2:], STRIDE, cfg.anchor_sizes, ANCHOR_RATIOS, image.device)

        losses = _rpn_losses(anchors, objectness, deltas, gt_boxes, height, width, cfg.rpn_batch, generator)
        proposals, valid = region_proposals(anchors, objectness.detach(), deltas.detach(), height, width, min_size, cfg)
        rois, labels, targets, is_fg, ok = _sample_rois(proposals, valid, gt_boxes, gt_labels, cfg.roi_batch,
                                                         generator)
        pooled = ops.roi_align(features, rois, cfg.pooled, 1.0 / STRIDE, sampling_ratio=2, aligned=True)
        top = self.res5(pooled).mean(dim=(2, 3))  # [R, 32 width]
        scores, box_deltas = self.cls_score(top), self.bbox_pred(top).view(-1, NUM_CLASSES, 4)

        ok_f = ok.to(scores.dtype)
        ce = F.cross_entropy(scores, labels, reduction="none")
        losses["head_cls"] = (ce * ok_f).sum() / ok_f.sum().clamp(min=1)
        chosen = box_deltas[torch.arange(labels.shape[0], device=labels.device), labels]  # [R, 4]
        l1 = F.smooth_l1_loss(chosen, targets, beta=1.0, reduction="none").sum(dim=1)
        losses["head_box"] = (l1 * (is_fg & ok).to(l1.dtype)).sum() / cfg.roi_batch
        return losses


def _rpn_losses(anchors: torch.Tensor, objectness: torch.Tensor, deltas: torch.Tensor, gt_boxes: torch.Tensor,
                height: int, width: int, batch: int, generator: torch.Generator | None) -> dict[str, torch.Tensor]:
    """RPN objectness (BCE, mean over sampled anchors) and box (smooth-L1 sum / batch) losses.

    Anchor labels follow py-faster-rcnn's anchor_target_layer: only anchors wholly inside the
    image count; negative below IoU 0.3, positive at >= 0.7 or as some GT box's best match (ties
    included; a GT box no anchor overlaps has no best match).
    """
    inside = (anchors[:, 0] >= 0) & (anchors[:, 1] >= 0) & (anchors[:, 2] <= width) & (anchors[:, 3] <= height)
    iou = torch.where(inside[:, None], ops.box_iou(anchors, gt_boxes), -1.0)  # [A, G]
    best, match = iou.max(dim=1)
    per_gt = iou.max(dim=0).values  # [G]
    is_best = ((iou == per_gt[None, :]) & (per_gt[None, :] > 0)).any(dim=1)
    positive = inside & ((best >= RPN_POSITIVE_IOU) | is_best)
    negative = inside & (best < RPN_NEGATIVE_IOU) & ~positive
    index, is_pos, ok = ops.balanced_sample(positive, negative, batch, RPN_POSITIVE_FRACTION, generator)
    ok_f = ok.to(objectness.dtype)
    bce = F.binary_cross_entropy_with_logits(objectness[index], is_pos.to(objectness.dtype), reduction="none")
    regress = is_pos & ok
    targets = torch.where(regress[:, None], ops.encode_boxes(gt_boxes[match[index]], anchors[index]), 0.0)
    l1 = F.smooth_l1_loss(deltas[index], targets, beta=RPN_SMOOTH_L1_BETA, reduction="none").sum(dim=1)
    return {"rpn_cls": (bce * ok_f).sum() / ok_f.sum().clamp(min=1),
            "rpn_box": (l1 * regress.to(l1.dtype)).sum() / batch}


def region_proposals(anchors: torch.Tensor, objectness: torch.Tensor, deltas: torch.Tensor, height: int, width: int,
               min_size: float, cfg: DetectorConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The RPN's proposals [post_nms, 4] in score order and which of them exist (bool [post_nms]).

    py-faster-rcnn's proposal_layer: decode, clip, drop boxes under min_size, keep the pre_nms
    best, NMS, keep the post_nms best. Fewer than post_nms survivors leave invalid rows.
    """
    boxes = ops.clip_boxes(ops.decode_boxes(deltas, anchors), height, width)
    big = ((boxes[:, 2] - boxes[:, 0]) >= min_size) & ((boxes[:, 3] - boxes[:, 1]) >= min_size)
    scores = torch.where(big, objectness, float("-inf"))
    top_scores, order = scores.topk(min(cfg.pre_nms, scores.shape[0]))  # sorted, best first
    boxes = boxes[order]
    kept = ops.nms_sorted(boxes, NMS_IOU, candidates=top_scores > float("-inf"))
    # The first post_nms kept boxes in score order, without reading how many there are.
    rank = torch.arange(kept.shape[0], 0, -1, device=kept.device, dtype=torch.float32)
    key, pick = torch.where(kept, rank, 0.0).topk(min(cfg.post_nms, kept.shape[0]))
    return boxes[pick], key > 0


def _sample_rois(proposals: torch.Tensor, valid: torch.Tensor, gt_boxes: torch.Tensor, gt_labels: torch.Tensor,
                 batch: int, generator: torch.Generator | None
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The head's minibatch of R = batch RoIs, as py-faster-rcnn's proposal_target_layer picks it.

    Candidates are the proposals plus the GT boxes; foreground at IoU >= 0.5 with a GT box
    (labelled with its class), background below (label 0).

    Returns:
        (rois [R, 4], labels int64 [R], box targets [R, 4] (weights HEAD_BOX_WEIGHTS),
        is_foreground bool [R], valid bool [R]).
    """
    candidates = torch.cat([proposals, gt_boxes])
    usable = torch.cat([valid, torch.ones_like(gt_labels, dtype=torch.bool)])
    best, match = ops.box_iou(candidates, gt_boxes).max(dim=1)
    foreground = usable & (best >= HEAD_FOREGROUND_IOU)
    background = usable & (best < HEAD_FOREGROUND_IOU)
    index, is_fg, ok = ops.balanced_sample(foreground, background, batch, HEAD_FOREGROUND_FRACTION, generator)
    rois = candidates[index]
    matched = match[index]
    labels = torch.where(is_fg, gt_labels[matched], 0)
    # Zero where unused: an unfilled slot may hold a degenerate (zero-width) box, whose
    # encoding is inf, and inf x 0 in the masked loss would be NaN.
    targets = torch.where((is_fg & ok)[:, None], ops.encode_boxes(gt_boxes[matched], rois, HEAD_BOX_WEIGHTS), 0.0)
    return rois, labels, targets, is_fg, ok


def _swap_batchnorm(module: nn.Module) -> None:
    """Replace every nn.BatchNorm2d below `module` with a FrozenBatchNorm2d of the same width, in place."""
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d):
            setattr(module, name, FrozenBatchNorm2d(child.num_features, child.eps))
        else:
            _swap_batchnorm(child)


def build(batch: int, device: "torch.device | str", size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE, parallel: Callable[[nn.Module], nn.Module] | None = None) -> Workload:
    """Faster R-CNN training workload: SGD with momentum, one synthetic VOC-like image per step, on `device`.

    Args:
        batch: images per iteration; must be 1 (the paper's setting).
        device: where the model, optimizer state and images live ("cpu", "cuda", ...).
        size: "full" (ResNet-101 C4, 600-pixel images) or "test" (tiny, same structure, ~96x128 images).
        seed: fixes weights, frozen BN statistics, images and the step's anchor/RoI sampling.
        pool_size: synthetic images kept on the device and cycled through by step().
        parallel: wraps the model for data-parallel training (e.g. in DistributedDataParallel);
            step() runs the forward pass through the wrapper, while Workload.model and the
            optimizer keep the module itself (FSDP shards it in place, before the optimizer is
            made). None: single process.
    Returns:
        Workload whose step() runs one iteration and returns the summed loss tensor; on a GPU
        the only host syncs in it are NMS's loop checks.
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    if batch != 1:
        raise UsageError("faster_rcnn fixes its batch at 1 image per iteration, as the TBD paper ran it",
                         hint="drop --batch")
    cfg = _SIZES[size]
    device = torch.device(device)
    generator = torch.Generator().manual_seed(seed)

    model = FasterRCNN(cfg)
    init_weights(model, generator)
    calibrate(model, _normalised_pixels((1, 3, cfg.calibration_side, cfg.calibration_side), generator))
    freeze(model)
    model.to(device).train()
    # Wrapped before the optimizer is made: FSDP replaces the parameters with their shards.
    net = parallel(model) if parallel else model
    trainable = [p for p in model.parameters() if p.requires_grad]
    # The reference's recipe (MXNet example/rcnn train.py, py-faster-rcnn): SGD, lr 0.001,
    # momentum 0.9, weight decay 0.0005.
    optimizer = torch.optim.SGD(trainable, lr=1e-3, momentum=0.9, weight_decay=5e-4)

    host_pool = [voc_like_image(cfg, generator) for _ in range(pool_size)]
    pool = [(image.to(device), boxes.to(device), labels.to(device), RPN_MIN_SIZE * scale)
            for image, boxes, labels, scale in host_pool]
    sampler = torch.Generator(device=device).manual_seed(seed)

    def train_step(image, boxes, labels, min_size) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = sum(net(image, boxes, labels, min_size, sampler).values())
        loss.backward()
        optimizer.step()
        return loss

    sides = sorted({tuple(image.shape[-2:]) for image, *_ in pool})
    return pool_workload(
        "faster_rcnn", pool, train_step,
        samples_per_step=1,
        throughput_unit="images/s",
        model=model,
        optimizer=optimizer,
        inputs=lambda: [t for image, boxes, labels, _ in pool for t in (image, boxes, labels)],
        description=(f"Faster R-CNN (Ren et al. 2015), ResNet C4 ({size}: depths {cfg.depths}, width {cfg.width}; "
                     f"RPN {cfg.rpn_channels}, {cfg.post_nms} proposals, {cfg.roi_batch} RoIs, RoI Align "
                     f"{cfg.pooled}x{cfg.pooled}), SGD momentum 0.9, {pool_size} synthetic VOC images (HxW {sides})"),
    )


def voc_like_image(cfg: DetectorConfig, generator: torch.Generator
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """One synthetic Pascal VOC 2007 training image at network size, with its boxes.

    VOC 2007 images are at most 500 px on the long side, mostly 500x375 or 500x333 and landscape
    (VOC_SHORT_SIDES, VOC_LANDSCAPE: an approximation of the data set's spread); trainval has
    12,608 objects in 5,011 images, 2.5 per image, which 1..4 objects uniformly matches. Each
    object is a box whose sides are a uniform 10%..80% of the image's, placed uniformly inside
    it, with a class uniform over the 20 VOC classes. The image is then scaled as the reference
    does (short side to cfg.short_side, long side at most cfg.max_side); pixels are uniform over
    0..255, normalised by the ImageNet mean and std.

    Returns:
        (image float32 [1, 3, H, W], boxes float32 [G, 4] in network pixels, labels int64 [G] in
        1..20, scale = network pixels per original pixel), on the CPU.
    """
    short = int(torch.randint(VOC_SHORT_SIDES[0], VOC_SHORT_SIDES[1] + 1, (1,), generator=generator))
    landscape = bool(torch.rand(1, generator=generator) < VOC_LANDSCAPE)
    orig_h, orig_w = (short, VOC_LONG_SIDE) if landscape else (VOC_LONG_SIDE, short)
    scale = min(cfg.short_side / short, cfg.max_side / VOC_LONG_SIDE)
    height, width = round(orig_h * scale), round(orig_w * scale)

    count = int(torch.randint(1, VOC_MAX_OBJECTS + 1, (1,), generator=generator))
    side = torch.tensor([orig_w, orig_h], dtype=torch.float32)
    wh = (0.1 + 0.7 * torch.rand(count, 2, generator=generator)) * side
    corner = torch.rand(count, 2, generator=generator) * (side - wh)
    # Per-axis factors (the rounded network size over the original) keep boxes inside the image.
    boxes = torch.cat([corner, corner + wh], dim=1) * torch.tensor([width / orig_w, height / orig_h] * 2)
    labels = torch.randint(1, NUM_CLASSES, (count,), generator=generator)
    image = _normalised_pixels((1, 3, height, width), generator)
    return image, boxes, labels, scale


#: VOC 2007 image shapes (see voc_like_image): long side 500 px, short side uniform over these
#: pixels, landscape with this probability; at most this many objects per image.


def _normalised_pixels(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Pixels uniform over the integers 0..255, scaled to [0, 1] and normalised by the ImageNet mean/std."""
    pixels = torch.randint(0, 256, shape, generator=generator).float() / 255
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (pixels - mean) / std


def init_weights(model: FasterRCNN, generator: torch.Generator) -> None:
    """Trunk and res5: torchvision's ResNet init; RPN and head: the reference's N(0, 0.01) / N(0, 0.001), zero bias."""
    for module in itertools.chain(model.trunk.modules(), model.res5.modules()):
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu", generator=generator)
    for layer, std in ((model.rpn_conv, 0.01), (model.rpn_objectness, 0.01), (model.rpn_deltas, 0.01),
                       (model.cls_score, 0.01), (model.bbox_pred, 0.001)):
        nn.init.normal_(layer.weight, 0.0, std, generator=generator)
        nn.init.zeros_(layer.bias)


def freeze(model: FasterRCNN) -> None:
    """Stop training conv1 and res2 (the MXNet reference's FIXED_PARAMS 'conv0', 'stage1'); BN is frozen already."""
    for param in model.trunk[:model.frozen_prefix].parameters():
        param.requires_grad_(False)


@torch.no_grad()


def calibrate(model: FasterRCNN, image: torch.Tensor) -> None:
    """Set every frozen BN's statistics from one forward pass of `image` through conv1..conv5.

    Each BN normalises by (and keeps) the statistics of its own input in that pass, as a
    training-mode BN would, so the network starts with unit-scale activations like a
    pretrained one. res5 sees the whole res4 map here: 14x14 for a 224-pixel image, the size of
    the RoI features it gets in training.
    """
    norms = [m for m in model.modules() if isinstance(m, FrozenBatchNorm2d)]
    for norm in norms:
        norm.calibrating = True
    try:
        model.res5(model.trunk(image))
    finally:
        for norm in norms:
            norm.calibrating = False
