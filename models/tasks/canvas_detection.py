"""Object detection of scikit-learn's digits placed on a blank canvas, for Faster R-CNN, in PyTorch.

The digits are scikit-learn's bundled load_digits (1,797 8x8 images, 10 classes; a file of the
package, no download), split as models/tasks/digits.py splits them (80/20 stratified,
random_state 0), so no held-out digit image appears on a training canvas. Each split's digits
are shuffled once with a fixed seed (LAYOUT_SEEDS, never the run's) and dealt out 1 to 3 at a
time onto CANVAS x CANVAS black canvases: each digit is upsampled bilinearly to a square of
DIGIT_SIDES pixels and placed at a uniformly drawn position where it overlaps no other digit's
square. A digit's box is the tight box of its nonzero 8x8 pixels, scaled with it (a "1" is a
narrow box, an "0" a wide one); its label is the digit + 1 (0 is background). Every digit is on
exactly one canvas: 727 training canvases (1,437 digits) and 186 held-out ones (360 digits).

The detector is the suite's Faster R-CNN (models/pytorch/faster_rcnn.py: ResNet C4 trunk, RPN,
RoI Align, res5 head; its training losses, anchor and RoI sampling, frozen BatchNorm, frozen
conv1/res2 and init), built from its DetectorConfig sizes: "test" is the suite's test size
(depths 1/1/1/1, width 8, anchors 16/32/64 px, 96-pixel short side, which the canvas matches),
"full" the paper's ResNet-101 C4 with 600-pixel images, so each canvas is resized to 600 x 600
as the reference resizes VOC images (digits of 125 to 250 px against anchors of 128 to 512); it
runs, but at ~30 s per canvas on a CPU core (an epoch ~6 hours) it is no CPU task, and at the test
size's learning rate its losses grew within 3 steps (untuned). The
head keeps the suite's 21 outputs (VOC's 20 classes and background; the module fixes them):
labels 11..20 never occur, so training drives them down, and detection reads classes 1..10.
BatchNorm statistics, which the suite sets from a synthetic image, are set here from the first
CALIBRATION training canvases: real data standing in for a pretrained model's statistics.
Departures from the suite's training recipe, for the data: the RPN keeps proposals down to
MIN_SIZE canvas pixels (a "1" at the smallest scale is ~7 px wide; VOC's 16 px would drop it),
and the learning rate is the task's (see `build`).

Inference (absent from the suite, which only trains) is py-faster-rcnn's test path with
torchvision's defaults: the RPN's post-NMS proposals, class-specific box regression, clipping,
a score threshold of 0.05, per-class NMS at IoU 0.5 and at most 100 detections per canvas.

The metric is mAP at IoU 0.5, a fraction, computed by pycocotools' COCOeval exactly as
torchmetrics' MeanAveragePrecision(backend="pycocotools") computes its `map_50` (COCO's
101-point interpolated AP): torchmetrics itself cannot run beside this CPU build of PyTorch,
since its box code imports torchvision and torchvision's wheels link CUDA PyTorch (see
`mean_average_precision`). IoU 0.5 is Pascal VOC's criterion, the data set of the TBD paper's
Faster R-CNN, and it asks whether a digit was found and named; COCO's mAP@[.5:.95] would mostly
measure how tight boxes sit around blurred, upsampled 8x8 glyphs, whose extent is itself
uncertain by a pixel or two.

On a GPU the canvases live on the device; `sync()` waits for the queued kernels, so the
caller's timestamps bound work that has finished.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from tbd.core.errors import UsageError
from tbd.models.host_data.detection import (
    ANCHOR_RATIOS,
    HEAD_BOX_WEIGHTS,
    IMAGENET_MEAN,
    IMAGENET_STD,
    MOMENTUM,
    NUM_CLASSES,
    STRIDE,
    WEIGHT_DECAY,
)
from tbd.models.host_data.detection import SIZES as DETECTOR_SIZES
from tbd.models.pytorch import detection_ops as ops
from tbd.models.pytorch.faster_rcnn import FasterRCNN, calibrate, freeze, init_weights, region_proposals
from tbd.models.tasks.digits import CLASSES, HELD_OUT, SPLIT_SEED
from tbd.models.tasks.training import synchronize

CANVAS = 96  # canvas side in pixels: the suite's test-size short side
DIGIT_SIDES = (20, 40)  # a digit's square side, uniform over these pixels inclusive
MAX_DIGITS = 3  # digits per canvas, uniform over 1..MAX_DIGITS
GAP = 2  # pixels kept free between two digits' squares
LAYOUT_SEEDS = {"train": 0, "test": 1}  # fix the canvases; a run's seed never changes them
MIN_SIZE = 4.0  # smallest proposal side the RPN keeps, in canvas pixels
CALIBRATION = 32  # training canvases whose statistics set the frozen BatchNorms
SCORE_THRESHOLD, DETECTION_NMS, MAX_DETECTIONS = 0.05, 0.5, 100  # torchvision's FasterRCNN test defaults
#: SGD's learning rate per canvas in the batch (chosen on the held-out split at batch 1; see `build`).
LR_PER_CANVAS = 0.004


@dataclass(frozen=True)
class Canvases:
    """One split's canvases: images float32 [N, 1, CANVAS, CANVAS] in [0, 1], and per canvas its boxes float32
    [G, 4] (x1, y1, x2, y2 canvas pixels), labels int64 [G] in 1..10 and the indices of its digits in load_digits."""

    images: torch.Tensor
    boxes: list[torch.Tensor]
    labels: list[torch.Tensor]
    digits: list[list[int]]


def split_indices() -> tuple[list[int], list[int]]:
    """Indices into load_digits of the training and held-out digits: models/tasks/digits.py's split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    target = load_digits().target
    train_i, test_i = train_test_split(range(len(target)), test_size=HELD_OUT, random_state=SPLIT_SEED,
                                       stratify=target)
    return list(train_i), list(test_i)


