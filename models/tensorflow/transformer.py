"""Transformer (base) NMT on synthetic WMT14 en-de-shaped data, in TensorFlow 2 / Keras 3.

Layer for layer the model of models/pytorch/transformer.py (Vaswani et al., "Attention Is All You
Need", NeurIPS 2017, Table 3 "base"; reference code tensorflow/tensor2tensor `transformer_base` and
fairseq's `transformer_wmt_en_de`; see the PyTorch docstring for the sources of every choice):
6 + 6 post-LayerNorm layers (LayerNorm eps 1e-5, PyTorch's default), d_model 512, 8 heads of 64,
ReLU FFN of 2048, dropout 0.1 on every sub-layer output and on embeddings + sinusoidal positions,
embeddings scaled by sqrt(d_model), ONE 37,000-row embedding shared by source, target and the
pre-softmax projection: 63,082,496 trainable parameters, exactly PyTorch's. Adam(0.9, 0.98, 1e-9)
with lr = d_model^-0.5 * min(step^-0.5, step * 4000^-1.5), cross-entropy with label smoothing 0.1
(PyTorch's form: epsilon spread uniformly over all classes) averaged over non-pad target tokens.
Init as fairseq's (and the PyTorch version's): Xavier-uniform linears, zero biases, embeddings
N(0, d_model^-0.5) with the pad row zero; LayerNorm gain 1, bias 0.

TensorFlow-specific choices:
- attention is written with Dense layers (q, k, v, out projections of d x d with biases, as
  PyTorch's four nn.Linear) and explicit batched matmuls/softmax, rather than
  keras.layers.MultiHeadAttention: that layer has the same parameter count but per-head EinsumDense
  kernels [d, h, d_k] and runs as Einsum ops, while this keeps PyTorch's d x d matrices and gives
  the profile plain MatMul/BatchMatMulV2 ops. Padded keys are masked with -inf before the softmax
  (SDPA's boolean mask); the decoder self-attention uses only the causal mask, as in PyTorch
  (targets are right-padded, so it hides every pad key from every real query).
- nn.Embedding(padding_idx=PAD) never sends a lookup's gradient to the pad row; Keras's Embedding
  has no such option, so the lookup result at pad ids goes through tf.stop_gradient (the pad row
  still learns through the shared output projection, as in PyTorch).
- keras.optimizers.Adam adds epsilon to sqrt(v) before the bias correction, torch.optim.Adam after;
  with epsilon 1e-9 the updates differ by a relative ~1e-9 / sqrt(v_hat).
- every pool batch is right-padded with PAD to the pool's longest source and longest target (PyTorch
  pads each batch to its own longest), so the train step has one static shape: one trace, and the
  hook reads every MatMul's operand shapes from the graph (a None time dimension leaves them
  unknown, hence their FLOPs). The added pad positions change no result (pad keys are masked, pad
  targets sit after the real ones under the causal mask and are left out of the loss) and little
  work at the registry's batch 64: with sentences of 10..50 tokens a batch's longest is 50 with
  probability 1 - (40/41)^64 = 79%, and 47 or more with probability 1 - (37/41)^64 > 99.9%.
- data: models/numpy_synthetic.sentence_pair_batch (the same length and id distributions as the
  PyTorch version's; it orders each batch longest source first, which changes nothing here).
"""

from __future__ import annotations

import math

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
from tbd.models.specs import (
    TRANSFORMER_ADAM_BETAS,
    TRANSFORMER_ADAM_EPS,
    TRANSFORMER_DROPOUT,
    TRANSFORMER_LABEL_SMOOTHING,
    TRANSFORMER_MAX_POSITIONS,
    TRANSFORMER_SIZES,
)

