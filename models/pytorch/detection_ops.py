"""Object-detection building blocks in plain PyTorch: boxes, anchors, NMS, RoI Align, sampling.

Boxes are float [N, 4] tensors (x1, y1, x2, y2) in continuous pixel coordinates: a box's width
is x2 - x1 (no "+1"), the convention of torchvision.ops and Detectron2 (the "+1" of the
original py-faster-rcnn code is a legacy of integer pixel indices). Every op works on any
device and, apart from nms_sorted's loop, never reads a tensor's value on the host, so the
training step it is part of does not wait on the device.

References: Ren et al., "Faster R-CNN", NeurIPS 2015 (anchors, box parametrisation, NMS of
proposals, balanced sampling); He et al., "Mask R-CNN", ICCV 2017 (RoI Align);
torchvision/ops (boxes.py, _box_coder.py, roi_align.py, csrc/ops/cpu/roi_align_kernel.cpp),
whose semantics the functions here reproduce.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from tbd.core.errors import UsageError

#: Largest log-scale change decode_boxes applies: exp(dw) <= 1000 / 16 (torchvision's
#: `bbox_xform_clip`), so an untrained regressor cannot blow a box up to inf.
BBOX_XFORM_CLIP = math.log(1000.0 / 16)


def box_area(boxes: torch.Tensor) -> torch.Tensor:
    """Areas float [N] of boxes [N, 4], in square pixels (width x2 - x1 times height y2 - y1)."""
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Intersection over union float [N, M] of boxes a [N, 4] against boxes b [M, 4].

    IoU = |a ∩ b| / (|a| + |b| - |a ∩ b|) (torchvision.ops.box_iou); 0 for disjoint boxes.
    """
    top_left = torch.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = (bottom_right - top_left).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = box_area(a)[:, None] + box_area(b)[None, :] - inter
    # A degenerate pair (both boxes empty) has union 0; its IoU is 0, not NaN.
    return inter / union.clamp(min=torch.finfo(union.dtype).tiny)


def encode_boxes(targets: torch.Tensor, references: torch.Tensor,
                 weights: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)) -> torch.Tensor:
    """Regression deltas float [N, 4] that move `references` [N, 4] onto `targets` [N, 4].

    The R-CNN parametrisation (Girshick et al., CVPR 2014, appendix C; Ren et al. 2015, eq. 2):
    dx = wx (x - xa) / wa, dy = wy (y - ya) / ha, dw = ww log(w / wa), dh = wh log(h / ha) for
    centres (x, y) and sizes (w, h). `weights` (wx, wy, ww, wh) are the inverse of the target
    normalisation stds: (10, 10, 5, 5) for stds (0.1, 0.1, 0.2, 0.2) in the Fast R-CNN head.
    """
    wx, wy, ww, wh = weights
    ref_w = references[:, 2] - references[:, 0]
    ref_h = references[:, 3] - references[:, 1]
    ref_x = references[:, 0] + 0.5 * ref_w
    ref_y = references[:, 1] + 0.5 * ref_h
    tgt_w = targets[:, 2] - targets[:, 0]
    tgt_h = targets[:, 3] - targets[:, 1]
    tgt_x = targets[:, 0] + 0.5 * tgt_w
    tgt_y = targets[:, 1] + 0.5 * tgt_h
    return torch.stack([wx * (tgt_x - ref_x) / ref_w, wy * (tgt_y - ref_y) / ref_h,
                        ww * torch.log(tgt_w / ref_w), wh * torch.log(tgt_h / ref_h)], dim=1)


def decode_boxes(deltas: torch.Tensor, references: torch.Tensor,
                 weights: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)) -> torch.Tensor:
    """Boxes float [N, 4] from deltas [N, 4] applied to `references` [N, 4]; inverse of encode_boxes.

    dw and dh are capped at BBOX_XFORM_CLIP (after dividing by their weights) as torchvision does.
    """
    wx, wy, ww, wh = weights
    ref_w = references[:, 2] - references[:, 0]
    ref_h = references[:, 3] - references[:, 1]
    ref_x = references[:, 0] + 0.5 * ref_w
    ref_y = references[:, 1] + 0.5 * ref_h
    x = deltas[:, 0] / wx * ref_w + ref_x
    y = deltas[:, 1] / wy * ref_h + ref_y
    w = torch.exp((deltas[:, 2] / ww).clamp(max=BBOX_XFORM_CLIP)) * ref_w
    h = torch.exp((deltas[:, 3] / wh).clamp(max=BBOX_XFORM_CLIP)) * ref_h
    return torch.stack([x - 0.5 * w, y - 0.5 * h, x + 0.5 * w, y + 0.5 * h], dim=1)