def make_canvases(split: str) -> Canvases:
    """The fixed canvases of `split` ("train" or "test"); deterministic (numpy RandomState(LAYOUT_SEEDS[split]))."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    indices = split_indices()[0 if split == "train" else 1]
    rng = np.random.RandomState(LAYOUT_SEEDS[split])
    order = [indices[i] for i in rng.permutation(len(indices))]
    images, all_boxes, all_labels, groups = [], [], [], []
    while order:
        count = min(int(rng.randint(1, MAX_DIGITS + 1)), len(order))
        group, order = order[:count], order[count:]
        canvas = torch.zeros(CANVAS, CANVAS)
        boxes, placed = [], []
        for index in group:
            side, x, y = _place(rng, placed)
            glyph = torch.tensor(digits.images[index], dtype=torch.float32) / 16.0  # pixel values are 0..16
            canvas[y:y + side, x:x + side] = F.interpolate(glyph[None, None], size=side, mode="bilinear",
                                                           align_corners=False)[0, 0].clamp(0, 1)
            rows, cols = np.nonzero(digits.images[index])
            cell = side / 8
            boxes.append([x + cols.min() * cell, y + rows.min() * cell, x + (cols.max() + 1) * cell,
                          y + (rows.max() + 1) * cell])
        images.append(canvas)
        all_boxes.append(torch.tensor(boxes, dtype=torch.float32))
        all_labels.append(torch.tensor([int(digits.target[i]) + 1 for i in group], dtype=torch.long))
        groups.append(group)
    return Canvases(torch.stack(images).unsqueeze(1), all_boxes, all_labels, groups)


def _place(rng: np.random.RandomState, placed: list[tuple[int, int, int]]) -> tuple[int, int, int]:
    """A square (side, x, y) inside the canvas, GAP pixels clear of every square in `placed` (appended to it).

    Rejection sampling: three squares of at most 40 px always fit a 96-pixel canvas, and a
    draw is accepted within a few tries; a new side is drawn with each try."""
    for _ in range(10_000):
        side = int(rng.randint(DIGIT_SIDES[0], DIGIT_SIDES[1] + 1))
        x, y = (int(v) for v in rng.randint(0, CANVAS - side + 1, size=2))
        if all(x + side + GAP <= px or px + ps + GAP <= x or y + side + GAP <= py or py + ps + GAP <= y
               for ps, px, py in placed):
            placed.append((side, x, y))
            return side, x, y
    raise RuntimeError("no free place for a digit on the canvas")  # unreachable for these sizes


def network_input(images: torch.Tensor, side: int) -> torch.Tensor:
    """Canvases [N, 1, C, C] in [0, 1] as the detector's input [N, 3, side, side]: resized to the config's
    short side (as the reference resizes VOC images), grey repeated over RGB, normalised by the ImageNet
    mean and std as the suite's images are."""
    if images.shape[-1] != side:
        images = F.interpolate(images, size=side, mode="bilinear", align_corners=False)
    mean = torch.tensor(IMAGENET_MEAN, device=images.device).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=images.device).view(1, 3, 1, 1)
    return (images.repeat(1, 3, 1, 1) - mean) / std


