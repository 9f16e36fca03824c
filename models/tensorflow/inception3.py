"""Inception-v3 image classification on synthetic ImageNet-shaped data, in TensorFlow 2 / Keras 3.

Layer for layer the network of models/pytorch/inception3.py: torchvision's
`inception_v3(aux_logits=True, transform_input=False)`, i.e. Szegedy et al., "Rethinking the
Inception Architecture for Computer Vision", CVPR 2016 (see the PyTorch module for the block
list and sources). Every convolution is bias-free, then BatchNorm (eps 0.001) and ReLU; the
auxiliary classifier reads Mixed_6e's 17x17x768 output. Trainable parameters: 27,161,264, as
in PyTorch (torchvision's documented count). Keras BatchNormalization also holds its moving mean
and variance as non-trainable variables (PyTorch's running-stat buffers), so a like-for-like count
takes `model.trainable_weights` only. keras.applications.InceptionV3 is not used: its
convolutions use BatchNormalization(scale=False) and it has no auxiliary head, so neither its
layers nor its parameter count are torchvision's.

Training as in PyTorch: RMSProp (rho 0.9, epsilon 1.0, lr 0.045; Szegedy et al. section 8),
cross-entropy with label smoothing 0.1 on both heads, loss = CE(main) + 0.4 * CE(aux).

Differences from PyTorch that change no parameter and no FLOP count:
- layout: channels-last (NHWC images [N, 299, 299, 3]), TensorFlow's native layout; TF's CPU
  convolution kernels do not take NCHW, and on a GPU Keras/cuDNN picks its own internal layout.
- the 3x3 stride-1 average pools before each pool branch use padding="same", which divides a
  border window by the number of real pixels in it (TF-slim's and keras.applications' Inception
  v3 do the same); PyTorch's avg_pool2d(padding=1) counts the zero padding (divides by 9). An
  exact copy would need an extra ZeroPadding2D copy of the block input per block.
- every other padding is PyTorch's: "valid" where PyTorch pads 0, "same" where it pads k // 2 at
  stride 1 (symmetric for odd kernels, including the 1x7 / 7x1 and 1x3 / 3x1 ones).
- RMSProp: Keras adds epsilon inside the square root (lr * g / sqrt(v + eps)), PyTorch outside
  (lr * g / (sqrt(v) + eps)); with eps 1.0 the step size differs slightly, the cost does not.
- weights: normal with std 0.1 (0.001 for the auxiliary fc), as torchvision's trunc_normal_
  truncated at +-2, which at these stds (20 and 2000 standard deviations) truncates nothing;
  Keras's TruncatedNormal would cut at 2 standard deviations, so RandomNormal is the match.
  BatchNorm momentum 0.9 is PyTorch's default momentum=0.1 (weight of the new batch statistic).
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

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


class _Builder:
    """Adds torchvision-named layers to a functional graph; `c` scales channel counts by the width."""

    def __init__(self, width: float):
        self.width = width

    def c(self, channels: int) -> int:
        """Channels after the width multiplier (at least 1), rounded as in the PyTorch version."""
        return max(1, round(channels * self.width))

    def conv(self, x, channels: int, kernel, name: str, stride: int = 1, same: bool = False):
        """BasicConv2d: bias-free conv ("same" = PyTorch's k // 2 padding at stride 1), BN eps 0.001, ReLU."""
        x = keras.layers.Conv2D(self.c(channels), kernel, strides=stride, padding="same" if same else "valid",
                                use_bias=False, kernel_initializer=keras.initializers.RandomNormal(0.0, _STD),
                                name=f"{name}_conv")(x)
        x = keras.layers.BatchNormalization(epsilon=0.001, momentum=0.9, name=f"{name}_bn")(x)
        return keras.layers.ReLU(name=f"{name}_relu")(x)

    def pool_branch(self, x, channels: int, name: str):
        """3x3 stride-1 average pool (see the module docstring on its padding), then a 1x1 BasicConv2d."""
        x = keras.layers.AveragePooling2D(3, strides=1, padding="same", name=f"{name}_avgpool")(x)
        return self.conv(x, channels, 1, name)

    def inception_a(self, x, pool_features: int, name: str):
        """35x35 block (paper Figure 5): 1x1, 5x5, double 3x3 and pooled 1x1 branches."""
        b1 = self.conv(x, 64, 1, f"{name}_branch1x1")
        b5 = self.conv(self.conv(x, 48, 1, f"{name}_branch5x5_1"), 64, 5, f"{name}_branch5x5_2", same=True)
        b3 = self.conv(x, 64, 1, f"{name}_branch3x3dbl_1")
        b3 = self.conv(b3, 96, 3, f"{name}_branch3x3dbl_2", same=True)
        b3 = self.conv(b3, 96, 3, f"{name}_branch3x3dbl_3", same=True)
        bp = self.pool_branch(x, pool_features, f"{name}_branch_pool")
        return keras.layers.Concatenate(name=name)([b1, b5, b3, bp])

    def inception_b(self, x, name: str):
        """35x35 -> 17x17 grid reduction (paper Figure 10): strided 3x3, double 3x3, max pool."""
        b3 = self.conv(x, 384, 3, f"{name}_branch3x3", stride=2)
        bd = self.conv(x, 64, 1, f"{name}_branch3x3dbl_1")
        bd = self.conv(bd, 96, 3, f"{name}_branch3x3dbl_2", same=True)
        bd = self.conv(bd, 96, 3, f"{name}_branch3x3dbl_3", stride=2)
        bp = keras.layers.MaxPooling2D(3, strides=2, name=f"{name}_maxpool")(x)
        return keras.layers.Concatenate(name=name)([b3, bd, bp])

    def inception_c(self, x, channels_7x7: int, name: str):
        """17x17 block (paper Figure 6) with 7x7 convolutions factorised into 1x7 and 7x1."""
        c7 = channels_7x7
        b1 = self.conv(x, 192, 1, f"{name}_branch1x1")
        b7 = self.conv(x, c7, 1, f"{name}_branch7x7_1")
        b7 = self.conv(b7, c7, (1, 7), f"{name}_branch7x7_2", same=True)
        b7 = self.conv(b7, 192, (7, 1), f"{name}_branch7x7_3", same=True)
        bd = self.conv(x, c7, 1, f"{name}_branch7x7dbl_1")
        for i, (kernel, out) in enumerate((((7, 1), c7), ((1, 7), c7), ((7, 1), c7), ((1, 7), 192)), start=2):
            bd = self.conv(bd, out, kernel, f"{name}_branch7x7dbl_{i}", same=True)
        bp = self.pool_branch(x, 192, f"{name}_branch_pool")
        return keras.layers.Concatenate(name=name)([b1, b7, bd, bp])

    def inception_d(self, x, name: str):
        """17x17 -> 8x8 grid reduction: 1x1 then strided 3x3, 1x1-1x7-7x1 then strided 3x3, max pool."""
        b3 = self.conv(self.conv(x, 192, 1, f"{name}_branch3x3_1"), 320, 3, f"{name}_branch3x3_2", stride=2)
        b7 = self.conv(x, 192, 1, f"{name}_branch7x7x3_1")
        b7 = self.conv(b7, 192, (1, 7), f"{name}_branch7x7x3_2", same=True)
        b7 = self.conv(b7, 192, (7, 1), f"{name}_branch7x7x3_3", same=True)
        b7 = self.conv(b7, 192, 3, f"{name}_branch7x7x3_4", stride=2)
        bp = keras.layers.MaxPooling2D(3, strides=2, name=f"{name}_maxpool")(x)
        return keras.layers.Concatenate(name=name)([b3, b7, bp])

    def inception_e(self, x, name: str):
        """8x8 block (paper Figure 7): 3x3 outputs expanded into parallel 1x3 and 3x1 convolutions."""
        b1 = self.conv(x, 320, 1, f"{name}_branch1x1")
        b3 = self.conv(x, 384, 1, f"{name}_branch3x3_1")
        b3 = keras.layers.Concatenate(name=f"{name}_branch3x3_2")(
            [self.conv(b3, 384, (1, 3), f"{name}_branch3x3_2a", same=True),
             self.conv(b3, 384, (3, 1), f"{name}_branch3x3_2b", same=True)])
        bd = self.conv(x, 448, 1, f"{name}_branch3x3dbl_1")
        bd = self.conv(bd, 384, 3, f"{name}_branch3x3dbl_2", same=True)
        bd = keras.layers.Concatenate(name=f"{name}_branch3x3dbl_3")(
            [self.conv(bd, 384, (1, 3), f"{name}_branch3x3dbl_3a", same=True),
             self.conv(bd, 384, (3, 1), f"{name}_branch3x3dbl_3b", same=True)])
        bp = self.pool_branch(x, 192, f"{name}_branch_pool")
        return keras.layers.Concatenate(name=name)([b1, b3, bd, bp])

    def aux_head(self, x, num_classes: int):
        """Auxiliary classifier (paper section 4): 5x5/3 avg pool, 1x1, 5x5, global pool, fc."""
        x = keras.layers.AveragePooling2D(5, strides=3, name="AuxLogits_avgpool")(x)  # 17x17 -> 5x5
        x = self.conv(self.conv(x, 128, 1, "AuxLogits_conv0"), 768, 5, "AuxLogits_conv1")  # -> 1x1
        x = keras.layers.GlobalAveragePooling2D(name="AuxLogits_gap")(x)
        return _linear(x, num_classes, _AUX_FC_STD, "AuxLogits_fc")


def _linear(x, units: int, std: float, name: str):
    """nn.Linear with torchvision's init: weight normal(0, std), bias uniform +-1/sqrt(fan_in)."""
    bound = 1 / math.sqrt(x.shape[-1])
    return keras.layers.Dense(units, kernel_initializer=keras.initializers.RandomNormal(0.0, std),
                              bias_initializer=keras.initializers.RandomUniform(-bound, bound), name=name)(x)


def inception3(num_classes: int = 1000, stages=FULL_STAGES, width: float = 1.0, side: int = 299) -> keras.Model:
    """Inception-v3 with its auxiliary head as torchvision builds it, initialised as torchvision's.

    Args:
        num_classes: outputs of both classifiers.
        stages: (InceptionA pool widths, InceptionC 7x7 widths, InceptionE count), at most
            (3, 4, 2) blocks; FULL_STAGES is the paper's network.
        width: multiplier on every layer's channel count (1.0 for the paper's network).
        side: image height and width in pixels (299; the auxiliary head needs Mixed_6e >= 17x17).
    Returns:
        keras.Model mapping float32 [N, side, side, 3] images to [logits, aux_logits], each
        [N, num_classes]. Layers are named as torchvision's modules (Mixed_5b ... Mixed_7c, AuxLogits).
    """
    pool_widths, widths_7x7, blocks_e = stages
    b = _Builder(width)
    images = keras.Input((side, side, 3), name="images")
    x = b.conv(images, 32, 3, "Conv2d_1a_3x3", stride=2)
    x = b.conv(x, 32, 3, "Conv2d_2a_3x3")
    x = b.conv(x, 64, 3, "Conv2d_2b_3x3", same=True)
    x = keras.layers.MaxPooling2D(3, strides=2, name="maxpool1")(x)
    x = b.conv(x, 80, 1, "Conv2d_3b_1x1")
    x = b.conv(x, 192, 3, "Conv2d_4a_3x3")
    x = keras.layers.MaxPooling2D(3, strides=2, name="maxpool2")(x)
    for letter, pool_features in zip("bcd", pool_widths):
        x = b.inception_a(x, pool_features, f"Mixed_5{letter}")
    x = b.inception_b(x, "Mixed_6a")
    for letter, channels_7x7 in zip("bcde", widths_7x7):
        x = b.inception_c(x, channels_7x7, f"Mixed_6{letter}")
    aux = b.aux_head(x, num_classes)
    x = b.inception_d(x, "Mixed_7a")
    for letter in "bc"[:blocks_e]:
        x = b.inception_e(x, f"Mixed_7{letter}")
    x = keras.layers.GlobalAveragePooling2D(name="avgpool")(x)
    x = keras.layers.Dropout(0.5, name="dropout")(x)
    logits = _linear(x, num_classes, _STD, "fc")
    return keras.Model(images, [logits, aux], name="inception_v3")


def inception_loss(labels: tf.Tensor, logits: tf.Tensor, aux_logits: tf.Tensor) -> tf.Tensor:
    """Scalar training loss: mean CE(main) + 0.4 * mean CE(aux), both with label smoothing 0.1.

    Args:
        labels: int32 [N] class ids.
        logits, aux_logits: float32 [N, classes] outputs of the main and auxiliary classifiers.
    """
    # Keras's smoothing target (1 - eps) * one_hot + eps / classes is PyTorch's label_smoothing.
    criterion = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=LABEL_SMOOTHING)
    targets = tf.one_hot(labels, tf.shape(logits)[-1])
    return criterion(targets, logits) + AUX_WEIGHT * criterion(targets, aux_logits)


