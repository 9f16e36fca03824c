"""ResNet-50 (v1.5) image classification on synthetic ImageNet-shaped data, in PyTorch.

The network follows torchvision's `resnet50` (He et al., "Deep Residual Learning for Image
Recognition", CVPR 2016, with the "v1.5" change of putting the stride-2 on the 3x3 convolution of
the bottleneck instead of the first 1x1): 25,557,032 parameters for depths (3, 4, 6, 3) and 1000
classes, the count torchvision documents for ResNet50_Weights.IMAGENET1K_V1. The same code gives
ResNet-101 (3, 4, 23, 3) and ResNet-152 (3, 8, 36, 3).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from tbd.models.base import Workload, pool_workload
from tbd.models.pytorch.synthetic import POOL_SIZE, check_build_args, image_batch
from tbd.models.specs import RESNET_DEPTHS as DEPTHS  # noqa: F401 - public name (faster_rcnn, tests)
from tbd.models.specs import RESNET_SIZES as _SIZES

#: Data-parallel engines this model runs under (tbd profile --data-parallel; checked by 2-rank tests).
DATA_PARALLEL = ("ddp", "fsdp")

_EXPANSION = 4  # bottleneck output channels / inner width


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided in v1.5), 1x1 expand, each with BatchNorm; identity or projection shortcut."""

    def __init__(self, in_channels: int, width: int, stride: int):
        super().__init__()
        out_channels = width * _EXPANSION
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + shortcut)


def resnet(depths: tuple[int, ...], num_classes: int = 1000, width: int = 64) -> nn.Sequential:
    """A bottleneck ResNet v1.5 with `depths` blocks per stage, under PyTorch's default init.

    Args:
        depths: bottleneck blocks in each stage, e.g. DEPTHS["resnet50"]; stage i has inner width
            width * 2**i channels and (for i > 0) halves the spatial size.
        num_classes: outputs of the final fully connected layer.
        width: channels of the stem convolution and of the first stage's inner width.
    Returns:
        nn.Sequential mapping float [N, 3, H, W] images to [N, num_classes] logits.
    """
    layers: list[nn.Module] = [
        nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, stride=2, padding=1),
    ]
    in_channels = width
    for stage, blocks in enumerate(depths):
        inner = width * 2 ** stage
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            layers.append(Bottleneck(in_channels, inner, stride))
            in_channels = inner * _EXPANSION
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_channels, num_classes)]
    return nn.Sequential(*layers)


def build(batch: int, device: "torch.device | str", size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE, parallel: Callable[[nn.Module], nn.Module] | None = None) -> Workload:
    """ResNet-50 training workload; see `build_variant`."""
    return build_variant("resnet50", batch, device, size, seed, pool_size=pool_size, parallel=parallel)


def build_variant(variant: str, batch: int, device: "torch.device | str", size: str = "full", seed: int = 0,
                  *, pool_size: int = POOL_SIZE, parallel: Callable[[nn.Module], nn.Module] | None = None
                  ) -> Workload:
    """ResNet-50/101/152 training workload: SGD with momentum on `pool_size` synthetic batches on `device`.

    Args:
        batch: images per iteration.
        device: where the model, optimizer state and batches live ("cpu", "cuda", ...).
        size: "full" (ImageNet-sized ResNet-50) or "test" (tiny, same architecture, for CI).
        seed: fixes weight init and data (drawn on the CPU, so identical on every device).
        pool_size: synthetic batches kept on the device and cycled through by step().
        parallel: wraps the model for data-parallel training (e.g. in DistributedDataParallel);
            step() runs the forward pass through the wrapper, while Workload.model and the
            optimizer keep the module itself (FSDP shards it in place, before the optimizer is
            made). None: single process.
    Returns:
        Workload whose step() runs one iteration and returns the loss tensor (no host sync).
    """
    check_build_args(batch, size, tuple(_SIZES[variant]), pool_size)
    depths, width, side, classes = _SIZES[variant][size]
    device = torch.device(device)
    generator = torch.Generator().manual_seed(seed)

    model = resnet(depths, classes, width)
    _init_weights(model, generator)
    model.to(device).train()
    # The reference recipe (Goyal et al., "Accurate, Large Minibatch SGD", 2017; torchvision's
    # references/classification): SGD, momentum 0.9, weight decay 1e-4, lr 0.1 per 256 images
    # scaled linearly with the batch.
    # Wrapped before the optimizer is made: FSDP replaces the parameters with their shards.
    net = parallel(model) if parallel else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * batch / 256, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()

    pool = [tuple(t.to(device) for t in image_batch(batch, (3, side, side), classes, generator))
            for _ in range(pool_size)]

    def train_step(images, labels) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(net(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    return pool_workload(
        variant, pool, train_step,
        samples_per_step=batch,
        throughput_unit="images/s",
        model=model,
        optimizer=optimizer,
        description=(f"{variant} v1.5 ({size}: depths {depths}, width {width}, 3x{side}x{side} images, "
                     f"{classes} classes), SGD momentum 0.9, {pool_size} synthetic batches of {batch}"),
    )


def _init_weights(model: nn.Module, generator: torch.Generator) -> None:
    """torchvision's ResNet init, drawn from `generator` (seeded locally, not the global RNG)."""
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu", generator=generator)
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            # nn.Linear.reset_parameters, with the generator passed through.
            nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
            bound = 1 / math.sqrt(module.in_features)
            nn.init.uniform_(module.bias, -bound, bound, generator=generator)
