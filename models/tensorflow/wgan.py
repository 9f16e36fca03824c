"""WGAN-GP: ResNet generator and critic on synthetic down-sampled-ImageNet data, in TensorFlow 2 / Keras 3.

Layer for layer the networks of models/pytorch/wgan.py: Gulrajani et al., "Improved Training of
Wasserstein GANs", NeurIPS 2017, 64x64 ImageNet model of the authors' TensorFlow code
(github.com/igul222/improved_wgan_training, gan_64x64.py, MODE='wgan-gp', GoodGenerator /
GoodDiscriminator, DIM=64, CRITIC_ITERS=5, LAMBDA=10); see the PyTorch docstring for the details.
- generator: z ~ N(0, I_128) -> Dense(4*4*8*DIM) -> four "up" residual blocks (BatchNorm, ReLU,
  nearest 2x upsampling, 3x3 conv without bias, BatchNorm, ReLU, 3x3 conv; 1x1 shortcut conv after
  upsampling) -> BatchNorm, ReLU, 3x3 conv to RGB, tanh: 8,540,483 trainable parameters;
- critic: 3x3 conv RGB -> DIM -> four "down" residual blocks (tflib Layernorm = per-sample
  moments over (H, W, C) with per-channel scale/offset, eps 1e-5; 3x3 conv without bias; 3x3 conv
  then 2x2 mean pool; shortcut 2x2 mean pool then 1x1 conv) -> Dense(1): 7,491,841 parameters, no
  BatchNorm (the penalty is per sample);
- critic loss E[D(G(z))] - E[D(x)] + 10 * E[(||grad_x^ D(x^)||_2 - 1)^2], x^ = x + a (G(z) - x),
  a ~ U[0, 1] per sample, the input gradient taken by a nested GradientTape so the outer tape
  differentiates through it (double backward); generator loss -E[D(G(z))]; Adam(1e-4, beta1 0,
  beta2 0.9) for each network. One step() is one tf.function: n_critic critic updates, each on its
  own real batch, then one generator update (n_critic + 1 optimizer iterations).
- tflib init as in PyTorch: uniform weights of std sqrt(k / (fan_in + fan_out)), k = 4 (He) or 2
  (Glorot: 1x1 shortcuts, the critic's input conv, the Dense layers), zero biases. That is Keras's
  VarianceScaling(scale=k/2, mode="fan_avg", distribution="uniform") (limit sqrt(6 scale / (fan_in + fan_out))).

TensorFlow-specific departures, none changing a parameter count or a FLOP count:
- layout NHWC (images [N, H, W, 3]; TensorFlow's CPU convolutions take no NCHW). The generator's
  Dense output is reshaped to [4, 4, 8*DIM] and the critic flattens [4, 4, 8*DIM] before its Dense,
  a fixed permutation of those layers' units relative to PyTorch's [C, H, W] order.
- the critic's layer norm is keras.layers.GroupNormalization(groups=1, epsilon=1e-5): one group
  over all channels is exactly tflib's Layernorm (and PyTorch's nn.GroupNorm(1, C)).
- BatchNormalization uses PyTorch's constants (epsilon 1e-5, moving-average momentum 0.9 = PyTorch's 0.1).
- as in PyTorch, z and a are drawn on the host with the real images (numpy RandomState) and kept
  in the device pool; the generator's forward pass of a critic update runs outside the tape and the
  generator update differentiates with respect to the generator's variables only.
"""

from __future__ import annotations

import itertools

import keras
import numpy as np
import tensorflow as tf

from tbd.models.base import Workload, pool_workload
from tbd.models.host_data.synthetic import POOL_SIZE, check_build_args

# What the model is (sizes, loss weights, optimizer settings) is framework-neutral: one copy, models/specs.py.
from tbd.models.specs import IMAGENET_MEAN, IMAGENET_STD  # noqa: F401 - the module's public names
from tbd.models.specs import WGAN_BETAS as BETAS
from tbd.models.specs import WGAN_BLOCKS as _BLOCKS
from tbd.models.specs import WGAN_GP_WEIGHT as GP_WEIGHT
from tbd.models.specs import WGAN_LEARNING_RATE as LEARNING_RATE
from tbd.models.specs import WGAN_SIZES as _SIZES


def _init(he: bool) -> keras.initializers.Initializer:
    """tflib's uniform init of std sqrt(k / (fan_in + fan_out)), k = 4 (He) or 2 (Glorot)."""
    return keras.initializers.VarianceScaling(2.0 if he else 1.0, mode="fan_avg", distribution="uniform")


def _conv(channels: int, kernel: int, name: str, *, he: bool = True, bias: bool = True) -> keras.layers.Conv2D:
    """Stride-1 conv, 'same' padding (symmetric for odd kernels), tflib init, zero bias."""
    return keras.layers.Conv2D(channels, kernel, padding="same", use_bias=bias, kernel_initializer=_init(he),
                               bias_initializer="zeros", name=name)


def _batch_norm(name: str) -> keras.layers.BatchNormalization:
    return keras.layers.BatchNormalization(epsilon=1e-5, momentum=0.9, name=name)


