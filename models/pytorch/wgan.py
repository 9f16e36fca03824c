"""WGAN-GP: ResNet generator and critic on synthetic down-sampled-ImageNet data, in PyTorch.

Gulrajani, Ahmed, Arjovsky, Dumoulin and Courville, "Improved Training of Wasserstein GANs",
NeurIPS 2017, with the 64x64 ImageNet networks of the authors' code
(github.com/igul222/improved_wgan_training, gan_64x64.py, MODE='wgan-gp', GoodGenerator /
GoodDiscriminator, DIM=64, BATCH_SIZE=64, CRITIC_ITERS=5, LAMBDA=10):

- generator: noise z ~ N(0, I_128) -> Linear(128, 4*4*8*DIM) -> [8*DIM, 4, 4] -> four "up"
  residual blocks (8->8, 8->4, 4->2, 2->1 times DIM channels, each doubling the side) ->
  BatchNorm, ReLU, 3x3 conv to 3 channels, tanh: 3x64x64 in [-1, 1];
- critic: 3x3 conv 3 -> DIM -> four "down" residual blocks (1->2, 2->4, 4->8, 8->8 times DIM,
  each halving the side) -> Linear(4*4*8*DIM, 1), no output nonlinearity;
- residual block (gan_64x64.py ResidualBlock): shortcut = 1x1 conv (with up/down-sampling);
  main path = norm, ReLU, 3x3 conv (no bias), norm, ReLU, 3x3 conv (bias). "up": nearest
  2x upsampling before Conv1 and before the shortcut conv (UpsampleConv), Conv1 changes the
  width. "down": Conv1 keeps the width, Conv2 changes it and is followed by a 2x2 mean pool
  (ConvMeanPool); the shortcut mean-pools before its conv (MeanPoolConv);
- normalisation: BatchNorm (batch statistics, eps 1e-5) in the generator; in the critic no batch
  norm (the gradient penalty is per sample, and batch norm couples the samples; paper §4), but
  the code's `Normalize` swaps in tflib's Layernorm there: per-sample statistics over (C, H, W)
  with a per-channel scale and offset, eps 1e-5, i.e. exactly nn.GroupNorm(1, C);
- losses: critic E[D(G(z))] - E[D(x)] + 10 * E[(||grad_x^ D(x^)||_2 - 1)^2] on x^ = x + a(G(z) - x),
  a ~ U[0, 1] per sample; generator -E[D(G(z))]; Adam(lr 1e-4, betas (0, 0.9)) for both.

One training iteration is CRITIC_ITERS critic updates, each on its own real batch, then one
generator update (the reference loop runs the generator update first from its second iteration
on: the same sequence of updates, shifted by one). Deliberate departures, neither of which
changes the networks or the sequence of kernels beyond two tiny RNG kernels per update:
- the noise z and the interpolation weights a are drawn on the host with the real images, from
  the seeded generator, and kept in the device pool (the reference draws them in the graph at
  every update), so the data is identical on every device and a pool of one is a fixed batch;
- the generator's forward pass inside a critic update runs under no_grad and the critic's
  parameters are frozen during the generator update: TensorFlow's minimize(var_list=...) prunes
  those gradients in the reference too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from tbd.models.base import Workload, pool_workload
from tbd.models.pytorch.synthetic import POOL_SIZE, check_build_args

# What the model is (sizes, loss weights, optimizer settings) is framework-neutral: one copy, models/specs.py.
from tbd.models.specs import IMAGENET_MEAN, IMAGENET_STD  # noqa: F401 - the module's public names
from tbd.models.specs import WGAN_BETAS as BETAS
from tbd.models.specs import WGAN_BLOCKS as _BLOCKS
from tbd.models.specs import WGAN_GP_WEIGHT as GP_WEIGHT
from tbd.models.specs import WGAN_LEARNING_RATE as LEARNING_RATE
from tbd.models.specs import WGAN_SIZES as _SIZES


class _Conv(nn.Conv2d):
    """'SAME'-padded stride-1 conv that remembers tflib's init family (He or Glorot uniform)."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int, *, he_init: bool = True,
                 bias: bool = True):
        super().__init__(in_channels, out_channels, kernel, padding=kernel // 2, bias=bias)
        self.he_init = he_init


class UpBlock(nn.Module):
    """gan_64x64.py ResidualBlock(resample='up') with BatchNorm: doubles the side, in -> out channels."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.shortcut = _Conv(in_channels, out_channels, 1, he_init=False)
        self.norm1 = nn.BatchNorm2d(in_channels)
        self.conv1 = _Conv(in_channels, out_channels, 3, bias=False)
        self.norm2 = nn.BatchNorm2d(out_channels)
        self.conv2 = _Conv(out_channels, out_channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # UpsampleConv: tile 4x along channels + depth_to_space(2) is nearest-neighbour 2x upsampling.
        shortcut = self.shortcut(F.interpolate(x, scale_factor=2, mode="nearest"))
        out = F.interpolate(F.relu(self.norm1(x)), scale_factor=2, mode="nearest")
        out = self.conv2(F.relu(self.norm2(self.conv1(out))))
        return shortcut + out


class DownBlock(nn.Module):
    """gan_64x64.py ResidualBlock(resample='down') with layer norm: halves the side, in -> out channels."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.shortcut = _Conv(in_channels, out_channels, 1, he_init=False)
        self.norm1 = nn.GroupNorm(1, in_channels)  # tflib Layernorm over (C, H, W), per-channel affine
        self.conv1 = _Conv(in_channels, in_channels, 3, bias=False)
        self.norm2 = nn.GroupNorm(1, in_channels)
        self.conv2 = _Conv(in_channels, out_channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = self.shortcut(F.avg_pool2d(x, 2))  # MeanPoolConv
        out = self.conv1(F.relu(self.norm1(x)))
        out = F.avg_pool2d(self.conv2(F.relu(self.norm2(out))), 2)  # ConvMeanPool
        return shortcut + out


class Generator(nn.Module):
    """GoodGenerator: noise [N, noise] -> images [N, 3, side, side] in [-1, 1]."""

    def __init__(self, dim: int = 64, side: int = 64, noise: int = 128):
        super().__init__()
        self.start = side // 2 ** _BLOCKS  # 4 for 64x64 images
        self.input = nn.Linear(noise, self.start ** 2 * 8 * dim)
        widths = (8 * dim, 8 * dim, 4 * dim, 2 * dim, dim)
        self.blocks = nn.Sequential(*(UpBlock(a, b) for a, b in itertools.pairwise(widths)))
        self.out_norm = nn.BatchNorm2d(dim)
        self.out_conv = _Conv(dim, 3, 3)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.input(z).view(len(z), -1, self.start, self.start)
        return torch.tanh(self.out_conv(F.relu(self.out_norm(self.blocks(x)))))


class Critic(nn.Module):
    """GoodDiscriminator: images [N, 3, side, side] -> scores [N] (unbounded)."""

    def __init__(self, dim: int = 64, side: int = 64):
        super().__init__()
        self.input = _Conv(3, dim, 3, he_init=False)
        widths = (dim, 2 * dim, 4 * dim, 8 * dim, 8 * dim)
        self.blocks = nn.Sequential(*(DownBlock(a, b) for a, b in itertools.pairwise(widths)))
        self.output = nn.Linear((side // 2 ** _BLOCKS) ** 2 * 8 * dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.blocks(self.input(x)).flatten(1)).view(-1)


def gradient_penalty(critic: nn.Module, real: torch.Tensor, fake: torch.Tensor, alpha: torch.Tensor
                     ) -> torch.Tensor:
    """E[(||grad D(x^)||_2 - 1)^2] over x^ = real + alpha (fake - real); differentiable in the critic.

    Args:
        critic: maps images [N, C, H, W] to scores [N].
        real, fake: images [N, C, H, W].
        alpha: interpolation weights [N, 1, 1, 1] in [0, 1].
    Returns:
        scalar tensor (unweighted; the critic loss multiplies it by GP_WEIGHT).
    """
    interpolates = (real + alpha * (fake - real)).requires_grad_(True)
    # create_graph: the penalty is a function of the critic's weights through this gradient,
    # so the backward pass differentiates through it (double backward).
    grads, = torch.autograd.grad(critic(interpolates).sum(), interpolates, create_graph=True)
    slopes = grads.flatten(1).norm(dim=1)  # ||.||_2 over each sample's pixels
    return ((slopes - 1.0) ** 2).mean()


def critic_loss(critic: nn.Module, real: torch.Tensor, fake: torch.Tensor, alpha: torch.Tensor
                ) -> torch.Tensor:
    """WGAN-GP critic loss E[D(fake)] - E[D(real)] + GP_WEIGHT * gradient_penalty (a scalar tensor)."""
    wasserstein = critic(fake).mean() - critic(real).mean()
    return wasserstein + GP_WEIGHT * gradient_penalty(critic, real, fake, alpha)


def build(batch: int, device: "torch.device | str", size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE, parallel: Callable[[nn.Module], nn.Module] | None = None) -> Workload:
    """WGAN-GP training workload: n_critic critic updates + 1 generator update per step().

    Args:
        batch: images per critic update (and noise vectors per generator update).
        device: where the networks, optimizer state and batches live ("cpu", "cuda", ...).
        size: "full" (gan_64x64.py at DIM 64, 5 critic updates) or "test" (DIM 8, 32x32, 2 updates).
        seed: fixes weight init and data (drawn on the CPU, so identical on every device).
        pool_size: iterations' worth of data kept on the device and cycled through by step();
            each holds n_critic real batches, n_critic + 1 noise batches and n_critic sets of
            interpolation weights.
        parallel: wraps a network for data-parallel training (e.g. in DistributedDataParallel);
            the generator and the critic are wrapped separately, and each update runs the forward
            pass of the network it trains through its wrapper. Workload.model and the optimizers
            keep the unwrapped networks. None: single process.
    Returns:
        Workload whose step() runs one iteration and returns the last critic update's loss
        (detached, no host sync); samples_per_step = batch * n_critic real images consumed;
        model = ModuleDict(generator, critic); optimizer = [critic_opt, gen_opt].
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    dim, side, noise, n_critic = _SIZES[size]
    device = torch.device(device)
    generator = torch.Generator().manual_seed(seed)

    model = nn.ModuleDict({"generator": Generator(dim, side, noise), "critic": Critic(dim, side)})
    init_weights(model, generator)
    model.to(device).train()
    gen_net, critic = model["generator"], model["critic"]
    critic_opt = torch.optim.Adam(critic.parameters(), lr=LEARNING_RATE, betas=BETAS)
    gen_opt = torch.optim.Adam(gen_net.parameters(), lr=LEARNING_RATE, betas=BETAS)

    pool = [_iteration_data(batch, side, noise, n_critic, generator, device) for _ in range(pool_size)]

    return pool_workload(
        "wgan", pool, _train_step(gen_net, critic, gen_opt, critic_opt, parallel),
        samples_per_step=batch * n_critic,  # real images the critic consumes per iteration
        throughput_unit="images/s",
        units_per_step={"generator_steps/s": 1.0},
        model=model,
        optimizer=[critic_opt, gen_opt],
        description=(f"WGAN-GP ResNet generator/critic (Gulrajani et al. 2017, gan_64x64.py; {size}: DIM {dim}, "
                     f"3x{side}x{side} images, noise {noise}, {n_critic} critic updates per generator update), "
                     f"Adam(1e-4, 0, 0.9), {pool_size} synthetic iterations of {n_critic} batches of {batch}"),
    )


def _train_step(gen_net: Generator, critic: Critic, gen_opt: torch.optim.Optimizer,
                critic_opt: torch.optim.Optimizer, parallel: Callable[[nn.Module], nn.Module] | None = None
                ) -> Callable[..., torch.Tensor]:
    """One WGAN-GP iteration: n_critic critic updates, then one generator update.

    The returned function takes one pool entry (reals, noises, alphas) and returns the last
    critic update's loss (detached). With `parallel`, each update runs the network it trains
    through its wrapper, and the other one (which gets no gradients) unwrapped.
    """
    gen_train, critic_train = (parallel(gen_net), parallel(critic)) if parallel else (gen_net, critic)

    def train_step(reals, noises, alphas) -> torch.Tensor:
        for real, z, alpha in zip(reals, noises, alphas):  # noises has one more: the generator's
            critic_opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                fake = gen_net(z)
            loss = critic_loss(critic_train, real, fake, alpha)
            loss.backward()
            critic_opt.step()
        gen_opt.zero_grad(set_to_none=True)
        critic.requires_grad_(False)  # gradients for the generator only
        gen_loss = -critic(gen_train(noises[-1])).mean()
        gen_loss.backward()
        critic.requires_grad_(True)
        gen_opt.step()
        return loss.detach()

    return train_step


def _iteration_data(batch: int, side: int, noise: int, n_critic: int, generator: torch.Generator,
                    device: torch.device) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """One iteration's data on `device`: (n_critic real batches, n_critic + 1 noise batches, n_critic alphas)."""
    reals = [imagenet64_batch(batch, side, generator).to(device) for _ in range(n_critic)]
    noises = [torch.randn((batch, noise), generator=generator).to(device) for _ in range(n_critic + 1)]
    alphas = [torch.rand((batch, 1, 1, 1), generator=generator).to(device) for _ in range(n_critic)]
    return reals, noises, alphas


def imagenet64_batch(batch: int, side: int, generator: torch.Generator) -> torch.Tensor:
    """Synthetic down-sampled ImageNet images as gan_64x64.py feeds them, float32 [batch, 3, side, side].

    Pixels are 8-bit levels drawn per channel from a normal with ImageNet's mean and standard
    deviation (IMAGENET_MEAN/STD, in [0, 1]), clipped to [0, 255] and rounded, then mapped to
    [-1, 1] as the reference does: 2 * (level / 255 - 0.5). On the CPU.
    """
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    pixels = torch.randn((batch, 3, side, side), generator=generator) * std + mean
    levels = (pixels * 255).round().clamp(0, 255)
    return 2 * (levels / 255 - 0.5)


def init_weights(model: nn.Module, generator: torch.Generator) -> None:
    """tflib's init, drawn from `generator`: uniform weights of std sqrt(k / (fan_in + fan_out)), zero biases.

    tflib/ops/conv2d.py: k = 4 (he_init, the default) or 2 (Glorot: the 1x1 shortcuts and the
    critic's input conv), fans = channels * kernel area; tflib/ops/linear.py (initialization=None):
    Glorot, k = 2. A uniform on [-s sqrt(3), s sqrt(3)] has standard deviation s. Norm layers
    start at scale 1, offset 0 (PyTorch's defaults, as tflib).
    """
    for module in model.modules():
        if isinstance(module, (_Conv, nn.Linear)):
            if isinstance(module, _Conv):
                area = module.kernel_size[0] * module.kernel_size[1]
                k = 4.0 if module.he_init else 2.0
                std = math.sqrt(k / ((module.in_channels + module.out_channels) * area))
            else:
                std = math.sqrt(2.0 / (module.in_features + module.out_features))
            nn.init.uniform_(module.weight, -std * math.sqrt(3), std * math.sqrt(3), generator=generator)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
