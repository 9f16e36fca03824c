"""Inception-v3 image classification on synthetic ImageNet-shaped data, in PyTorch.

The network is torchvision's `inception_v3(aux_logits=True, transform_input=False)`
(torchvision/models/inception.py), which implements Szegedy et al., "Rethinking the Inception
Architecture for Computer Vision", CVPR 2016 (Table 1, Figures 5-7 and 10): a convolutional stem,
three InceptionA blocks (Mixed_5b..5d, the paper's Figure 5), the grid reduction InceptionB
(Mixed_6a, Figure 10), four InceptionC blocks with factorised 1x7/7x1 convolutions (Mixed_6b..6e,
Figure 6), the grid reduction InceptionD (Mixed_7a), two InceptionE blocks with expanded 1x3/3x1
outputs (Mixed_7b..7c, Figure 7), global average pooling, dropout 0.5 and a 2048 -> 1000 fully
connected layer. Every convolution is bias-free and followed by BatchNorm (eps 0.001) and ReLU.
The auxiliary classifier (section 4) reads Mixed_6e's 17x17x768 output. With 1000 classes the
network has 27,161,264 parameters, the count torchvision documents for
Inception_V3_Weights.IMAGENET1K_V1 ("num_params").

Training follows the paper (section 8 and Table 3, "Inception-v3"): RMSProp with decay 0.9 and
epsilon 1.0 at learning rate 0.045, and label-smoothing regularisation with epsilon 0.1
(section 7). The auxiliary head's loss is added with weight 0.4, as in TF-slim's Inception
training script (tensorflow/models research/slim/train_image_classifier.py, `weights=0.4` on
AuxLogits) and PyTorch's fine-tuning tutorial (`loss = loss1 + 0.4 * loss2`). Departures:
- the paper batch-normalises the auxiliary head's fully connected layer ("BN-auxiliary");
  torchvision does not, and we follow torchvision so the parameter count is the documented one;
- no gradient clipping (the paper clips at 2.0 for stability) and no weight decay (the paper
  gives none), so step() is exactly zero_grad, forward, loss, backward, optimizer step;
- PyTorch's RMSprop adds epsilon outside the square root (TensorFlow's inside); with epsilon 1.0
  the update differs slightly in size, not in cost.

The auxiliary head's 5x5 average pool (stride 3) and 5x5 convolution need Mixed_6e's output to be
at least 17x17, which the stem and Mixed_6a reach only from 299x299 inputs; so the test size keeps
299x299 images and shrinks channels (width multiplier) and blocks per stage instead.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from tbd.models.base import Workload, pool_workload
from tbd.models.pytorch.synthetic import POOL_SIZE, check_build_args, image_batch

# What the model is (sizes, loss weights, optimizer settings) is framework-neutral: one copy, models/specs.py.
from tbd.models.specs import INCEPTION3_AUX_WEIGHT as AUX_WEIGHT  # noqa: F401 - the module's public names
from tbd.models.specs import INCEPTION3_FULL_STAGES as FULL_STAGES
from tbd.models.specs import INCEPTION3_LABEL_SMOOTHING as LABEL_SMOOTHING
from tbd.models.specs import INCEPTION3_SIZES as _SIZES
from tbd.models.specs import check_inception3_batch

#: Data-parallel engines this model runs under (tbd profile --data-parallel; checked by 2-rank tests).
DATA_PARALLEL = ("ddp", "fsdp")

Scale = Callable[[int], int]


class BasicConv2d(nn.Module):
    """Bias-free convolution, BatchNorm (eps 0.001, as torchvision and TF-slim) and ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class InceptionA(nn.Module):
    """35x35 block (paper Figure 5): 1x1, 5x5, double 3x3 and pooled 1x1 branches."""

    def __init__(self, in_channels: int, pool_features: int, c: Scale):
        super().__init__()
        self.branch1x1 = BasicConv2d(in_channels, c(64), 1)
        self.branch5x5_1 = BasicConv2d(in_channels, c(48), 1)
        self.branch5x5_2 = BasicConv2d(c(48), c(64), 5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(in_channels, c(64), 1)
        self.branch3x3dbl_2 = BasicConv2d(c(64), c(96), 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(c(96), c(96), 3, padding=1)
        self.branch_pool = BasicConv2d(in_channels, c(pool_features), 1)
        self.out_channels = c(64) + c(64) + c(96) + c(pool_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b5, b3, bp], 1)


class InceptionB(nn.Module):
    """35x35 -> 17x17 grid reduction (paper Figure 10): strided 3x3, double 3x3, max pool."""

    def __init__(self, in_channels: int, c: Scale):
        super().__init__()
        self.branch3x3 = BasicConv2d(in_channels, c(384), 3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(in_channels, c(64), 1)
        self.branch3x3dbl_2 = BasicConv2d(c(64), c(96), 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(c(96), c(96), 3, stride=2)
        self.out_channels = c(384) + c(96) + in_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([b3, bd, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionC(nn.Module):
    """17x17 block (paper Figure 6) with 7x7 convolutions factorised into 1x7 and 7x1."""

    def __init__(self, in_channels: int, channels_7x7: int, c: Scale):
        super().__init__()
        c7 = c(channels_7x7)
        self.branch1x1 = BasicConv2d(in_channels, c(192), 1)
        self.branch7x7_1 = BasicConv2d(in_channels, c7, 1)
        self.branch7x7_2 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, c(192), (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(in_channels, c7, 1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, c(192), (1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(in_channels, c(192), 1)
        self.out_channels = 4 * c(192)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = self.branch7x7dbl_1(x)
        for conv in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            bd = conv(bd)
        bp = self.branch_pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b7, bd, bp], 1)


class InceptionD(nn.Module):
    """17x17 -> 8x8 grid reduction: 1x1 then strided 3x3, 1x1-1x7-7x1 then strided 3x3, max pool."""

    def __init__(self, in_channels: int, c: Scale):
        super().__init__()
        self.branch3x3_1 = BasicConv2d(in_channels, c(192), 1)
        self.branch3x3_2 = BasicConv2d(c(192), c(320), 3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(in_channels, c(192), 1)
        self.branch7x7x3_2 = BasicConv2d(c(192), c(192), (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(c(192), c(192), (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(c(192), c(192), 3, stride=2)
        self.out_channels = c(320) + c(192) + in_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return torch.cat([b3, b7, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionE(nn.Module):
    """8x8 block (paper Figure 7): 3x3 outputs expanded into parallel 1x3 and 3x1 convolutions."""

    def __init__(self, in_channels: int, c: Scale):
        super().__init__()
        self.branch1x1 = BasicConv2d(in_channels, c(320), 1)
        self.branch3x3_1 = BasicConv2d(in_channels, c(384), 1)
        self.branch3x3_2a = BasicConv2d(c(384), c(384), (1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(c(384), c(384), (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(in_channels, c(448), 1)
        self.branch3x3dbl_2 = BasicConv2d(c(448), c(384), 3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(c(384), c(384), (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(c(384), c(384), (3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(in_channels, c(192), 1)
        self.out_channels = c(320) + 4 * c(384) + c(192)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = torch.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        bp = self.branch_pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([b1, b3, bd, bp], 1)


class InceptionAux(nn.Module):
    """Auxiliary classifier on the 17x17 grid (paper section 4): 5x5/3 avg pool, 1x1, 5x5, fc."""

    def __init__(self, in_channels: int, num_classes: int, c: Scale):
        super().__init__()
        self.conv0 = BasicConv2d(in_channels, c(128), 1)
        self.conv1 = BasicConv2d(c(128), c(768), 5)
        self.fc = nn.Linear(c(768), num_classes)
        # torchvision's init std for this layer (0.1 elsewhere). torchvision also sets
        # `stddev = 0.01` on conv1, but on the BasicConv2d wrapper, which its init loop never
        # reads (it looks at nn.Conv2d modules), so that convolution gets 0.1; we do the same.
        self.fc.stddev = 0.001

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(self.conv0(F.avg_pool2d(x, 5, stride=3)))  # 17x17 -> 5x5 -> 5x5 -> 1x1
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Inception3(nn.Module):
    """Inception-v3 as torchvision builds it; forward returns (logits, aux_logits) in training mode.

    Args:
        num_classes: outputs of both classifiers.
        stages: (InceptionA pool widths, InceptionC 7x7 widths, InceptionE count), at most
            (3, 4, 2) blocks; FULL_STAGES is the paper's network.
        width: multiplier on every layer's channel count (1.0 for the paper's network).
    """

    def __init__(self, num_classes: int = 1000, stages=FULL_STAGES, width: float = 1.0):
        super().__init__()
        pool_widths, widths_7x7, blocks_e = stages

        def c(channels: int) -> int:
            return max(1, round(channels * width))

        self.Conv2d_1a_3x3 = BasicConv2d(3, c(32), 3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(c(32), c(32), 3)
        self.Conv2d_2b_3x3 = BasicConv2d(c(32), c(64), 3, padding=1)
        self.maxpool1 = nn.MaxPool2d(3, stride=2)
        self.Conv2d_3b_1x1 = BasicConv2d(c(64), c(80), 1)
        self.Conv2d_4a_3x3 = BasicConv2d(c(80), c(192), 3)
        self.maxpool2 = nn.MaxPool2d(3, stride=2)
        # Blocks are attributes named as in torchvision (Mixed_5b .. Mixed_7c), so module paths
        # in traces and state dicts read the same; the name lists give the forward order.
        blocks: list[tuple[str, nn.Module]] = []
        channels = c(192)
        for letter, pool_features in zip("bcd", pool_widths):
            blocks.append((f"Mixed_5{letter}", InceptionA(channels, pool_features, c)))
            channels = blocks[-1][1].out_channels
        blocks.append(("Mixed_6a", InceptionB(channels, c)))
        channels = blocks[-1][1].out_channels
        for letter, channels_7x7 in zip("bcde", widths_7x7):
            blocks.append((f"Mixed_6{letter}", InceptionC(channels, channels_7x7, c)))
            channels = blocks[-1][1].out_channels
        for name, block in blocks:
            self.add_module(name, block)
        self._before_aux = [name for name, _ in blocks]
        self.AuxLogits = InceptionAux(channels, num_classes, c)
        after = [("Mixed_7a", InceptionD(channels, c))]
        for letter in "bc"[:blocks_e]:
            after.append((f"Mixed_7{letter}", InceptionE(after[-1][1].out_channels, c)))
        for name, block in after:
            self.add_module(name, block)
        self._after_aux = [name for name, _ in after]
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(after[-1][1].out_channels, num_classes)

    def forward(self, x: torch.Tensor):
        x = self.maxpool1(self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x))))
        x = self.maxpool2(self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x)))
        for name in self._before_aux:
            x = getattr(self, name)(x)
        # As in torchvision, the auxiliary head runs only in training mode.
        aux = self.AuxLogits(x) if self.training else None
        for name in self._after_aux:
            x = getattr(self, name)(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        logits = self.fc(self.dropout(x))
        return (logits, aux) if self.training else logits


def build(batch: int, device: "torch.device | str", size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE, parallel: Callable[[nn.Module], nn.Module] | None = None) -> Workload:
    """Inception-v3 training workload: RMSProp on `pool_size` synthetic 299x299 batches on `device`.

    Args:
        batch: images per iteration, at least 2 (training-mode BatchNorm on the aux head's 1x1 map).
        device: where the model, optimizer state and batches live ("cpu", "cuda", ...).
        size: "full" (ImageNet-sized Inception-v3) or "test" (narrow, same block types, for CI).
        seed: fixes weight init and data (drawn on the CPU, so identical on every device).
        pool_size: synthetic batches kept on the device and cycled through by step().
        parallel: wraps the model for data-parallel training (e.g. in DistributedDataParallel);
            step() runs the forward pass through the wrapper, while Workload.model and the
            optimizer keep the module itself (FSDP shards it in place, before the optimizer is
            made). None: single process.
    Returns:
        Workload whose step() runs one iteration (loss = CE(main) + 0.4 CE(aux), both with label
        smoothing 0.1) and returns the loss tensor (no host sync).
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    check_inception3_batch(batch)
    stages, width, side, classes = _SIZES[size]
    device = torch.device(device)
    generator = torch.Generator().manual_seed(seed)

    model = Inception3(classes, stages, width)
    init_weights(model, generator)
    model.to(device).train()
    # Wrapped before the optimizer is made: FSDP replaces the parameters with their shards.
    net = parallel(model) if parallel else model
    # Szegedy et al. 2016, section 8: "RMSProp with decay of 0.9 and epsilon = 1.0", lr 0.045.
    optimizer = torch.optim.RMSprop(model.parameters(), lr=0.045, alpha=0.9, eps=1.0)
    criterion = nn.CrossEntropyLoss(label_smoothing=LABEL_SMOOTHING)

    pool = [tuple(t.to(device) for t in image_batch(batch, (3, side, side), classes, generator))
            for _ in range(pool_size)]

    def train_step(images, labels) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        logits, aux = net(images)
        loss = criterion(logits, labels) + AUX_WEIGHT * criterion(aux, labels)
        loss.backward()
        optimizer.step()
        return loss

    return pool_workload(
        "inception3", pool, train_step,
        samples_per_step=batch,
        throughput_unit="images/s",
        model=model,
        optimizer=optimizer,
        description=(f"Inception-v3 with auxiliary head (Szegedy et al. 2016, torchvision layout; {size}: "
                     f"width x{width:g}, blocks A/C/E {len(stages[0])}/{len(stages[1])}/{stages[2]}, "
                     f"3x{side}x{side} images, {classes} classes), RMSProp lr 0.045, "
                     f"{pool_size} synthetic batches of {batch}"),
    )


def init_weights(model: nn.Module, generator: torch.Generator) -> None:
    """torchvision's Inception3 init, drawn from `generator` (seeded locally, not the global RNG).

    Convolution and linear weights: normal truncated to [-2, 2] with std 0.1, or the layer's own
    `stddev` (0.01 and 0.001 in the auxiliary head); BatchNorm: weight 1, bias 0. Linear biases
    keep nn.Linear's default uniform(+-1/sqrt(fan_in)), as torchvision leaves them.
    """
    for module in model.modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            std = float(getattr(module, "stddev", 0.1))
            nn.init.trunc_normal_(module.weight, mean=0.0, std=std, a=-2, b=2, generator=generator)
            if isinstance(module, nn.Linear):
                bound = 1 / math.sqrt(module.in_features)
                nn.init.uniform_(module.bias, -bound, bound, generator=generator)
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
