"""Seeded synthetic batches drawn on the host with numpy, for the workloads of every framework
other than PyTorch (whose own module, models/pytorch/synthetic.py, draws with a torch.Generator).

Same shapes and distributions as the PyTorch suite; framework-neutral so the MXNet and TensorFlow
interpreters (which have no torch) share one copy.
"""

from __future__ import annotations

import numpy as np

from tbd.errors import UsageError

#: Batches each workload pre-builds on the device and cycles through (as in the PyTorch suite).
POOL_SIZE = 3


def image_batch(batch: int, shape: tuple[int, int, int], classes: int,
                rng: np.random.RandomState) -> tuple[np.ndarray, np.ndarray]:
    """Normally distributed images and uniform class labels.

    Args:
        batch: images in the batch.
        shape: (channels, height, width) of one image, in pixels.
        classes: number of classes; labels are uniform over [0, classes).
        rng: host random state that fixes the draw.
    Returns:
        (images float32 [batch, *shape], labels int32 [batch]), numpy arrays on the host.
    """
    _check_positive(batch=batch, classes=classes)
    images = rng.standard_normal((batch, *shape)).astype(np.float32)
    labels = rng.randint(0, classes, size=batch).astype(np.int32)
    return images, labels


def sentence_lengths(count: int, low: int, high: int, rng: np.random.RandomState) -> np.ndarray:
    """Sentence lengths uniform over the integers low..high inclusive (tokens), int64 [count]."""
    _check_positive(count=count, low=low)
    if high < low:
        raise UsageError(f"sentence length range {low}..{high} is empty")
    return rng.randint(low, high + 1, size=count).astype(np.int64)


def token_batch(lengths: np.ndarray, first_id: int, vocab: int, pad_id: int,
                rng: np.random.RandomState) -> np.ndarray:
    """Right-padded sentences of token ids uniform over [first_id, vocab).

    Args:
        lengths: int [batch], tokens in each sentence (before padding).
        first_id: smallest regular token id; ids below it are specials (pad, bos, eos).
        vocab: vocabulary size; ids are < vocab.
        pad_id: id written after each sentence's end, up to the batch's longest sentence.
        rng: host random state that fixes the draw.
    Returns:
        int64 [batch, max(lengths)] on the host.
    """
    if first_id >= vocab:
        raise UsageError(f"vocabulary of {vocab} leaves no regular tokens above id {first_id}")
    width = int(lengths.max())
    tokens = rng.randint(first_id, vocab, size=(len(lengths), width)).astype(np.int64)
    past_end = np.arange(width)[None, :] >= lengths[:, None]
    tokens[past_end] = pad_id
    return tokens


def check_build_args(batch: int, size: str, sizes: tuple[str, ...], pool_size: int) -> None:
    """UsageError unless batch and pool_size are integers >= 1 and size is one of `sizes`."""
    for name, value in (("batch", batch), ("pool_size", pool_size)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError(f"{name} must be an integer, got {value!r}")
    _check_positive(batch=batch, pool_size=pool_size)
    if size not in sizes:
        raise UsageError(f"unknown workload size '{size}'", hint=f"choose one of: {', '.join(sizes)}")


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise UsageError(f"{name} must be at least 1, got {value}")
