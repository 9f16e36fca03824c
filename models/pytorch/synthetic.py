"""Seeded synthetic batches shaped like the suite's data sets, built on the host.

Batches are drawn on the CPU from a `torch.Generator`, so the same seed gives the same data on
every device; the workload builders move them to the device once, before the training loop.
"""

from __future__ import annotations

import torch

from tbd.core.errors import UsageError


def image_batch(batch: int, shape: tuple[int, int, int], classes: int,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Normally distributed images and uniform class labels.

    Args:
        batch: images in the batch.
        shape: (channels, height, width) of one image, in pixels.
        classes: number of classes; labels are uniform over [0, classes).
        generator: CPU generator that fixes the draw.
    Returns:
        (images float32 [batch, *shape], labels int64 [batch]), on the CPU.
    """
    _check_positive(batch=batch, classes=classes)
    images = torch.randn((batch, *shape), generator=generator)
    labels = torch.randint(0, classes, (batch,), generator=generator)
    return images, labels


def sentence_lengths(count: int, low: int, high: int, generator: torch.Generator) -> torch.Tensor:
    """Sentence lengths uniform over the integers low..high inclusive (tokens), int64 on the CPU."""
    _check_positive(count=count, low=low)
    if high < low:
        raise UsageError(f"sentence length range {low}..{high} is empty")
    return torch.randint(low, high + 1, (count,), generator=generator)


def token_batch(lengths: torch.Tensor, first_id: int, vocab: int, pad_id: int,
                generator: torch.Generator) -> torch.Tensor:
    """Right-padded sentences of token ids uniform over [first_id, vocab).

    Args:
        lengths: int64 [batch], tokens in each sentence (before padding).
        first_id: smallest regular token id; ids below it are specials (pad, bos, eos).
        vocab: vocabulary size; ids are < vocab.
        pad_id: id written after each sentence's end, up to the batch's longest sentence.
        generator: CPU generator that fixes the draw.
    Returns:
        int64 [batch, max(lengths)] on the CPU.
    """
    if first_id >= vocab:
        raise UsageError(f"vocabulary of {vocab} leaves no regular tokens above id {first_id}")
    width = int(lengths.max())
    tokens = torch.randint(first_id, vocab, (len(lengths), width), generator=generator)
    past_end = torch.arange(width).unsqueeze(0) >= lengths.unsqueeze(1)
    return tokens.masked_fill(past_end, pad_id)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise UsageError(f"{name} must be at least 1, got {value}")


#: Batches each workload pre-builds on the device and cycles through (enough that consecutive
#: steps see different data, few enough to keep input memory small).
POOL_SIZE = 3


def check_build_args(batch: int, size: str, sizes: tuple[str, ...], pool_size: int) -> None:
    """UsageError unless batch and pool_size are integers >= 1 and size is one of `sizes`."""
    for name, value in (("batch", batch), ("pool_size", pool_size)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError(f"{name} must be an integer, got {value!r}")
    _check_positive(batch=batch, pool_size=pool_size)
    if size not in sizes:
        raise UsageError(f"unknown workload size '{size}'", hint=f"choose one of: {', '.join(sizes)}")
