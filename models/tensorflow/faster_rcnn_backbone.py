"""The Faster R-CNN port's ResNet-101 C4 backbone in Keras 3: frozen BatchNorm, the conv1..conv4 trunk and res5.

torchvision's v1.5 bottlenecks (stride on the 3x3) with PyTorch's symmetric padding, every
BatchNorm frozen (FrozenBatchNorm); conv1 and res2 are not trainable. models/tensorflow/faster_rcnn.py
puts the RPN and the detection head on top (its docstring has the whole recipe).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from tbd.models.host_data import detection as nd

_EXPANSION = 4  # bottleneck output channels / inner width


class FrozenBatchNorm(keras.layers.Layer):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta with every term fixed (non-trainable).

    PyTorch's FrozenBatchNorm2d (MXNet BatchNorm(use_global_stats=True) with gamma/beta fixed).
    While `calibrating` (eager calls only), it normalises by its input's own statistics
    (biased variance) and keeps them, as a training-mode BN with momentum 0 would.
    """

    def __init__(self, epsilon: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.calibrating = False

    def build(self, input_shape):
        channels = (int(input_shape[-1]),)
        self.gamma = self.add_weight(channels, "ones", trainable=False, name="gamma")
        self.beta = self.add_weight(channels, "zeros", trainable=False, name="beta")
        self.moving_mean = self.add_weight(channels, "zeros", trainable=False, name="moving_mean")
        self.moving_variance = self.add_weight(channels, "ones", trainable=False, name="moving_variance")

    def call(self, x):
        if self.calibrating:
            mean, variance = tf.nn.moments(x, axes=[0, 1, 2])
            self.moving_mean.assign(mean)
            self.moving_variance.assign(variance)
        scale = self.gamma * tf.math.rsqrt(self.moving_variance + self.epsilon)
        return x * scale + (self.beta - self.moving_mean * scale)


def _conv(x, channels: int, kernel: int, stride: int, name: str, trainable: bool):
    """Bias-free conv with PyTorch's symmetric padding kernel // 2 and torchvision's kaiming fan-out init."""
    pad = kernel // 2
    padding = "same"  # stride 1 (or a 1x1 kernel): "same" pads k // 2 symmetrically (or nothing)
    if stride > 1 and pad > 0:
        x = keras.layers.ZeroPadding2D(pad, name=f"{name}_pad")(x)
        padding = "valid"
    init = keras.initializers.VarianceScaling(2.0, mode="fan_out", distribution="untruncated_normal")
    return keras.layers.Conv2D(channels, kernel, strides=stride, padding=padding, use_bias=False,
                               kernel_initializer=init, trainable=trainable, name=name)(x)


def _conv_bn(x, channels: int, kernel: int, stride: int, name: str, trainable: bool):
    return FrozenBatchNorm(name=f"{name}_bn")(_conv(x, channels, kernel, stride, name, trainable))


def _stage(x, in_channels: int, width: int, blocks: int, stride: int, name: str, trainable: bool = True):
    """`blocks` v1.5 bottlenecks (stride on the 3x3), the first with a projection shortcut."""
    for block in range(blocks):
        prefix, s = f"{name}_block{block + 1}", stride if block == 0 else 1
        shortcut = x
        if block == 0:
            shortcut = _conv_bn(x, width * _EXPANSION, 1, s, f"{prefix}_down", trainable)
        out = keras.layers.ReLU()(_conv_bn(x, width, 1, 1, f"{prefix}_conv1", trainable))
        out = keras.layers.ReLU()(_conv_bn(out, width, 3, s, f"{prefix}_conv2", trainable))
        out = _conv_bn(out, width * _EXPANSION, 1, 1, f"{prefix}_conv3", trainable)
        x = keras.layers.ReLU()(keras.layers.Add()([out, shortcut]))
    return x


def trunk(cfg: nd.DetectorConfig) -> keras.Model:
    """conv1 .. conv4 (stride 16): float32 [1, H, W, 3] -> [1, ceil(H/16), ceil(W/16), 16 width]; conv1, res2 frozen."""
    w = cfg.width
    images = keras.Input((None, None, 3), batch_size=1, name="image")
    x = keras.layers.ReLU()(_conv_bn(images, w, 7, 2, "conv1", trainable=False))
    x = keras.layers.ZeroPadding2D(1, name="pool1_pad")(x)  # = PyTorch's -inf padding: input is post-ReLU
    x = keras.layers.MaxPooling2D(3, strides=2, name="pool1")(x)
    x = _stage(x, w, w, cfg.depths[0], 1, "res2", trainable=False)
    x = _stage(x, 4 * w, 2 * w, cfg.depths[1], 2, "res3")
    x = _stage(x, 8 * w, 4 * w, cfg.depths[2], 2, "res4")
    return keras.Model(images, x, name="trunk")


def res5(cfg: nd.DetectorConfig) -> keras.Model:
    """conv5: RoI features [R, P, P, 16 width] -> [R, P/2, P/2, 32 width] (first block strided)."""
    rois = keras.Input((None, None, 16 * cfg.width), name="roi_features")
    return keras.Model(rois, _stage(rois, 16 * cfg.width, 8 * cfg.width, cfg.depths[3], 2, "res5"), name="res5")

