"""Seeded synthetic batches drawn on the host with numpy, for the workloads of every framework
other than PyTorch (whose own module, models/pytorch/synthetic.py, draws with a torch.Generator).

Same shapes and distributions as the PyTorch suite; framework-neutral so the MXNet and TensorFlow
interpreters (which have no torch) share one copy.
"""

from __future__ import annotations

import numpy as np

from tbd.core.errors import UsageError

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


#: Special token ids of the translation workloads; regular tokens are FIRST_TOKEN..vocab-1 (as in
#: models/pytorch/seq2seq.py).
PAD, BOS, EOS = 0, 1, 2
FIRST_TOKEN = 3


def sentence_pair_batch(batch: int, vocab: int, shortest: int, longest: int, rng: np.random.RandomState
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One synthetic batch of sentence pairs, laid out as models/pytorch/seq2seq.py's.

    Source and target lengths are independent and uniform over shortest..longest tokens, ids
    uniform over the regular tokens; the decoder reads <s> + target and predicts target + </s>,
    each padded with PAD to the batch's longest. Pairs are ordered longest source first, as in
    the PyTorch version (there packing needs it; here it only keeps the two layouts identical).

    Returns:
        (src int64 [B, S], tgt_in int64 [B, T + 1], tgt_out int64 [B, T + 1]) numpy arrays on the
        host; S and T are the batch's longest source and target sentence in tokens.
    """
    src_len = np.sort(sentence_lengths(batch, shortest, longest, rng))[::-1]
    tgt_len = sentence_lengths(batch, shortest, longest, rng)
    src = token_batch(src_len, FIRST_TOKEN, vocab, PAD, rng)
    tgt = token_batch(tgt_len, FIRST_TOKEN, vocab, PAD, rng)
    tgt_in = np.concatenate([np.full((batch, 1), BOS, dtype=np.int64), tgt], axis=1)
    tgt_out = np.concatenate([tgt, np.full((batch, 1), PAD, dtype=np.int64)], axis=1)
    tgt_out[np.arange(batch), tgt_len] = EOS
    return src, tgt_in, tgt_out


def batch_tokens(src: np.ndarray, tgt_out: np.ndarray) -> float:
    """Non-pad tokens in a batch: source words plus target words and </s> (tensorflow/nmt's word_count)."""
    return float((src != PAD).sum() + (tgt_out != PAD).sum())
