"""English-to-French translation of numbers written in words, for Seq2Seq and the Transformer, in PyTorch.

The data is generated offline by a real translation system: the `num2words` package (rule-based number
spelling for dozens of languages, deterministic, no download). A source sentence is a number written in
English, the target the same number written in French:

    "seventy-one thousand, two hundred and ninety-nine" -> "soixante et onze mille deux cent quatre-vingt-dix-neuf"

English to French, not digits to words or English to English, because it is a genuine translation: the
vocabularies differ, the lengths differ (English's "and" and "one" of "one hundred" have no French word;
French's 70..99 are 60+10..19 and 4x20+0..19, so "seventy-one" becomes "soixante et onze" and "ninety-nine"
"quatre-vingt-dix-neuf"), and the right word depends on context ("cents" only at the end of a number,
"quatre-vingts" likewise, "vingt et un" but "vingt-deux"). German would reorder more (units before tens), but
it writes each number as one compound word, which word BLEU would score as exact match only.

Numbers are 0..999,999, drawn by a fixed seed (SPLIT_SEED) with a number of digits uniform over 1..6 (so short
numbers are not swamped by the 900,000 six-digit ones), distinct, in draw order: the first TRAIN_PAIRS (8,000)
train, the next HELD_OUT (500) are held out. The split is disjoint by construction and never depends on the
run's seed (which varies the weights and the order of the batches only). The 100 numbers below 100 are used up
early, so all are in training and the held-out numbers have 3..6 digits (18, 127, 186, 169): the held-out
sentences are the long ones (6.7 English, 5.4 French words on average), whose translation composes the parts.

Tokens are words: the sentence split on spaces, with each hyphen and comma its own token ("quatre-vingt-dix"
-> "quatre - vingt - dix"), so the vocabulary is the closed set of number words of both languages (~60, built
from the training split; anything else would be <unk>) and `detokenize(tokenize(s)) == s` for every sentence
num2words writes. Characters would triple the lengths the decoders walk for no gain on a closed vocabulary.
Both models share one vocabulary of both languages (the Transformer ties its embeddings across languages, as
the base model does on WMT's shared BPE).

Metric: corpus BLEU by sacrebleu (`corpus_bleu`, default 13a tokenization, on the detokenized French),
in BLEU points 0..100, of greedy translations of the held-out numbers. The 13a tokenizer keeps hyphenated
words whole, so "quatre-vingt-dix-neuf" for "quatre-vingt-dix-sept" is a wrong word, not three right tokens.

Sizes: the vocabulary is always the task's (63). "test": the Transformer keeps the suite's test size
(models/specs.py: d_model 32, 4 heads, FFN 128, 2+2 layers); Seq2Seq keeps its 2+2 LSTM layers but at width 64
(SEQ2SEQ_TEST_WIDTH) instead of the suite's 16: at 16 the runs need 11 (seed 0), 19 (seed 1) and over 19 (seed
2, still at 44 BLEU) epochs; at 32 seed 2 needs 14; at 64 it needs 6. "full" is the suite's full widths
(Seq2Seq 512 / 2x512, Transformer base 512 / 8 heads / 2048 / 6+6).
"""

from __future__ import annotations

import functools
import random
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from tbd.models.pytorch.seq2seq import Seq2Seq
from tbd.models.pytorch.transformer import (
    ADAM_BETAS,
    ADAM_EPS,
    LABEL_SMOOTHING,
    Transformer,
    init_weights,
    inverse_sqrt_lr,
)
from tbd.models.specs import SEQ2SEQ_INIT_SCALE, SEQ2SEQ_SIZES, TRANSFORMER_SIZES
from tbd.models.tasks.training import descend, synchronize

SOURCE_LANG, TARGET_LANG = "en", "fr"
MAX_DIGITS = 6  # numbers 0..999,999
TRAIN_PAIRS = 8_000
HELD_OUT = 500
SPLIT_SEED = 0

#: Special token ids, the same as the suite's models (models/pytorch/seq2seq.py and transformer.py); <unk> next.
PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")
#: Seq2Seq's embedding and LSTM width at test size (see the module docstring for why not the suite's 16).
SEQ2SEQ_TEST_WIDTH = 64
#: Seq2Seq: Adam at lr 0.01. At the suite's 0.001 (and at 0.003) a 16-wide model still scores under 10 BLEU
#: after 15 epochs; at 0.01 it passes 90 in about 10. At width 64, lr 0.005 is at 38 BLEU when 0.01 is at 98.6.
SEQ2SEQ_LR = 1e-2
#: Transformer: the base model's schedule (d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), models/pytorch/
#: transformer.py) with the warm-up sized to the task: an epoch is 125 steps at batch 64, and the suite's
#: test-size warm-up of 4 steps (made for profiling a few steps) would peak at lr 0.09; 400 steps peak at 0.009.
#: "full" keeps the paper's 4000.
TRANSFORMER_WARMUP = {"test": 400, "full": 4000}
#: Greedy decoding stops here if a sentence has not written </s> (the longest French target is 15 tokens + </s>).
MAX_DECODE = 24


