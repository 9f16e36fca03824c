"""Seq2Seq: LSTM encoder-decoder with Luong attention (NMT) on synthetic IWSLT15-shaped data, in MXNet Gluon.

The TBD paper ran Sockeye for MXNet's translation workload; here the model is layer for layer the
one of models/pytorch/seq2seq.py (see its docstring for the sources): 512-wide source and target
embeddings, a 2-layer LSTM encoder and a 2-layer LSTM decoder of 512 units (gluon.rnn.LSTM, the
fused RNN operator, cuDNN on a GPU; gates in MXNet's order i, f, g, o, the same as PyTorch's, and
two bias vectors per layer, i2h and h2h, as PyTorch's b_ih and b_hh), Luong "general" attention
W_a, the attention layer tanh(W_c [c_t; h_t]) and the projection to 17,188 words, all without bias,
weights uniform in [-0.1, 0.1]. Trainable parameters: 35,592,192, as in PyTorch.

One deliberate departure from the PyTorch version: the encoder runs over the padded source and
the decoder starts from the encoder state after the batch's longest sentence, not after each
sentence's own end. PyTorch packs the source (pack_padded_sequence) for that; MXNet's fused RNN
has `use_sequence_length`, but only with cuDNN (on the CPU it is ignored or rejected, see
src/operator/rnn-inl.h) and, on the GPU, it copies the lengths to the host inside every forward
pass, a sync we don't want inside the step. Running over padding is what Sockeye's forward RNN
encoder did too. The attention still masks pad positions, so only the decoder's initial state
differs, and the step's cost is that of the padded batch (the same LSTM kernels).

The network is hybridized with the default flags (static_alloc=False, static_shape=False):
the batches in the pool have different sentence lengths, so shapes change from step to step and
static_shape cannot hold; static_alloc=True measured the same on the CPU (1.11 vs 1.10 s per
full-size step at batch 32, 2 cores), so the default is kept.
"""

from __future__ import annotations

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn, rnn

from tbd.models.base import Workload, pool_workload
from tbd.models.host_data.synthetic import (  # noqa: F401
    BOS,
    EOS,
    FIRST_TOKEN,
    PAD,
    POOL_SIZE,
    batch_tokens,
    check_build_args,
    sentence_pair_batch,
)
from tbd.models.specs import SEQ2SEQ_INIT_SCALE, SEQ2SEQ_SIZES

# Sizes and the init scale are framework-neutral: one copy in models/specs.py.
INIT_SCALE, _SIZES = SEQ2SEQ_INIT_SCALE, SEQ2SEQ_SIZES


