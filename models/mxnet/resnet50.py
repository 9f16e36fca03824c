"""ResNet-50 (v1.5) image classification on synthetic ImageNet-shaped data, in MXNet Gluon.

Layer for layer the network of models/pytorch/resnet50.py (torchvision's resnet50: He et al.,
CVPR 2016, with the "v1.5" stride-2 on the bottleneck's 3x3 convolution, which Gluon's model zoo
calls resnet50_v1b; the zoo's resnet50_v1 strides the first 1x1 instead, so we do not use it).
Trainable parameters: 25,557,032, as in PyTorch. Gluon's `collect_params()` also lists each
BatchNorm's running mean and variance (grad_req 'null', 53,120 values for ResNet-50); PyTorch
keeps those as buffers, so a like-for-like count takes only parameters with grad_req != 'null'.

The network is hybridized with static_alloc=True and static_shape=True: every batch in the pool
has the same shape, so MXNet plans memory once, which is closest to the symbolic executor
(mx.mod.Module) of the MXNet image-classification example the TBD paper ran.
"""

from __future__ import annotations

import math
from typing import Callable

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

from tbd.models.base import Workload, pool_workload
from tbd.models.host_data.synthetic import POOL_SIZE, check_build_args, image_batch

# Sizes are framework-neutral: one copy in models/specs.py.
from tbd.models.specs import RESNET_DEPTHS, RESNET_SIZES

DEPTHS = RESNET_DEPTHS["resnet50"]
_SIZES = RESNET_SIZES["resnet50"]


EXPANSION = 4  # bottleneck output channels / inner width


def batch_norm(channels: int) -> nn.BatchNorm:
    """A trainable BatchNorm over `channels` (Gluon's defaults are PyTorch's: eps 1e-5, momentum 0.9 = 1 - 0.1)."""
    return nn.BatchNorm(in_channels=channels)


class Bottleneck(nn.HybridBlock):
    """1x1 reduce, 3x3 (strided in v1.5), 1x1 expand, each with a norm; identity or projection shortcut.

    `norm(channels)` makes each normalization layer: `batch_norm` here, the Faster R-CNN backbone's
    frozen BatchNorm there (models/mxnet/faster_rcnn_backbone.py).
    """

    def __init__(self, in_channels: int, width: int, stride: int,
                 norm: Callable[[int], nn.HybridBlock] = batch_norm, **kwargs):
        super().__init__(**kwargs)
        out_channels = width * EXPANSION
        with self.name_scope():
            self.conv1 = conv(width, 1, 1, 0, in_channels)
            self.bn1 = norm(width)
            self.conv2 = conv(width, 3, stride, 1, width)
            self.bn2 = norm(width)
            self.conv3 = conv(out_channels, 1, 1, 0, width)
            self.bn3 = norm(out_channels)
            self.downsample = None
            if stride != 1 or in_channels != out_channels:
                self.downsample = nn.HybridSequential(prefix="down_")
                self.downsample.add(conv(out_channels, 1, stride, 0, in_channels), norm(out_channels))

    def hybrid_forward(self, F, x):
        """Block output [N, 4*width, H/stride, W/stride] from x [N, in_channels, H, W]."""
        shortcut = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + shortcut)


def conv(channels: int, kernel: int, stride: int, padding: int, in_channels: int) -> nn.Conv2D:
    """A bias-free Conv2D with torchvision's ResNet init, its input channels known at build."""
    # in_channels given so shapes are known at initialize() (no deferred init on the first step).
    # torchvision's kaiming_normal_(mode="fan_out", nonlinearity="relu"): std sqrt(2 / (channels * k * k)),
    # which is MSRAPrelu(factor_type="out", slope=0) (Xavier gaussian, magnitude 2 / (1 + slope^2)).
    return nn.Conv2D(channels, kernel, strides=stride, padding=padding, use_bias=False, in_channels=in_channels,
                     weight_initializer=mx.init.MSRAPrelu(factor_type="out", slope=0.0))