def build(batch: int, device: str, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """Inception-v3 training workload: RMSProp on `pool_size` synthetic 299x299 batches on `device`.

    Args:
        batch: images per iteration, at least 2 (training-mode BatchNorm on the aux head's 1x1 map).
        device: TensorFlow device string where variables, optimizer state and batches live
            ("/CPU:0", "/GPU:0").
        size: "full" (ImageNet-sized Inception-v3) or "test" (narrow, same block types, for CI).
        seed: fixes weight init (keras.utils.set_random_seed) and data (numpy RandomState).
        pool_size: synthetic batches kept on the device and cycled through by step().
    Returns:
        Workload whose step() runs one iteration (a tf.function; loss = CE(main) + 0.4 CE(aux),
        label smoothing 0.1) and returns the scalar loss tensor without reading it (no host sync).
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    check_inception3_batch(batch)
    stages, width, side, classes = _SIZES[size]
    rng = np.random.RandomState(seed)
    keras.utils.set_random_seed(seed)

    with tf.device(device):
        model = inception3(classes, stages, width, side)
        # Szegedy et al. 2016, section 8: "RMSProp with decay of 0.9 and epsilon = 1.0", lr 0.045.
        optimizer = keras.optimizers.RMSprop(learning_rate=0.045, rho=0.9, epsilon=1.0)
        optimizer.build(model.trainable_variables)  # slots now, not inside the first trace
        pool = [tuple(tf.constant(a) for a in image_batch(batch, (side, side, 3), classes, rng))
                for _ in range(pool_size)]

    @tf.function(jit_compile=False, reduce_retracing=True)
    def train_step(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits, aux = model(images, training=True)
            loss = inception_loss(labels, logits, aux)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    return pool_workload(
        "inception3", pool, train_step,
        scope=lambda: tf.device(device),
        samples_per_step=batch,
        throughput_unit="images/s",
        model=model,
        optimizer=optimizer,
        description=(f"Inception-v3 with auxiliary head (Szegedy et al. 2016, torchvision layout; {size}: "
                     f"width x{width:g}, blocks A/C/E {len(stages[0])}/{len(stages[1])}/{stages[2]}, "
                     f"{side}x{side}x3 NHWC images, {classes} classes), Keras 3 on TensorFlow (tf.function, "
                     f"no XLA), RMSProp lr 0.045, {pool_size} synthetic batches of {batch}"),
    )
