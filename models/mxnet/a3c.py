"""A3C's actor-critic on a synthetic Pong-like game, in MXNet Gluon, with its environments run as one batch.

The network, losses and optimizer are those of models/pytorch/a3c.py (Mnih et al., "Asynchronous
Methods for Deep Reinforcement Learning", ICML 2016; see its docstring): 4 stacked 84x84 frames,
conv 16 8x8/4, conv 32 4x4/2, fc 256 (ReLU after each), a 6-way policy and a value output, 677,943
trainable parameters; weights and biases U(+-1/sqrt(fan_in)) (Torch7's default, as PyTorch's
port); n-step returns with gamma 0.99, entropy bonus 0.01, value loss x 0.5, summed over the
rollout; RMSProp with alpha 0.99, eps 0.1, lr 7e-4. The environment is models.atari_env.

How it runs — the MXNet reference's way, not the paper's processes: MXNet's A3C example
(apache/mxnet example/reinforcement-learning/a3c/a3c.py, by Junyuan Xie) runs `batch_size`
environments in ONE process, synchronously: every frame one batched forward pass picks the
actions of all of them, after t_max frames one update learns from all their rollouts (its README:
"we use `batch_size` threads for each worker instead of the original 1 thread"). MXNet has no
Hogwild processes over shared-memory NDArrays, so this port does the same:
- `batch` = environments (PaddleBallEnv instances) stepped together; every step() acts t_max
  frames in each (one forward pass of batch observations per frame, actions sampled on the host),
  bootstraps from V(s_t_max), then one training pass over the t_max x batch stored observations
  and one RMSProp update. Throughput = frames of all environments: samples_per_step = batch x
  t_max frames per step() (no samples_counter: everything happens inside step()).
- This differs from PyTorch's `batch`, which is t_max (frames per update of one learner, the
  training batch of one process among `workers`): here the batch dimension is the environments
  and t_max is fixed (T_MAX = 5, the paper's Atari setting, Section 8), so the training pass sees
  t_max x batch frames and the acting pass batch frames.
- The gradient is that of the PyTorch loss summed over all environments and scaled by 1 / batch
  (trainer.step(batch)): the mean of the environments' A3C gradients, i.e. the synchronous
  (A2C-style) average of `batch` learners' updates, applied once.

The network is hybridized with the default flags (static_alloc=False, static_shape=False): it
alternates between two input shapes, [batch, ...] when acting and [t_max x batch, ...] when
learning, so one static shape cannot hold.

RMSProp: gluon.Trainer "rmsprop" with centered=False, gamma1 = 0.99 (alpha), epsilon = 0.1:
MXNet's rmsprop_update is n = gamma1 n + (1 - gamma1) g^2, w -= lr g / sqrt(n + epsilon), epsilon
inside the square root: the same formula as the PyTorch port's SharedRMSprop (the paper's eq. 9);
the only difference is that the statistics are one process's, not shared between processes.
"""

from __future__ import annotations

import itertools
import math

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

from tbd.core.errors import UsageError
from tbd.models.atari_env import PaddleBallEnv
from tbd.models.base import Workload
from tbd.models.host_data.synthetic import POOL_SIZE, check_build_args
from tbd.models.specs import A3C_ACTIONS as ACTIONS
from tbd.models.specs import A3C_ALPHA as ALPHA
from tbd.models.specs import A3C_ENTROPY_BETA as ENTROPY_BETA
from tbd.models.specs import A3C_EPS as EPS
from tbd.models.specs import A3C_GAMMA as GAMMA
from tbd.models.specs import A3C_LR as LR
from tbd.models.specs import A3C_SIZES as SIZES
from tbd.models.specs import A3C_STACK as STACK
from tbd.models.specs import A3C_VALUE_COEF as VALUE_COEF

# What the model is (sizes, loss weights, optimizer settings) is framework-neutral: one copy, models/specs.py.
from tbd.models.specs import A3CArch as Arch  # noqa: F401 - the module's public names

T_MAX = 5  # frames per environment per update (Mnih et al. 2016, Section 8: t_max = 5)


def _conv_out(side: int, kernel: int, stride: int) -> int:
    return (side - kernel) // stride + 1  # no padding (as in the DQN network)


def _torch7_init(fan_in: int) -> mx.init.Uniform:
    """U(+-1/sqrt(fan_in)): Torch7's default for weights and biases, as the PyTorch port draws them."""
    return mx.init.Uniform(1.0 / math.sqrt(fan_in))