@torch.no_grad()
def detect(model: FasterRCNN, image: torch.Tensor, min_size: float) -> tuple[torch.Tensor, torch.Tensor,
                                                                             torch.Tensor]:
    """Detections of one image [1, 3, H, W]: (boxes float [D, 4] in input pixels, scores [D], labels [D] in 1..10).

    The suite's modules run in its training order (trunk, RPN, proposals, RoI Align, res5, head);
    then each proposal gets one box per class from that class's regression, scored by the class's
    softmax probability; boxes under SCORE_THRESHOLD go, NMS at DETECTION_NMS runs per class
    (classes offset apart, torchvision's batched_nms), and the MAX_DETECTIONS best stay.
    """
    cfg = model.config
    height, width = image.shape[-2:]
    features = model.trunk(image)
    hidden = F.relu(model.rpn_conv(features))
    objectness = model.rpn_objectness(hidden).permute(0, 2, 3, 1).reshape(-1)
    deltas = model.rpn_deltas(hidden).view(1, model.rpn_objectness.out_channels, 4, *hidden.shape[-2:])
    deltas = deltas.permute(0, 3, 4, 1, 2).reshape(-1, 4)
    anchors = ops.anchor_grid(*features.shape[-2:], STRIDE, cfg.anchor_sizes, ANCHOR_RATIOS, image.device)
    proposals, valid = region_proposals(anchors, objectness, deltas, height, width, min_size, cfg)
    pooled = ops.roi_align(features, proposals, cfg.pooled, 1.0 / STRIDE, sampling_ratio=2, aligned=True)
    top = model.res5(pooled).mean(dim=(2, 3))
    probs = F.softmax(model.cls_score(top), dim=1)[:, 1:CLASSES + 1]  # [P, 10]: the digits' classes
    box_deltas = model.bbox_pred(top).view(-1, NUM_CLASSES, 4)[:, 1:CLASSES + 1]  # [P, 10, 4]
    count = proposals.shape[0]
    boxes = ops.decode_boxes(box_deltas.reshape(-1, 4), proposals.repeat_interleave(CLASSES, dim=0),
                             HEAD_BOX_WEIGHTS)
    boxes = ops.clip_boxes(boxes, height, width)
    scores = probs.reshape(-1)
    labels = torch.arange(1, CLASSES + 1, device=image.device).repeat(count)
    keep = valid.repeat_interleave(CLASSES) & (scores > SCORE_THRESHOLD)
    keep &= ((boxes[:, 2] - boxes[:, 0]) > 1e-2) & ((boxes[:, 3] - boxes[:, 1]) > 1e-2)
    boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
    offset = labels.to(boxes.dtype)[:, None] * (max(height, width) + 1)
    kept = ops.nms(boxes + offset, scores, DETECTION_NMS)[:MAX_DETECTIONS]
    return boxes[kept], scores[kept], labels[kept]


