"""ResNet-152 v1.5 training workload: the ResNet-50 builder with 152's stage depths.

He et al., "Deep Residual Learning for Image Recognition" (CVPR 2016), Table 1; v1.5 puts the
stride on the 3x3 convolution, as torchvision's resnet152. See models/pytorch/resnet50.py.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from tbd.models.base import Workload
from tbd.models.pytorch.resnet50 import POOL_SIZE, build_variant

#: Data-parallel engines this model runs under (tbd profile --data-parallel; checked by 2-rank tests).
DATA_PARALLEL = ("ddp", "fsdp")


def build(batch: int, device, size: str = "full", seed: int = 0, *, pool_size: int = POOL_SIZE,
          parallel: Callable[[nn.Module], nn.Module] | None = None) -> Workload:
    """ResNet-152 training workload; arguments as models.pytorch.resnet50.build_variant."""
    return build_variant("resnet152", batch, device, size, seed, pool_size=pool_size, parallel=parallel)
