"""Seq2Seq: LSTM encoder-decoder with Luong attention (NMT) on synthetic IWSLT15-shaped data, in TensorFlow 2 / Keras 3.

Layer for layer the model of models/pytorch/seq2seq.py (see its docstring for the sources; the
TBD paper's TensorFlow workload is the tensorflow/nmt tutorial model itself): 512-wide source and
target embeddings, a 2-layer LSTM encoder and a 2-layer LSTM decoder of 512 units (one
keras.layers.LSTM per layer, cuDNN on a GPU), Luong "general" attention W_a, the attention layer
tanh(W_c [c_t; h_t]) and the projection to 17,188 words, all without bias, every parameter
uniform in [-0.1, 0.1]; no input feeding, no dropout, no gradient clipping, as in PyTorch.

Parameter count: a Keras LSTM layer has ONE bias vector of 4*H (TensorFlow's LSTMCell and cuDNN's
canonical TF layout), where PyTorch (and MXNet) keep two, b_ih and b_hh, whose sum is all that the
gates see. So each of the 4 LSTM layers has 4*H = 2,048 fewer parameters: 35,592,192 - 4 * 2,048 =
35,584,000 trainable parameters, 0.023% fewer than PyTorch's; the function computed is the same.

The encoder takes the source's padding mask (src != PAD, right-padded), so each sentence's final
state, the decoder's initial state, is the one after its own last word, as PyTorch gets with
pack_padded_sequence (Keras passes the lengths to cuDNN on a GPU and carries the state over masked
steps on the CPU). The attention masks pad positions; the loss averages over real target tokens.

Batches in the pool differ in sentence length; they are right-padded with PAD to the pool's
longest source and target, so the train step has one static signature: one trace serves every
batch, and every op's shape is known in the traced graph, which is where tbd reads the shapes for
analytic FLOPs (TF's profiler records none; a None time dimension would leave the attention's
and the projection's FLOPs unknown). The padding is masked like any other (encoder mask,
attention mask, loss mask), so the function is unchanged; it costs the masked steps of the
difference between the pool's and each batch's longest sentence (0-2 of ~30 at full size with 3
batches), which the PyTorch version, padding each batch to its own longest, does not run.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

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


class Seq2Seq(keras.Model):
    """Encoder LSTM, decoder LSTM initialised from the encoder's final state, Luong general attention."""

    def __init__(self, vocab: int, embed: int, hidden: int, layers: int, **kwargs):
        super().__init__(**kwargs)
        init = keras.initializers.RandomUniform(-INIT_SCALE, INIT_SCALE)
        self.src_embed = keras.layers.Embedding(vocab, embed, embeddings_initializer=init, name="src_embed")
        self.tgt_embed = keras.layers.Embedding(vocab, embed, embeddings_initializer=init, name="tgt_embed")

        def lstm(name: str) -> keras.layers.LSTM:
            # Defaults kept (tanh, sigmoid, no unroll, with bias) so the cuDNN kernel is eligible;
            # unit_forget_bias=False so the bias starts uniform like every other parameter.
            return keras.layers.LSTM(hidden, return_sequences=True, return_state=True, kernel_initializer=init,
                                     recurrent_initializer=init, bias_initializer=init, unit_forget_bias=False,
                                     name=name)

        self.encoder = [lstm(f"encoder_{i}") for i in range(layers)]
        self.decoder = [lstm(f"decoder_{i}") for i in range(layers)]
        # W_a in score(h_t, h_s) = h_t^T W_a h_s; W_c in tanh(W_c [c_t; h_t]); the output projection.
        self.attn_score = keras.layers.Dense(hidden, use_bias=False, kernel_initializer=init, name="attn_score")
        self.attn_out = keras.layers.Dense(hidden, use_bias=False, kernel_initializer=init, name="attn_out")
        self.proj = keras.layers.Dense(vocab, use_bias=False, kernel_initializer=init, name="proj")

    def call(self, inputs, training=False):
        """Logits float32 [B, T, vocab] from (source ids [B, S], decoder input ids [B, T]), int32."""
        src, tgt_in = inputs
        src_mask = tf.not_equal(src, PAD)
        memory, states = self.src_embed(src), []
        for layer in self.encoder:
            memory, h, c = layer(memory, mask=src_mask, training=training)  # memory [B, S, H]
            states.append([h, c])
        hidden = self.tgt_embed(tgt_in)
        for layer, state in zip(self.decoder, states):
            hidden, _, _ = layer(hidden, initial_state=state, training=training)  # [B, T, H]
        scores = tf.matmul(hidden, self.attn_score(memory), transpose_b=True)  # [B, T, S]
        scores = tf.where(src_mask[:, None, :], scores, tf.fill(tf.shape(scores), float("-inf")))
        context = tf.matmul(tf.nn.softmax(scores, axis=-1), memory)  # [B, T, H]
        return self.proj(tf.tanh(self.attn_out(tf.concat([context, hidden], axis=-1))))