def clip_boxes(boxes: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Boxes [N, 4] clipped to the image [0, width] x [0, height] (pixels)."""
    x = boxes[:, 0::2].clamp(0, width)
    y = boxes[:, 1::2].clamp(0, height)
    return torch.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], dim=1)


def anchor_grid(height: int, width: int, stride: int, sizes: tuple[float, ...], ratios: tuple[float, ...],
                device: "torch.device | str | None" = None) -> torch.Tensor:
    """Anchors float [height * width * A, 4] for a feature map of height x width cells.

    A = len(ratios) * len(sizes) anchors sit at each cell's centre ((x + 0.5) stride,
    (y + 0.5) stride) — py-faster-rcnn's generate_anchors centres them at 7.5 in its "+1"
    pixel convention, which is 8 = stride / 2 in continuous coordinates. An anchor of size s
    and ratio r (height / width) is s / sqrt(r) wide and s sqrt(r) tall, so its area is s^2
    (torchvision's AnchorGenerator; py-faster-rcnn rounds these sides to whole pixels). The
    order is cell-major (row y, then column x), then ratio, then size, matching an RPN output
    [1, A, H, W] permuted to [H, W, A].
    """
    if height < 1 or width < 1 or stride < 1 or not sizes or not ratios:
        raise UsageError(f"anchor grid needs a non-empty feature map, sizes and ratios, got "
                         f"{height}x{width}, stride {stride}, sizes {sizes}, ratios {ratios}")
    size = torch.tensor(sizes, dtype=torch.float32, device=device)
    root = torch.tensor(ratios, dtype=torch.float32, device=device).sqrt()
    half_w = (size[None, :] / root[:, None]).reshape(-1) / 2  # [A], ratio-major
    half_h = (size[None, :] * root[:, None]).reshape(-1) / 2
    cx = (torch.arange(width, dtype=torch.float32, device=device) + 0.5) * stride
    cy = (torch.arange(height, dtype=torch.float32, device=device) + 0.5) * stride
    cy, cx = torch.meshgrid(cy, cx, indexing="ij")  # [H, W]
    cx, cy = cx.reshape(-1, 1), cy.reshape(-1, 1)
    return torch.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], dim=2).reshape(-1, 4)


def nms_sorted(boxes: torch.Tensor, iou_threshold: float, candidates: torch.Tensor | None = None,
               method: str | None = None, rounds_per_check: int = 4) -> torch.Tensor:
    """Greedy non-maximum suppression of boxes [N, 4] already sorted by descending score.

    Returns bool [N]: True for the boxes greedy NMS keeps (Ren et al. 2015 §3.3, py-faster-rcnn's
    nms): walking down the list, a box is kept unless a box kept before it overlaps it with IoU
    > iou_threshold. `candidates` (bool [N]) leaves the False boxes out entirely: they are never
    kept and never suppress. Two exact methods, chosen by device unless `method` says:

    - "scan" (CPU): the walk itself, each kept box suppressing the later boxes it overlaps — the
      algorithm of py-faster-rcnn's cpu_nms and torchvision's CPU kernel; it reads the device
      once per box, which costs nothing on the CPU.
    - "rounds" (GPU): parallel rounds over S[j, i] = (j < i and IoU > t). Every round decides,
      for each undecided box i at once, "removed" if a kept box suppresses it and "kept" if no
      kept or undecided box does (all its suppressors were removed); otherwise it waits. Each
      decision is greedy's (by induction down the sorted list) and each round settles at least
      the first undecided box, so the loop ends after at most N rounds — in practice the
      longest chain of overlapping boxes, about a dozen for 12,000 RPN proposals. A round is
      one [2, N] x [N, N] product (fp16 on a GPU: counts only need to stay > 0); the loop reads
      the device once per `rounds_per_check` rounds to stop, NMS's only host syncs (the
      reference CUDA NMS syncs too: it copies its overlap mask to the host).

    Both use the same division-free test, IoU > t <=> (1 + t) inter > t (area_j + area_i), so
    they agree bit for bit.
    """
    n = boxes.shape[0]
    method = method or ("scan" if boxes.device.type == "cpu" else "rounds")
    undecided = torch.ones(n, dtype=torch.bool, device=boxes.device) if candidates is None else candidates.clone()
    if method == "scan":
        return _nms_scan(boxes, iou_threshold, undecided)
    if method != "rounds":
        raise UsageError(f"unknown NMS method '{method}'", hint="choose scan or rounds")
    kept = torch.zeros(n, dtype=torch.bool, device=boxes.device)
    if n == 0:
        return kept
    dtype = torch.float16 if boxes.device.type == "cuda" else torch.float32
    suppresses = _suppression_matrix(boxes, iou_threshold, dtype)
    while True:
        for _ in range(rounds_per_check):
            by_kept, by_open = (torch.stack([kept, undecided]).to(dtype) @ suppresses) > 0
            kept = kept | (undecided & ~by_kept & ~by_open)
            undecided = undecided & ~by_kept & by_open
        if not bool(undecided.any()):
            return kept


def _nms_scan(boxes: torch.Tensor, threshold: float, open_: torch.Tensor) -> torch.Tensor:
    """Greedy NMS walking down sorted boxes; `open_` (bool [N], consumed) marks the boxes still in play."""
    n = boxes.shape[0]
    x1, y1, x2, y2 = boxes.unbind(1)
    area = (x2 - x1) * (y2 - y1)
    kept = torch.zeros(n, dtype=torch.bool, device=boxes.device)
    for i in range(n):
        if not bool(open_[i]):
            continue
        kept[i] = True
        later = slice(i + 1, n)
        inter = torch.minimum(x2[i], x2[later]).sub_(torch.maximum(x1[i], x1[later])).clamp_(min=0)
        height = torch.minimum(y2[i], y2[later]).sub_(torch.maximum(y1[i], y1[later])).clamp_(min=0)
        inter.mul_(height).mul_(1 + threshold)
        open_[later] &= ~(inter > (area[i] + area[later]).mul_(threshold))
    return kept


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float, method: str | None = None) -> torch.Tensor:
    """Indices int64 [K] of the boxes greedy NMS keeps, by descending score (torchvision.ops.nms); see nms_sorted."""
    order = torch.sort(scores, descending=True, stable=True).indices
    return order[nms_sorted(boxes[order], iou_threshold, method=method)]


def _suppression_matrix(boxes: torch.Tensor, threshold: float, dtype: torch.dtype) -> torch.Tensor:
    """S [N, N] of `dtype`: 1 where j < i and IoU(box j, box i) > threshold, else 0.

    Only the upper triangle is computed, a block of rows at a time (temporaries ~16 MiB), and
    without a division: IoU > t  <=>  inter > t (area_j + area_i - inter)  <=>
    (1 + t) inter > t (area_j + area_i), for a non-empty union (an empty union gives 0 > 0).
    """
    n = boxes.shape[0]
    x1, y1, x2, y2 = boxes.unbind(1)
    area = (x2 - x1) * (y2 - y1)
    out = torch.zeros(n, n, dtype=dtype, device=boxes.device)
    rows = max(1, (1 << 22) // n)
    for start in range(0, n, rows):
        r, c = slice(start, min(start + rows, n)), slice(start, n)
        inter = torch.minimum(x2[r, None], x2[None, c]).sub_(torch.maximum(x1[r, None], x1[None, c])).clamp_(min=0)
        height = torch.minimum(y2[r, None], y2[None, c]).sub_(torch.maximum(y1[r, None], y1[None, c])).clamp_(min=0)
        inter.mul_(height).mul_(1 + threshold)
        out[r, c] = inter > (area[r, None] + area[None, c]).mul_(threshold)
    return out.triu_(diagonal=1)


def roi_align(features: torch.Tensor, rois: torch.Tensor, output_size: int, spatial_scale: float,
              sampling_ratio: int = 2, aligned: bool = True) -> torch.Tensor:
    """RoI Align (He et al. 2017) of features [1, C, H, W] over rois [R, 4] (image pixels) -> [R, C, P, P].

    Same result as torchvision.ops.roi_align(features, [rois], P, spatial_scale, sampling_ratio,
    aligned) for a fixed sampling_ratio > 0. A RoI, scaled by spatial_scale and shifted by -0.5
    when aligned (so pixel centres sit at integer+0.5), is cut into P x P bins; each bin averages
    sampling_ratio^2 bilinear samples at the centres of an even sub-grid. Per torchvision's
    bilinear_interpolate, a sample beyond one cell outside the map (y < -1 or y > H) is 0, and
    one within it is clamped to the edge row/column.

    The samples come from one F.grid_sample call (bilinear, zero padding, align_corners=False,
    where pixel coordinate p maps to (2p + 1) / W - 1): coordinates are clamped to [0, H - 1]
    by hand for the edge rule, and out-of-range samples are sent to pixel -2, where zero padding
    gives exactly 0. An average pool over each sampling_ratio x sampling_ratio block then makes
    the bins. Gradients reach `features`, not the RoI coordinates (as in torchvision).
    """
    if features.dim() != 4 or features.shape[0] != 1:
        raise UsageError(f"roi_align takes features of one image [1, C, H, W], got {tuple(features.shape)}")
    if rois.dim() != 2 or rois.shape[1] != 4 or output_size < 1 or sampling_ratio < 1:
        raise UsageError(f"roi_align takes rois [R, 4], output_size >= 1 and sampling_ratio >= 1, got "
                         f"{tuple(rois.shape)}, {output_size}, {sampling_ratio}")
    _, channels, height, width = features.shape
    r, p, s = rois.shape[0], output_size, sampling_ratio
    boxes = rois.detach().to(features.dtype) * spatial_scale - (0.5 if aligned else 0.0)
    size = boxes[:, 2:] - boxes[:, :2]  # [R, 2] (w, h)
    if not aligned:  # torchvision's legacy mode forces RoIs to be at least 1x1
        size = size.clamp(min=1.0)
    # Sample k = bin * s + j of a row sits at (bin + (j + 0.5) / s) bin_size = (k + 0.5) / s bin_size.
    steps = (torch.arange(p * s, dtype=features.dtype, device=features.device) + 0.5) / s
    xs = boxes[:, 0:1] + steps * (size[:, 0:1] / p)  # [R, P*s]
    ys = boxes[:, 1:2] + steps * (size[:, 1:2] / p)
    gx = _grid_coordinate(xs, width)
    gy = _grid_coordinate(ys, height)
    grid = torch.stack([gx[:, None, :].expand(r, p * s, p * s), gy[:, :, None].expand(r, p * s, p * s)], dim=-1)
    samples = F.grid_sample(features, grid.reshape(1, r * p * s, p * s, 2), mode="bilinear",
                            padding_mode="zeros", align_corners=False)  # [1, C, R*P*s, P*s]
    bins = F.avg_pool2d(samples, kernel_size=s)  # [1, C, R*P, P]; blocks never straddle two RoIs
    return bins.view(channels, r, p, p).transpose(0, 1).contiguous()


def _grid_coordinate(pixel: torch.Tensor, size: int) -> torch.Tensor:
    """grid_sample's normalised coordinate for RoI Align sample positions along an axis of `size` cells."""
    inside = (pixel >= -1.0) & (pixel <= size)
    pixel = torch.where(inside, pixel.clamp(0, size - 1), torch.full_like(pixel, -2.0))
    return (2 * pixel + 1) / size - 1


