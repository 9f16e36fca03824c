"""TensorFlow (Keras 3) WGAN-GP: network sizes against PyTorch's, layer norm, gradient penalty, update schedule, data.

Runs only where tensorflow imports (its own venv):
    .venv-tensorflow/bin/python -m pytest -q -p no:cacheprovider tests/models/tensorflow/test_tensorflow_wgan.py
"""

from __future__ import annotations

import math

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
import keras  # noqa: E402  (Keras 3, installed with tensorflow)

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.tensorflow import wgan  # noqa: E402

CPU = "/CPU:0"
DIM, NOISE = 64, 128  # gan_64x64.py: DIM = 64, noise tf.random_normal([n, 128])


def _count(variables) -> int:
    return sum(int(np.prod(v.shape)) for v in variables)


def _layers(model: keras.Model, kind: type) -> list:
    return [layer for layer in model.layers if isinstance(layer, kind)]


# --- Architecture --------------------------------------------------------------------------
# Closed forms from gan_64x64.py and tflib, as in tests/models/pytorch/test_pytorch_wgan.py: a k x k conv i -> o has
# k*k*i*o weights (+ o biases unless biases=False); BatchNorm and tflib's Layernorm each train a
# per-channel scale and offset (2 * channels); Dense i -> o has i*o + o.

def _up_block(i: int, o: int) -> int:
    shortcut = i * o + o  # UpsampleConv 1x1, biases
    return 2 * i + 9 * i * o + 2 * o + (9 * o * o + o) + shortcut  # BN1, Conv1 (no bias), BN2, Conv2


def _down_block(i: int, o: int) -> int:
    shortcut = i * o + o  # MeanPoolConv 1x1, biases
    return 2 * i + 9 * i * i + 2 * i + (9 * i * o + o) + shortcut  # LN1, Conv1 (no bias), LN2, ConvMeanPool


def test_generator_parameter_count_closed_form_equals_pytorch():
    d = DIM
    linear = NOISE * 4 * 4 * 8 * d + 4 * 4 * 8 * d
    blocks = _up_block(8 * d, 8 * d) + _up_block(8 * d, 4 * d) + _up_block(4 * d, 2 * d) + _up_block(2 * d, d)
    output = 2 * d + (9 * d * 3 + 3)  # out BatchNorm, 3x3 conv to RGB
    expected = linear + blocks + output
    assert expected == 8_540_483  # models/pytorch/wgan.py Generator (tests/models/pytorch/test_pytorch_wgan.py)
    gen = wgan.generator(DIM, 64, NOISE)
    assert _count(gen.trainable_weights) == expected
    # Keras keeps BatchNorm's moving mean and variance as variables (PyTorch's running-stat buffers).
    bn_channels = (8 * d + 8 * d) + (8 * d + 4 * d) + (4 * d + 2 * d) + (2 * d + d) + d
    assert _count(gen.non_trainable_weights) == 2 * bn_channels
    assert gen.output_shape == (None, 64, 64, 3)


def test_critic_parameter_count_closed_form_equals_pytorch():
    d = DIM
    first = 9 * 3 * d + d  # 3x3 conv RGB -> DIM
    blocks = _down_block(d, 2 * d) + _down_block(2 * d, 4 * d) + _down_block(4 * d, 8 * d) + _down_block(8 * d, 8 * d)
    output = 4 * 4 * 8 * d + 1  # Dense(4*4*8*DIM, 1)
    expected = first + blocks + output
    assert expected == 7_491_841  # models/pytorch/wgan.py Critic (tests/models/pytorch/test_pytorch_wgan.py)
    critic = wgan.critic(DIM, 64)
    assert _count(critic.trainable_weights) == expected and critic.non_trainable_weights == []
    assert critic.output_shape == (None,)


