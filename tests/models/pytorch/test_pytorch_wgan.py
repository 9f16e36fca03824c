"""WGAN-GP workload: network sizes, synthetic data, the gradient penalty and the update schedule."""

from __future__ import annotations

import math

import pytest
import torch

from tbd.core.errors import UsageError
from tbd.models.base import Workload
from tbd.models.pytorch import wgan

DIM, NOISE = 64, 128  # gan_64x64.py: DIM = 64, noise tf.random_normal([n, 128])


@pytest.fixture(autouse=True)
def _one_intra_op_thread():
    """Run each test on one intra-op thread, then restore the count.

    These models are tiny, so a second thread buys nothing, and on a shared 2-core machine
    OpenMP's spin-waiting threads made the file ~10x slower (75 s vs 6 s measured at load 10).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _param_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _meta(factory, *args) -> torch.nn.Module:
    """Build a module on the meta device: shapes only, no memory, no init cost."""
    with torch.device("meta"):
        return factory(*args)


# --- Architecture --------------------------------------------------------------------------
# Closed forms from gan_64x64.py (GoodGenerator, GoodDiscriminator, ResidualBlock) and tflib:
# a k x k conv i -> o has k*k*i*o weights (+ o biases unless biases=False); BatchNorm and tflib's
# Layernorm each have a per-channel scale and offset (2 * channels); Linear i -> o has i*o + o.

def _up_block(i: int, o: int) -> int:
    shortcut = i * o + o  # UpsampleConv 1x1, biases
    return 2 * i + 9 * i * o + 2 * o + (9 * o * o + o) + shortcut  # BN1, Conv1 (no bias), BN2, Conv2


def _down_block(i: int, o: int) -> int:
    shortcut = i * o + o  # MeanPoolConv 1x1, biases
    return 2 * i + 9 * i * i + 2 * i + (9 * i * o + o) + shortcut  # LN1, Conv1 (no bias), LN2, ConvMeanPool


def test_generator_parameter_count_closed_form():
    d = DIM
    linear = NOISE * 4 * 4 * 8 * d + 4 * 4 * 8 * d
    blocks = _up_block(8 * d, 8 * d) + _up_block(8 * d, 4 * d) + _up_block(4 * d, 2 * d) + _up_block(2 * d, d)
    output = 2 * d + (9 * d * 3 + 3)  # OutputN (BatchNorm), 3x3 conv to RGB
    expected = linear + blocks + output
    assert expected == 8_540_483
    assert _param_count(_meta(wgan.Generator, DIM, 64, NOISE)) == expected


def test_critic_parameter_count_closed_form():
    d = DIM
    first = 9 * 3 * d + d  # 3x3 conv RGB -> DIM
    blocks = _down_block(d, 2 * d) + _down_block(2 * d, 4 * d) + _down_block(4 * d, 8 * d) + _down_block(8 * d, 8 * d)
    output = 4 * 4 * 8 * d + 1  # Linear(4*4*8*DIM, 1)
    expected = first + blocks + output
    assert expected == 7_491_841
    assert _param_count(_meta(wgan.Critic, DIM, 64)) == expected


def test_shapes_through_the_full_networks():
    gen, critic = _meta(wgan.Generator), _meta(wgan.Critic)
    images = gen(torch.empty((2, NOISE), device="meta"))
    assert images.shape == (2, 3, 64, 64)
    assert critic(images).shape == (2,)
    # Critic uses no batch statistics (the penalty is per sample): no BatchNorm anywhere in it.
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in critic.modules())
    assert sum(isinstance(m, torch.nn.GroupNorm) and m.num_groups == 1 for m in critic.modules()) == 2 * 4
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in gen.modules()) == 2 * 4 + 1


def test_layer_norm_is_tflib_layernorm():
    """GroupNorm(1, C) == tflib Layernorm: moments over (C, H, W) per sample, per-channel affine, eps 1e-5."""
    x = torch.randn((3, 4, 5, 5), generator=torch.Generator().manual_seed(0))
    norm = torch.nn.GroupNorm(1, 4)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, 0.5, -1.0]))
        norm.bias.copy_(torch.tensor([0.0, 1.0, -1.0, 2.0]))
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        var = x.var(dim=(1, 2, 3), unbiased=False, keepdim=True)
        expected = (x - mean) / torch.sqrt(var + 1e-5) * norm.weight.view(1, 4, 1, 1) + norm.bias.view(1, 4, 1, 1)
        torch.testing.assert_close(norm(x), expected)


# --- Full workload -------------------------------------------------------------------------

def test_full_workload_shapes_and_units():
    work = wgan.build(2, "cpu", "full", seed=0, pool_size=1)
    assert isinstance(work, Workload)
    n_critic = 5  # gan_64x64.py CRITIC_ITERS
    assert (work.name, work.throughput_unit) == ("wgan", "images/s")
    assert work.samples_per_step == 2 * n_critic  # real images the critic reads per iteration
    assert work.units_per_step == {"generator_steps/s": 1.0}
    assert _param_count(work.model) == 8_540_483 + 7_491_841
    critic_opt, gen_opt = work.optimizer
    assert critic_opt.defaults["lr"] == gen_opt.defaults["lr"] == 1e-4
    assert critic_opt.defaults["betas"] == gen_opt.defaults["betas"] == (0.0, 0.9)
    inputs = work.inputs()
    assert len(inputs) == n_critic + (n_critic + 1) + n_critic  # reals, noises, alphas
    assert all(t.shape == (2, 3, 64, 64) for t in inputs[:n_critic])
    assert all(t.shape == (2, NOISE) for t in inputs[n_critic:2 * n_critic + 1])
    assert all(t.shape == (2, 1, 1, 1) for t in inputs[2 * n_critic + 1:])


def test_test_size_keeps_the_structure_and_trains_at_batch_one():
    work = wgan.build(1, "cpu", "test", seed=0, pool_size=1)
    assert math.isfinite(float(work.step()))  # BatchNorm sees 2x2 values per channel at the start
    work = wgan.build(2, "cpu", "test", seed=0, pool_size=1)
    gen, critic = work.model["generator"], work.model["critic"]
    assert [type(b) for b in gen.blocks] == [wgan.UpBlock] * 4
    assert [type(b) for b in critic.blocks] == [wgan.DownBlock] * 4
    real = work.inputs()[0]
    assert real.shape == (2, 3, 32, 32)
    with torch.no_grad():
        assert gen(work.inputs()[2]).shape == real.shape  # inputs: 2 reals, then 3 noises
    assert work.samples_per_step == 2 * 2  # batch x 2 critic updates


# --- Synthetic data ------------------------------------------------------------------------

def _clipped_normal_moments(m: float, s: float) -> tuple[float, float]:
    """Mean and std of clip(X, 0, 1), X ~ N(m, s^2) (censored normal; Z = (X - m) / s)."""
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    a, b = (0 - m) / s, (1 - m) / s
    inside = cdf(b) - cdf(a)
    ez, ez2 = phi(a) - phi(b), inside + a * phi(a) - b * phi(b)  # E[Z; a<Z<b], E[Z^2; a<Z<b]
    above = 1 - cdf(b)  # mass clipped to 1 (mass clipped to 0 adds nothing)
    mean = m * inside + s * ez + above
    second = m * m * inside + 2 * m * s * ez + s * s * ez2 + above
    return mean, math.sqrt(second - mean * mean)


def test_images_are_8bit_levels_in_minus_one_one_with_imagenet_channel_statistics():
    images = wgan.imagenet64_batch(64, 64, torch.Generator().manual_seed(0))
    assert images.shape == (64, 3, 64, 64) and images.dtype == torch.float32
    assert float(images.min()) == -1.0 and float(images.max()) == 1.0
    levels = (images + 1) / 2 * 255  # the reference feeds 2 * (uint8 / 255 - 0.5)
    assert torch.allclose(levels, levels.round(), atol=1e-4)
    unit = (images + 1) / 2
    means, stds = unit.mean(dim=(0, 2, 3)), unit.std(dim=(0, 2, 3))
    for c in range(3):
        mean, std = _clipped_normal_moments(wgan.IMAGENET_MEAN[c], wgan.IMAGENET_STD[c])
        # 64 * 64 * 64 = 262,144 pixels per channel: standard error ~0.23 / 512 = 0.00045;
        # rounding to 1/255 adds 1 / (12 * 255^2) of variance.
        assert abs(float(means[c]) - mean) < 0.002
        assert abs(float(stds[c]) - std) < 0.002


def test_same_seed_same_workload():
    a, b = wgan.build(2, "cpu", "test", seed=3), wgan.build(2, "cpu", "test", seed=3)
    c = wgan.build(2, "cpu", "test", seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.inputs(), b.inputs(), strict=True))
    assert all(torch.equal(x, y) for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True))
    assert not any(torch.equal(x, y) for x, y in zip(a.inputs(), c.inputs(), strict=True))
    reals = a.inputs()[:2]  # test size: 2 critic updates, each on its own real batch
    assert not torch.equal(reals[0], reals[1])


# --- Training ------------------------------------------------------------------------------

def test_test_size_training_lowers_critic_loss_on_a_fixed_batch():
    work = wgan.build(4, "cpu", "test", seed=0, pool_size=1)
    losses = []
    for _ in range(8):
        loss = work.step()
        assert isinstance(loss, torch.Tensor) and loss.ndim == 0
        losses.append(float(loss))
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


def test_gradient_penalty_is_positive_and_reaches_the_critic():
    gen = torch.Generator().manual_seed(0)
    critic = wgan.Critic(8, 32)
    real = wgan.imagenet64_batch(4, 32, gen)
    fake = torch.rand((4, 3, 32, 32), generator=gen) * 2 - 1
    alpha = torch.rand((4, 1, 1, 1), generator=gen)
    penalty = wgan.gradient_penalty(critic, real, fake, alpha)
    assert penalty.ndim == 0 and float(penalty.detach()) > 0
    penalty.backward()
    weights = [m.weight for m in critic.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    assert all(w.grad is not None and float(w.grad.abs().sum()) > 0 for w in weights)
    # The output bias shifts every score equally, so it cannot change grad_x D: not in the graph.
    assert critic.output.bias.grad is None


def test_gradient_penalty_hand_case_on_a_linear_critic():
    """D(x) = <w, x>: grad_x D = w everywhere, so the penalty is (||w|| - 1)^2 for any interpolate."""
    w = torch.tensor([3.0, 4.0, 0.0, 0.0]).view(1, 1, 2, 2)  # ||w|| = 5
    critic = lambda x: (x * w).flatten(1).sum(dim=1)  # noqa: E731
    real, fake = torch.zeros((2, 1, 2, 2)), torch.ones((2, 1, 2, 2))
    penalty = wgan.gradient_penalty(critic, real, fake, torch.tensor([0.25, 0.75]).view(2, 1, 1, 1))
    assert float(penalty) == pytest.approx((5 - 1) ** 2)


def test_one_step_is_n_critic_critic_updates_and_one_generator_update():
    work = wgan.build(2, "cpu", "test", seed=0, pool_size=1)
    critic_opt, gen_opt = work.optimizer
    calls = {"critic": 0, "generator": 0}
    critic_opt.register_step_post_hook(lambda *_: calls.__setitem__("critic", calls["critic"] + 1))
    gen_opt.register_step_post_hook(lambda *_: calls.__setitem__("generator", calls["generator"] + 1))
    n_critic = 2  # test size
    for iteration in (1, 2):
        work.step()
        assert calls == {"critic": iteration * n_critic, "generator": iteration}
    assert all(float(critic_opt.state[p]["step"]) == 2 * n_critic for p in work.model["critic"].parameters())
    assert all(float(gen_opt.state[p]["step"]) == 2 for p in work.model["generator"].parameters())
    # Optimizers own disjoint halves of the model: all parameters, each trained once.
    owned = [p for opt in work.optimizer for g in opt.param_groups for p in g["params"]]
    assert len(owned) == len(set(map(id, owned))) == len(list(work.model.parameters()))
    assert all(p.requires_grad for p in work.model.parameters())  # the critic is unfrozen again


@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": None}, {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": "cpu", "size": "test", **kwargs}
    with pytest.raises(UsageError):
        wgan.build(**args)