def _pad_to_longest(host_pool: list[tuple[np.ndarray, ...]]) -> list[tuple[np.ndarray, ...]]:
    """Right-pad every (src, tgt_in, tgt_out) batch with PAD to the pool's widest of each array."""
    widths = [max(arrays[i].shape[1] for arrays in host_pool) for i in range(3)]
    return [tuple(np.pad(a, ((0, 0), (0, w - a.shape[1])), constant_values=PAD) for a, w in zip(arrays, widths))
            for arrays in host_pool]


def build(batch: int, device: str, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """Seq2Seq training workload: Adam on `pool_size` synthetic sentence-pair batches on `device`.

    Args:
        batch: sentence pairs per iteration.
        device: TensorFlow device string where variables, optimizer state and batches live
            ("/CPU:0", "/GPU:0").
        size: "full" (the paper's NMT model) or "test" (tiny, same architecture, for CI).
        seed: fixes weight init (keras.utils.set_random_seed) and data (numpy RandomState).
        pool_size: synthetic batches kept on the device and cycled through by step().
    Returns:
        Workload whose step() runs one iteration (a tf.function) and returns the scalar loss
        tensor, the cross-entropy averaged over the batch's real target tokens (PyTorch's
        CrossEntropyLoss(ignore_index=PAD)), without reading it (no host sync).
        units_per_step["tokens/s"] is the mean over the pool of tokens per batch (see batch_tokens).
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    vocab, embed, hidden, layers, (shortest, longest) = _SIZES[size]
    rng = np.random.RandomState(seed)
    keras.utils.set_random_seed(seed)

    host_pool = _pad_to_longest([sentence_pair_batch(batch, vocab, shortest, longest, rng)
                                 for _ in range(pool_size)])
    with tf.device(device):
        model = Seq2Seq(vocab, embed, hidden, layers, name="seq2seq")
        pool = [tuple(tf.constant(a, dtype=tf.int32) for a in arrays) for arrays in host_pool]
        model((pool[0][0], pool[0][1]))  # creates the variables, outside any tf.function
        # Adam at lr 0.001 as in the PyTorch version (betas 0.9/0.999; epsilon 1e-8 as PyTorch's,
        # Keras's default is 1e-7).
        optimizer = keras.optimizers.Adam(learning_rate=1e-3, epsilon=1e-8)
        optimizer.build(model.trainable_variables)

    train_step = _train_step(model, optimizer, host_pool[0][0].shape, host_pool[0][1].shape)

    # Batches in the pool differ in length, so tokens per step is their mean (as in PyTorch).
    tokens = sum(batch_tokens(src, tgt_out) for src, _, tgt_out in host_pool) / pool_size
    return pool_workload(
        "seq2seq", pool, train_step,
        scope=lambda: tf.device(device),
        samples_per_step=batch,
        throughput_unit="sentences/s",
        units_per_step={"tokens/s": tokens},
        model=model,
        optimizer=optimizer,
        description=(f"Seq2Seq NMT ({size}: vocab {vocab}, embed {embed}, {layers}x{hidden} LSTM encoder and "
                     f"decoder, Luong attention, sentences of {shortest}..{longest} tokens), Keras 3 on "
                     f"TensorFlow (tf.function, no XLA), Adam, {pool_size} synthetic batches of {batch} "
                     f"sentence pairs"),
    )


def _train_step(model: Seq2Seq, optimizer: keras.optimizers.Optimizer, src_shape: tuple[int, int],
                tgt_shape: tuple[int, int]) -> tf.types.experimental.PolymorphicFunction:
    """One optimizer step on the cross-entropy averaged over real target tokens, as a tf.function.

    It takes (src, tgt_in, tgt_out) int32 batches of shapes src_shape, tgt_shape, tgt_shape.
    Static shapes (module docstring): one trace, and every op's shape known in the graph.
    """
    src_ids = tf.TensorSpec(src_shape, tf.int32)
    tgt_ids = tf.TensorSpec(tgt_shape, tf.int32)

    @tf.function(input_signature=[src_ids, tgt_ids, tgt_ids], jit_compile=False, reduce_retracing=True)
    def train_step(src: tf.Tensor, tgt_in: tf.Tensor, tgt_out: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model((src, tgt_in), training=True)
            nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tgt_out, logits=logits)  # [B, T]
            real = tf.cast(tf.not_equal(tgt_out, PAD), nll.dtype)
            loss = tf.reduce_sum(nll * real) / tf.reduce_sum(real)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    return train_step