def test_layer_types_match_pytorch():
    gen, critic = wgan.generator(8, 32), wgan.critic(8, 32)
    # Critic: no batch statistics (the penalty is per sample); one-group layer norms, eps 1e-5.
    assert _layers(critic, keras.layers.BatchNormalization) == []
    norms = _layers(critic, keras.layers.GroupNormalization)
    assert len(norms) == 2 * 4 and all(n.groups == 1 and n.epsilon == 1e-5 for n in norms)
    bns = _layers(gen, keras.layers.BatchNormalization)
    assert len(bns) == 2 * 4 + 1 and all(b.epsilon == 1e-5 for b in bns)
    # Each residual block's Conv1 has no bias (gan_64x64.py biases=False); every other conv has one.
    for net in (gen, critic):
        convs = _layers(net, keras.layers.Conv2D)
        assert sorted(c.name for c in convs if not c.use_bias) == [c.name for c in convs if c.name.endswith("conv1")]
        assert len([c for c in convs if not c.use_bias]) == 4


def test_group_norm_of_one_group_is_tflib_layernorm():
    """Moments over (H, W, C) per sample, per-channel scale and offset, eps 1e-5 (tflib ops/layernorm.py)."""
    x = np.random.RandomState(0).standard_normal((3, 5, 5, 4)).astype(np.float32)
    norm = wgan._layer_norm("ln")
    norm.build(x.shape)
    gamma, beta = np.array([1.0, 2.0, 0.5, -1.0]), np.array([0.0, 1.0, -1.0, 2.0])
    norm.gamma.assign(gamma)
    norm.beta.assign(beta)
    mean = x.mean(axis=(1, 2, 3), keepdims=True)
    var = x.var(axis=(1, 2, 3), keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-5) * gamma + beta
    np.testing.assert_allclose(norm(x).numpy(), expected, rtol=1e-4, atol=1e-5)


# --- Gradient penalty ----------------------------------------------------------------------

def test_gradient_penalty_is_positive_and_reaches_the_critic():
    keras.utils.set_random_seed(0)
    critic = wgan.critic(8, 32)
    rng = np.random.RandomState(0)
    real = tf.constant(wgan.imagenet64_batch(4, 32, rng))
    fake = tf.constant(rng.uniform(-1, 1, (4, 32, 32, 3)).astype(np.float32))
    alpha = tf.constant(rng.uniform(size=(4, 1, 1, 1)).astype(np.float32))
    with tf.GradientTape() as tape:
        penalty = wgan.gradient_penalty(critic, real, fake, alpha)
    assert penalty.shape == () and float(penalty) > 0
    kernels = [layer.kernel for layer in critic.layers if isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense))]
    # Through the inner tape's input gradient: double backward.
    *grads, bias_grad = tape.gradient(penalty, kernels + [critic.get_layer("output").bias])
    assert all(g is not None and float(tf.reduce_sum(tf.abs(g))) > 0 for g in grads)
    # The output bias shifts every score equally, so it cannot change grad_x D.
    assert bias_grad is None or float(tf.reduce_sum(tf.abs(bias_grad))) == 0


def test_gradient_penalty_hand_case_on_a_linear_critic():
    """D(x) = <w, x>: grad_x D = w everywhere, so the penalty is (||w|| - 1)^2 for any interpolate."""
    w = tf.reshape(tf.constant([3.0, 4.0, 0.0, 0.0]), (1, 2, 2, 1))  # ||w|| = 5

    def critic(x, training=False):
        return tf.reduce_sum(x * w, axis=[1, 2, 3])

    real, fake = tf.zeros((2, 2, 2, 1)), tf.ones((2, 2, 2, 1))
    penalty = wgan.gradient_penalty(critic, real, fake, tf.reshape(tf.constant([0.25, 0.75]), (2, 1, 1, 1)))
    assert float(penalty) == pytest.approx((5 - 1) ** 2)


# --- Workload ------------------------------------------------------------------------------

def test_full_workload_fields():
    work = wgan.build(2, CPU, "full", seed=0, pool_size=1)  # built for its fields only: no step
    n_critic = 5  # gan_64x64.py CRITIC_ITERS
    assert (work.name, work.throughput_unit) == ("wgan", "images/s")
    assert work.samples_per_step == 2 * n_critic  # real images the critic reads per iteration
    assert work.units_per_step == {"generator_steps/s": 1.0}
    gen, critic = work.model
    assert (gen.name, critic.name) == ("generator", "critic")
    assert _count(gen.trainable_weights) + _count(critic.trainable_weights) == 8_540_483 + 7_491_841
    for opt in work.optimizer:
        assert isinstance(opt, keras.optimizers.Adam)
        assert (float(opt.learning_rate), opt.beta_1, opt.beta_2) == (pytest.approx(1e-4), 0.0, 0.9)
    inputs = work.inputs()
    assert len(inputs) == n_critic + (n_critic + 1) + n_critic  # reals, noises, alphas
    assert all(tuple(t.shape) == (2, 64, 64, 3) for t in inputs[:n_critic])
    assert all(tuple(t.shape) == (2, NOISE) for t in inputs[n_critic:2 * n_critic + 1])
    assert all(tuple(t.shape) == (2, 1, 1, 1) for t in inputs[2 * n_critic + 1:])