class Seq2Seq(gluon.HybridBlock):
    """Encoder LSTM, decoder LSTM initialised from the encoder's final state, Luong general attention."""

    def __init__(self, vocab: int, embed: int, hidden: int, layers: int, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.src_embed = nn.Embedding(vocab, embed)
            self.tgt_embed = nn.Embedding(vocab, embed)
            # The LSTM's biases default to 'zeros'; tensorflow/nmt (and the PyTorch version)
            # start every parameter uniform in [-0.1, 0.1], so name that init here too.
            init = mx.init.Uniform(INIT_SCALE)
            self.encoder = rnn.LSTM(hidden, layers, layout="NTC", input_size=embed,
                                    i2h_bias_initializer=init, h2h_bias_initializer=init)
            self.decoder = rnn.LSTM(hidden, layers, layout="NTC", input_size=embed,
                                    i2h_bias_initializer=init, h2h_bias_initializer=init)
            # W_a in score(h_t, h_s) = h_t^T W_a h_s; W_c in tanh(W_c [c_t; h_t]); the output projection.
            self.attn_score = nn.Dense(hidden, in_units=hidden, use_bias=False, flatten=False)
            self.attn_out = nn.Dense(hidden, in_units=2 * hidden, use_bias=False, flatten=False)
            self.proj = nn.Dense(vocab, in_units=hidden, use_bias=False, flatten=False)

    def hybrid_forward(self, F, src, tgt_in):
        """Logits float32 [B, T, vocab] from source ids [B, S] and decoder input ids [B, T] (int32)."""
        # Batch size 0 lets the symbol's shape inference fill it in; NDArray mode needs the number.
        batch = src.shape[0] if F is mx.nd else 0
        begin = self.encoder.begin_state(batch, func=F.zeros)
        memory, state = self.encoder(self.src_embed(src), begin)  # [B, S, H]
        hidden, _ = self.decoder(self.tgt_embed(tgt_in), state)  # [B, T, H]
        scores = F.batch_dot(hidden, self.attn_score(memory), transpose_b=True)  # [B, T, S]
        pad = F.broadcast_like(F.expand_dims(src == PAD, axis=1), scores)
        scores = F.where(pad, F.ones_like(scores) * float("-inf"), scores)
        context = F.batch_dot(F.softmax(scores, axis=-1), memory)  # [B, T, H]
        return self.proj(F.tanh(self.attn_out(F.concat(context, hidden, dim=-1))))


def build(batch: int, device: mx.Context, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """Seq2Seq training workload: Adam on `pool_size` synthetic sentence-pair batches on `device`.

    Args:
        batch: sentence pairs per iteration.
        device: mx.Context where parameters, optimizer state and batches live (mx.cpu(), mx.gpu(0)).
        size: "full" (the paper's NMT model) or "test" (tiny, same architecture, for CI).
        seed: fixes weight init (mx.random.seed; Gluon draws initial values on the CPU, then
            copies them) and data (numpy RandomState), so both are the same on every device.
        pool_size: synthetic batches kept on the device and cycled through by step().
    Returns:
        Workload whose step() runs one iteration and returns the per-sentence loss NDArray [batch]
        without waiting for it (no host sync); its mean is the cross-entropy averaged over the
        batch's real target tokens, PyTorch's CrossEntropyLoss(ignore_index=PAD).
        units_per_step["tokens/s"] is the mean over the pool of tokens per batch (see batch_tokens).
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    vocab, embed, hidden, layers, (shortest, longest) = _SIZES[size]
    rng = np.random.RandomState(seed)
    mx.random.seed(seed)

    model = Seq2Seq(vocab, embed, hidden, layers)
    model.initialize(mx.init.Uniform(INIT_SCALE), ctx=device)
    model.hybridize()
    # Adam at lr 0.001 as in the PyTorch version (betas 0.9/0.999, eps 1e-8 in both).
    trainer = gluon.Trainer(model.collect_params(), "adam", {"learning_rate": 1e-3})
    criterion = gluon.loss.SoftmaxCrossEntropyLoss()  # -log p(label), weighted, mean over time per sentence
    criterion.hybridize()

    host_pool = [sentence_pair_batch(batch, vocab, shortest, longest, rng) for _ in range(pool_size)]
    pool = [_to_device(src, tgt_in, tgt_out, device) for src, tgt_in, tgt_out in host_pool]

    def train_step(src, tgt_in, tgt_out, weight) -> mx.nd.NDArray:
        with autograd.record():
            loss = criterion(model(src, tgt_in), tgt_out, weight)
        loss.backward()
        trainer.step(batch)  # scales the summed per-sentence gradients by 1 / batch
        return loss

    # Batches in the pool differ in length, so tokens per step is their mean (as in PyTorch).
    tokens = sum(batch_tokens(src, tgt_out) for src, _, tgt_out in host_pool) / pool_size
    return pool_workload(
        "seq2seq", pool, train_step,
        samples_per_step=batch,
        throughput_unit="sentences/s",
        units_per_step={"tokens/s": tokens},
        model=model,
        aux_modules=[criterion],  # the hybridized loss: its operators are logged too
        optimizer=trainer,
        description=(f"Seq2Seq NMT ({size}: vocab {vocab}, embed {embed}, {layers}x{hidden} LSTM encoder and "
                     f"decoder, Luong attention, sentences of {shortest}..{longest} tokens, encoder run over "
                     f"padding), MXNet Gluon hybridized, Adam, {pool_size} synthetic batches of {batch} "
                     f"sentence pairs"),
    )


def _to_device(src: np.ndarray, tgt_in: np.ndarray, tgt_out: np.ndarray, device: mx.Context
               ) -> tuple[mx.nd.NDArray, mx.nd.NDArray, mx.nd.NDArray, mx.nd.NDArray]:
    """(src, tgt_in, tgt_out) as int32 NDArrays on `device`, plus the loss weights float32 [B, T, 1].

    SoftmaxCrossEntropyLoss averages weight * -log p over the T target positions of a sentence;
    a weight of T * B / n_tokens on real tokens and 0 on pads makes the batch's per-sentence
    losses sum to B times the mean over real tokens, so trainer.step(B) applies that mean's
    gradient, exactly PyTorch's CrossEntropyLoss(ignore_index=PAD). Built once, on the host.
    """
    batch, steps = tgt_out.shape
    real = (tgt_out != PAD).astype(np.float32)
    weight = (real * (steps * batch / real.sum()))[:, :, None]
    return tuple(mx.nd.array(a, ctx=device, dtype=a.dtype)
                 for a in (src.astype(np.int32), tgt_in.astype(np.int32), tgt_out.astype(np.int32), weight))

