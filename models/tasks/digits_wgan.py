"""Generating scikit-learn's handwritten digits with the suite's WGAN-GP, scored by a Fréchet distance, in PyTorch.

The data is the training split of the digits task (models/tasks/digits.py `load_split`: scikit-learn's
bundled 8x8 digits, fixed 80/20 stratified split, 1,437 images to train on, 360 held out), upsampled
bilinearly to the side the generator draws (32x32 at "test", 64x64 at "full"), in [-1, 1] on the three
channels the networks have (the generator's tanh range). The networks and the update rule are the
suite's (models/pytorch/wgan.py: the authors' gan_64x64.py ResNet generator and critic, gradient
penalty 10, Adam, CRITIC_ITERS critic updates per generator update, tflib's init), at WGAN_SIZES.
An epoch is one shuffled pass of the critic over the training split: each iteration takes
`n_critic` real batches, one per critic update, then one generator update.

The score is the Fréchet distance (FID's formula, computed by torchmetrics' FrechetInceptionDistance
with a custom feature extractor) between 1,000 generated digits and the 360 held-out digits, in the
64-dimensional penultimate layer of a small digits classifier in place of Inception-v3 (whose
ImageNet features neither ship offline nor suit 8x8 digits). That classifier is trained once per
process, on the CPU, on the training split only, from fixed seeds, so every run and device scores
in the same feature space; it classifies 97 % of the held-out digits right. Both real and generated
images reach it as the channel mean resampled to 16x16. Lower is better: the 1,437 training digits
themselves score 3.5 against the held-out ones, an untrained generator about 760, and at the
target (DEFAULT_TARGET) sample grids show recognizable digits of every class, by eye.

The generated set is fixed per run (noise drawn once from the run's seed) and made with the
generator's batch statistics, as gan_64x64.py samples (its batch norm always normalises by the
batch), in chunks of 250. There is no per-item latency: a generator has no held-out input to infer
on, and with batch statistics a sample drawn alone is not what the model makes, so
latency_per_item_s is None.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tbd.models.pytorch import wgan
from tbd.models.specs import WGAN_BETAS, WGAN_SIZES
from tbd.models.tasks.digits import load_split
from tbd.models.tasks.training import synchronize

#: The score's target: recognizable digits (checked by eye on sample grids), reached at test size in minutes.
DEFAULT_TARGET = 40.0
#: Adam's rate for both networks: 10x gan_64x64.py's 1e-4 (why: the comment in build).
LEARNING_RATE = 1e-3
GENERATED = 1000  # generated samples per evaluation
FEATURE_SIDE = 16  # the classifier's input side
FEATURES = 64  # the classifier's feature width (the Fréchet distance's space)
CLASSIFIER_SEED = 0
CLASSIFIER_EPOCHS = 10
CHUNK = 250  # samples per generator call in evaluate (batch statistics over each chunk)


class DigitFeatures(nn.Module):
    """Small CNN digits classifier; forward gives its penultimate features, `logits` the class scores.

    Takes images [N, C, H, W] in [-1, 1] (any C, H, W): channel mean, resampled to 16x16."""

    num_features = FEATURES  # torchmetrics reads the feature width from here

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 4 * 4, FEATURES), nn.ReLU())
        self.head = nn.Linear(FEATURES, 10)

    @staticmethod
    def prepare(images: torch.Tensor) -> torch.Tensor:
        x = images.float().mean(dim=1, keepdim=True)
        if x.shape[-1] != FEATURE_SIDE or x.shape[-2] != FEATURE_SIDE:
            x = F.interpolate(x, size=FEATURE_SIDE, mode="bilinear", align_corners=False, antialias=True)
        return x

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.body(self.prepare(images))

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.forward(images))


@functools.lru_cache(maxsize=1)
def feature_extractor() -> DigitFeatures:
    """The classifier behind the score, trained on the digits' training split (CPU, fixed seeds, 30 epochs of
    Adam at batch 64): deterministic, so every run measures in the same space. Cached per process; callers copy."""
    train_x, train_y, _, _ = load_split()
    train_x = 2 * train_x - 1
    gen = torch.Generator().manual_seed(CLASSIFIER_SEED)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(CLASSIFIER_SEED)
        net = DigitFeatures()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    net.train()
    for _ in range(CLASSIFIER_EPOCHS):
        order = torch.randperm(len(train_y), generator=gen)
        for start in range(0, len(order), 32):
            idx = order[start:start + 32]
            loss = F.cross_entropy(net.logits(train_x[idx]), train_y[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return net.eval().requires_grad_(False)


def fid_metric(device: torch.device):
    """torchmetrics' FrechetInceptionDistance over the digits classifier's features, real features kept on reset."""
    from torchmetrics.image.fid import FrechetInceptionDistance

    return FrechetInceptionDistance(feature=copy.deepcopy(feature_extractor()), reset_real_features=False,
                                    normalize=False).to(device)


def digits_at(images: torch.Tensor, side: int) -> torch.Tensor:
    """load_split's [N, 3, 32, 32] images in [0, 1] as the networks' [N, 3, side, side] in [-1, 1]."""
    if images.shape[-1] != side:
        images = F.interpolate(images, size=side, mode="bilinear", align_corners=False, antialias=side < 32)
    return 2 * images - 1


@dataclass
class TaskRun:
    """One run's networks, optimizers and data: `train_epoch` is one pass of the critic over the training split,
    `evaluate` the Fréchet distance of a fixed generated set to the held-out digits."""

    model: nn.ModuleDict  # {"generator", "critic"}, as the suite's workload
    optimizer: list[torch.optim.Optimizer]  # [critic's, generator's]
    update: Any  # wgan._train_step's closure: (reals, noises, alphas) -> critic loss
    train_x: torch.Tensor
    eval_noise: torch.Tensor
    fid: Any  # torchmetrics FrechetInceptionDistance, held-out features already in
    held_out: int
    batch: int
    n_critic: int
    noise: int
    generator: torch.Generator
    device: torch.device
    hyperparameters: dict[str, Any] = field(default_factory=dict)

    @property
    def generator_net(self) -> wgan.Generator:
        return self.model["generator"]

    @property
    def train_samples(self) -> int:
        return len(self.train_x)

    @property
    def samples_per_step(self) -> int:
        return self.batch * self.n_critic  # real images one iteration's critic updates take, as the workload counts

    @property
    def eval_samples(self) -> int:
        return self.held_out

    def train_epoch(self) -> int:
        """One shuffled pass over the training split, `n_critic` real batches per iteration; the samples trained.

        The noise and interpolation weights are drawn on the host from the run's generator (as the suite's
        workload), so a run is the same sequence of updates on every device."""
        order = torch.randperm(len(self.train_x), generator=self.generator)
        batches = [order[i:i + self.batch] for i in range(0, len(order), self.batch)]
        for first in range(0, len(batches), self.n_critic):
            self._iteration(batches[first:first + self.n_critic])
        self.sync()
        return len(order)

    def train_step(self) -> None:
        """One iteration on the first `n_critic` training batches: what tbd's profiler times for the stable phase."""
        self._iteration([torch.arange(i * self.batch, (i + 1) * self.batch) for i in range(self.n_critic)])

    def _iteration(self, group: list[torch.Tensor]) -> None:
        """A critic update per real batch of `group` (image indices), then a generator update."""
        reals = [self.train_x[idx.to(self.device)] for idx in group]
        noises = [torch.randn((len(idx), self.noise), generator=self.generator).to(self.device) for idx in group]
        noises.append(torch.randn((self.batch, self.noise), generator=self.generator).to(self.device))
        alphas = [torch.rand((len(idx), 1, 1, 1), generator=self.generator).to(self.device) for idx in group]
        self.update(reals, noises, alphas)

    def sync(self) -> None:
        synchronize(self.device)

    @torch.no_grad()
    def samples(self) -> torch.Tensor:
        """The run's fixed generated set, [GENERATED, 3, side, side] in [-1, 1] (batch statistics per chunk)."""
        return torch.cat([self.generator_net(self.eval_noise[i:i + CHUNK])
                          for i in range(0, len(self.eval_noise), CHUNK)])

    @torch.no_grad()
    def evaluate(self) -> float:
        self.fid.reset()  # drops the generated features, keeps the held-out ones
        self.fid.update(self.samples(), real=False)
        return float(self.fid.compute())

    def latency_per_item_s(self) -> None:
        """None: a generator has no held-out items to infer on, and its batch statistics make a lone sample
        something other than what it generates (module docstring)."""
        return None