def test_steps_do_n_critic_plus_one_updates_in_one_trace_and_lower_the_critic_loss():
    # One workload for all checks: tracing the double-backward step costs ~10 s of CPU.
    work = wgan.build(4, CPU, "test", seed=0, pool_size=2)  # two batches, alternating: one trace
    gen_opt, critic_opt = work.optimizer
    gen, critic = work.model
    n_critic = 2  # test size
    losses = []
    for iteration in range(1, 9):
        loss = work.step()
        assert isinstance(loss, tf.Tensor) and loss.shape == ()
        losses.append(float(loss))
        assert (int(gen_opt.iterations), int(critic_opt.iterations)) == (iteration, iteration * n_critic)
        assert int(gen_opt.iterations) + int(critic_opt.iterations) == iteration * (n_critic + 1)
    assert work.step.train_step.experimental_get_tracing_count() == 1
    assert all(math.isfinite(x) for x in losses)
    # The same pool entry (same reals, noises and alphas) at iterations 1 and 7, and 2 and 8.
    assert losses[6] < losses[0] and losses[7] < losses[1]
    # Each optimizer owns exactly one network's trainable variables.
    assert {id(v) for v in gen_opt._trainable_variables} == {id(v) for v in gen.trainable_variables}
    assert {id(v) for v in critic_opt._trainable_variables} == {id(v) for v in critic.trainable_variables}
    real = work.inputs()[0]
    assert tuple(real.shape) == (4, 32, 32, 3)
    assert tuple(gen(work.inputs()[2]).shape) == tuple(real.shape)  # inputs: 2 reals, then 3 noises


# --- Synthetic data ------------------------------------------------------------------------

def _clipped_normal_mean(m: float, s: float) -> float:
    """E[clip(X, 0, 1)], X ~ N(m, s^2) (censored normal; Z = (X - m) / s)."""
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    a, b = (0 - m) / s, (1 - m) / s
    return m * (cdf(b) - cdf(a)) + s * (phi(a) - phi(b)) + (1 - cdf(b))  # inside, plus the mass clipped to 1


def test_images_are_8bit_levels_in_minus_one_one_with_imagenet_channel_means():
    images = wgan.imagenet64_batch(16, 64, np.random.RandomState(0))
    assert images.shape == (16, 64, 64, 3) and images.dtype == np.float32
    assert images.min() == -1.0 and images.max() == 1.0
    levels = (images.astype(np.float64) + 1) / 2 * 255  # the reference feeds 2 * (uint8 / 255 - 0.5)
    np.testing.assert_allclose(levels, np.round(levels), atol=1e-3)
    means = ((images + 1) / 2).mean(axis=(0, 1, 2))
    for c in range(3):
        # 16 * 64 * 64 = 65,536 pixels per channel: standard error ~0.23 / 256 = 0.0009.
        assert abs(float(means[c]) - _clipped_normal_mean(wgan.IMAGENET_MEAN[c], wgan.IMAGENET_STD[c])) < 0.004


def test_same_seed_same_workload():
    a, b = (wgan.build(2, CPU, "test", seed=3, pool_size=1) for _ in range(2))
    c = wgan.build(2, CPU, "test", seed=4, pool_size=1)
    a_vars = [v for m in a.model for v in m.weights] + a.inputs()
    b_vars = [v for m in b.model for v in m.weights] + b.inputs()
    for x, y in zip(a_vars, b_vars, strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    assert not any(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a.inputs(), c.inputs()))
    assert not np.array_equal(np.asarray(a.inputs()[0]), np.asarray(a.inputs()[1]))  # each critic update its own reals


@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": None}, {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": CPU, "size": "test", **kwargs}
    with pytest.raises(UsageError):
        wgan.build(**args)