def tokenize(sentence: str) -> list[str]:
    """Words of a num2words sentence, with hyphens and commas as tokens of their own."""
    return sentence.replace("-", " - ").replace(",", " ,").split()


def detokenize(tokens: list[str]) -> str:
    """The sentence `tokens` came from: no space around a hyphen or before a comma (num2words' spelling)."""
    return " ".join(tokens).replace(" - ", "-").replace(" ,", ",")


def draw_numbers() -> tuple[list[int], list[int]]:
    """(training numbers, held-out numbers): distinct, disjoint, fixed by SPLIT_SEED."""
    rng = random.Random(SPLIT_SEED)
    seen: set[int] = set()
    numbers: list[int] = []
    while len(numbers) < TRAIN_PAIRS + HELD_OUT:
        digits = rng.randint(1, MAX_DIGITS)
        n = rng.randrange(0 if digits == 1 else 10 ** (digits - 1), 10 ** digits)
        if n not in seen:
            seen.add(n)
            numbers.append(n)
    return numbers[:TRAIN_PAIRS], numbers[TRAIN_PAIRS:]


@functools.lru_cache(maxsize=None)
def sentence_pairs(numbers: tuple[int, ...]) -> list[tuple[str, str]]:
    """(English, French) of each number, as num2words writes them (cached: num2words takes ~1 ms a
    number, and a `tbd train` process builds its N runs on the same split)."""
    from num2words import num2words

    return [(num2words(n, lang=SOURCE_LANG), num2words(n, lang=TARGET_LANG)) for n in numbers]


@dataclass
class Vocab:
    """Token <-> id over the training split's words of both languages, after the special tokens."""

    words: list[str]

    def __post_init__(self) -> None:
        self.ids = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def of(cls, pairs: list[tuple[str, str]]) -> Vocab:
        return cls([*SPECIALS, *sorted({t for pair in pairs for s in pair for t in tokenize(s)})])

    def encode(self, sentence: str) -> list[int]:
        return [self.ids.get(t, UNK) for t in tokenize(sentence)]

    def decode(self, ids: list[int]) -> str:
        """The sentence of `ids` up to the first </s> (specials dropped)."""
        out = []
        for i in ids:
            if i == EOS:
                break
            if i >= len(SPECIALS):
                out.append(self.words[i])
        return detokenize(out)

    def __len__(self) -> int:
        return len(self.words)


@dataclass
class Split:
    """One side of the split as padded id tensors: src [N, S], tgt_in [N, T + 1] (<s> + target), tgt_out
    (target + </s>); lengths stay int64 on the CPU (pack_padded_sequence wants them there, and batch shapes
    come from them without a device sync)."""

    src: torch.Tensor
    src_len: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    tgt_len: torch.Tensor  # target tokens + </s>
    references: list[str]  # the French sentences, for BLEU

    @classmethod
    def of(cls, pairs: list[tuple[str, str]], vocab: Vocab) -> Split:
        src = [vocab.encode(s) for s, _ in pairs]
        tgt = [vocab.encode(t) for _, t in pairs]
        src_len = torch.tensor([len(s) for s in src])
        tgt_len = torch.tensor([len(t) + 1 for t in tgt])
        src_t = torch.full((len(pairs), int(src_len.max())), PAD)
        tgt_in = torch.full((len(pairs), int(tgt_len.max())), PAD)
        tgt_out = torch.full((len(pairs), int(tgt_len.max())), PAD)
        for i, (s, t) in enumerate(zip(src, tgt)):
            src_t[i, :len(s)] = torch.tensor(s)
            tgt_in[i, :len(t) + 1] = torch.tensor([BOS, *t])
            tgt_out[i, :len(t) + 1] = torch.tensor([*t, EOS])
        return cls(src_t, src_len, tgt_in, tgt_out, tgt_len, [t for _, t in pairs])

    def to(self, device: torch.device) -> Split:
        return Split(self.src.to(device), self.src_len, self.tgt_in.to(device), self.tgt_out.to(device),
                     self.tgt_len, self.references)

    def __len__(self) -> int:
        return len(self.references)