def resnet(depths: tuple[int, ...], num_classes: int = 1000, width: int = 64) -> nn.HybridSequential:
    """A bottleneck ResNet v1.5 with `depths` blocks per stage, uninitialised, with torchvision's init set.

    Args:
        depths: bottleneck blocks in each stage; stage i has inner width width * 2**i channels
            and (for i > 0) halves the spatial size.
        num_classes: outputs of the final fully connected layer.
        width: channels of the stem convolution and of the first stage's inner width.
    Returns:
        HybridSequential mapping float32 [N, 3, H, W] images to [N, num_classes] logits.
    """
    net = nn.HybridSequential(prefix="resnet_")
    with net.name_scope():
        net.add(conv(width, 7, 2, 3, 3), batch_norm(width), nn.Activation("relu"),
                nn.MaxPool2D(3, strides=2, padding=1))
        in_channels = width
        for stage, blocks in enumerate(depths):
            inner = width * 2 ** stage
            for block in range(blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                net.add(Bottleneck(in_channels, inner, stride))
                in_channels = inner * EXPANSION
        # Dense flattens [N, C, 1, 1] itself (flatten=True), PyTorch's Flatten + Linear.
        # nn.Linear's default init: weight and bias uniform in +-1/sqrt(fan_in) (kaiming_uniform, a=sqrt(5)).
        bound = mx.init.Uniform(1 / math.sqrt(in_channels))
        net.add(nn.GlobalAvgPool2D(),
                nn.Dense(num_classes, in_units=in_channels, weight_initializer=bound, bias_initializer=bound))
    return net


def build(batch: int, device: mx.Context, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """ResNet-50 training workload: SGD with momentum on `pool_size` synthetic batches on `device`.

    Args:
        batch: images per iteration.
        device: mx.Context where parameters, optimizer state and batches live (mx.cpu(), mx.gpu(0)).
        size: "full" (ImageNet-sized ResNet-50) or "test" (tiny, same architecture, for CI).
        seed: fixes weight init (mx.random.seed; Gluon draws initial values on the CPU, then
            copies them) and data (numpy RandomState), so both are the same on every device.
        pool_size: synthetic batches kept on the device and cycled through by step().
    Returns:
        Workload whose step() runs one iteration and returns the per-image loss NDArray [batch]
        (its mean is PyTorch's CrossEntropyLoss) without waiting for it (no host sync).
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    depths, width, side, classes = _SIZES[size]
    rng = np.random.RandomState(seed)
    mx.random.seed(seed)

    model = resnet(depths, classes, width)
    # Initial values come from the layers' initializers (torchvision's init, see `resnet`); BatchNorm
    # keeps Gluon's defaults, gamma 1, beta 0, running mean 0 and variance 1, as PyTorch's.
    model.initialize(ctx=device)
    model.hybridize(static_alloc=True, static_shape=True)
    # Goyal et al. 2017's recipe, as in the PyTorch version: momentum 0.9, weight decay 1e-4,
    # lr 0.1 per 256 images. MXNet's SGD folds wd into the gradient before momentum, which for a
    # constant lr is the same update as torch.optim.SGD.
    trainer = gluon.Trainer(model.collect_params(), "sgd",
                            {"learning_rate": 0.1 * batch / 256, "momentum": 0.9, "wd": 1e-4})
    criterion = gluon.loss.SoftmaxCrossEntropyLoss()  # per-image loss [N]
    criterion.hybridize(static_alloc=True, static_shape=True)

    host_pool = [image_batch(batch, (3, side, side), classes, rng) for _ in range(pool_size)]
    pool = [tuple(mx.nd.array(a, ctx=device, dtype=a.dtype) for a in pair) for pair in host_pool]

    def train_step(images, labels) -> mx.nd.NDArray:
        with autograd.record():
            loss = criterion(model(images), labels)
        loss.backward()
        # step(batch) scales the summed per-image gradients by 1/batch: the mean loss's gradient.
        trainer.step(batch)
        return loss

    return pool_workload(
        "resnet50", pool, train_step,
        samples_per_step=batch,
        throughput_unit="images/s",
        model=model,
        aux_modules=[criterion],  # the hybridized loss: its operators are logged too
        optimizer=trainer,
        description=(f"resnet50 v1.5 ({size}: depths {depths}, width {width}, 3x{side}x{side} images, "
                     f"{classes} classes), MXNet Gluon hybridized (static_alloc, static_shape), "
                     f"SGD momentum 0.9, {pool_size} synthetic batches of {batch}"),
    )