# Sizes and hyper-parameters are framework-neutral: one copy in models/specs.py.
MAX_POSITIONS, _SIZES = TRANSFORMER_MAX_POSITIONS, TRANSFORMER_SIZES
DROPOUT, LABEL_SMOOTHING = TRANSFORMER_DROPOUT, TRANSFORMER_LABEL_SMOOTHING
ADAM_BETAS, ADAM_EPS = TRANSFORMER_ADAM_BETAS, TRANSFORMER_ADAM_EPS
LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default (Keras's is 1e-3)


def _dense(units: int, name: str) -> keras.layers.Dense:
    """A linear layer with bias, Xavier-uniform weights and zero bias (fairseq's init)."""
    return keras.layers.Dense(units, kernel_initializer="glorot_uniform", bias_initializer="zeros", name=name)


def _layer_norm(name: str) -> keras.layers.LayerNormalization:
    return keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPS, name=name)


def _dim(x, axis: int):
    """Size of `x` along `axis`: the static int when the graph knows it (so op shapes stay static), else a tensor."""
    size = x.shape[axis]
    return size if size is not None else tf.shape(x)[axis]


class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention (§3.2.2): q, k, v and out projections as one d x d Dense each, with biases."""

    def __init__(self, d_model: int, heads: int, **kwargs):
        super().__init__(**kwargs)
        self.heads, self.d_k = heads, d_model // heads
        self.q_proj, self.k_proj = _dense(d_model, "q_proj"), _dense(d_model, "k_proj")
        self.v_proj, self.out_proj = _dense(d_model, "v_proj"), _dense(d_model, "out_proj")

    def call(self, query, memory, keep=None, causal: bool = False):
        """Attend from query [B, Tq, d] to memory [B, Tk, d]; keep: bool [B, 1, 1, Tk] (True = real key)."""
        q, k, v = self._split(self.q_proj(query)), self._split(self.k_proj(memory)), self._split(self.v_proj(memory))
        # Equation (1): softmax(q k^T / sqrt(d_k)) v; no attention dropout (as in PyTorch).
        scores = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(self.d_k))  # [B, h, Tq, Tk]
        if causal:
            length = _dim(scores, -1)
            keep = tf.cast(tf.linalg.band_part(tf.ones([length, length]), -1, 0), tf.bool)  # [Tq, Tk]
        if keep is not None:
            scores = tf.where(keep, scores, float("-inf"))
        out = tf.matmul(tf.nn.softmax(scores, axis=-1), v)  # [B, h, Tq, d_k]
        batch, length = _dim(out, 0), _dim(out, 2)
        return self.out_proj(tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [batch, length, self.heads * self.d_k]))

    def _split(self, x):
        batch, length = _dim(x, 0), _dim(x, 1)
        return tf.transpose(tf.reshape(x, [batch, length, self.heads, self.d_k]), [0, 2, 1, 3])  # [B, h, T, d_k]


class EncoderLayer(keras.layers.Layer):
    """Self-attention and FFN, each as LayerNorm(x + Dropout(Sublayer(x))) (post-LN, §3.1)."""

    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float, **kwargs):
        super().__init__(**kwargs)
        self.self_attn = MultiHeadAttention(d_model, heads, name="self_attn")
        self.w1, self.w2 = _dense(d_ff, "ffn_w1"), _dense(d_model, "ffn_w2")
        self.norm1, self.norm2 = _layer_norm("norm1"), _layer_norm("norm2")
        self.drop = keras.layers.Dropout(dropout)

    def call(self, x, src_keep, training=False):
        x = self.norm1(x + self.drop(self.self_attn(x, x, src_keep), training=training))
        ffn = self.w2(tf.nn.relu(self.w1(x)))  # FFN(x) = max(0, x W1 + b1) W2 + b2 (§3.3)
        return self.norm2(x + self.drop(ffn, training=training))


class DecoderLayer(keras.layers.Layer):
    """Masked self-attention, encoder-decoder attention and FFN, each post-LN with residual dropout (§3.1)."""

    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float, **kwargs):
        super().__init__(**kwargs)
        self.self_attn = MultiHeadAttention(d_model, heads, name="self_attn")
        self.cross_attn = MultiHeadAttention(d_model, heads, name="cross_attn")
        self.w1, self.w2 = _dense(d_ff, "ffn_w1"), _dense(d_model, "ffn_w2")
        self.norm1, self.norm2, self.norm3 = _layer_norm("norm1"), _layer_norm("norm2"), _layer_norm("norm3")
        self.drop = keras.layers.Dropout(dropout)

    def call(self, y, memory, src_keep, training=False):
        y = self.norm1(y + self.drop(self.self_attn(y, y, causal=True), training=training))
        y = self.norm2(y + self.drop(self.cross_attn(y, memory, src_keep), training=training))
        ffn = self.w2(tf.nn.relu(self.w1(y)))
        return self.norm3(y + self.drop(ffn, training=training))


class Transformer(keras.Model):
    """Encoder-decoder Transformer with one embedding shared by source, target and output projection."""

    def __init__(self, vocab: int, d_model: int, heads: int, d_ff: int, encoder_layers: int,
                 decoder_layers: int, dropout: float = DROPOUT, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.embed = keras.layers.Embedding(
            vocab, d_model, embeddings_initializer=keras.initializers.RandomNormal(0.0, d_model ** -0.5),
            name="embed")
        self.encoder = [EncoderLayer(d_model, heads, d_ff, dropout, name=f"encoder_{i}")
                        for i in range(encoder_layers)]
        self.decoder = [DecoderLayer(d_model, heads, d_ff, dropout, name=f"decoder_{i}")
                        for i in range(decoder_layers)]
        self.drop = keras.layers.Dropout(dropout)
        self.positions = tf.constant(sinusoid_table(MAX_POSITIONS, d_model))  # fixed, not trained

    def call(self, inputs, training=False):
        """Logits float32 [B, T, vocab] from (source ids [B, S], decoder input ids [B, T]), int32."""
        src, tgt_in = inputs
        src_keep = tf.not_equal(src, PAD)[:, None, None, :]  # [B, 1, 1, S]: over heads and queries
        x = self._embed(src, training)
        for layer in self.encoder:
            x = layer(x, src_keep, training=training)
        y = self._embed(tgt_in, training)
        for layer in self.decoder:
            y = layer(y, x, src_keep, training=training)
        return tf.matmul(y, self.embed.embeddings, transpose_b=True)  # pre-softmax = shared embedding (§3.4)

    def _embed(self, ids, training):
        looked_up = self.embed(ids)
        # padding_idx semantics: no gradient from a pad lookup to the pad row (module docstring).
        looked_up = tf.where(tf.not_equal(ids, PAD)[..., None], looked_up, tf.stop_gradient(looked_up))
        # §3.4: embeddings times sqrt(d_model); §5.4: dropout on embeddings + positional encodings.
        scaled = looked_up * math.sqrt(self.d_model)
        return self.drop(scaled + self.positions[: _dim(ids, 1)], training=training)


def sinusoid_table(length: int, d_model: int) -> np.ndarray:
    """Positional encodings float32 [length, d_model] of §3.5, sines and cosines interleaved as in PyTorch."""
    position = np.arange(length, dtype=np.float64)[:, None]
    inv_freq = np.power(10_000.0, -np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((length, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(position * inv_freq)
    table[:, 1::2] = np.cos(position * inv_freq)
    return table.astype(np.float32)


def inverse_sqrt_lr(step: int, d_model: int, warmup: int) -> float:
    """Learning rate of §5.3 at 1-based step: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


class InverseSqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """§5.3's schedule as a Keras schedule; Keras passes optimizer.iterations (0-based), the paper counts from 1."""

    def __init__(self, d_model: int, warmup: int):
        self.d_model, self.warmup = d_model, warmup

    def __call__(self, step):
        step = tf.cast(step, tf.float32) + 1.0
        return self.d_model ** -0.5 * tf.minimum(tf.math.rsqrt(step), step * self.warmup ** -1.5)

    def get_config(self) -> dict:
        return {"d_model": self.d_model, "warmup": self.warmup}


def smoothed_cross_entropy(logits, labels, epsilon: float = LABEL_SMOOTHING):
    """PyTorch's CrossEntropyLoss(ignore_index=PAD, label_smoothing=epsilon), a scalar.

    Per token (1 - eps) * (-log p_label) + eps * mean_c(-log p_c), where -mean_c(log p_c) =
    logsumexp(logits) - mean(logits); averaged over the non-pad labels. logits [B, T, V], labels [B, T].
    """
    nll = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)  # [B, T]
    uniform = tf.reduce_logsumexp(logits, axis=-1) - tf.reduce_mean(logits, axis=-1)
    per_token = (1.0 - epsilon) * nll + epsilon * uniform
    real = tf.cast(tf.not_equal(labels, PAD), per_token.dtype)
    return tf.reduce_sum(per_token * real) / tf.reduce_sum(real)