def balanced_sample(positive: torch.Tensor, negative: torch.Tensor, num: int, positive_fraction: float,
                    generator: torch.Generator | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A random minibatch of `num` slots: up to num * positive_fraction positives, negatives filling the rest.

    The sampling of the RPN (256 anchors, half positive) and of the Fast R-CNN head (128 RoIs, a
    quarter foreground) in Ren et al. 2015 §3.1.3 / py-faster-rcnn's anchor_target_layer and
    proposal_target_layer: a uniformly random subset of each pool. Done with fixed shapes, so
    nothing is read on the host: each candidate draws a uniform key, top-k picks the subsets,
    and slot k holds the k-th chosen positive while k < (number of positives taken), then the
    chosen negatives in order.

    Args:
        positive, negative: bool [N], disjoint candidate pools.
        num: slots in the minibatch.
        positive_fraction: largest share of slots positives may take.
        generator: fixes the draw (on the masks' device).
    Returns:
        (index int64 [num] into the N candidates, is_positive bool [num], valid bool [num]); a slot is
        invalid (and its index arbitrary) when the pools run out before `num`.
    """
    n = positive.shape[0]
    max_positive = int(num * positive_fraction)
    if n == 0 or num < 1 or max_positive < 1:
        raise UsageError(f"balanced_sample needs candidates and at least one positive slot, got "
                         f"{n} candidates, {num} slots, positive fraction {positive_fraction}")
    key = torch.rand(n, generator=generator, device=positive.device)
    pos_key, pos_index = torch.where(positive, key, -1.0).topk(min(max_positive, n))
    neg_key, neg_index = torch.where(negative, key, -1.0).topk(min(num, n))
    taken = (pos_key >= 0).sum()
    slot = torch.arange(num, device=positive.device)
    is_positive = slot < taken
    neg_slot = slot - taken
    neg_ok = neg_slot < neg_index.shape[0]
    neg_slot = neg_slot.clamp(0, neg_index.shape[0] - 1)
    index = torch.where(is_positive, pos_index[slot.clamp(max=pos_index.shape[0] - 1)], neg_index[neg_slot])
    valid = is_positive | (neg_ok & (neg_key[neg_slot] >= 0))
    return index, is_positive, valid