def load_split() -> tuple[Vocab, Split, Split]:
    """(vocabulary, training split, held-out split), on the CPU."""
    train_n, test_n = draw_numbers()
    train_pairs, test_pairs = sentence_pairs(tuple(train_n)), sentence_pairs(tuple(test_n))
    vocab = Vocab.of(train_pairs)
    return vocab, Split.of(train_pairs, vocab), Split.of(test_pairs, vocab)


def bleu(hypotheses: list[str], references: list[str]) -> float:
    """sacrebleu's corpus BLEU in points (0..100), one reference per sentence, default 13a tokenization."""
    import sacrebleu

    return sacrebleu.corpus_bleu(hypotheses, [references]).score


# --- greedy decoding: the models' forward() is teacher-forced, so decoding steps their layers one token at a time


@torch.no_grad()
def greedy_seq2seq(model: Seq2Seq, src: torch.Tensor, src_len: torch.Tensor, max_len: int = MAX_DECODE
                   ) -> torch.Tensor:
    """Greedy translations int64 [B, <= max_len] of src [B, S]: Seq2Seq.forward's math, one target step at a
    time (the decoder LSTM carries its state; attention over the encoder's outputs at each step)."""
    packed = pack_padded_sequence(model.src_embed(src), src_len, batch_first=True, enforce_sorted=False)
    memory, state = model.encoder(packed)  # state comes back in the batch's own order
    memory, _ = pad_packed_sequence(memory, batch_first=True, total_length=src.shape[1])
    keys = model.attn_score(memory).transpose(1, 2)  # [B, H, S]
    pad = (src == PAD).unsqueeze(1)
    token = torch.full((src.shape[0], 1), BOS, device=src.device)
    out = []
    for _ in range(max_len):
        hidden, state = model.decoder(model.tgt_embed(token), state)  # [B, 1, H]
        context = torch.softmax((hidden @ keys).masked_fill(pad, float("-inf")), dim=-1) @ memory
        logits = model.proj(torch.tanh(model.attn_out(torch.cat([context, hidden], dim=-1))))
        token = logits.argmax(-1)  # [B, 1]
        out.append(token)
        if _all_ended(out):
            break
    return torch.cat(out, dim=1)


@torch.no_grad()
def greedy_transformer(model: Transformer, src: torch.Tensor, max_len: int = MAX_DECODE) -> torch.Tensor:
    """Greedy translations int64 [B, <= max_len] of src [B, S]: the encoder once, then the decoder over the
    prefix written so far, taking the last position's most likely token (Transformer.forward's math)."""
    keep = (src != PAD)[:, None, None, :]
    memory = model.embed_tokens(src)
    for layer in model.encoder:
        memory = layer(memory, keep)
    prefix = torch.full((src.shape[0], 1), BOS, device=src.device)
    out = []
    for _ in range(max_len):
        y = model.embed_tokens(prefix)
        for layer in model.decoder:
            y = layer(y, memory, keep)
        token = F.linear(y[:, -1:], model.embed.weight).argmax(-1)  # [B, 1]
        out.append(token)
        prefix = torch.cat([prefix, token], dim=1)
        if _all_ended(out):
            break
    return torch.cat(out, dim=1)


def _all_ended(out: list[torch.Tensor]) -> bool:
    """Whether every sentence has written </s> (a host sync, checked every 4 steps to keep few of them)."""
    if len(out) % 4:
        return False
    return bool((torch.cat(out, dim=1) == EOS).any(dim=1).all())


