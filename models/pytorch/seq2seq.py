"""Seq2Seq: LSTM encoder-decoder with Luong attention (NMT) on synthetic IWSLT15-shaped data, in PyTorch.

The TBD paper's translation workload is the TensorFlow NMT tutorial model on IWSLT15 en-vi
(Luong, Brevdo and Zhao, 2017; github.com/tensorflow/nmt): 512-wide embeddings, a 2-layer
unidirectional LSTM encoder and a 2-layer LSTM decoder of 512 units, Luong "general" attention
(Luong, Pham and Manning, EMNLP 2015), an attention layer tanh(W_c [context; h]) of 512 units
and a projection to the target vocabulary. Both vocabularies are 17,188 (the issue's figure; the
paper lists 17,188 en and 17,191 vi, and one size for both keeps the workload symmetric).

As in tensorflow/nmt, the attention memory layer, the attention layer and the output projection
have no bias (`use_bias=False` in nmt/model.py and tf.contrib.seq2seq's AttentionWrapper and
LuongAttention), and weights start uniform in [-0.1, 0.1] (`init_weight` 0.1 in
nmt/standard_hparams/iwslt15.json). Two deliberate departures, both so the decoder runs as one
nn.LSTM call (cuDNN on a GPU) over the whole target sentence under teacher forcing:
- no input feeding: the attention vector of step t-1 is not fed into step t (Luong et al. 2015
  §3.3 present it as an optional extension); the decoder's first layer takes the 512-wide
  embedding only;
- no dropout (the iwslt15 recipe uses 0.2) and no gradient clipping, so step() is exactly
  zero_grad, forward, loss, backward, optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from tbd.models.base import Workload, pool_workload
from tbd.models.pytorch.synthetic import POOL_SIZE, check_build_args, sentence_lengths, token_batch
from tbd.models.specs import SEQ2SEQ_INIT_SCALE, SEQ2SEQ_SIZES

#: Data-parallel engines this model runs under (tbd profile --data-parallel; checked by 2-rank tests).
DATA_PARALLEL = ("ddp", "fsdp")

#: Special token ids; regular tokens are FIRST_TOKEN..vocab-1.
PAD, BOS, EOS = 0, 1, 2
FIRST_TOKEN = 3


_SIZES = SEQ2SEQ_SIZES  # framework-neutral: one copy in models/specs.py


class Seq2Seq(nn.Module):
    """Encoder LSTM, decoder LSTM initialised from the encoder's final state, Luong general attention."""

    def __init__(self, vocab: int, embed: int, hidden: int, layers: int):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, embed)
        self.tgt_embed = nn.Embedding(vocab, embed)
        self.encoder = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.decoder = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.attn_score = nn.Linear(hidden, hidden, bias=False)  # W_a in score(h_t, h_s) = h_t^T W_a h_s
        self.attn_out = nn.Linear(2 * hidden, hidden, bias=False)  # W_c in tanh(W_c [c_t; h_t])
        self.proj = nn.Linear(hidden, vocab, bias=False)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Logits float [B, T, vocab] from source ids [B, S], source lengths and decoder inputs [B, T].

        `src_lengths` is int64 [B] on the CPU, longest first (pack_padded_sequence's contract).
        """
        # Packing makes the encoder stop at each sentence's end, so its final state (the decoder's
        # initial state) ignores padding, as tf.nn.dynamic_rnn does with sequence_length.
        packed = pack_padded_sequence(self.src_embed(src), src_lengths, batch_first=True)
        memory, state = self.encoder(packed)
        memory, _ = pad_packed_sequence(memory, batch_first=True, total_length=src.shape[1])  # [B, S, H]
        hidden, _ = self.decoder(self.tgt_embed(tgt_in), state)  # [B, T, H]
        scores = hidden @ self.attn_score(memory).transpose(1, 2)  # [B, T, S]
        scores = scores.masked_fill((src == PAD).unsqueeze(1), float("-inf"))
        context = torch.softmax(scores, dim=-1) @ memory  # [B, T, H]
        return self.proj(torch.tanh(self.attn_out(torch.cat([context, hidden], dim=-1))))


def build(batch: int, device: "torch.device | str", size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE, parallel: Callable[[nn.Module], nn.Module] | None = None) -> Workload:
    """Seq2Seq training workload: Adam on `pool_size` synthetic sentence-pair batches on `device`.

    Args:
        batch: sentence pairs per iteration.
        device: where the model, optimizer state and batches live ("cpu", "cuda", ...).
        size: "full" (the paper's NMT model) or "test" (tiny, same architecture, for CI).
        seed: fixes weight init and data (drawn on the CPU, so identical on every device).
        pool_size: synthetic batches kept on the device and cycled through by step().
        parallel: wraps the model for data-parallel training (e.g. in DistributedDataParallel);
            step() runs the forward pass through the wrapper, while Workload.model and the
            optimizer keep the module itself (FSDP shards it in place, before the optimizer is
            made). None: single process.
    Returns:
        Workload whose step() runs one iteration and returns the loss tensor (no host sync);
        units_per_step["tokens/s"] is the mean over the pool of tokens per batch (see batch_tokens).
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    vocab, embed, hidden, layers, (shortest, longest) = _SIZES[size]
    device = torch.device(device)
    generator = torch.Generator().manual_seed(seed)

    model = Seq2Seq(vocab, embed, hidden, layers)
    for param in model.parameters():
        nn.init.uniform_(param, -SEQ2SEQ_INIT_SCALE, SEQ2SEQ_INIT_SCALE, generator=generator)
    model.to(device).train()
    # Adam, Sockeye's default optimizer, at PyTorch's default lr 0.001. (The NMT tutorial's
    # iwslt15 recipe uses plain SGD at lr 1.0; the optimizer barely changes the step's cost,
    # Adam's two state tensors per parameter show up as "dynamic" memory.)
    # Wrapped before the optimizer is made: FSDP replaces the parameters with their shards.
    net = parallel(model) if parallel else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)  # mean over real (non-pad) target tokens

    host_pool = [sentence_pair_batch(batch, vocab, shortest, longest, generator) for _ in range(pool_size)]
    # Lengths stay on the host: pack_padded_sequence wants them there, and keeping them there
    # avoids a device-to-host copy (a sync) on every step.
    pool = [(src.to(device), src_len, tgt_in.to(device), tgt_out.to(device))
            for src, src_len, tgt_in, tgt_out in host_pool]

    def train_step(src, src_len, tgt_in, tgt_out) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        logits = net(src, src_len, tgt_in)
        loss = criterion(logits.reshape(-1, vocab), tgt_out.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss

    # Batches in the pool differ in length, so tokens per step is their mean: exact over any
    # whole number of trips through the pool, and off by under (max - min) / (n * mean) over n steps.
    tokens = sum(batch_tokens(src, tgt_out) for src, _, _, tgt_out in host_pool) / pool_size
    return pool_workload(
        "seq2seq", pool, train_step,
        samples_per_step=batch,
        throughput_unit="sentences/s",
        units_per_step={"tokens/s": tokens},
        model=model,
        optimizer=optimizer,
        inputs=lambda: [t for src, _, tgt_in, tgt_out in pool for t in (src, tgt_in, tgt_out)],
        description=(f"Seq2Seq NMT ({size}: vocab {vocab}, embed {embed}, {layers}x{hidden} LSTM encoder and "
                     f"decoder, Luong attention, sentences of {shortest}..{longest} tokens), Adam, "
                     f"{pool_size} synthetic batches of {batch} sentence pairs"),
    )


def sentence_pair_batch(batch: int, vocab: int, shortest: int, longest: int, generator: torch.Generator
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One synthetic batch of sentence pairs, laid out as tensorflow/nmt's iterator does.

    Source and target sentences have independent lengths uniform over shortest..longest tokens
    and ids uniform over the regular tokens. The decoder reads <s> + target and predicts
    target + </s> (teacher forcing); each is padded with PAD to the batch's longest. Pairs are
    ordered longest source first, as pack_padded_sequence(enforce_sorted=True) wants, so packing
    never has to send a permutation to the device inside the step.

    Returns:
        (src int64 [B, S], src_lengths int64 [B], tgt_in int64 [B, T + 1], tgt_out int64 [B, T + 1]),
        all on the CPU; S and T are the batch's longest source and target sentence in tokens.
    """
    src_len = sentence_lengths(batch, shortest, longest, generator).sort(descending=True).values
    tgt_len = sentence_lengths(batch, shortest, longest, generator)
    src = token_batch(src_len, FIRST_TOKEN, vocab, PAD, generator)
    tgt = token_batch(tgt_len, FIRST_TOKEN, vocab, PAD, generator)
    tgt_in = torch.cat([torch.full((batch, 1), BOS), tgt], dim=1)
    tgt_out = torch.cat([tgt, torch.full((batch, 1), PAD)], dim=1)
    tgt_out[torch.arange(batch), tgt_len] = EOS
    return src, src_len, tgt_in, tgt_out


def batch_tokens(src: torch.Tensor, tgt_out: torch.Tensor) -> float:
    """Non-pad tokens in a batch: source words plus target words and </s>.

    This is tensorflow/nmt's word_count (sum of source_sequence_length plus sum of
    target_sequence_length, whose target side is the </s>-terminated decoder output), the count
    behind its "wps" speed, so our tokens/s is comparable to the tutorial's.
    """
    return float((src != PAD).sum() + (tgt_out != PAD).sum())