class ActorCritic(gluon.HybridBlock):
    """conv-ReLU, conv-ReLU, fc-ReLU, then policy logits [B, actions] and value [B]."""

    def __init__(self, arch: Arch, actions: int = ACTIONS, stack: int = STACK, **kwargs):
        super().__init__(**kwargs)
        (c1, k1, s1), (c2, k2, s2) = arch.conv1, arch.conv2
        side = _conv_out(_conv_out(arch.side, k1, s1), k2, s2)
        with self.name_scope():
            fan = stack * k1 * k1
            self.conv1 = nn.Conv2D(c1, k1, strides=s1, in_channels=stack, activation="relu",
                                   weight_initializer=_torch7_init(fan), bias_initializer=_torch7_init(fan))
            fan = c1 * k2 * k2
            self.conv2 = nn.Conv2D(c2, k2, strides=s2, in_channels=c1, activation="relu",
                                   weight_initializer=_torch7_init(fan), bias_initializer=_torch7_init(fan))
            fan = c2 * side * side
            self.fc = nn.Dense(arch.hidden, in_units=fan, activation="relu",
                               weight_initializer=_torch7_init(fan), bias_initializer=_torch7_init(fan))
            fan = arch.hidden
            self.policy = nn.Dense(actions, in_units=fan,
                                   weight_initializer=_torch7_init(fan), bias_initializer=_torch7_init(fan))
            self.value = nn.Dense(1, in_units=fan,
                                  weight_initializer=_torch7_init(fan), bias_initializer=_torch7_init(fan))

    def hybrid_forward(self, F, frames):
        """frames: uint8 [B, stack, side, side] -> (logits [B, actions], value [B])."""
        x = self.fc(self.conv2(self.conv1(F.cast(frames, "float32") / 255.0)))  # Dense flattens the maps
        return self.policy(x), F.reshape(self.value(x), shape=(-1,))


def a3c_loss(F, logits, values, actions, returns):
    """Policy loss with entropy bonus plus VALUE_COEF x value loss, summed over all frames (shape [1]).

    logits [N, A], values [N], actions [N] (float, as F.pick wants), returns [N]; N = t_max x batch.
    """
    log_probs = F.log_softmax(logits, axis=1)
    entropy = -F.sum(F.exp(log_probs) * log_probs, axis=1)
    chosen = F.pick(log_probs, actions, axis=1)
    advantage = returns - values
    policy_loss = -F.sum(chosen * F.stop_gradient(advantage)) - ENTROPY_BETA * F.sum(entropy)
    return policy_loss + VALUE_COEF * F.sum(F.square(advantage))


def n_step_returns(rewards: np.ndarray, ended: np.ndarray, bootstrap: np.ndarray, gamma: float = GAMMA) -> np.ndarray:
    """R_i = r_i + gamma (1 - ended_i) R_{i+1}, R_T = bootstrap (Algorithm S3), per environment.

    rewards, ended: [T, E] (float, bool); bootstrap: [E] values of the states after the rollout.
    Returns float32 [T, E].
    """
    returns = np.empty(rewards.shape, dtype=np.float32)
    running = np.asarray(bootstrap, dtype=np.float64)
    for i in range(len(rewards) - 1, -1, -1):
        running = rewards[i] + np.where(ended[i], 0.0, gamma * running)
        returns[i] = running
    return returns


