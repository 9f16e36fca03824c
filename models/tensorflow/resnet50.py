"""ResNet-50 (v1.5) image classification on synthetic ImageNet-shaped data, in TensorFlow 2 / Keras 3.

Layer for layer the network of models/pytorch/resnet50.py (torchvision's resnet50: He et al.,
CVPR 2016, with the "v1.5" stride-2 on the bottleneck's 3x3 convolution; keras.applications'
ResNet50 is v1, stride on the first 1x1 and biased convolutions, so we do not use it).
Trainable parameters: 25,557,032, as in PyTorch. Keras BatchNormalization also holds its moving
mean and variance as non-trainable variables (53,120 values), PyTorch's running-stat buffers, so a
like-for-like count takes `model.trainable_weights` only.

Differences from PyTorch that change no parameter and no FLOP count:
- layout: channels-last (NHWC images [N, H, W, 3]), TensorFlow's native layout; TF's CPU
  convolution kernels do not take NCHW, and on a GPU Keras/cuDNN picks its own internal layout.
- padding: a strided convolution or pooling gets an explicit symmetric ZeroPadding2D and then
  "valid", as PyTorch's padding=k//2. Keras's padding="same" pads asymmetrically (the extra
  row/column at the bottom/right) when the input side is even, which shifts the sampling grid.
  The max-pool's zero padding equals PyTorch's -inf padding because its input is post-ReLU (>= 0).
- BatchNormalization uses PyTorch's constants: epsilon 1e-5 and moving-average momentum 0.9
  (PyTorch's momentum=0.1 weighs the new batch statistic by 0.1).

Weight decay is L2 added to the gradient (g + 1e-4 * w for every trainable variable, BatchNorm's
gamma/beta and the classifier's bias included) before keras.optimizers.SGD's momentum, which is
exactly torch.optim.SGD(weight_decay=1e-4). Keras's own `weight_decay=` argument is decoupled
(w -= lr * wd * w after the momentum update), a different update once momentum is on.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from tbd.models.base import Workload, pool_workload
from tbd.models.host_data.synthetic import POOL_SIZE, check_build_args, image_batch

# Sizes are framework-neutral: one copy in models/specs.py.
from tbd.models.specs import RESNET_DEPTHS, RESNET_SIZES

DEPTHS = RESNET_DEPTHS["resnet50"]
_SIZES = RESNET_SIZES["resnet50"]


_EXPANSION = 4  # bottleneck output channels / inner width

#: L2 coefficient added to every gradient (Goyal et al. 2017; torchvision's reference recipe).
WEIGHT_DECAY = 1e-4


def _conv(x, channels: int, kernel: int, stride: int, name: str):
    """Bias-free convolution with PyTorch's symmetric padding kernel // 2 and torchvision's init."""
    pad = kernel // 2
    if stride > 1 and pad > 0:
        x = keras.layers.ZeroPadding2D(pad, name=f"{name}_pad")(x)
        padding = "valid"
    else:
        padding = "same"  # stride 1 and an odd kernel: "same" is symmetric, k // 2 on each side
    # torchvision's kaiming_normal_(mode="fan_out", nonlinearity="relu"): normal with variance
    # 2 / (channels * k * k); Keras's fan_out for a conv kernel is the same product.
    init = keras.initializers.VarianceScaling(2.0, mode="fan_out", distribution="untruncated_normal")
    return keras.layers.Conv2D(channels, kernel, strides=stride, padding=padding, use_bias=False,
                               kernel_initializer=init, name=name)(x)


def _bn(x, name: str):
    """BatchNorm with PyTorch's eps 1e-5 and momentum (Keras 0.9 == PyTorch 0.1); gamma 1, beta 0."""
    return keras.layers.BatchNormalization(epsilon=1e-5, momentum=0.9, name=name)(x)


def _bottleneck(x, in_channels: int, width: int, stride: int, name: str):
    """1x1 reduce, 3x3 (strided in v1.5), 1x1 expand, each with BatchNorm; identity or projection shortcut."""
    out_channels = width * _EXPANSION
    shortcut = x
    if stride != 1 or in_channels != out_channels:
        shortcut = _bn(_conv(x, out_channels, 1, stride, f"{name}_down_conv"), f"{name}_down_bn")
    out = keras.layers.ReLU()(_bn(_conv(x, width, 1, 1, f"{name}_conv1"), f"{name}_bn1"))
    out = keras.layers.ReLU()(_bn(_conv(out, width, 3, stride, f"{name}_conv2"), f"{name}_bn2"))
    out = _bn(_conv(out, out_channels, 1, 1, f"{name}_conv3"), f"{name}_bn3")
    return keras.layers.ReLU()(keras.layers.Add()([out, shortcut]))