def build(model_name: str, batch: int, seed: int, size: str = "test", device: torch.device | None = None) -> TaskRun:
    """A run of the WGAN-GP (`model_name` "wgan") on the digits, weights, batches and noise from `seed`, on `device`
    (default the CPU)."""
    if model_name != "wgan":
        raise ValueError(f"digits_wgan trains the wgan model, not {model_name!r}")
    device = device or torch.device("cpu")
    dim, side, noise, n_critic = WGAN_SIZES[size]
    gen = torch.Generator().manual_seed(seed)
    model = nn.ModuleDict({"generator": wgan.Generator(dim, side, noise), "critic": wgan.Critic(dim, side)})
    wgan.init_weights(model, gen)
    model.to(device).train()
    generator_net, critic = model["generator"], model["critic"]
    # Adam's betas and the penalty are the paper's; the rate is 10x gan_64x64.py's 1e-4, tuned on the held-out
    # score at batch 32: at 1e-3 the test size reaches the target in 250-480 generator updates (11-21 epochs, seeds
    # 0-2), minutes of CPU; at batch 64 it draws digits more slowly per CPU second, at 2e-3 less steadily.
    lr = LEARNING_RATE
    critic_opt = torch.optim.Adam(critic.parameters(), lr=lr, betas=WGAN_BETAS)
    gen_opt = torch.optim.Adam(generator_net.parameters(), lr=lr, betas=WGAN_BETAS)
    train_x, _, test_x, _ = load_split()
    fid = fid_metric(device)
    with torch.no_grad():
        fid.update(digits_at(test_x, side).to(device), real=True)
    eval_noise = torch.randn((GENERATED, noise), generator=torch.Generator().manual_seed(seed + 1_000_003))
    task = TaskRun(model, [critic_opt, gen_opt], wgan._train_step(generator_net, critic, gen_opt, critic_opt),
                   digits_at(train_x, side).to(device), eval_noise.to(device), fid, len(test_x), batch, n_critic,
                   noise, gen, device,
                   {"opt_name": "adam", "opt_base_learning_rate": lr, "opt_adam_beta_1": WGAN_BETAS[0],
                    "opt_adam_beta_2": WGAN_BETAS[1], "critic_iterations": n_critic,
                    "gradient_penalty_weight": wgan.GP_WEIGHT})
    task.sync()  # init_stop comes after the weights and data are on the device
    return task