def _layer_norm(name: str) -> keras.layers.GroupNormalization:
    """tflib Layernorm: per-sample moments over (H, W, C), per-channel scale and offset, eps 1e-5."""
    return keras.layers.GroupNormalization(groups=1, epsilon=1e-5, name=name)


def _mean_pool(x):
    """2x2 mean pool, stride 2 (tflib's (a + b + c + d) / 4 over the four phases)."""
    return keras.layers.AveragePooling2D(2)(x)


def _up_block(x, out_channels: int, name: str):
    """gan_64x64.py ResidualBlock(resample='up') with BatchNorm: doubles the side, -> out_channels."""
    upsample = keras.layers.UpSampling2D(2, interpolation="nearest")
    shortcut = _conv(out_channels, 1, f"{name}_shortcut", he=False)(upsample(x))  # UpsampleConv 1x1
    out = keras.layers.UpSampling2D(2, interpolation="nearest")(keras.layers.ReLU()(_batch_norm(f"{name}_bn1")(x)))
    out = _conv(out_channels, 3, f"{name}_conv1", bias=False)(out)
    out = _conv(out_channels, 3, f"{name}_conv2")(keras.layers.ReLU()(_batch_norm(f"{name}_bn2")(out)))
    return keras.layers.Add()([shortcut, out])


def _down_block(x, in_channels: int, out_channels: int, name: str):
    """gan_64x64.py ResidualBlock(resample='down') with layer norm: halves the side, -> out_channels."""
    shortcut = _conv(out_channels, 1, f"{name}_shortcut", he=False)(_mean_pool(x))  # MeanPoolConv
    out = _conv(in_channels, 3, f"{name}_conv1", bias=False)(keras.layers.ReLU()(_layer_norm(f"{name}_ln1")(x)))
    out = _conv(out_channels, 3, f"{name}_conv2")(keras.layers.ReLU()(_layer_norm(f"{name}_ln2")(out)))
    return keras.layers.Add()([shortcut, _mean_pool(out)])  # ConvMeanPool


def generator(dim: int = 64, side: int = 64, noise: int = 128) -> keras.Model:
    """GoodGenerator: noise [N, noise] -> images [N, side, side, 3] in [-1, 1]."""
    start = side // 2 ** _BLOCKS  # 4 for 64x64 images
    z = keras.Input((noise,), name="noise")
    x = keras.layers.Dense(start * start * 8 * dim, kernel_initializer=_init(False), name="input")(z)
    x = keras.layers.Reshape((start, start, 8 * dim))(x)
    for i, width in enumerate((8 * dim, 4 * dim, 2 * dim, dim)):
        x = _up_block(x, width, f"up{i + 1}")
    x = keras.layers.ReLU()(_batch_norm("out_bn")(x))
    images = keras.layers.Activation("tanh")(_conv(3, 3, "out_conv")(x))
    return keras.Model(z, images, name="generator")


def critic(dim: int = 64, side: int = 64) -> keras.Model:
    """GoodDiscriminator: images [N, side, side, 3] -> scores [N] (unbounded)."""
    images = keras.Input((side, side, 3), name="images")
    x = _conv(dim, 3, "input", he=False)(images)
    widths = (dim, 2 * dim, 4 * dim, 8 * dim, 8 * dim)
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        x = _down_block(x, a, b, f"down{i + 1}")
    score = keras.layers.Dense(1, kernel_initializer=_init(False), name="output")(keras.layers.Flatten()(x))
    return keras.Model(images, keras.layers.Reshape(())(score), name="critic")


def gradient_penalty(critic_net, real, fake, alpha):
    """E[(||grad D(x^)||_2 - 1)^2] over x^ = real + alpha (fake - real); differentiable in the critic.

    Args:
        critic_net: maps images [N, H, W, C] to scores [N].
        real, fake: images [N, H, W, C].
        alpha: interpolation weights [N, 1, 1, 1] in [0, 1].
    Returns:
        scalar tensor (unweighted; the critic loss multiplies it by GP_WEIGHT). Call it inside an
        outer GradientTape to differentiate it with respect to the critic's variables.
    """
    interpolates = real + alpha * (fake - real)
    with tf.GradientTape() as inner:
        inner.watch(interpolates)
        scores = tf.reduce_sum(critic_net(interpolates, training=True))
    grads = inner.gradient(scores, interpolates)  # recorded by any outer tape: double backward
    slopes = tf.sqrt(tf.reduce_sum(tf.square(grads), axis=[1, 2, 3]))  # ||.||_2 over each sample's pixels
    return tf.reduce_mean(tf.square(slopes - 1.0))


def critic_loss(critic_net, real, fake, alpha):
    """WGAN-GP critic loss E[D(fake)] - E[D(real)] + GP_WEIGHT * gradient_penalty (a scalar tensor)."""
    wasserstein = tf.reduce_mean(critic_net(fake, training=True)) - tf.reduce_mean(critic_net(real, training=True))
    return wasserstein + GP_WEIGHT * gradient_penalty(critic_net, real, fake, alpha)


