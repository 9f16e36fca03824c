"""Transformer (base) NMT on synthetic WMT14 en-de-shaped data, in PyTorch.

The architecture is the "base" model of Vaswani et al., "Attention Is All You Need", NeurIPS 2017
(Table 3; reference code tensorflow/tensor2tensor `transformer_base`, and fairseq's
`transformer_wmt_en_de`): 6 encoder and 6 decoder layers, d_model 512, 8 heads of 64, a position-wise
FFN of 2048 with ReLU, dropout 0.1 on each sub-layer's output before the residual add and on the
embeddings + positions (§5.4 "Residual Dropout"), post-LayerNorm `LayerNorm(x + Sublayer(x))` (§3.1),
sinusoidal positions (§3.5) and embeddings scaled by sqrt(d_model) (§3.4). WMT14 en-de uses one
shared source/target BPE vocabulary of 37,000 tokens (§5.1), and the source embedding, the target
embedding and the pre-softmax projection share one weight matrix (§3.4), so the model has
63,082,496 parameters (the paper's Table 3 rounds its base model to 65M). Training follows §5.3/§5.4:
Adam(beta1 0.9, beta2 0.98, eps 1e-9), lr = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) with
4000 warm-up steps, and cross-entropy with label smoothing 0.1 over non-pad target tokens.

Attention is written out with `F.scaled_dot_product_attention`, so a profile shows one
`aten::_scaled_dot_product_*` op per attention (flash/efficient on CUDA, flash_attention_for_cpu on
the CPU) that the FLOP table in analysis/flops/ops.py counts, between explicit q/k/v/out `aten::linear`s.
Deliberate choices, none changing the step's cost:
- no attention-weight dropout: the paper lists only residual and embedding dropout (tensor2tensor's
  `transformer_base` v1 and fairseq's default also use attention_dropout 0);
- the decoder self-attention uses only the causal mask: targets are right-padded, so the causal mask
  already hides every pad key from every real query (a pad query's output reaches only the loss,
  which ignores it); this keeps it on SDPA's `is_causal` path (flash attention on CUDA). Encoder
  self-attention and encoder-decoder attention mask the source's pad keys;
- weights start as in fairseq's transformer: Xavier-uniform linears with zero biases, embeddings
  N(0, d_model^-0.5) with the pad row zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from tbd.models.base import Workload, pool_workload
from tbd.models.pytorch.synthetic import POOL_SIZE, check_build_args, sentence_lengths, token_batch
from tbd.models.specs import (
    TRANSFORMER_ADAM_BETAS,
    TRANSFORMER_ADAM_EPS,
    TRANSFORMER_DROPOUT,
    TRANSFORMER_LABEL_SMOOTHING,
    TRANSFORMER_MAX_POSITIONS,
    TRANSFORMER_SIZES,
)

#: Special token ids; regular tokens are FIRST_TOKEN..vocab-1.
PAD, BOS, EOS = 0, 1, 2
FIRST_TOKEN = 3

# Sizes and hyper-parameters are framework-neutral: one copy in models/specs.py.
MAX_POSITIONS, _SIZES = TRANSFORMER_MAX_POSITIONS, TRANSFORMER_SIZES
DROPOUT, LABEL_SMOOTHING = TRANSFORMER_DROPOUT, TRANSFORMER_LABEL_SMOOTHING
ADAM_BETAS, ADAM_EPS = TRANSFORMER_ADAM_BETAS, TRANSFORMER_ADAM_EPS


class MultiHeadAttention(nn.Module):
    """Multi-head attention (§3.2.2): per-head projections as one d x d linear each for q, k, v and out."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads  # d_model / heads = d_k per head (64 in the base model)
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, query: torch.Tensor, memory: torch.Tensor, keep: torch.Tensor | None = None,
                causal: bool = False) -> torch.Tensor:
        """Attend from query [B, Tq, d] to memory [B, Tk, d]; keep: bool [B, 1, 1, Tk] (True = real key)."""
        q, k, v = (self._split(proj(x)) for proj, x in
                   ((self.q_proj, query), (self.k_proj, memory), (self.v_proj, memory)))
        # SDPA scales by 1/sqrt(d_k) as in equation (1); no attention dropout (see module docstring).
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=causal)  # [B, h, Tq, d_k]
        return self.out_proj(out.transpose(1, 2).flatten(2))

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.heads, -1).transpose(1, 2)  # [B, h, T, d_k]