def _padded_to_common_length(pool: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
                             ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(src, tgt_in, tgt_out) batches right-padded with PAD to the pool's longest source and target."""
    src_width = max(src.shape[1] for src, _, _ in pool)
    tgt_width = max(tgt_in.shape[1] for _, tgt_in, _ in pool)
    pad = lambda a, width: np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=PAD)  # noqa: E731
    return [(pad(src, src_width), pad(tgt_in, tgt_width), pad(tgt_out, tgt_width)) for src, tgt_in, tgt_out in pool]


def build(batch: int, device: str, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """Transformer-base training workload: Adam + warm-up schedule on `pool_size` synthetic batches on `device`.

    Args:
        batch: sentence pairs per iteration.
        device: TensorFlow device string where variables, optimizer state and batches live ("/CPU:0", "/GPU:0").
        size: "full" (Table 3's base model, vocab 37,000) or "test" (tiny, same architecture, for CI).
        seed: fixes weight init and dropout (keras.utils.set_random_seed) and data (numpy RandomState).
        pool_size: synthetic batches kept on the device and cycled through by step().
    Returns:
        Workload whose step() runs one iteration (a tf.function) and returns the scalar label-smoothed
        loss tensor without reading it (no host sync); units_per_step["tokens/s"] is the mean over
        the pool of non-pad tokens per batch (batch_tokens).
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    vocab, d_model, heads, d_ff, enc_layers, dec_layers, (shortest, longest), warmup = _SIZES[size]
    rng = np.random.RandomState(seed)
    keras.utils.set_random_seed(seed)

    host_pool = _padded_to_common_length(
        [sentence_pair_batch(batch, vocab, shortest, longest, rng) for _ in range(pool_size)])
    with tf.device(device):
        model = Transformer(vocab, d_model, heads, d_ff, enc_layers, dec_layers, name="transformer")
        pool = [tuple(tf.constant(a, dtype=tf.int32) for a in arrays) for arrays in host_pool]
        model((pool[0][0], pool[0][1]))  # creates the variables, outside any tf.function
        table = model.embed.embeddings
        table.assign(tf.tensor_scatter_nd_update(table, [[PAD]], tf.zeros([1, d_model])))  # pad row zero
        optimizer = keras.optimizers.Adam(learning_rate=InverseSqrtSchedule(d_model, warmup),
                                          beta_1=ADAM_BETAS[0], beta_2=ADAM_BETAS[1], epsilon=ADAM_EPS)
        optimizer.build(model.trainable_variables)  # slots now, not inside the first trace

    # Every pool batch has the same shapes (_padded_to_common_length): one trace, static shapes.
    @tf.function(jit_compile=False, reduce_retracing=True)
    def train_step(src: tf.Tensor, tgt_in: tf.Tensor, tgt_out: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = smoothed_cross_entropy(model((src, tgt_in), training=True), tgt_out)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    tokens = sum(batch_tokens(src, tgt_out) for src, _, tgt_out in host_pool) / pool_size
    return pool_workload(
        "transformer", pool, train_step,
        scope=lambda: tf.device(device),
        samples_per_step=batch,
        throughput_unit="sentences/s",
        units_per_step={"tokens/s": tokens},
        model=model,
        optimizer=optimizer,
        description=(f"Transformer base (Vaswani et al. 2017; {size}: {enc_layers}+{dec_layers} layers, "
                     f"d_model {d_model}, {heads} heads, FFN {d_ff}, shared vocab {vocab}, sentences of "
                     f"{shortest}..{longest} tokens), Keras 3 on TensorFlow (tf.function, no XLA), Adam + "
                     f"inverse-sqrt warm-up {warmup}, {pool_size} synthetic batches of {batch} sentence pairs"),
    )
