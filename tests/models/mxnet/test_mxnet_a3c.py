"""MXNet A3C: network size by closed form, batched environments, returns, loss, RMSProp and a learning update.

    .venv-mxnet/bin/python -m pytest -q tests/models/mxnet/test_mxnet_a3c.py
"""

from __future__ import annotations

import math

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from mxnet import gluon  # noqa: E402

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.atari_env import ACTIONS  # noqa: E402
from tbd.models.base import Workload  # noqa: E402
from tbd.models.mxnet import a3c  # noqa: E402

PYTORCH_PARAMS = 677_943  # models/pytorch/a3c.py (tests/models/pytorch/test_pytorch_a3c.py closed form)


def _trainable(block) -> int:
    return sum(int(np.prod(p.shape)) for p in block.collect_params().values() if p.grad_req != "null")


def _params(block) -> list[np.ndarray]:
    return [p.data().asnumpy().copy() for p in block.collect_params().values()]


def test_full_network_parameter_count_closed_form():
    # Mnih et al. 2016, Section 8: conv 16 8x8 s4 -> conv 32 4x4 s2 -> fc 256 -> policy (6) + value,
    # on 4x84x84 frames. Spatial sizes: (84 - 8) / 4 + 1 = 20, (20 - 4) / 2 + 1 = 9.
    conv1 = 16 * 4 * 8 * 8 + 16
    conv2 = 32 * 16 * 4 * 4 + 32
    fc = (32 * 9 * 9) * 256 + 256
    policy = 256 * 6 + 6
    value = 256 * 1 + 1
    assert _trainable(a3c.ActorCritic(a3c.SIZES["full"])) == conv1 + conv2 + fc + policy + value == PYTORCH_PARAMS


def test_network_output_shapes_and_init_bounds():
    for size in ("full", "test"):
        arch = a3c.SIZES[size]
        model = a3c.ActorCritic(arch)
        model.initialize()
        logits, value = model(mx.nd.zeros((3, 4, arch.side, arch.side), dtype="uint8"))
        assert logits.shape == (3, len(ACTIONS)) and value.shape == (3,)
    # Torch7's init: the fc layer's weights and biases inside +-1/sqrt(32 * 9 * 9) (last arch: "test" is
    # 16 maps of 9x9 too: (42 - 4) // 2 + 1 = 20, (20 - 4) // 2 + 1 = 9).
    bound = 1 / math.sqrt(16 * 9 * 9)
    for p in (model.fc.weight, model.fc.bias):
        values = p.data().asnumpy()
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.9 * bound


def test_n_step_returns_by_hand_per_environment():
    g = 0.99
    rewards = np.array([[0, 0], [1, -1], [0, 0]], np.float32)  # [t, env]
    ended = np.array([[False, False], [False, True], [False, False]])
    got = a3c.n_step_returns(rewards, ended, np.array([2.0, 2.0]))
    # env 0: bootstrapped from V = 2 through all three steps; env 1: the episode ends at step 1.
    r2 = 0 + g * 2.0
    np.testing.assert_allclose(got[:, 0], [g * (1 + g * r2), 1 + g * r2, r2], rtol=1e-6)
    np.testing.assert_allclose(got[:, 1], [g * -1, -1, g * 2.0], rtol=1e-6)


def test_loss_by_hand_on_two_frames():
    logits = mx.nd.zeros((2, 2))  # uniform policy over 2 actions: log pi = log 0.5, entropy log 2
    loss = a3c.a3c_loss(mx.nd, logits, mx.nd.array([1.0, 0.5]), mx.nd.array([0, 1]), mx.nd.array([2.0, 0.0]))
    advantage = [2.0 - 1.0, 0.0 - 0.5]
    policy = -(math.log(0.5) * advantage[0] + math.log(0.5) * advantage[1]) - 0.01 * 2 * math.log(2)
    value = 0.5 * (advantage[0] ** 2 + advantage[1] ** 2)
    assert float(loss.asscalar()) == pytest.approx(policy + value, rel=1e-6)