class FeedForward(nn.Module):
    """Position-wise FFN(x) = max(0, x W1 + b1) W2 + b2 (§3.3)."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.relu(self.w1(x)))


class EncoderLayer(nn.Module):
    """Self-attention and FFN, each as LayerNorm(x + Dropout(Sublayer(x))) (post-LN, §3.1)."""

    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_keep: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.drop(self.self_attn(x, x, src_keep)))
        return self.norm2(x + self.drop(self.ffn(x)))


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention and FFN, each post-LN with residual dropout (§3.1)."""

    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads)
        self.cross_attn = MultiHeadAttention(d_model, heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, y: torch.Tensor, memory: torch.Tensor, src_keep: torch.Tensor) -> torch.Tensor:
        y = self.norm1(y + self.drop(self.self_attn(y, y, causal=True)))
        y = self.norm2(y + self.drop(self.cross_attn(y, memory, src_keep)))
        return self.norm3(y + self.drop(self.ffn(y)))


class Transformer(nn.Module):
    """Encoder-decoder Transformer with one embedding shared by source, target and output projection."""

    def __init__(self, vocab: int, d_model: int, heads: int, d_ff: int, encoder_layers: int,
                 decoder_layers: int, dropout: float = DROPOUT):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, heads, d_ff, dropout) for _ in range(encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, heads, d_ff, dropout) for _ in range(decoder_layers))
        self.drop = nn.Dropout(dropout)
        # Not persistent: a fixed function of position, not a trained or saved quantity.
        self.register_buffer("positions", sinusoid_table(MAX_POSITIONS, d_model), persistent=False)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Logits float [B, T, vocab] from source ids [B, S] and decoder input ids [B, T] (teacher forcing)."""
        src_keep = (src != PAD)[:, None, None, :]  # [B, 1, 1, S], broadcast over heads and queries
        x = self.embed_tokens(src)
        for layer in self.encoder:
            x = layer(x, src_keep)
        y = self.embed_tokens(tgt_in)
        for layer in self.decoder:
            y = layer(y, x, src_keep)
        return F.linear(y, self.embed.weight)  # pre-softmax projection = the shared embedding (§3.4)

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        # §3.4: embeddings times sqrt(d_model); §5.4: dropout on embeddings + positional encodings.
        scaled = self.embed(ids) * math.sqrt(self.d_model)
        return self.drop(scaled + self.positions[: ids.shape[1]])


def sinusoid_table(length: int, d_model: int) -> torch.Tensor:
    """Positional encodings float32 [length, d_model] of §3.5.

    PE(pos, 2i) = sin(pos / 10000^(2i / d_model)) and PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model)),
    interleaved as the paper writes them (tensor2tensor concatenates the sines then the cosines).
    """
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    inv_freq = torch.pow(10_000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table.float()


def inverse_sqrt_lr(step: int, d_model: int, warmup: int) -> float:
    """Learning rate of §5.3 at 1-based step: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def build(batch: int, device: "torch.device | str", size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE, parallel: Callable[[nn.Module], nn.Module] | None = None) -> Workload:
    """Transformer-base training workload: Adam + warm-up schedule on `pool_size` synthetic batches on `device`.

    Args:
        batch: sentence pairs per iteration.
        device: where the model, optimizer state and batches live ("cpu", "cuda", ...).
        size: "full" (Table 3's base model, vocab 37,000) or "test" (tiny, same architecture, for CI).
        seed: fixes weight init and data (drawn on the CPU, so identical on every device).
        pool_size: synthetic batches kept on the device and cycled through by step().
        parallel: wraps the model for data-parallel training (e.g. in DistributedDataParallel);
            step() runs the forward pass through the wrapper, while Workload.model and the
            optimizer keep the module itself (FSDP shards it in place, before the optimizer is
            made). None: single process.
    Returns:
        Workload whose step() runs one iteration and returns the loss tensor (no host sync);
        units_per_step["tokens/s"] is the mean over the pool of non-pad tokens per batch (batch_tokens).
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    vocab, d_model, heads, d_ff, enc_layers, dec_layers, (shortest, longest), warmup = _SIZES[size]
    device = torch.device(device)
    generator = torch.Generator().manual_seed(seed)

    model = Transformer(vocab, d_model, heads, d_ff, enc_layers, dec_layers)
    init_weights(model, generator)
    model.to(device).train()
    # Base lr 1.0 so the LambdaLR factor is the learning rate itself. LambdaLR calls the lambda
    # with 0 before the first step, so the factor uses step + 1 (the paper's steps count from 1).
    # Wrapped before the optimizer is made: FSDP replaces the parameters with their shards.
    net = parallel(model) if parallel else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=ADAM_BETAS, eps=ADAM_EPS)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: inverse_sqrt_lr(step + 1, d_model, warmup))
    # Mean over real target tokens; PyTorch spreads epsilon uniformly over all classes.
    criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=LABEL_SMOOTHING)

    host_pool = [sentence_pair_batch(batch, vocab, shortest, longest, generator) for _ in range(pool_size)]
    pool = [tuple(t.to(device) for t in pair) for pair in host_pool]

    def train_step(src, tgt_in, tgt_out) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        logits = net(src, tgt_in)
        loss = criterion(logits.reshape(-1, vocab), tgt_out.reshape(-1))
        loss.backward()
        optimizer.step()
        schedule.step()  # per iteration, as the paper's schedule is defined over training steps
        return loss

    # Batches differ in length, so tokens per step is their mean (exact over whole trips through the pool).
    tokens = sum(batch_tokens(src, tgt_out) for src, _, tgt_out in host_pool) / pool_size
    return pool_workload(
        "transformer", pool, train_step,
        samples_per_step=batch,
        throughput_unit="sentences/s",
        units_per_step={"tokens/s": tokens},
        model=model,
        optimizer=optimizer,
        description=(f"Transformer base (Vaswani et al. 2017; {size}: {enc_layers}+{dec_layers} layers, "
                     f"d_model {d_model}, {heads} heads, FFN {d_ff}, shared vocab {vocab}, sentences of "
                     f"{shortest}..{longest} tokens), Adam + inverse-sqrt warm-up {warmup}, "
                     f"{pool_size} synthetic batches of {batch} sentence pairs"),
    )


def init_weights(model: Transformer, generator: torch.Generator) -> None:
    """fairseq's transformer init: Xavier-uniform linears, zero biases, N(0, d^-0.5) embeddings, zero pad row."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight, generator=generator)
            nn.init.zeros_(module.bias)
    nn.init.normal_(model.embed.weight, 0.0, model.d_model ** -0.5, generator=generator)
    with torch.no_grad():
        model.embed.weight[PAD].zero_()
    # LayerNorms keep PyTorch's default (weight 1, bias 0), as fairseq's do.