class BatchedA3C:
    """`envs` environments stepped together by one network: t_max-frame rollouts, one update each."""

    def __init__(self, envs: int, t_max: int, device: mx.Context, size: str, seed: int, pool_size: int):
        self.arch, self.t_max, self.envs, self.device = SIZES[size], t_max, envs, device
        mx.random.seed(seed)
        self.model = ActorCritic(self.arch)
        self.model.initialize(ctx=device)
        self.model.hybridize()
        self.trainer = gluon.Trainer(self.model.collect_params(), "rmsprop",
                                     {"learning_rate": LR, "gamma1": ALPHA, "epsilon": EPS, "centered": False})
        env_seeds = np.random.SeedSequence([seed, 0]).spawn(envs)
        self.environments = [PaddleBallEnv(s, side=self.arch.side, stack=STACK) for s in env_seeds]
        self._rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
        side = self.arch.side
        #: uint8 [t_max + 1, envs, stack, side, side] on the device; the last slot holds the bootstrap states.
        self.buffers = [mx.nd.zeros((t_max + 1, envs, STACK, side, side), ctx=device, dtype="uint8")
                        for _ in range(pool_size)]
        self._buffers = itertools.cycle(self.buffers)

    def step(self) -> mx.nd.NDArray:
        """Act t_max frames in every environment, then one RMSProp update; returns the loss NDArray [1]."""
        return self.learn(*self.rollout())

    def learn(self, obs: mx.nd.NDArray, actions: mx.nd.NDArray, returns: mx.nd.NDArray) -> mx.nd.NDArray:
        """One RMSProp update from a rollout's t_max x envs frames; returns the loss NDArray [1] (no sync)."""
        with autograd.record():
            logits, values = self.model(obs[:self.t_max].reshape((-1,) + obs.shape[2:]))
            loss = a3c_loss(mx.nd, logits, values, actions, returns)
        loss.backward()
        self.trainer.step(self.envs)  # mean over environments of each one's summed A3C gradient
        return loss

    def rollout(self) -> tuple[mx.nd.NDArray, mx.nd.NDArray, mx.nd.NDArray]:
        """t_max frames in all environments: (observations buffer, actions [t_max x envs], returns [t_max x envs])."""
        obs = next(self._buffers)
        actions = np.empty((self.t_max, self.envs), dtype=np.float32)
        rewards = np.empty((self.t_max, self.envs), dtype=np.float32)
        ended = np.zeros((self.t_max, self.envs), dtype=bool)
        for t in range(self.t_max):
            probs, _ = self._act(obs, t)
            # Inverse-CDF sampling per environment on the host: the actions go to the host envs anyway.
            u = self._rng.random(self.envs) * probs.sum(axis=1)
            actions[t] = np.minimum((np.cumsum(probs, axis=1) < u[:, None]).sum(axis=1), ACTIONS - 1)
            for e, env in enumerate(self.environments):
                rewards[t, e], ended[t, e] = env.step(int(actions[t, e]))
        _, bootstrap = self._act(obs, self.t_max)
        returns = n_step_returns(rewards, ended, bootstrap)
        return (obs, mx.nd.array(actions.reshape(-1), ctx=self.device),
                mx.nd.array(returns.reshape(-1), ctx=self.device))

    def _act(self, obs: mx.nd.NDArray, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Store every environment's observation in slot t; one batched forward: (probabilities [E, A], values [E])."""
        obs[t] = np.stack([env.observation for env in self.environments])
        logits, values = self.model(obs[t])
        out = mx.nd.concat(mx.nd.softmax(logits, axis=1), values.expand_dims(1), dim=1).asnumpy().astype(np.float64)
        return out[:, :-1], out[:, -1]


def build(batch: int, device: mx.Context, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE, t_max: int = T_MAX) -> Workload:
    """A3C training workload, MXNet style: `batch` environments acted on and learned from together.

    Args:
        batch: environments stepped together (the batch of every acting forward pass).
        device: mx.Context holding the model, RMSProp statistics and observation buffers.
        size: "full" (the paper's network on 4x84x84) or "test" (same layers, 4x42x42, narrower).
        seed: fixes the weights (mx.random.seed), each environment's serves and the action draws.
        pool_size: observation buffers (uint8 [t_max + 1, batch, 4, side, side]) cycled through.
        t_max: frames per environment per update.
    Returns:
        Workload whose step() acts t_max frames in all environments and makes one update, returning
        the loss NDArray; samples_per_step = batch x t_max frames.
    """
    check_build_args(batch, size, tuple(SIZES), pool_size)
    if not isinstance(t_max, int) or isinstance(t_max, bool) or t_max < 1:
        raise UsageError(f"t_max must be an integer >= 1, got {t_max!r}")
    trainer = BatchedA3C(batch, t_max, device, size, seed, pool_size)
    a = trainer.arch
    return Workload(
        name="a3c",
        step=trainer.step,
        samples_per_step=float(batch * t_max),
        throughput_unit="frames/s",
        model=trainer.model,
        optimizer=trainer.trainer,
        inputs=lambda: list(trainer.buffers),
        description=(f"A3C feed-forward actor-critic (Mnih et al. 2016; {size}: {STACK}x{a.side}x{a.side} frames, "
                     f"conv {a.conv1} conv {a.conv2} fc {a.hidden}, {ACTIONS} actions), MXNet Gluon, RMSProp, "
                     f"{batch} environments stepped as one batch (MXNet's A3C example), t_max {t_max}, "
                     f"synthetic Pong-like game"),
    )