def imagenet64_batch(batch: int, side: int, rng: np.random.RandomState) -> np.ndarray:
    """Synthetic down-sampled ImageNet images as gan_64x64.py feeds them, float32 [batch, side, side, 3] (NHWC).

    8-bit levels drawn per channel from a normal with ImageNet's mean and std (in [0, 1]), clipped
    to [0, 255] and rounded, mapped to [-1, 1] as 2 * (level / 255 - 0.5), as in models/pytorch/wgan.py.
    """
    pixels = rng.standard_normal((batch, side, side, 3)) * np.array(IMAGENET_STD) + np.array(IMAGENET_MEAN)
    levels = np.clip(np.round(pixels * 255), 0, 255)
    return (2 * (levels / 255 - 0.5)).astype(np.float32)


def _iteration_data(batch: int, side: int, noise: int, n_critic: int, rng: np.random.RandomState):
    """One iteration's host data: (n_critic real batches, n_critic + 1 noise batches, n_critic alphas)."""
    reals = [imagenet64_batch(batch, side, rng) for _ in range(n_critic)]
    noises = [rng.standard_normal((batch, noise)).astype(np.float32) for _ in range(n_critic + 1)]
    alphas = [rng.uniform(size=(batch, 1, 1, 1)).astype(np.float32) for _ in range(n_critic)]
    return reals, noises, alphas


def build(batch: int, device: str, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """WGAN-GP training workload: n_critic critic updates + 1 generator update per step().

    Args:
        batch: images per critic update (and noise vectors per generator update).
        device: TensorFlow device string where variables, optimizer state and batches live ("/CPU:0", "/GPU:0").
        size: "full" (gan_64x64.py at DIM 64, 5 critic updates) or "test" (DIM 8, 32x32, 2 updates).
        seed: fixes weight init (keras.utils.set_random_seed) and data (numpy RandomState).
        pool_size: iterations' worth of data kept on the device and cycled through by step(); each
            holds n_critic real batches, n_critic + 1 noise batches and n_critic sets of alphas.
    Returns:
        Workload whose step() runs one iteration (one tf.function) and returns the last critic
        update's loss tensor (no host sync); samples_per_step = batch * n_critic real images;
        model = [generator, critic]; optimizer = [gen_opt, critic_opt].
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    dim, side, noise, n_critic = _SIZES[size]
    rng = np.random.RandomState(seed)
    keras.utils.set_random_seed(seed)

    with tf.device(device):
        gen_net, critic_net = generator(dim, side, noise), critic(dim, side)
        gen_opt = keras.optimizers.Adam(LEARNING_RATE, beta_1=BETAS[0], beta_2=BETAS[1], epsilon=1e-8)
        critic_opt = keras.optimizers.Adam(LEARNING_RATE, beta_1=BETAS[0], beta_2=BETAS[1], epsilon=1e-8)
        gen_opt.build(gen_net.trainable_variables)  # slots now, not inside the first trace
        critic_opt.build(critic_net.trainable_variables)
        pool = [tuple([tf.constant(a) for a in group] for group in _iteration_data(batch, side, noise, n_critic, rng))
                for _ in range(pool_size)]

    return pool_workload(
        "wgan", pool, _train_step(gen_net, critic_net, gen_opt, critic_opt),
        scope=lambda: tf.device(device),
        samples_per_step=batch * n_critic,  # real images the critic consumes per iteration
        throughput_unit="images/s",
        units_per_step={"generator_steps/s": 1.0},
        model=[gen_net, critic_net],
        optimizer=[gen_opt, critic_opt],
        description=(f"WGAN-GP ResNet generator/critic (Gulrajani et al. 2017, gan_64x64.py; {size}: DIM {dim}, "
                     f"{side}x{side}x3 NHWC images, noise {noise}, {n_critic} critic updates per generator "
                     f"update), Keras 3 on TensorFlow (tf.function, no XLA), Adam(1e-4, 0, 0.9), "
                     f"{pool_size} synthetic iterations of {n_critic} batches of {batch}"),
    )


def _train_step(gen_net: keras.Model, critic_net: keras.Model, gen_opt: keras.optimizers.Optimizer,
                critic_opt: keras.optimizers.Optimizer) -> tf.types.experimental.PolymorphicFunction:
    """One WGAN-GP iteration as a tf.function: n_critic critic updates, then one generator update.

    Takes one pool entry (reals, noises, alphas); returns the last critic update's loss.
    """
    @tf.function(jit_compile=False, reduce_retracing=True)
    def train_step(reals: list, noises: list, alphas: list) -> tf.Tensor:
        for real, z, alpha in zip(reals, noises, alphas):  # noises has one more: the generator's
            fake = gen_net(z, training=True)  # outside the tape: no gradient to the generator
            with tf.GradientTape() as tape:
                loss = critic_loss(critic_net, real, fake, alpha)
            variables = critic_net.trainable_variables
            critic_opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        with tf.GradientTape() as tape:
            gen_loss = -tf.reduce_mean(critic_net(gen_net(noises[-1], training=True), training=True))
        variables = gen_net.trainable_variables  # gradients for the generator only
        gen_opt.apply_gradients(zip(tape.gradient(gen_loss, variables), variables))
        return loss

    return train_step
