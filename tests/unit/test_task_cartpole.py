"""The cartpole task (A3C family on gymnasium's CartPole-v1): the real environment, held-out reset seeds
disjoint from the training ones, the mean return checked against episodes stepped by hand, epochs of a
fixed frame count, and a short training that beats a uniformly random policy by far."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

gymnasium = pytest.importorskip("gymnasium")

from tbd.models.pytorch.a3c_model import a3c_loss  # noqa: E402 - after the skip for a missing gymnasium
from tbd.models.specs import A3C_SIZES  # noqa: E402
from tbd.models.tasks import cartpole  # noqa: E402

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _one_thread():
    """The tests call the network outside train_epoch/evaluate too: one thread, as the task itself runs."""
    with cartpole.one_cpu_thread(CPU):
        yield


class _Constant(nn.Module):
    """A policy that always prefers `action` (logits one-hot), value 0."""

    def __init__(self, action: int):
        super().__init__()
        self.action = action

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = torch.zeros(len(obs), cartpole.ACTIONS)
        logits[:, self.action] = 1.0
        return logits, torch.zeros(len(obs))


def _return_by_hand(seed: int, action: int) -> float:
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, _ = env.step(action)
        total += reward
        done = terminated or truncated
    return total


def _reset_seeds(monkeypatch) -> list[int]:
    """Record every reset seed CartPole gets from here on."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    seen: list[int] = []
    original = CartPoleEnv.reset

    def reset(self, *, seed=None, options=None):
        seen.append(seed)
        return original(self, seed=seed, options=options)

    monkeypatch.setattr(CartPoleEnv, "reset", reset)
    return seen


def test_the_environment_is_gymnasiums_cartpole_v1_with_its_threshold():
    env = gymnasium.make("CartPole-v1")
    assert (env.spec.reward_threshold, env.spec.max_episode_steps) == (475.0, 500)
    assert env.observation_space.shape == (cartpole.OBSERVATIONS,) and env.action_space.n == cartpole.ACTIONS
    # A known start: gymnasium's own draw for reset seed 0 (uniform in +-0.05 per state variable).
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(obs, [0.013696168549358845, -0.023021329194307327, -0.04590264707803726,
                                     -0.04834723472595215], rtol=0, atol=1e-7)
    # Pushing right from there tips the pole past 12 degrees after 8 steps: reward 1 per step.
    assert _return_by_hand(0, 1) == 8.0


def test_the_mean_return_is_the_episodes_summed_rewards():
    for action in (0, 1):
        returns = cartpole.play_greedy(_Constant(action), range(6), CPU)
        assert returns == [_return_by_hand(seed, action) for seed in range(6)]
    assert cartpole.play_greedy(_Constant(1), range(3), CPU) == [8.0, 9.0, 10.0]


def test_held_out_seeds_are_fixed_and_disjoint_from_training_seeds(monkeypatch):
    seen = _reset_seeds(monkeypatch)
    runs = {}
    for seed in (0, 1):
        seen.clear()
        task = cartpole.build("a3c", 5, seed, "test", CPU)
        for _ in range(20):
            task._update()
        train = list(seen)
        seen.clear()
        task.evaluate()
        runs[seed] = (train, list(seen))
    for train, held_out in runs.values():
        assert held_out == list(range(cartpole.EVAL_EPISODES))  # the same held-out split for every run seed
        assert len(train) > cartpole.WORKERS  # the learners' first episodes and those that ended since
        assert all(cartpole.EVAL_EPISODES <= s < cartpole.TRAIN_SEED_HIGH for s in train)
    assert runs[0][0] != runs[1][0]  # the run seed varies the training episodes


def test_the_network_is_the_suites_heads_on_an_mlp_trunk():
    task = cartpole.build("a3c", 5, 0, "test", CPU)
    hidden = A3C_SIZES["test"].hidden
    model = task.model
    assert (model.trunk.in_features, model.fc.in_features, model.fc.out_features) == (4, hidden, hidden)
    assert (model.policy.out_features, model.value.out_features) == (cartpole.ACTIONS, 1)
    logits, value = model(torch.zeros(3, 4))
    assert logits.shape == (3, 2) and value.shape == (3,)
    # The suite's loss, by hand on one step: -log pi(a) * advantage - beta * entropy + 0.5 * advantage^2.
    logits, values = torch.tensor([[0.0, 0.0]]), torch.tensor([1.0])
    loss = a3c_loss(logits, values, torch.tensor([1]), torch.tensor([3.0]))
    expected = np.log(2) * 2.0 - 0.01 * np.log(2) + 0.5 * 2.0 ** 2
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert cartpole.build("a3c", 5, 0, "full", CPU).model.fc.out_features == A3C_SIZES["full"].hidden == 256
    with pytest.raises(ValueError):
        cartpole.build("resnet50", 5, 0, "test", CPU)


def test_an_epoch_is_a_fixed_block_of_frames_and_short_training_beats_random():
    task = cartpole.build("a3c", 5, 0, "test", CPU)
    assert task.eval_samples == 100
    assert task.train_samples == 10_000  # 250 updates of 8 learners x t_max 5
    assert cartpole.build("a3c", 64, 0, "test", CPU).train_samples == 10_240  # whole updates of 8 x 64
    untrained = task.evaluate()
    assert 8.0 <= untrained <= 500.0
    returns = []
    for _ in range(2):
        assert task.train_epoch() == 10_000
        returns.append(task.evaluate())
    assert all(0.0 < r <= 500.0 for r in returns)
    # A uniformly random policy on the same held-out seeds averages about 23 steps.
    rng = np.random.default_rng(0)
    envs = [gymnasium.make("CartPole-v1") for _ in range(cartpole.EVAL_EPISODES)]
    random_returns = []
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(int(rng.integers(2)))
            total, done = total + reward, terminated or truncated
        random_returns.append(total)
    assert max(returns) > 100.0 > 4 * np.mean(random_returns)
    # Deterministic given the seed on the CPU: a second run repeats the first epoch's result exactly.
    again = cartpole.build("a3c", 5, 0, "test", CPU)
    again.train_epoch()
    assert again.evaluate() == returns[0]


def test_latency_is_per_step_of_a_held_out_greedy_episode():
    task = cartpole.build("a3c", 5, 0, "test", CPU)
    steps = cartpole.episode_observations(task.model, 0, CPU)
    assert len(steps) == cartpole.play_greedy(task.model, [0], CPU)[0]  # one observation per rewarded step
    latency = task.latency_per_item_s()
    assert 0.0 < latency < 0.05
