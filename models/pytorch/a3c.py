"""A3C (asynchronous advantage actor-critic) on a synthetic Pong-like game, in PyTorch.

Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", ICML 2016 (arXiv:1602.01783):
- Network (Section 8, "Experimental setup", the feed-forward agent; it is the DQN network of Mnih
  et al., NIPS 2013 workshop, "Playing Atari with Deep Reinforcement Learning"): input 4 stacked
  84x84 grey frames; conv 16 filters 8x8 stride 4, ReLU; conv 32 filters 4x4 stride 2, ReLU; fully
  connected 256, ReLU; a softmax policy (one output per action) and a linear value output.
  677,943 parameters for Pong's 6 actions (written out term by term in tests/models/pytorch/test_pytorch_a3c.py).
- Algorithm S3 (supplementary): each actor-learner syncs its own copy of the parameters from the
  shared ones, acts for t_max steps (or to the episode's end), computes n-step returns
  R = r_i + gamma R bootstrapped from V(s_t_max), accumulates the gradients of the policy loss
  -log pi(a_i|s_i)(R_i - V(s_i)) - beta H(pi(s_i)) (entropy bonus beta = 0.01, Section 8) and of the
  value loss (R_i - V(s_i))^2, and applies them to the shared parameters without locks (Hogwild).
- Optimizer (Section 4 and 8): RMSProp with statistics g shared between the learners,
  g = alpha g + (1 - alpha) dtheta^2, theta -= lr dtheta / sqrt(g + eps) (their eq. 9), alpha 0.99;
  lr 7e-4 and eps 0.1 are the values of the widely used PyTorch/baselines ports (OpenAI baselines
  a2c, ikostrikov/pytorch-a3c), the paper samples lr per game.
- Value loss coefficient 0.5 and gamma 0.99 as in those ports (ikostrikov/pytorch-a3c train.py).

Processes (torch.multiprocessing, "spawn"): the process that calls step() is one actor-learner;
`workers - 1` background processes run the same loop on the shared model from the first step()
until close(). Every learner adds its frames to one shared counter, which is the workload's
throughput (frames/s of all workers). The environment is models.atari_env (no gym).

One deliberate difference from a literal reading of Algorithm S3: the rollout acts under no_grad
(batch of 1 per frame) and the training pass re-evaluates the t_max stored observations in one
batch. The local parameters do not change during a rollout and the network has no dropout or
batch norm, so the gradient is the same; this is how batched A2C/A3C ports run (baselines a2c),
and `batch` (= t_max) is then the batch of the training convolution.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.multiprocessing as mp
from tbd.models.atari_env import PaddleBallEnv
from tbd.models.base import Workload
from tbd.models.pytorch.synthetic import POOL_SIZE, check_build_args
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
from torch import nn
from torch.nn import functional as F

from tbd.errors import UsageError, WorkloadError

TEST_WORKERS = 2


def _conv_out(side: int, kernel: int, stride: int) -> int:
    return (side - kernel) // stride + 1  # no padding (as in the DQN network)


class ActorCritic(nn.Module):
    """conv-ReLU, conv-ReLU, fc-ReLU, then policy logits [B, actions] and value [B]."""

    def __init__(self, arch: Arch, actions: int = ACTIONS, stack: int = STACK):
        super().__init__()
        (c1, k1, s1), (c2, k2, s2) = arch.conv1, arch.conv2
        side = _conv_out(_conv_out(arch.side, k1, s1), k2, s2)
        self.conv1 = nn.Conv2d(stack, c1, k1, stride=s1)
        self.conv2 = nn.Conv2d(c1, c2, k2, stride=s2)
        self.fc = nn.Linear(c2 * side * side, arch.hidden)
        self.policy = nn.Linear(arch.hidden, actions)
        self.value = nn.Linear(arch.hidden, 1)

    def forward(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """frames: float [B, stack, side, side] in [0, 1] -> (logits [B, actions], value [B])."""
        x = F.relu(self.conv1(frames))
        x = F.relu(self.conv2(x))
        x = F.relu(self.fc(x.flatten(1)))
        return self.policy(x), self.value(x).squeeze(1)


def _init_weights(model: nn.Module, generator: torch.Generator) -> None:
    """Torch7's default init, which DeepMind's Lua DQN code used: U(+-1/sqrt(fan_in)), drawn from `generator`."""
    for module in model.modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            bound = 1 / module.weight[0].numel() ** 0.5  # fan_in = in_channels x kernel area (or in_features)
            nn.init.uniform_(module.weight, -bound, bound, generator=generator)
            nn.init.uniform_(module.bias, -bound, bound, generator=generator)


class SharedRMSprop(torch.optim.Optimizer):
    """RMSProp with its statistics in tensors created up front, so they can be shared between processes.

    g = alpha g + (1 - alpha) grad^2; p -= lr grad / sqrt(g + eps) — Mnih et al. 2016, eq. 9 (eps
    inside the square root, unlike torch.optim.RMSprop). `square_avgs` (one per parameter, in
    order) attaches existing (shared) statistics; otherwise they start at zero.
    """

    def __init__(self, params, lr: float = LR, alpha: float = ALPHA, eps: float = EPS,
                 square_avgs: list[torch.Tensor] | None = None):
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps})
        ps = [p for group in self.param_groups for p in group["params"]]
        if square_avgs is not None and len(square_avgs) != len(ps):
            raise UsageError(f"{len(square_avgs)} RMSProp statistics given for {len(ps)} parameters")
        for i, p in enumerate(ps):
            self.state[p]["square_avg"] = square_avgs[i] if square_avgs is not None else torch.zeros_like(p)

    def share_memory(self) -> "SharedRMSprop":
        """Move the statistics into shared memory (a no-op for CUDA tensors, shared by IPC)."""
        for state in self.state.values():
            state["square_avg"].share_memory_()
        return self

    def square_avgs(self) -> list[torch.Tensor]:
        """The statistics, one per parameter, in parameter order."""
        return [self.state[p]["square_avg"] for group in self.param_groups for p in group["params"]]

    @torch.no_grad()
    def step(self, closure=None):  # noqa: D102 - the update is in the class docstring
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                square_avg = self.state[p]["square_avg"]
                square_avg.mul_(group["alpha"]).addcmul_(p.grad, p.grad, value=1 - group["alpha"])
                p.addcdiv_(p.grad, square_avg.add(group["eps"]).sqrt_(), value=-group["lr"])


def n_step_returns(rewards: np.ndarray, ended: np.ndarray, bootstrap: float, gamma: float = GAMMA) -> np.ndarray:
    """R_i = r_i + gamma (1 - ended_i) R_{i+1}, R_T = bootstrap (Algorithm S3); float32 [T]."""
    returns = np.empty(len(rewards), dtype=np.float32)
    running = bootstrap
    for i in range(len(rewards) - 1, -1, -1):
        running = rewards[i] + (0.0 if ended[i] else gamma * running)
        returns[i] = running
    return returns


def a3c_loss(logits: torch.Tensor, values: torch.Tensor, actions: torch.Tensor,
             returns: torch.Tensor) -> torch.Tensor:
    """Policy loss with entropy bonus plus VALUE_COEF x value loss, summed over the rollout (scalar).

    logits [T, A], values [T], actions int64 [T], returns [T]. Sums, not means: Algorithm S3
    accumulates the gradient over the t_max steps.
    """
    log_probs = F.log_softmax(logits, dim=1)
    entropy = -(log_probs.exp() * log_probs).sum(1)
    chosen = log_probs.gather(1, actions.unsqueeze(1)).squeeze(1)
    advantage = returns - values
    policy_loss = -(chosen * advantage.detach()).sum() - ENTROPY_BETA * entropy.sum()
    return policy_loss + VALUE_COEF * advantage.pow(2).sum()


@dataclass(frozen=True)


class Rollout:
    """t_max steps of one learner: observations on the device and what the loss needs."""

    obs: torch.Tensor  # uint8 [t_max + 1, stack, side, side], the last slot the bootstrap state
    actions: torch.Tensor  # int64 [t_max], on the device
    returns: torch.Tensor  # float32 [t_max] n-step returns, on the device


class ActorLearner:
    """One A3C actor-learner: its environment, local parameter copy and rollout buffers.

    `buffers`: uint8 [t_max + 1, stack, side, side] tensors on the device (the last slot holds the
    bootstrap state), cycled through one per update.
    """

    def __init__(self, shared: ActorCritic, optimizer: SharedRMSprop, arch: Arch, t_max: int, device: torch.device,
                 seeds: np.random.SeedSequence, frames, buffers: list[torch.Tensor]):
        env_seed, act_seed = seeds.spawn(2)
        self.shared, self.optimizer, self.t_max, self.device, self.frames = shared, optimizer, t_max, device, frames
        with torch.device("meta"):  # shapes only: update() loads the shared weights before every rollout
            self.local = ActorCritic(arch)
        self.local.to_empty(device=device)
        self.env = PaddleBallEnv(env_seed, side=arch.side, stack=STACK)
        self._rng = np.random.default_rng(act_seed)
        self._buffers = itertools.cycle(buffers)

    def update(self) -> torch.Tensor:
        """Sync, act t_max frames, one gradient step on the shared model; returns the loss (detached)."""
        self.sync()
        loss = self.learn(self.rollout())
        with self.frames.get_lock():
            self.frames.value += self.t_max
        return loss

    def sync(self) -> None:
        """Clear the gradients and copy the shared weights into the local copy (theta' = theta, Algorithm S3)."""
        self.optimizer.zero_grad(set_to_none=True)
        self.local.zero_grad(set_to_none=True)
        self.local.load_state_dict(self.shared.state_dict())

    def learn(self, rollout: Rollout) -> torch.Tensor:
        """Gradient of the loss over `rollout` on the local copy, applied to the shared model; the loss (detached)."""
        logits, values = self.local(rollout.obs[:self.t_max].float().div_(255))
        loss = a3c_loss(logits, values, rollout.actions, rollout.returns)
        loss.backward()
        # Hand the local gradients to the shared parameters: .grad is per process, the weights are shared.
        for shared_p, local_p in zip(self.shared.parameters(), self.local.parameters()):
            shared_p.grad = local_p.grad
        self.optimizer.step()  # Hogwild: no lock around the shared update
        return loss.detach()

    @torch.no_grad()
    def rollout(self) -> Rollout:
        """Act t_max frames with the local copy, storing the observations in the next buffer."""
        obs = next(self._buffers)
        actions = np.empty(self.t_max, dtype=np.int64)
        rewards = np.empty(self.t_max, dtype=np.float32)
        ended = np.zeros(self.t_max, dtype=bool)
        for t in range(self.t_max):
            probs, _ = self._act(obs, t)
            # Inverse-CDF sampling on the host: the action has to reach the host for the env anyway.
            actions[t] = min(int(np.searchsorted(np.cumsum(probs), self._rng.random() * probs.sum())), ACTIONS - 1)
            rewards[t], ended[t] = self.env.step(int(actions[t]))
        bootstrap = 0.0 if ended[-1] else self._act(obs, self.t_max)[1]
        returns = n_step_returns(rewards, ended, bootstrap)
        return Rollout(obs, torch.from_numpy(actions).to(self.device), torch.from_numpy(returns).to(self.device))

    def _act(self, obs: torch.Tensor, t: int) -> tuple[np.ndarray, float]:
        """Store the current observation in slot t and evaluate it: (policy probabilities, value)."""
        obs[t].copy_(torch.from_numpy(self.env.observation))
        logits, value = self.local(obs[t:t + 1].float().div_(255))
        out = torch.cat([F.softmax(logits[0], 0), value]).cpu().numpy().astype(np.float64)
        return out[:-1], float(out[-1])


@dataclass(frozen=True)


class _Job:
    """What a background worker needs besides the shared tensors (picklable for spawn)."""

    index: int
    arch: Arch
    t_max: int
    device: str
    seed: int
    parent_pid: int


def _background_worker(job: _Job, shared: ActorCritic, square_avgs: list[torch.Tensor], frames, ready, go,
                       stop) -> None:
    """Entry of a background worker process: say `ready`, wait for `go`, update until `stop` or the parent dies."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and calls close()
    os.dup2(2, 1)  # stdout is the runner's progress pipe: don't hold it open or write to it
    torch.set_num_threads(1)  # one thread per actor-learner, as the paper's CPU threads
    device = torch.device(job.device)
    optimizer = SharedRMSprop(shared.parameters(), square_avgs=square_avgs)
    buffers = [torch.empty((job.t_max + 1, STACK, job.arch.side, job.arch.side), dtype=torch.uint8, device=device)]
    learner = ActorLearner(shared, optimizer, job.arch, job.t_max, device,
                           np.random.SeedSequence([job.seed, job.index]), frames, buffers)

    def running() -> bool:
        return not stop.is_set() and os.getppid() == job.parent_pid  # an orphan stops by itself

    with ready.get_lock():
        ready.value += 1
    while not go.wait(0.2):
        if not running():
            return
    while running():
        learner.update()


class A3C:
    """The shared model and optimizer, the frame counter, this process's learner and the background workers."""

    def __init__(self, t_max: int, device: torch.device, size: str, seed: int, workers: int, pool_size: int,
                 startup_timeout_s: float = 300.0):
        self.arch, self.t_max, self.workers = SIZES[size], t_max, workers
        generator = torch.Generator().manual_seed(seed)
        self.model = ActorCritic(self.arch)
        _init_weights(self.model, generator)
        self.model.to(device).train().share_memory()
        self.optimizer = SharedRMSprop(self.model.parameters()).share_memory()
        ctx = mp.get_context("spawn")  # forking a process that ran OpenMP threads is unsafe
        self._frames, self._ready, self._go, self._stop = ctx.Value("q", 0), ctx.Value("i", 0), ctx.Event(), ctx.Event()
        side = self.arch.side
        self.buffers = [torch.zeros((t_max + 1, STACK, side, side), dtype=torch.uint8, device=device)
                        for _ in range(pool_size)]
        self.learner = ActorLearner(self.model, self.optimizer, self.arch, t_max, device,
                                     np.random.SeedSequence([seed, 0]), self._frames, self.buffers)
        self._processes = []
        try:
            for index in range(1, workers):
                job = _Job(index, self.arch, t_max, str(device), seed, os.getpid())
                proc = ctx.Process(target=_background_worker, daemon=True, name=f"a3c-worker-{index}",
                                   args=(job, self.model, self.optimizer.square_avgs(), self._frames,
                                         self._ready, self._go, self._stop))
                with _sigint_ignored():  # the child starts with SIGINT ignored, before its first line runs
                    proc.start()
                self._processes.append(proc)
            self._wait_ready(startup_timeout_s)
        except BaseException:
            self.close()
            raise

    def _wait_ready(self, timeout_s: float) -> None:
        """Block until every background worker has imported torch and built its learner, so the first
        step() already runs beside all of them (not a worker joining in the middle of the timing window)."""
        deadline = time.monotonic() + timeout_s
        while self._ready.value < len(self._processes):
            self._check_workers()
            if time.monotonic() > deadline:
                raise WorkloadError(f"A3C background workers not started after {timeout_s:.0f} s "
                                    f"({self._ready.value} of {len(self._processes)} ready)")
            time.sleep(0.01)

    def _check_workers(self) -> None:
        for proc in self._processes:
            if proc.exitcode is not None:
                raise WorkloadError(f"A3C background worker {proc.name} exited with code {proc.exitcode}")

    def start_background(self) -> None:
        """Let the background workers start updating (step() does it on its first call)."""
        self._go.set()

    def step(self) -> torch.Tensor:
        """One update of this process's learner (t_max frames); returns the loss tensor."""
        if not self._go.is_set():
            self._go.set()
        self._check_workers()  # a poll per process (waitpid, WNOHANG): microseconds
        return self.learner.update()

    def frames(self) -> float:
        """Frames processed so far by all workers, this process included."""
        return float(self._frames.value)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the background workers: set the stop flag, join, terminate any that did not stop."""
        self._stop.set()
        for proc in self._processes:
            proc.join(timeout_s)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout_s)
        self._processes = []


@contextlib.contextmanager


def _sigint_ignored():
    """SIGINT ignored while a child is started, so it inherits SIG_IGN through exec (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal.signal works in the main thread only; the worker still ignores SIGINT itself
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def default_workers(size: str) -> int:
    """Actor-learner processes when `workers` is not given: 2 at test size, else min(4, CPU count)."""
    return TEST_WORKERS if size == "test" else min(4, os.cpu_count() or 1)


def build(batch: int, device: "torch.device | str", size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE, workers: int | None = None) -> Workload:
    """A3C training workload: this process is one actor-learner, `workers - 1` more run in the background.

    Args:
        batch: t_max, frames per update of one learner (the paper uses 5 or 20).
        device: where the shared model, optimizer statistics and rollout buffers live.
        size: "full" (the paper's network on 4x84x84) or "test" (same layers, 4x42x42, narrower).
        seed: fixes the weights, and each learner's environment and action draws.
        pool_size: rollout buffers (uint8 [t_max + 1, 4, side, side]) on the device, cycled through.
        workers: actor-learner processes in all, this one included; None means default_workers(size).
    Returns:
        Workload whose step() is one update of this process's learner; throughput counts the frames
        of all workers (samples_counter); close() stops the background workers.
    """
    check_build_args(batch, size, tuple(SIZES), pool_size)
    if workers is None:
        workers = default_workers(size)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise UsageError(f"workers must be an integer >= 1, got {workers!r}")
    trainer = A3C(batch, torch.device(device), size, seed, workers, pool_size)
    a = trainer.arch
    return Workload(
        name="a3c",
        step=trainer.step,
        samples_per_step=batch,
        throughput_unit="frames/s",
        model=trainer.model,
        optimizer=trainer.optimizer,
        inputs=lambda: list(trainer.buffers),
        description=(f"A3C feed-forward actor-critic (Mnih et al. 2016; {size}: {STACK}x{a.side}x{a.side} frames, "
                     f"conv {a.conv1} conv {a.conv2} fc {a.hidden}, {ACTIONS} actions), shared RMSProp, "
                     f"{workers} worker processes, t_max {batch}, synthetic Pong-like game"),
        samples_counter=trainer.frames,
        close=trainer.close,
    )