def test_rmsprop_matches_pytorch_shared_rmsprop_formula():
    work = a3c.build(2, mx.cpu(), "test", seed=0, pool_size=1)
    opt = work.optimizer._optimizer
    assert (type(opt).__name__, opt.learning_rate, opt.gamma1, opt.epsilon, opt.centered) == \
        ("RMSProp", 7e-4, 0.99, 0.1, False)
    # The same settings on one scalar: g = (1 - 0.99) * 2^2; p = 1 - 7e-4 * 2 / sqrt(g + 0.1) (eps inside).
    p = gluon.Parameter("p", shape=(1,), init=mx.init.One())
    p.initialize(ctx=mx.cpu())
    trainer = gluon.Trainer([p], "rmsprop", {"learning_rate": 7e-4, "gamma1": 0.99, "epsilon": 0.1,
                                             "centered": False})
    with mx.autograd.record():
        loss = (2.0 * p.data()).sum()  # d loss / d p = 2
    loss.backward()
    trainer.step(1)
    g = (1 - 0.99) * 2.0 ** 2
    assert float(p.data().asscalar()) == pytest.approx(1.0 - 7e-4 * 2.0 / math.sqrt(g + 0.1), rel=1e-6)


def test_updates_on_a_fixed_rollout_lower_the_loss():
    # One rollout of 4 environments x 5 frames learned from repeatedly; returns set to 1 (every action
    # paid off) so minimising has a clear direction: V -> 1 and pi(a_i) -> 1 (as the PyTorch test).
    trainer = a3c.BatchedA3C(4, 5, mx.cpu(), "test", seed=0, pool_size=1)
    obs, actions, _ = trainer.rollout()
    returns = mx.nd.ones((5 * 4,))
    losses = [float(trainer.learn(obs, actions, returns).asscalar()) for _ in range(8)]
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


def test_workload_steps_all_environments_together():
    envs, t_max = 3, 5
    work = a3c.build(envs, mx.cpu(), "test", seed=0, pool_size=2, t_max=t_max)
    assert isinstance(work, Workload)
    assert (work.name, work.samples_per_step, work.throughput_unit) == ("a3c", envs * t_max, "frames/s")
    assert work.samples_counter is None
    before = _params(work.model)
    for _ in range(2):
        loss = work.step()
        assert loss.shape == (1,) and math.isfinite(float(loss.asscalar()))
    assert any(not np.array_equal(a, b) for a, b in zip(before, _params(work.model)))
    buffers = work.inputs()
    assert len(buffers) == 2 and all(b.shape == (t_max + 1, envs, 4, 42, 42) and b.dtype == np.uint8
                                     for b in buffers)
    # The last step used the second buffer; its bootstrap slot holds every environment's current stack.
    envs_now = np.stack([env.observation for env in work.step.__self__.environments])
    assert np.array_equal(buffers[1][t_max].asnumpy(), envs_now)
    # The environments are distinct games (different serves), not copies of one.
    assert not np.array_equal(envs_now[0], envs_now[1]) or not np.array_equal(envs_now[1], envs_now[2])


def test_same_seed_same_workload():
    def first_step(seed: int):
        work = a3c.build(2, mx.cpu(), "test", seed=seed, pool_size=1)
        params = _params(work.model)
        loss = float(work.step().asscalar())
        return params, loss, work.inputs()[0].asnumpy()

    (pa, la, ia), (pb, lb, ib), (pc, _, ic) = first_step(3), first_step(3), first_step(4)
    assert all(np.array_equal(x, y) for x, y in zip(pa, pb, strict=True)) and la == lb and np.array_equal(ia, ib)
    assert not all(np.array_equal(x, y) for x, y in zip(pa, pc)) and not np.array_equal(ia, ic)


@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": None}, {"size": "huge"}, {"pool_size": 0},
                                    {"t_max": 0}, {"t_max": 1.5}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": mx.cpu(), "size": "test", **kwargs}
    with pytest.raises(UsageError):
        a3c.build(**args)
