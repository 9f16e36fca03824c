"""The A3C agent in PyTorch: the actor-critic network and its init, n-step returns, the loss, and
the RMSProp whose statistics every actor-learner shares (models/pytorch/a3c.py has the sources).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from tbd.core.errors import UsageError
from tbd.models.specs import A3C_ACTIONS as ACTIONS
from tbd.models.specs import A3C_ALPHA as ALPHA
from tbd.models.specs import A3C_ENTROPY_BETA as ENTROPY_BETA
from tbd.models.specs import A3C_EPS as EPS
from tbd.models.specs import A3C_GAMMA as GAMMA
from tbd.models.specs import A3C_LR as LR
from tbd.models.specs import A3C_STACK as STACK
from tbd.models.specs import A3C_VALUE_COEF as VALUE_COEF
from tbd.models.specs import A3CArch as Arch


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


def init_weights(model: nn.Module, generator: torch.Generator) -> None:
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

