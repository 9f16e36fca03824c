"""Inception-v3 image classification on synthetic ImageNet-shaped data, in MXNet Gluon.

Layer for layer the network of models/pytorch/inception3.py: torchvision's
`inception_v3(aux_logits=True, transform_input=False)`, i.e. Szegedy et al., "Rethinking the
Inception Architecture for Computer Vision", CVPR 2016 (see the PyTorch module for the block
list and sources). Every convolution is bias-free, then BatchNorm (eps 0.001) and ReLU; the
auxiliary classifier reads Mixed_6e's 17x17x768 output. Trainable parameters: 27,161,264, as
in PyTorch (torchvision's documented count). Gluon's `collect_params()` also lists each
BatchNorm's running mean and variance (grad_req 'null'); PyTorch keeps those as buffers, so a
like-for-like count takes only parameters with grad_req != 'null'. Gluon's model zoo
inception_v3 is not used: it has no auxiliary head, so its parameter count is not torchvision's.

Training as in PyTorch: RMSProp (gamma1 0.9, epsilon 1.0, lr 0.045; Szegedy et al. section 8),
cross-entropy with label smoothing 0.1 on both heads, loss = CE(main) + 0.4 * CE(aux). Layout is
NCHW, as PyTorch's; every padding and pooling is PyTorch's (Gluon's AvgPool2D counts the zero
padding by default, count_include_pad=True, as PyTorch's avg_pool2d).

Differences from PyTorch that change no parameter and no FLOP count:
- RMSProp: MXNet adds epsilon inside the square root (lr * g / sqrt(n + eps)), PyTorch outside
  (lr * g / (sqrt(n) + eps)); with eps 1.0 the step size differs slightly, the cost does not.
- weights: normal with std 0.1 (0.001 for the auxiliary fc), as torchvision's trunc_normal_
  truncated at +-2, which at these stds (20 and 2000 standard deviations) truncates nothing.
  Gluon's BatchNorm momentum 0.9 is PyTorch's default momentum=0.1.

The network and the loss are hybridized with static_alloc=True and static_shape=True: every
batch in the pool has the same shape, so MXNet plans memory once, which is closest to the
symbolic executor (mx.mod.Module) of the MXNet image-classification example the TBD paper ran.
"""

from __future__ import annotations

import math

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

from tbd.models.base import Workload, pool_workload
from tbd.models.host_data.synthetic import POOL_SIZE, check_build_args, image_batch

# What the model is (sizes, loss weights, optimizer settings) is framework-neutral: one copy, models/specs.py.
from tbd.models.specs import INCEPTION3_AUX_FC_STD as _AUX_FC_STD  # noqa: F401 - the module's public names
from tbd.models.specs import INCEPTION3_AUX_WEIGHT as AUX_WEIGHT
from tbd.models.specs import INCEPTION3_FULL_STAGES as FULL_STAGES
from tbd.models.specs import INCEPTION3_INIT_STD as _STD
from tbd.models.specs import INCEPTION3_LABEL_SMOOTHING as LABEL_SMOOTHING
from tbd.models.specs import INCEPTION3_SIZES as _SIZES
from tbd.models.specs import check_inception3_batch