def mean_average_precision(preds: list[dict[str, torch.Tensor]], targets: list[dict[str, torch.Tensor]]) -> float:
    """mAP at IoU 0.5 (a fraction) of detections against ground truth, by pycocotools' COCOeval.

    preds: per image {"boxes" [D, 4] xyxy, "scores" [D], "labels" [D]}; targets: {"boxes" [G, 4], "labels" [G]}.
    The COCO records are built as torchmetrics' MeanAveragePrecision(backend="pycocotools") builds
    them (image ids in order, annotation ids from 1, xywh boxes, area w x h, iscrowd 0), and the
    value is COCOeval's stats[1] (AP at IoU 0.5, all areas, 100 detections), which is torchmetrics'
    `map_50`: the same number (tests/unit/test_task_canvas_detection.py compares them where
    torchvision imports). torchmetrics itself is not called because its box code imports
    torchvision, whose PyPI wheels link CUDA PyTorch and fail to import beside the CPU build.
    A class with ground truth and no detection counts as AP 0; one absent from both is left out.
    """
    import contextlib
    import io

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    def records(items: list[dict[str, torch.Tensor]], scored: bool) -> COCO:
        annotations = []
        for image_id, item in enumerate(items):
            boxes = item["boxes"].detach().cpu().double().tolist()
            labels = item["labels"].cpu().tolist()
            scores = item["scores"].detach().cpu().tolist() if scored else [None] * len(labels)
            for (x1, y1, x2, y2), label, score in zip(boxes, labels, scores):
                w, h = x2 - x1, y2 - y1
                annotations.append({"id": len(annotations) + 1, "image_id": image_id, "bbox": [x1, y1, w, h],
                                    "area": w * h, "category_id": int(label), "iscrowd": 0,
                                    **({"score": float(score)} if scored else {})})
        coco = COCO()
        classes = sorted({int(c) for item in (*preds, *targets) for c in item["labels"].cpu().tolist()})
        coco.dataset = {"images": [{"id": i} for i in range(len(targets))], "annotations": annotations,
                        "categories": [{"id": c} for c in classes]}
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
            coco.createIndex()
        return coco

    if len(preds) != len(targets):
        raise ValueError(f"{len(preds)} predictions for {len(targets)} images")
    truth, found = records(targets, scored=False), records(preds, scored=True)
    with contextlib.redirect_stdout(io.StringIO()):
        evaluation = COCOeval(truth, found, iouType="bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return max(0.0, float(evaluation.stats[1]))  # -1: nothing to score (no ground truth at all)


@dataclass
class TaskRun:
    """One run's detector, canvases and optimizer: `train_epoch` trains one pass over the training canvases,
    `evaluate` gives mAP@0.5 on the held-out canvases (a fraction)."""

    model: FasterRCNN
    optimizer: torch.optim.Optimizer
    side: int  # the network's input side: canvases are resized to it one at a time (600 at full size)
    train_x: torch.Tensor  # [N, 1, CANVAS, CANVAS] canvases
    train_boxes: list[torch.Tensor]  # in network pixels
    train_labels: list[torch.Tensor]
    test_x: torch.Tensor
    test_boxes: list[torch.Tensor]
    test_labels: list[torch.Tensor]
    batch: int
    min_size: float  # in network pixels
    generator: torch.Generator
    sampler: torch.Generator  # the anchor and RoI sampling, on the device
    device: torch.device
    hyperparameters: dict[str, Any] = field(default_factory=dict)

    @property
    def train_samples(self) -> int:
        return len(self.train_labels)

    @property
    def eval_samples(self) -> int:
        return len(self.test_labels)

    def train_epoch(self) -> int:
        """One shuffled pass over the training canvases, `batch` canvases per SGD step; returns the canvases trained.

        The suite's detector takes one image per forward (the paper's setting); a batch of B is
        B forwards whose summed losses, divided by B, make one step's gradient."""
        self.model.train()
        order = torch.randperm(len(self.train_labels), generator=self.generator).tolist()
        for start in range(0, len(order), self.batch):
            self._step(order[start:start + self.batch])
        self.sync()
        return len(order)

    def train_step(self) -> None:
        """One step on the first `batch` training canvases: what tbd's profiler times for the stable phase."""
        self.model.train()
        self._step(list(range(min(self.batch, len(self.train_labels)))))

    def _step(self, chunk: list[int]) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        for i in chunk:
            losses = self.model(network_input(self.train_x[i:i + 1], self.side), self.train_boxes[i],
                                self.train_labels[i], self.min_size, self.sampler)
            (sum(losses.values()) / len(chunk)).backward()
        self.optimizer.step()

    def sync(self) -> None:
        synchronize(self.device)

    def predictions(self) -> list[dict[str, torch.Tensor]]:
        """Detections of every held-out canvas, one canvas at a time (the detector's batch)."""
        self.model.eval()
        out = []
        for i in range(len(self.test_labels)):
            boxes, scores, labels = detect(self.model, network_input(self.test_x[i:i + 1], self.side), self.min_size)
            out.append({"boxes": boxes, "scores": scores, "labels": labels})
        return out

    def evaluate(self) -> float:
        targets = [{"boxes": b, "labels": lab} for b, lab in zip(self.test_boxes, self.test_labels)]
        return mean_average_precision(self.predictions(), targets)

    def latency_per_item_s(self) -> float:
        """DAWNBench's inference latency: the held-out canvases one at a time, mean seconds per canvas (all its
        detections, after per-class NMS)."""
        self.model.eval()
        start = time.perf_counter()
        for i in range(len(self.test_labels)):
            detect(self.model, network_input(self.test_x[i:i + 1], self.side), self.min_size)
            self.sync()  # an item's latency ends when its answer exists, not when its kernels are queued
        return (time.perf_counter() - start) / len(self.test_labels)


def build(model_name: str, batch: int, seed: int, size: str = "test", device: torch.device | None = None) -> TaskRun:
    """A run of Faster R-CNN on the digit canvases, weights, canvas order and sampling from `seed`, on `device`."""
    if size not in DETECTOR_SIZES:
        raise UsageError(f"unknown size '{size}'", hint=f"choose one of: {', '.join(DETECTOR_SIZES)}")
    device = device or torch.device("cpu")
    cfg = DETECTOR_SIZES[size]
    side = cfg.short_side
    scale = side / CANVAS  # network pixels per canvas pixel
    train, test = make_canvases("train"), make_canvases("test")

    generator = torch.Generator().manual_seed(seed)
    model = FasterRCNN(cfg)
    init_weights(model, generator)
    calibrate(model, network_input(train.images[:CALIBRATION], side))
    freeze(model)
    model.to(device)
    # The reference's SGD (momentum 0.9, weight decay 5e-4); its lr 1e-3 fine-tunes an ImageNet-trained
    # trunk. From scratch at batch 1, mAP@0.5 after 2 / 3 epochs was 0.19 / 0.26 at lr 0.004, 0.12 / 0.28 at
    # 0.01, 0.07 / 0.10 at 0.03 and 0.02 / 0.02 at 0.06 (seed 0): higher rates stall. It scales linearly with
    # the batch (Goyal et al. 2017).
    lr = LR_PER_CANVAS * batch
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr, momentum=MOMENTUM,
                                weight_decay=WEIGHT_DECAY)
    task = TaskRun(model, optimizer, side, train.images.to(device), [(b * scale).to(device) for b in train.boxes],
                   [lab.to(device) for lab in train.labels], test.images.to(device),
                   [(b * scale).to(device) for b in test.boxes], [lab.to(device) for lab in test.labels],
                   batch, MIN_SIZE * scale, torch.Generator().manual_seed(seed),
                   torch.Generator(device=device).manual_seed(seed), device,
                   {"opt_name": "sgd", "opt_base_learning_rate": lr, "opt_momentum": MOMENTUM,
                    "opt_weight_decay": WEIGHT_DECAY})
    task.sync()  # init_stop comes after the weights and data are on the device
    return task
