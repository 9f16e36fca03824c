"""The Faster R-CNN port's ResNet C4 backbone in MXNet Gluon: frozen-BatchNorm bottleneck stages,
and how build() calibrates the BatchNorm statistics and freezes conv1, res2 and every BN's gamma/beta.

models/mxnet/faster_rcnn.py assembles the detector from these stages (its docstring has the recipe).
"""

from __future__ import annotations

import mxnet as mx
from mxnet.gluon import nn

# ResNet-50's bottleneck (torchvision's conv init), here with the frozen norm below.
from tbd.models.mxnet.resnet50 import EXPANSION, Bottleneck


def norm(channels: int) -> nn.BatchNorm:
    """A frozen BatchNorm: the running statistics in training too; gamma and beta set to grad_req 'null' at build."""
    return nn.BatchNorm(in_channels=channels, use_global_stats=True, epsilon=1e-5)


def stage(blocks: int, in_channels: int, width: int, stride: int, prefix: str) -> nn.HybridSequential:
    """`blocks` bottlenecks of inner width `width`, the first with `stride` (and a projection)."""
    net = nn.HybridSequential(prefix=prefix)
    with net.name_scope():
        for block in range(blocks):
            net.add(Bottleneck(in_channels, width, stride if block == 0 else 1, norm))
            in_channels = width * EXPANSION
    return net


def calibrate(model: nn.HybridBlock, image: mx.nd.NDArray) -> None:
    """Set every frozen BN's running mean and (biased) variance from one forward pass of `image` [1, 3, S, S].

    Each BN takes the statistics of its own input in that pass (a pre-forward hook), as a
    training-mode BN would, so activations start at unit scale like a pretrained model's; res5
    sees the whole res4 map (14x14 for the full size's 224-pixel image, the RoI feature size).
    Runs imperatively (before hybridize), on the host. `model` is the FasterRCNN (its trunk() and res5).
    """
    def set_statistics(bn: nn.BatchNorm, inputs) -> None:
        x = inputs[0]
        mean = x.mean(axis=(0, 2, 3))
        bn.running_mean.set_data(mean)
        bn.running_var.set_data(mx.nd.mean(mx.nd.square(x - mean.reshape(1, -1, 1, 1)), axis=(0, 2, 3)))

    handles = [block.register_forward_pre_hook(set_statistics) for block in _blocks(model, nn.BatchNorm)]
    try:
        model.res5(model.trunk(image)).wait_to_read()
    finally:
        for handle in handles:
            handle.detach()


def freeze(model: nn.HybridBlock) -> None:
    """grad_req 'null' for conv1, res2 (the reference's FIXED_PARAMS 'conv0', 'stage1') and every BN's gamma/beta.

    `model` is the FasterRCNN (its stem, res2 and every BatchNorm below it).
    """
    for block in (model.stem, model.res2):
        block.collect_params().setattr("grad_req", "null")
    for bn in _blocks(model, nn.BatchNorm):
        bn.collect_params().setattr("grad_req", "null")


def _blocks(block: nn.Block, kind: type) -> list[nn.Block]:
    """Every descendant of `block` (itself included) that is an instance of `kind`, depth first."""
    found = [block] if isinstance(block, kind) else []
    for child in block._children.values():
        found += _blocks(child, kind)
    return found