def sentence_pair_batch(batch: int, vocab: int, shortest: int, longest: int, generator: torch.Generator
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One synthetic batch of sentence pairs for teacher forcing.

    Source and target sentences have independent lengths uniform over shortest..longest BPE
    tokens and ids uniform over the regular tokens of the shared vocabulary. The decoder reads
    <s> + target and predicts target + </s>; each side is right-padded with PAD to the batch's
    longest sentence (so the decoder's causal mask also hides its pad keys).

    Returns:
        (src int64 [B, S], tgt_in int64 [B, T + 1], tgt_out int64 [B, T + 1]) on the CPU, where S
        and T are the batch's longest source and target sentence in tokens.
    """
    src_len = sentence_lengths(batch, shortest, longest, generator)
    tgt_len = sentence_lengths(batch, shortest, longest, generator)
    src = token_batch(src_len, FIRST_TOKEN, vocab, PAD, generator)
    tgt = token_batch(tgt_len, FIRST_TOKEN, vocab, PAD, generator)
    tgt_in = torch.cat([torch.full((batch, 1), BOS), tgt], dim=1)
    tgt_out = torch.cat([tgt, torch.full((batch, 1), PAD)], dim=1)
    tgt_out[torch.arange(batch), tgt_len] = EOS
    return src, tgt_in, tgt_out


def batch_tokens(src: torch.Tensor, tgt_out: torch.Tensor) -> float:
    """Non-pad tokens in a batch: source words plus target words and </s> (the count behind tokens/s)."""
    return float((src != PAD).sum() + (tgt_out != PAD).sum())