class BasicConv2d(nn.HybridBlock):
    """Bias-free convolution, BatchNorm (eps 0.001, as torchvision and TF-slim) and ReLU."""

    def __init__(self, in_channels: int, channels: int, kernel, stride=1, padding=0, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            # in_channels given so shapes are known at initialize() (no deferred init on the first step).
            self.conv = nn.Conv2D(channels, kernel, strides=stride, padding=padding, use_bias=False,
                                  in_channels=in_channels, weight_initializer=mx.init.Normal(_STD))
            self.bn = nn.BatchNorm(epsilon=0.001, in_channels=channels)

    def hybrid_forward(self, F, x):
        """[N, channels, H', W'] from x [N, in_channels, H, W]."""
        return F.relu(self.bn(self.conv(x)))


def _conv(cin: int, cout: int, kernel, stride=1, padding=0, name: str = "") -> BasicConv2d:
    """BasicConv2d named `name` (Gluon parameter prefix), channels already scaled."""
    return BasicConv2d(cin, cout, kernel, stride, padding, prefix=f"{name}_")


class InceptionA(nn.HybridBlock):
    """35x35 block (paper Figure 5): 1x1, 5x5, double 3x3 and pooled 1x1 branches."""

    def __init__(self, in_channels: int, pool_features: int, c, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.branch1x1 = _conv(in_channels, c(64), 1, name="branch1x1")
            self.branch5x5_1 = _conv(in_channels, c(48), 1, name="branch5x5_1")
            self.branch5x5_2 = _conv(c(48), c(64), 5, padding=2, name="branch5x5_2")
            self.branch3x3dbl_1 = _conv(in_channels, c(64), 1, name="branch3x3dbl_1")
            self.branch3x3dbl_2 = _conv(c(64), c(96), 3, padding=1, name="branch3x3dbl_2")
            self.branch3x3dbl_3 = _conv(c(96), c(96), 3, padding=1, name="branch3x3dbl_3")
            self.pool = nn.AvgPool2D(3, strides=1, padding=1)  # count_include_pad=True, as PyTorch
            self.branch_pool = _conv(in_channels, c(pool_features), 1, name="branch_pool")
        self.out_channels = c(64) + c(64) + c(96) + c(pool_features)

    def hybrid_forward(self, F, x):
        """[N, out_channels, 35, 35] from x [N, in_channels, 35, 35]."""
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(self.pool(x))
        return F.concat(b1, b5, b3, bp, dim=1)


class InceptionB(nn.HybridBlock):
    """35x35 -> 17x17 grid reduction (paper Figure 10): strided 3x3, double 3x3, max pool."""

    def __init__(self, in_channels: int, c, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.branch3x3 = _conv(in_channels, c(384), 3, stride=2, name="branch3x3")
            self.branch3x3dbl_1 = _conv(in_channels, c(64), 1, name="branch3x3dbl_1")
            self.branch3x3dbl_2 = _conv(c(64), c(96), 3, padding=1, name="branch3x3dbl_2")
            self.branch3x3dbl_3 = _conv(c(96), c(96), 3, stride=2, name="branch3x3dbl_3")
            self.pool = nn.MaxPool2D(3, strides=2)
        self.out_channels = c(384) + c(96) + in_channels

    def hybrid_forward(self, F, x):
        """[N, out_channels, 17, 17] from x [N, in_channels, 35, 35]."""
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return F.concat(b3, bd, self.pool(x), dim=1)


class InceptionC(nn.HybridBlock):
    """17x17 block (paper Figure 6) with 7x7 convolutions factorised into 1x7 and 7x1."""

    def __init__(self, in_channels: int, channels_7x7: int, c, **kwargs):
        super().__init__(**kwargs)
        c7 = c(channels_7x7)
        with self.name_scope():
            self.branch1x1 = _conv(in_channels, c(192), 1, name="branch1x1")
            self.branch7x7_1 = _conv(in_channels, c7, 1, name="branch7x7_1")
            self.branch7x7_2 = _conv(c7, c7, (1, 7), padding=(0, 3), name="branch7x7_2")
            self.branch7x7_3 = _conv(c7, c(192), (7, 1), padding=(3, 0), name="branch7x7_3")
            self.branch7x7dbl_1 = _conv(in_channels, c7, 1, name="branch7x7dbl_1")
            self.branch7x7dbl_2 = _conv(c7, c7, (7, 1), padding=(3, 0), name="branch7x7dbl_2")
            self.branch7x7dbl_3 = _conv(c7, c7, (1, 7), padding=(0, 3), name="branch7x7dbl_3")
            self.branch7x7dbl_4 = _conv(c7, c7, (7, 1), padding=(3, 0), name="branch7x7dbl_4")
            self.branch7x7dbl_5 = _conv(c7, c(192), (1, 7), padding=(0, 3), name="branch7x7dbl_5")
            self.pool = nn.AvgPool2D(3, strides=1, padding=1)
            self.branch_pool = _conv(in_channels, c(192), 1, name="branch_pool")
        self.out_channels = 4 * c(192)

    def hybrid_forward(self, F, x):
        """[N, out_channels, 17, 17] from x [N, in_channels, 17, 17]."""
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = self.branch7x7dbl_1(x)
        for conv in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            bd = conv(bd)
        bp = self.branch_pool(self.pool(x))
        return F.concat(b1, b7, bd, bp, dim=1)


class InceptionD(nn.HybridBlock):
    """17x17 -> 8x8 grid reduction: 1x1 then strided 3x3, 1x1-1x7-7x1 then strided 3x3, max pool."""

    def __init__(self, in_channels: int, c, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.branch3x3_1 = _conv(in_channels, c(192), 1, name="branch3x3_1")
            self.branch3x3_2 = _conv(c(192), c(320), 3, stride=2, name="branch3x3_2")
            self.branch7x7x3_1 = _conv(in_channels, c(192), 1, name="branch7x7x3_1")
            self.branch7x7x3_2 = _conv(c(192), c(192), (1, 7), padding=(0, 3), name="branch7x7x3_2")
            self.branch7x7x3_3 = _conv(c(192), c(192), (7, 1), padding=(3, 0), name="branch7x7x3_3")
            self.branch7x7x3_4 = _conv(c(192), c(192), 3, stride=2, name="branch7x7x3_4")
            self.pool = nn.MaxPool2D(3, strides=2)
        self.out_channels = c(320) + c(192) + in_channels

    def hybrid_forward(self, F, x):
        """[N, out_channels, 8, 8] from x [N, in_channels, 17, 17]."""
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return F.concat(b3, b7, self.pool(x), dim=1)


class InceptionE(nn.HybridBlock):
    """8x8 block (paper Figure 7): 3x3 outputs expanded into parallel 1x3 and 3x1 convolutions."""

    def __init__(self, in_channels: int, c, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.branch1x1 = _conv(in_channels, c(320), 1, name="branch1x1")
            self.branch3x3_1 = _conv(in_channels, c(384), 1, name="branch3x3_1")
            self.branch3x3_2a = _conv(c(384), c(384), (1, 3), padding=(0, 1), name="branch3x3_2a")
            self.branch3x3_2b = _conv(c(384), c(384), (3, 1), padding=(1, 0), name="branch3x3_2b")
            self.branch3x3dbl_1 = _conv(in_channels, c(448), 1, name="branch3x3dbl_1")
            self.branch3x3dbl_2 = _conv(c(448), c(384), 3, padding=1, name="branch3x3dbl_2")
            self.branch3x3dbl_3a = _conv(c(384), c(384), (1, 3), padding=(0, 1), name="branch3x3dbl_3a")
            self.branch3x3dbl_3b = _conv(c(384), c(384), (3, 1), padding=(1, 0), name="branch3x3dbl_3b")
            self.pool = nn.AvgPool2D(3, strides=1, padding=1)
            self.branch_pool = _conv(in_channels, c(192), 1, name="branch_pool")
        self.out_channels = c(320) + 4 * c(384) + c(192)

    def hybrid_forward(self, F, x):
        """[N, out_channels, 8, 8] from x [N, in_channels, 8, 8]."""
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = F.concat(self.branch3x3_2a(b3), self.branch3x3_2b(b3), dim=1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = F.concat(self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd), dim=1)
        bp = self.branch_pool(self.pool(x))
        return F.concat(b1, b3, bd, bp, dim=1)


def _linear(in_units: int, units: int, std: float, name: str) -> nn.Dense:
    """nn.Linear with torchvision's init: weight normal(0, std), bias uniform +-1/sqrt(fan_in)."""
    return nn.Dense(units, in_units=in_units, weight_initializer=mx.init.Normal(std),
                    bias_initializer=mx.init.Uniform(1 / math.sqrt(in_units)), prefix=f"{name}_")


class InceptionAux(nn.HybridBlock):
    """Auxiliary classifier on the 17x17 grid (paper section 4): 5x5/3 avg pool, 1x1, 5x5, fc."""

    def __init__(self, in_channels: int, num_classes: int, c, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.pool = nn.AvgPool2D(5, strides=3)
            self.conv0 = _conv(in_channels, c(128), 1, name="conv0")
            self.conv1 = _conv(c(128), c(768), 5, name="conv1")
            self.gap = nn.GlobalAvgPool2D()
            # Dense flattens [N, C, 1, 1] itself (flatten=True): PyTorch's flatten + Linear.
            self.fc = _linear(c(768), num_classes, _AUX_FC_STD, "fc")

    def hybrid_forward(self, F, x):
        """[N, num_classes] aux logits from x [N, in_channels, 17, 17]."""
        x = self.conv1(self.conv0(self.pool(x)))  # 17x17 -> 5x5 -> 5x5 -> 1x1
        return self.fc(self.gap(x))


class Inception3(nn.HybridBlock):
    """Inception-v3 as torchvision builds it; forward returns (logits, aux_logits) [N, num_classes] each.

    Args:
        num_classes: outputs of both classifiers.
        stages: (InceptionA pool widths, InceptionC 7x7 widths, InceptionE count), at most
            (3, 4, 2) blocks; FULL_STAGES is the paper's network.
        width: multiplier on every layer's channel count (1.0 for the paper's network).
    Children are named as torchvision's modules (Mixed_5b ... Mixed_7c, AuxLogits), in attribute
    names and Gluon parameter prefixes.
    """

    def __init__(self, num_classes: int = 1000, stages=FULL_STAGES, width: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        pool_widths, widths_7x7, blocks_e = stages

        def c(channels: int) -> int:
            return max(1, round(channels * width))

        with self.name_scope():
            self.Conv2d_1a_3x3 = _conv(3, c(32), 3, stride=2, name="Conv2d_1a_3x3")
            self.Conv2d_2a_3x3 = _conv(c(32), c(32), 3, name="Conv2d_2a_3x3")
            self.Conv2d_2b_3x3 = _conv(c(32), c(64), 3, padding=1, name="Conv2d_2b_3x3")
            self.maxpool1 = nn.MaxPool2D(3, strides=2)
            self.Conv2d_3b_1x1 = _conv(c(64), c(80), 1, name="Conv2d_3b_1x1")
            self.Conv2d_4a_3x3 = _conv(c(80), c(192), 3, name="Conv2d_4a_3x3")
            self.maxpool2 = nn.MaxPool2D(3, strides=2)
            # Blocks are attributes named as torchvision's; the name lists give the forward order.
            channels, self._before_aux, self._after_aux = c(192), [], []
            for letter, pool_features in zip("bcd", pool_widths):
                block = InceptionA(channels, pool_features, c, prefix=f"Mixed_5{letter}_")
                channels = self._add(f"Mixed_5{letter}", block, self._before_aux)
            channels = self._add("Mixed_6a", InceptionB(channels, c, prefix="Mixed_6a_"), self._before_aux)
            for letter, channels_7x7 in zip("bcde", widths_7x7):
                block = InceptionC(channels, channels_7x7, c, prefix=f"Mixed_6{letter}_")
                channels = self._add(f"Mixed_6{letter}", block, self._before_aux)
            self.AuxLogits = InceptionAux(channels, num_classes, c, prefix="AuxLogits_")
            channels = self._add("Mixed_7a", InceptionD(channels, c, prefix="Mixed_7a_"), self._after_aux)
            for letter in "bc"[:blocks_e]:
                channels = self._add(f"Mixed_7{letter}", InceptionE(channels, c, prefix=f"Mixed_7{letter}_"),
                                     self._after_aux)
            self.gap = nn.GlobalAvgPool2D()
            self.dropout = nn.Dropout(0.5)
            self.fc = _linear(channels, num_classes, _STD, "fc")

    def _add(self, name: str, block: nn.HybridBlock, order: list[str]) -> int:
        """Registers `block` as attribute `name`, appends it to `order`; returns its output channels."""
        setattr(self, name, block)
        order.append(name)
        return block.out_channels

    def hybrid_forward(self, F, x):
        """(logits, aux_logits), each [N, num_classes], from images x [N, 3, 299, 299]."""
        x = self.maxpool1(self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x))))
        x = self.maxpool2(self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x)))
        for name in self._before_aux:
            x = getattr(self, name)(x)
        # Computed in every mode (PyTorch skips it in eval); the workload only trains.
        aux = self.AuxLogits(x)
        for name in self._after_aux:
            x = getattr(self, name)(x)
        return self.fc(self.dropout(self.gap(x))), aux


class SmoothedCrossEntropy(gluon.HybridBlock):
    """Per-image CE(main) + 0.4 * CE(aux), each with label smoothing 0.1 (PyTorch's label_smoothing).

    With target (1 - eps) * one_hot + eps / C, the cross-entropy is
    (1 - eps) * (-log p[label]) + eps * mean_c(-log p[c]).
    """

    def hybrid_forward(self, F, logits, aux_logits, labels):
        """float32 [N] loss from logits, aux_logits [N, C] and labels [N] (class ids)."""
        def ce(z):
            log_p = F.log_softmax(z, axis=-1)
            nll = -F.pick(log_p, labels, axis=-1)
            return (1 - LABEL_SMOOTHING) * nll - LABEL_SMOOTHING * F.mean(log_p, axis=-1)
        return ce(logits) + AUX_WEIGHT * ce(aux_logits)


def build(batch: int, device: mx.Context, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """Inception-v3 training workload: RMSProp on `pool_size` synthetic 299x299 batches on `device`.

    Args:
        batch: images per iteration, at least 2 (training-mode BatchNorm on the aux head's 1x1 map).
        device: mx.Context where parameters, optimizer state and batches live (mx.cpu(), mx.gpu(0)).
        size: "full" (ImageNet-sized Inception-v3) or "test" (narrow, same block types, for CI).
        seed: fixes weight init (mx.random.seed; Gluon draws initial values on the CPU, then
            copies them) and data (numpy RandomState), so both are the same on every device.
        pool_size: synthetic batches kept on the device and cycled through by step().
    Returns:
        Workload whose step() runs one iteration and returns the per-image loss NDArray [batch]
        (CE(main) + 0.4 CE(aux), label smoothing 0.1; its mean is PyTorch's loss) without
        waiting for it (no host sync).
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    check_inception3_batch(batch)
    stages, width, side, classes = _SIZES[size]
    rng = np.random.RandomState(seed)
    mx.random.seed(seed)

    model = Inception3(classes, stages, width, prefix="inception3_")
    # Initial values come from the layers' initializers (torchvision's init); BatchNorm keeps
    # Gluon's defaults, gamma 1, beta 0, running mean 0 and variance 1, as PyTorch's.
    model.initialize(ctx=device)
    model.hybridize(static_alloc=True, static_shape=True)
    # Szegedy et al. 2016, section 8: "RMSProp with decay of 0.9 and epsilon = 1.0", lr 0.045.
    trainer = gluon.Trainer(model.collect_params(), "rmsprop",
                            {"learning_rate": 0.045, "gamma1": 0.9, "epsilon": 1.0, "centered": False})
    criterion = SmoothedCrossEntropy()
    criterion.hybridize(static_alloc=True, static_shape=True)

    host_pool = [image_batch(batch, (3, side, side), classes, rng) for _ in range(pool_size)]
    pool = [tuple(mx.nd.array(a, ctx=device, dtype=a.dtype) for a in pair) for pair in host_pool]

    def train_step(images, labels) -> mx.nd.NDArray:
        with autograd.record():
            logits, aux = model(images)
            loss = criterion(logits, aux, labels)
        loss.backward()
        # step(batch) scales the summed per-image gradients by 1/batch: the mean loss's gradient.
        trainer.step(batch)
        return loss

    return pool_workload(
        "inception3", pool, train_step,
        samples_per_step=batch,
        throughput_unit="images/s",
        model=model,
        aux_modules=[criterion],  # the hybridized loss: its operators are logged too
        optimizer=trainer,
        description=(f"Inception-v3 with auxiliary head (Szegedy et al. 2016, torchvision layout; {size}: "
                     f"width x{width:g}, blocks A/C/E {len(stages[0])}/{len(stages[1])}/{stages[2]}, "
                     f"3x{side}x{side} images, {classes} classes), MXNet Gluon hybridized (static_alloc, "
                     f"static_shape), RMSProp lr 0.045, {pool_size} synthetic batches of {batch}"),
    )
