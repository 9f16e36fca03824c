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
The network, loss and shared optimizer are in models/pytorch/a3c_model.py, the learners and their
processes in models/pytorch/a3c_workers.py.

One deliberate difference from a literal reading of Algorithm S3: the rollout acts under no_grad
(batch of 1 per frame) and the training pass re-evaluates the t_max stored observations in one
batch. The local parameters do not change during a rollout and the network has no dropout or
batch norm, so the gradient is the same; this is how batched A2C/A3C ports run (baselines a2c),
and `batch` (= t_max) is then the batch of the training convolution.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from tbd.core.errors import UsageError
from tbd.models.base import Workload

# The agent's parts (models/pytorch/a3c_model.py) are public names of the workload's module too.
from tbd.models.pytorch.a3c_model import ActorCritic, SharedRMSprop, a3c_loss, n_step_returns  # noqa: F401
from tbd.models.pytorch.a3c_workers import A3C
from tbd.models.pytorch.synthetic import POOL_SIZE, check_build_args
from tbd.models.specs import A3C_ACTIONS as ACTIONS
from tbd.models.specs import A3C_SIZES as SIZES
from tbd.models.specs import A3C_STACK as STACK

# What the model is (sizes, loss weights, optimizer settings) is framework-neutral: one copy, models/specs.py.
from tbd.models.specs import A3CArch as Arch  # noqa: F401 - the module's public names

TEST_WORKERS = 2


def default_workers(size: str) -> int:
    """Actor-learner processes when `workers` is not given: 2 at test size, else min(4, CPU count)."""
    return TEST_WORKERS if size == "test" else min(4, os.cpu_count() or 1)


def build(batch: int, device: "torch.device | str", size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE, workers: int | None = None,
          parallel: Callable[[torch.nn.Module], torch.nn.Module] | None = None) -> Workload:
    """A3C training workload: this process is one actor-learner, `workers - 1` more run in the background.

    Args:
        batch: t_max, frames per update of one learner (the paper uses 5 or 20).
        device: where the shared model, optimizer statistics and rollout buffers live.
        size: "full" (the paper's network on 4x84x84) or "test" (same layers, 4x42x42, narrower).
        seed: fixes the weights, and each learner's environment and action draws.
        pool_size: rollout buffers (uint8 [t_max + 1, 4, side, side]) on the device, cycled through.
        workers: actor-learner processes in all, this one included; None means default_workers(size).
        parallel: must be None: A3C's learners are asynchronous (Hogwild) by design, so
            synchronous data-parallel training (DistributedDataParallel) does not apply.
    Returns:
        Workload whose step() is one update of this process's learner; throughput counts the frames
        of all workers (samples_counter); close() stops the background workers.
    """
    check_build_args(batch, size, tuple(SIZES), pool_size)
    if parallel is not None:
        raise UsageError("a3c trains with its own asynchronous worker processes; multi-process data parallel "
                         "does not apply", hint="run a3c without --nproc-per-node")
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
