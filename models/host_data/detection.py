"""Framework-neutral pieces of the Faster R-CNN workload, in numpy: sizes, constants, synthetic VOC images, anchors.

The one copy of the sizes and constants, used by all three implementations
(models/pytorch/faster_rcnn.py imports them; the MXNet and TensorFlow ports, whose interpreters
have no torch, also draw their data here). The data and anchors mirror
models/pytorch/faster_rcnn.py and models/pytorch/detection_ops.py (Ren et al., "Faster R-CNN",
NeurIPS 2015; ResNet-101 C4 layout of He et al. 2016): the same DetectorConfig sizes ("full",
"test"), thresholds, the same distributions for the synthetic Pascal VOC 2007 images and boxes
(drawn with a numpy RandomState instead of a torch.Generator, so the draws differ but the
distributions do not), and the same anchor grid (order and geometry).

Boxes are float32 [N, 4] (x1, y1, x2, y2) in continuous pixel coordinates (width = x2 - x1, no
"+1"), as in detection_ops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tbd.core.errors import UsageError
from tbd.models.host_data.synthetic import check_build_args

NUM_CLASSES = 21  # 20 Pascal VOC classes + background (label 0)
STRIDE = 16  # feature stride of the C4 trunk
ANCHOR_RATIOS = (0.5, 1.0, 2.0)  # height / width
HEAD_BOX_WEIGHTS = (10.0, 10.0, 5.0, 5.0)  # 1 / BBOX_NORMALIZE_STDS (0.1, 0.1, 0.2, 0.2)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

RPN_POSITIVE_IOU, RPN_NEGATIVE_IOU, RPN_POSITIVE_FRACTION = 0.7, 0.3, 0.5
NMS_IOU = 0.7
RPN_MIN_SIZE = 16  # px at the original image scale (py-faster-rcnn RPN_MIN_SIZE; MXNet rpn_min_size)
HEAD_FOREGROUND_IOU, HEAD_FOREGROUND_FRACTION = 0.5, 0.25
RPN_SMOOTH_L1_BETA = 1.0 / 9  # sigma 3 in the reference's smooth_l1(scalar=3.0)
HEAD_SMOOTH_L1_BETA = 1.0  # sigma 1

#: Largest log-scale change a box decode applies: exp(dw) <= 1000 / 16 (torchvision's
#: `bbox_xform_clip`, detection_ops.BBOX_XFORM_CLIP).
BBOX_XFORM_CLIP = float(np.log(1000.0 / 16))

#: The reference's optimizer (MXNet example/rcnn train.py, py-faster-rcnn): SGD, this lr,
#: momentum and weight decay (as models/pytorch/faster_rcnn.build).
LEARNING_RATE, MOMENTUM, WEIGHT_DECAY = 1e-3, 0.9, 5e-4

#: VOC 2007 image shapes (see voc_like_image): long side 500 px, short side uniform over these
#: pixels, landscape with this probability; at most this many objects per image.
VOC_LONG_SIDE = 500
VOC_SHORT_SIDES = (333, 375)
VOC_LANDSCAPE = 0.75
VOC_MAX_OBJECTS = 4


@dataclass(frozen=True)
class DetectorConfig:
    """Sizes of one Faster R-CNN variant; FULL is the paper's, TEST a tiny one of the same structure."""

    depths: tuple[int, int, int, int]  # bottlenecks in res2..res5
    width: int  # stem channels (64 in ResNet-101); res4 gives 16 x width, res5 32 x width
    rpn_channels: int  # the RPN's 3x3 conv
    anchor_sizes: tuple[float, float, float]  # anchor sides in network-input pixels
    short_side: int  # images are resized so the short side is this ...
    max_side: int  # ... unless the long side would pass this
    pre_nms: int  # proposals kept before NMS
    post_nms: int  # proposals kept after NMS
    rpn_batch: int  # anchors sampled for the RPN loss
    roi_batch: int  # RoIs sampled for the head
    pooled: int  # RoI Align output side (res5 halves it)
    calibration_side: int  # side of the synthetic image that sets the frozen BN statistics


RESNET101_DEPTHS = (3, 4, 23, 3)  # He et al. 2016, Table 1
FULL = DetectorConfig(RESNET101_DEPTHS, 64, 512, (128.0, 256.0, 512.0), 600, 1000, 12_000, 2_000, 256, 128, 14,
                      224)
TEST = DetectorConfig((1, 1, 1, 1), 8, 32, (16.0, 32.0, 64.0), 96, 160, 300, 100, 64, 16, 8, 64)
SIZES = {"full": FULL, "test": TEST}


def check_detector_build_args(batch: int, size: str, pool_size: int) -> DetectorConfig:
    """The DetectorConfig for `size`; UsageError for bad arguments or a batch other than 1 (hint "drop --batch")."""
    check_build_args(batch, size, tuple(SIZES), pool_size)
    if batch != 1:
        raise UsageError("faster_rcnn fixes its batch at 1 image per iteration, as the TBD paper ran it",
                         hint="drop --batch")
    return SIZES[size]


