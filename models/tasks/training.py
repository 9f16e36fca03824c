"""What every task's run does the same way: one optimizer step from a loss, and waiting for the device."""

from __future__ import annotations

import torch


def descend(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """One step of `optimizer` down the gradient of `loss` (gradients cleared first, as None)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def synchronize(device: torch.device) -> None:
    """Wait for `device`'s queued kernels, so that a timestamp or energy reading after it bounds finished work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