def resnet(depths: tuple[int, ...], num_classes: int = 1000, width: int = 64, side: int = 224) -> keras.Model:
    """A bottleneck ResNet v1.5 with `depths` blocks per stage, initialised as torchvision's.

    Args:
        depths: bottleneck blocks in each stage; stage i has inner width width * 2**i channels
            and (for i > 0) halves the spatial size.
        num_classes: outputs of the final fully connected layer.
        width: channels of the stem convolution and of the first stage's inner width.
        side: image height and width in pixels.
    Returns:
        keras.Model mapping float32 [N, side, side, 3] images to [N, num_classes] logits.
    """
    images = keras.Input((side, side, 3), name="images")
    x = keras.layers.ReLU()(_bn(_conv(images, width, 7, 2, "stem_conv"), "stem_bn"))
    x = keras.layers.ZeroPadding2D(1, name="stem_pool_pad")(x)
    x = keras.layers.MaxPooling2D(3, strides=2, name="stem_pool")(x)
    in_channels = width
    for stage, blocks in enumerate(depths):
        inner = width * 2 ** stage
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            x = _bottleneck(x, in_channels, inner, stride, f"stage{stage + 1}_block{block + 1}")
            in_channels = inner * _EXPANSION
    x = keras.layers.GlobalAveragePooling2D()(x)
    # nn.Linear's default init: weight and bias uniform in +-1/sqrt(fan_in); VarianceScaling's
    # uniform limit is sqrt(3 * scale / fan_in), so scale 1/3.
    bound = 1 / math.sqrt(in_channels)
    logits = keras.layers.Dense(
        num_classes, name="fc",
        kernel_initializer=keras.initializers.VarianceScaling(1 / 3, mode="fan_in", distribution="uniform"),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound))(x)
    return keras.Model(images, logits, name="resnet50_v1_5")


def build(batch: int, device: str, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """ResNet-50 training workload: SGD with momentum on `pool_size` synthetic batches on `device`.

    Args:
        batch: images per iteration.
        device: TensorFlow device string where variables, optimizer state and batches live
            ("/CPU:0", "/GPU:0").
        size: "full" (ImageNet-sized ResNet-50) or "test" (tiny, same architecture, for CI).
        seed: fixes weight init (keras.utils.set_random_seed) and data (numpy RandomState).
        pool_size: synthetic batches kept on the device and cycled through by step().
    Returns:
        Workload whose step() runs one iteration (a tf.function) and returns the scalar mean
        cross-entropy tensor without reading it (no host sync).
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    depths, width, side, classes = _SIZES[size]
    rng = np.random.RandomState(seed)
    keras.utils.set_random_seed(seed)

    with tf.device(device):
        model = resnet(depths, classes, width, side)
        # Goyal et al. 2017's recipe, as in the PyTorch version: momentum 0.9, lr 0.1 per 256
        # images; weight decay as L2 in the gradient (see the module docstring).
        optimizer = keras.optimizers.SGD(learning_rate=0.1 * batch / 256, momentum=0.9)
        optimizer.build(model.trainable_variables)  # slots now, not inside the first trace
        criterion = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # mean over the batch
        pool = [tuple(tf.constant(a) for a in image_batch(batch, (side, side, 3), classes, rng))
                for _ in range(pool_size)]

    @tf.function(jit_compile=False, reduce_retracing=True)
    def train_step(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = criterion(labels, model(images, training=True))
        variables = model.trainable_variables
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients([(g + WEIGHT_DECAY * v, v) for g, v in zip(grads, variables)])
        return loss

    return pool_workload(
        "resnet50", pool, train_step,
        scope=lambda: tf.device(device),
        samples_per_step=batch,
        throughput_unit="images/s",
        model=model,
        optimizer=optimizer,
        description=(f"resnet50 v1.5 ({size}: depths {depths}, width {width}, {side}x{side}x3 NHWC images, "
                     f"{classes} classes), Keras 3 on TensorFlow (tf.function, no XLA), SGD momentum 0.9 "
                     f"with L2 weight decay 1e-4, {pool_size} synthetic batches of {batch}"),
    )