def normalised_pixels(shape: tuple[int, ...], rng: np.random.RandomState) -> np.ndarray:
    """float32 `shape` (channels on axis 1): integers 0..255 uniform, / 255, normalised by the ImageNet mean/std."""
    pixels = rng.randint(0, 256, size=shape).astype(np.float32) / 255
    mean = np.asarray(IMAGENET_MEAN, dtype=np.float32).reshape(1, 3, *([1] * (len(shape) - 2)))
    std = np.asarray(IMAGENET_STD, dtype=np.float32).reshape(1, 3, *([1] * (len(shape) - 2)))
    return ((pixels - mean) / std).astype(np.float32)


def voc_like_image(cfg: DetectorConfig, rng: np.random.RandomState
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """One synthetic Pascal VOC 2007 training image at network size, with its boxes (NCHW).

    Same distributions as models/pytorch/faster_rcnn.voc_like_image: original image 500 px on
    the long side, short side uniform over 333..375, landscape with probability 0.75; 1..4
    objects (uniform), each a box whose sides are a uniform 10%..80% of the image's, placed
    uniformly inside it, class uniform over 1..20. The image is scaled as the reference does
    (short side to cfg.short_side, long side at most cfg.max_side); pixels uniform over 0..255,
    normalised by the ImageNet mean and std. A TensorFlow (NHWC) caller transposes the image.

    Returns:
        (image float32 [1, 3, H, W], boxes float32 [G, 4] in network pixels, labels int32 [G] in
        1..20, scale = network pixels per original pixel (a Python float)), numpy on the host.
        The smallest proposal side the RPN keeps is RPN_MIN_SIZE * scale network pixels.
    """
    short = int(rng.randint(VOC_SHORT_SIDES[0], VOC_SHORT_SIDES[1] + 1))
    landscape = bool(rng.random_sample() < VOC_LANDSCAPE)
    orig_h, orig_w = (short, VOC_LONG_SIDE) if landscape else (VOC_LONG_SIDE, short)
    scale = min(cfg.short_side / short, cfg.max_side / VOC_LONG_SIDE)
    height, width = round(orig_h * scale), round(orig_w * scale)

    count = int(rng.randint(1, VOC_MAX_OBJECTS + 1))
    side = np.array([orig_w, orig_h], dtype=np.float32)
    wh = (0.1 + 0.7 * rng.random_sample((count, 2)).astype(np.float32)) * side
    corner = rng.random_sample((count, 2)).astype(np.float32) * (side - wh)
    # Per-axis factors (the rounded network size over the original) keep boxes inside the image.
    factors = np.array([width / orig_w, height / orig_h] * 2, dtype=np.float32)
    boxes = (np.concatenate([corner, corner + wh], axis=1) * factors).astype(np.float32)
    labels = rng.randint(1, NUM_CLASSES, size=count).astype(np.int32)
    image = normalised_pixels((1, 3, height, width), rng)
    return image, boxes, labels, float(scale)


def anchor_grid(height: int, width: int, stride: int = STRIDE, sizes: tuple[float, ...] = FULL.anchor_sizes,
                ratios: tuple[float, ...] = ANCHOR_RATIOS) -> np.ndarray:
    """Anchors float32 [height * width * A, 4] (pixels) for a feature map of height x width cells.

    As detection_ops.anchor_grid: A = len(ratios) * len(sizes) anchors centred on each cell at
    ((x + 0.5) stride, (y + 0.5) stride); size s, ratio r (height / width) -> s / sqrt(r) wide,
    s sqrt(r) tall. Order: row y, then column x, then ratio, then size — an RPN output
    [1, A, H, W] (NCHW) transposed to [H, W, A], or an NHWC output [1, H, W, A], reshaped to [-1].
    """
    if height < 1 or width < 1 or stride < 1 or not sizes or not ratios:
        raise UsageError(f"anchor grid needs a non-empty feature map, sizes and ratios, got "
                         f"{height}x{width}, stride {stride}, sizes {sizes}, ratios {ratios}")
    size = np.asarray(sizes, dtype=np.float64)
    root = np.sqrt(np.asarray(ratios, dtype=np.float64))
    half_w = (size[None, :] / root[:, None]).reshape(-1) / 2  # [A], ratio-major
    half_h = (size[None, :] * root[:, None]).reshape(-1) / 2
    cx = (np.arange(width, dtype=np.float64) + 0.5) * stride
    cy = (np.arange(height, dtype=np.float64) + 0.5) * stride
    cy, cx = np.meshgrid(cy, cx, indexing="ij")  # [H, W]
    cx, cy = cx.reshape(-1, 1), cy.reshape(-1, 1)
    return np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], axis=2).reshape(-1, 4).astype(np.float32)


def feature_side(pixels: int) -> int:
    """Cells along one axis of the C4 (stride-16) feature map for an image side of `pixels`.

    conv1 (7x7, stride 2, pad 3), max pool (3x3, stride 2, pad 1), then res3 and res4's strided
    3x3 convs (pad 1) each map n -> floor((n - 1) / 2) + 1 = ceil(n / 2).
    """
    for _ in range(4):
        pixels = (pixels + 1) // 2
    return pixels


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU float32 [N, M] of boxes a [N, 4] against b [M, 4] (detection_ops.box_iou); 0 for disjoint or empty pairs."""
    top_left = np.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(bottom_right - top_left, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return (inter / np.maximum(union, np.finfo(np.float32).tiny)).astype(np.float32)
