"""A3C: network size, the Pong-like environment, the loss and optimizer, and the worker processes."""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from tbd.core.errors import UsageError
from tbd.models.atari_env import ACTIONS, BACKGROUND, OPPONENT, PLAYER, WHITE, PaddleBallEnv
from tbd.models.base import Workload
from tbd.models.pytorch import a3c


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One intra-op thread, as each A3C actor-learner uses: batch-1 acting ops gain nothing from more,
    and on a busy 2-core machine OpenMP barriers across threads make them many times slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _param_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _wait_for(condition, timeout_s: float = 60.0) -> bool:
    """Poll `condition` until true or the timeout passes (spawned workers import torch first)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


# --- Network --------------------------------------------------------------------------------

def test_full_network_parameter_count_closed_form():
    # Mnih et al. 2016, Section 8: conv 16 8x8 s4 -> conv 32 4x4 s2 -> fc 256 -> policy (6) + value,
    # on 4x84x84 frames. Spatial sizes: (84 - 8) / 4 + 1 = 20, (20 - 4) / 2 + 1 = 9.
    conv1 = 16 * 4 * 8 * 8 + 16
    conv2 = 32 * 16 * 4 * 4 + 32
    fc = (32 * 9 * 9) * 256 + 256
    policy = 256 * 6 + 6  # Pong's 6 actions
    value = 256 * 1 + 1
    with torch.device("meta"):
        model = a3c.ActorCritic(a3c.SIZES["full"])
    assert _param_count(model) == conv1 + conv2 + fc + policy + value == 677_943


def test_network_output_shapes_both_sizes():
    for size in ("full", "test"):
        arch = a3c.SIZES[size]
        logits, value = a3c.ActorCritic(arch)(torch.rand(3, 4, arch.side, arch.side))
        assert logits.shape == (3, len(ACTIONS)) and value.shape == (3,)


# --- Environment (the synthetic data) -------------------------------------------------------

def test_frames_look_like_preprocessed_atari():
    env = PaddleBallEnv(seed=0)
    obs = env.observation
    # DQN/A3C preprocessing: 4 stacked grey 84x84 uint8 frames.
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    rng = np.random.default_rng(0)
    previous = obs.copy()
    for _ in range(50):
        env.step(int(rng.integers(len(ACTIONS))))
        # Stacking: the oldest frame drops out, the rest shift by one.
        assert np.array_equal(env.observation[:-1], previous[1:])
        previous = env.observation.copy()
    assert set(np.unique(previous[-1])) == {BACKGROUND, OPPONENT, PLAYER, WHITE}


def test_rewards_and_episode_ends_follow_pong():
    env = PaddleBallEnv(seed=1, side=42, points_to_win=3)
    rng = np.random.default_rng(1)
    rewards, points = [], [0, 0]
    for _ in range(5000):
        reward, ended = env.step(int(rng.integers(len(ACTIONS))))
        rewards.append(reward)
        if reward:
            points[reward > 0] += 1
        if ended:
            # Ends exactly when one side reaches points_to_win; the env has reset to 0:0.
            assert max(points) == 3 and env.score == [0, 0]
            points = [0, 0]
    assert set(rewards) == {-1.0, 0.0, 1.0}
    assert env.episodes >= 2


def test_environment_is_deterministic_per_seed_and_frames_depend_on_actions():
    def frames(seed: int, actions: list[int]) -> np.ndarray:
        env = PaddleBallEnv(seed=seed, side=42)
        out = []
        for a in actions:
            env.step(a)
            out.append(env.observation.copy())
        return np.stack(out)

    ups, downs = [2] * 40, [3] * 40  # RIGHT moves the paddle up, LEFT down (ALE's Pong)
    assert np.array_equal(frames(5, ups), frames(5, ups))
    assert not np.array_equal(frames(5, ups), frames(5, downs))
    assert not np.array_equal(frames(5, ups), frames(6, ups))  # another seed serves differently


def test_environment_step_is_cheap():
    env = PaddleBallEnv(seed=0)
    start = time.perf_counter()
    for i in range(2000):
        env.step(i % len(ACTIONS))
    assert (time.perf_counter() - start) / 2000 < 1e-3  # well under a millisecond a frame


# --- Loss and optimizer ----------------------------------------------------------------------

def test_n_step_returns_by_hand():
    g = 0.99
    r2 = 0 + g * 2.0  # bootstrapped from V(s_3) = 2
    r1 = 1 + g * r2
    r0 = 0 + g * r1
    got = a3c.n_step_returns(np.array([0, 1, 0], np.float32), np.zeros(3, bool), 2.0)
    np.testing.assert_allclose(got, [r0, r1, r2], rtol=1e-6)
    # An episode ending at step 1 cuts the return there: nothing flows back across the reset.
    got = a3c.n_step_returns(np.array([0, -1, 0], np.float32), np.array([False, True, False]), 2.0)
    np.testing.assert_allclose(got, [g * -1, -1, g * 2.0], rtol=1e-6)


def test_shared_rmsprop_follows_equation_9():
    p = torch.nn.Parameter(torch.tensor([1.0]))
    opt = a3c.SharedRMSprop([p], lr=7e-4, alpha=0.99, eps=0.1).share_memory()
    assert opt.square_avgs()[0].is_shared()
    p.grad = torch.tensor([2.0])
    opt.step()
    g = (1 - 0.99) * 2.0 ** 2
    assert p.item() == pytest.approx(1.0 - 7e-4 * 2.0 / math.sqrt(g + 0.1))
    assert opt.square_avgs()[0].item() == pytest.approx(g)


def test_loss_by_hand_on_two_steps():
    logits = torch.zeros(2, 2)  # uniform policy over 2 actions: log pi = log 0.5, entropy log 2
    values = torch.tensor([1.0, 0.5])
    returns = torch.tensor([2.0, 0.0])
    loss = a3c.a3c_loss(logits, values, torch.tensor([0, 1]), returns)
    advantage = [2.0 - 1.0, 0.0 - 0.5]
    policy = -(math.log(0.5) * advantage[0] + math.log(0.5) * advantage[1]) - 0.01 * 2 * math.log(2)
    value = 0.5 * (advantage[0] ** 2 + advantage[1] ** 2)
    assert loss.item() == pytest.approx(policy + value)


# --- Training in this process ----------------------------------------------------------------

def test_updates_on_a_fixed_rollout_lower_the_loss():
    # The fixed batch of an RL workload: one rollout, learned from repeatedly (pool_size=1).
    # Its returns are set to 1 (every action paid off): then minimising the loss has a clear
    # direction, V -> 1 and pi(a_i) -> 1, while the rollout's own bootstrapped returns are tiny
    # (no point is scored in 20 frames) and leave only the entropy term to move.
    trainer = a3c.A3C(20, torch.device("cpu"), "test", seed=0, workers=1, pool_size=1)
    learner = trainer.learner
    learner.sync()
    rollout = dataclasses.replace(learner.rollout(), returns=torch.ones(20))
    losses = []
    for _ in range(8):
        learner.sync()
        losses.append(float(learner.learn(rollout)))
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


def test_single_worker_workload_steps():
    work = a3c.build(5, "cpu", "test", seed=0, workers=1, pool_size=2)
    try:
        assert isinstance(work, Workload)
        assert (work.name, work.samples_per_step, work.throughput_unit) == ("a3c", 5, "frames/s")
        before = [p.detach().clone() for p in work.model.parameters()]
        for _ in range(4):
            loss = work.step()
            assert isinstance(loss, torch.Tensor) and loss.ndim == 0 and math.isfinite(float(loss))
        assert work.samples_counter() == 4 * 5
        assert any(not torch.equal(a, b) for a, b in zip(before, work.model.parameters()))
        buffers = work.inputs()
        assert len(buffers) == 2 and all(b.shape == (5 + 1, 4, 42, 42) and b.dtype == torch.uint8 for b in buffers)
    finally:
        work.close()


def test_same_seed_same_workload():
    def first_step(seed: int):
        work = a3c.build(5, "cpu", "test", seed=seed, workers=1, pool_size=1)
        params = [p.detach().clone() for p in work.model.parameters()]
        loss = float(work.step())
        return params, loss, work.inputs()[0].clone()

    (pa, la, ia), (pb, lb, ib), (pc, _, ic) = first_step(3), first_step(3), first_step(4)
    assert all(torch.equal(x, y) for x, y in zip(pa, pb, strict=True)) and la == lb and torch.equal(ia, ib)
    assert not all(torch.equal(x, y) for x, y in zip(pa, pc)) and not torch.equal(ia, ic)


@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": None}, {"size": "huge"}, {"pool_size": 0},
                                    {"workers": 0}, {"workers": 1.5}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 5, "device": "cpu", "size": "test", "workers": 1, **kwargs}
    with pytest.raises(UsageError):
        a3c.build(**args)


def test_default_worker_count():
    assert a3c.default_workers("test") == 2
    assert a3c.default_workers("full") == min(4, os.cpu_count())


# --- Worker processes -------------------------------------------------------------------------

def test_asynchronous_workers_counter_sigint_and_close():
    t_max = 5
    trainer = a3c.A3C(t_max, torch.device("cpu"), "test", seed=0, workers=2, pool_size=1)
    children = [p for p in mp.active_children() if p.name.startswith("a3c-worker")]
    try:
        assert len(children) == 1  # workers - 1 background processes
        # The parent handles Ctrl-C; a background worker ignores SIGINT.
        os.kill(children[0].pid, signal.SIGINT)

        # 1. Only the background worker runs (this process never steps): the shared weights change.
        before = [p.detach().clone() for p in trainer.model.parameters()]
        assert trainer.frames() == 0
        trainer.start_background()
        assert _wait_for(lambda: trainer.frames() >= 2 * t_max)
        assert _wait_for(lambda: any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters())))
        assert children[0].is_alive()

        # 2. The counter holds the frames of all workers: this process's and the background one's.
        start = trainer.frames()
        steps = 3
        for _ in range(steps):
            trainer.step()
        assert _wait_for(lambda: trainer.frames() > start + steps * t_max)
        assert trainer.frames() % t_max == 0  # whole updates only
    finally:
        trainer.close()
    # 3. close() leaves no child process behind.
    assert not children[0].is_alive() and children[0].exitcode == 0
    assert mp.active_children() == []
