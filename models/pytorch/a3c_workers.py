"""The A3C actor-learners and their processes: one in the process that calls step(), the rest in
background processes (torch.multiprocessing, "spawn") on the shared model, until close().
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
from torch.nn import functional as F

from tbd.core.errors import WorkloadError
from tbd.models.atari_env import PaddleBallEnv
from tbd.models.pytorch.a3c_model import ActorCritic, SharedRMSprop, a3c_loss, init_weights, n_step_returns
from tbd.models.specs import A3C_ACTIONS as ACTIONS
from tbd.models.specs import A3C_SIZES as SIZES
from tbd.models.specs import A3C_STACK as STACK
from tbd.models.specs import A3CArch as Arch


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
        init_weights(self.model, generator)
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