@dataclass
class TaskRun:
    """One run: `train_epoch` is one shuffled pass over the training pairs (teacher forcing), `evaluate` the
    corpus BLEU of greedy translations of the held-out numbers."""

    model_name: str
    model: nn.Module
    optimizer: torch.optim.Optimizer
    schedule: torch.optim.lr_scheduler.LRScheduler | None
    criterion: nn.Module
    vocab: Vocab
    train: Split
    test: Split
    batch: int
    generator: torch.Generator
    device: torch.device
    hyperparameters: dict[str, Any] = field(default_factory=dict)

    @property
    def train_samples(self) -> int:
        return len(self.train)

    @property
    def eval_samples(self) -> int:
        return len(self.test)

    def train_epoch(self) -> int:
        """One shuffled pass over the training pairs; returns the sentence pairs trained."""
        self.model.train()
        order = torch.randperm(len(self.train), generator=self.generator)
        for start in range(0, len(order), self.batch):
            self._step(order[start:start + self.batch])
        self.sync()
        return len(order)

    def train_step(self) -> None:
        """One step on the first `batch` training pairs, without the schedule's step (the learning rate of a
        profiled step does not change its cost): what tbd's profiler times for the stable phase."""
        self.model.train()
        self._step(torch.arange(min(self.batch, len(self.train))), schedule=False)

    def _step(self, idx: torch.Tensor, schedule: bool = True) -> None:
        src_len = self.train.src_len[idx]
        src_len, by_len = src_len.sort(descending=True)  # longest first: pack_padded_sequence's contract
        idx = idx[by_len]
        s, t = int(src_len[0]), int(self.train.tgt_len[idx].max())
        dev_idx = idx.to(self.device)
        src = self.train.src[dev_idx, :s]
        tgt_in, tgt_out = self.train.tgt_in[dev_idx, :t], self.train.tgt_out[dev_idx, :t]
        logits = self.model(src, src_len, tgt_in) if self.model_name == "seq2seq" else self.model(src, tgt_in)
        loss = self.criterion(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        descend(self.optimizer, loss)
        if schedule and self.schedule is not None:
            self.schedule.step()

    def sync(self) -> None:
        synchronize(self.device)

    def translate(self, src: torch.Tensor, src_len: torch.Tensor) -> list[str]:
        """Greedy French for a batch of source ids (padded [B, S], lengths on the CPU)."""
        self.model.eval()
        if self.model_name == "seq2seq":
            ids = greedy_seq2seq(self.model, src, src_len)
        else:
            ids = greedy_transformer(self.model, src)
        return [self.vocab.decode(row) for row in ids.tolist()]

    def evaluate(self) -> float:
        """Corpus BLEU (points) of the greedy translations of the held-out split."""
        hypotheses = []
        for start in range(0, len(self.test), 250):
            s = int(self.test.src_len[start:start + 250].max())
            hypotheses += self.translate(self.test.src[start:start + 250, :s], self.test.src_len[start:start + 250])
        return bleu(hypotheses, self.test.references)

    def latency_per_item_s(self) -> float:
        """DAWNBench's inference latency: each held-out number translated alone (greedy, to the French
        string), mean seconds per sentence."""
        start = time.perf_counter()
        for i in range(len(self.test)):
            s = int(self.test.src_len[i])
            self.translate(self.test.src[i:i + 1, :s], self.test.src_len[i:i + 1])  # .tolist() waits for it
        return (time.perf_counter() - start) / len(self.test)


def build(model_name: str, batch: int, seed: int, size: str = "test", device: torch.device | None = None) -> TaskRun:
    """A run of `model_name` (seq2seq or transformer) on English-to-French numbers, weights and batches from
    `seed`, on `device` (default the CPU)."""
    if model_name not in ("seq2seq", "transformer"):
        raise ValueError(f"num2words translation trains seq2seq or transformer, not {model_name!r}")
    device = device or torch.device("cpu")
    vocab, train, test = load_split()
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    if model_name == "seq2seq":
        _vocab, embed, hidden, layers, _lengths = SEQ2SEQ_SIZES[size]
        if size == "test":
            embed = hidden = SEQ2SEQ_TEST_WIDTH
        model = Seq2Seq(len(vocab), embed, hidden, layers)
        for param in model.parameters():
            nn.init.uniform_(param, -SEQ2SEQ_INIT_SCALE, SEQ2SEQ_INIT_SCALE, generator=generator)
        lr = SEQ2SEQ_LR
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        schedule = None
        criterion = nn.CrossEntropyLoss(ignore_index=PAD)
        hyper = {"opt_name": "adam", "opt_base_learning_rate": lr}
    else:
        _vocab, d_model, heads, d_ff, enc, dec, _lengths, _warmup = TRANSFORMER_SIZES[size]
        warmup = TRANSFORMER_WARMUP[size]
        model = Transformer(len(vocab), d_model, heads, d_ff, enc, dec)
        init_weights(model, generator)
        optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=ADAM_BETAS, eps=ADAM_EPS)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: inverse_sqrt_lr(step + 1, d_model, warmup))
        criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=LABEL_SMOOTHING)
        hyper = {"opt_name": "adam", "opt_base_learning_rate": inverse_sqrt_lr(warmup, d_model, warmup),
                 "opt_adam_beta_1": ADAM_BETAS[0], "opt_adam_beta_2": ADAM_BETAS[1], "opt_adam_epsilon": ADAM_EPS,
                 "opt_learning_rate_warmup_steps": warmup, "label_smoothing": LABEL_SMOOTHING}
    model.to(device)
    task = TaskRun(model_name, model, optimizer, schedule, criterion, vocab, train.to(device), test.to(device),
                   batch, generator, device, hyper)
    task.sync()  # init_stop comes after the weights and data are on the device
    return task

