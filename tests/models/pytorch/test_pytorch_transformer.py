"""Transformer base workload: parameter count, synthetic WMT14-shaped data, masks, schedule, and that a step trains."""

from __future__ import annotations

import math

import pytest
import torch

from tbd.core.errors import UsageError
from tbd.models.base import Workload
from tbd.models.pytorch import transformer
from tbd.models.pytorch.transformer import BOS, EOS, FIRST_TOKEN, PAD

VOCAB, D, HEADS, D_FF, LAYERS = 37_000, 512, 8, 2048, 6  # Vaswani et al. 2017, Table 3 "base"; §5.1 vocab


def _param_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _tiny(**overrides) -> transformer.Transformer:
    """A small eval-mode model (no dropout) for exact comparisons."""
    args = {"vocab": 40, "d_model": 16, "heads": 4, "d_ff": 32, "encoder_layers": 2, "decoder_layers": 2}
    torch.manual_seed(0)
    return transformer.Transformer(**{**args, **overrides}).eval()


# --- Architecture --------------------------------------------------------------------------

def test_full_parameter_count_closed_form():
    # Closed form, term by term (biases on every linear; no final LayerNorms in the post-LN paper model).
    embedding = VOCAB * D  # ONE table: source = target = pre-softmax projection (§3.4)
    attention = 4 * (D * D + D)  # W_Q, W_K, W_V, W_O with biases
    ffn = D * D_FF + D_FF + D_FF * D + D  # W1, b1, W2, b2
    layer_norm = 2 * D  # gain and bias
    encoder_layer = attention + ffn + 2 * layer_norm
    decoder_layer = 2 * attention + ffn + 3 * layer_norm  # masked self-attention + encoder-decoder attention
    expected = embedding + LAYERS * encoder_layer + LAYERS * decoder_layer
    assert expected == 63_082_496  # ~63M; the paper's Table 3 rounds the base model to 65M
    with torch.device("meta"):
        model = transformer.Transformer(VOCAB, D, HEADS, D_FF, LAYERS, LAYERS)
    assert _param_count(model) == expected


def test_embedding_is_shared_with_the_output_projection():
    model = _tiny()
    assert sum(1 for p in model.parameters() if p.shape[0] == 40) == 1  # only the embedding has a vocab axis
    src, tgt_in = torch.tensor([[5, 6, 7]]), torch.tensor([[BOS, 8, 9]])
    logits = model(src, tgt_in)
    logits[0, -1, 11].backward()
    # Row 11 appears in neither input, so only the pre-softmax projection can give it a gradient.
    assert model.embed.weight.grad[11].abs().sum() > 0


def test_full_workload_fields_and_initial_learning_rate():
    work = transformer.build(2, "cpu", "full", seed=0)
    assert isinstance(work, Workload)
    assert (work.name, work.samples_per_step, work.throughput_unit) == ("transformer", 2, "sentences/s")
    assert _param_count(work.model) == 63_082_496
    group = work.optimizer.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
    # §5.3 at step 1 of 4000 warm-up steps: 512^-0.5 * 1 * 4000^-1.5.
    assert group["lr"] == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    inputs = work.inputs()
    assert len(inputs) == 3 * 3  # (src, tgt_in, tgt_out) for each of the 3 pool batches
    assert all(t.shape[0] == 2 and t.shape[1] <= 50 + 1 for t in inputs)  # <= 50 words (+ <s> or </s>)


def test_learning_rate_schedule_hand_values():
    lr = transformer.inverse_sqrt_lr
    assert lr(1, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)  # linear warm-up
    assert lr(4000, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)  # peak: both branches meet
    assert lr(16_000, 512, 4000) == pytest.approx(512 ** -0.5 / 16_000 ** 0.5)  # inverse-sqrt decay
    work = transformer.build(2, "cpu", "test", seed=0, pool_size=1)  # test size: d 32, warm-up 4
    seen = []
    for _ in range(6):
        seen.append(work.optimizer.param_groups[0]["lr"])
        work.step()
    assert seen == pytest.approx([lr(s, 32, 4) for s in range(1, 7)])


def test_sinusoid_table_hand_values():
    table = transformer.sinusoid_table(3, 4)
    expected = torch.tensor([
        [0.0, 1.0, 0.0, 1.0],
        [math.sin(1), math.cos(1), math.sin(1 / 10_000 ** (2 / 4)), math.cos(1 / 10_000 ** (2 / 4))],
        [math.sin(2), math.cos(2), math.sin(2 / 10_000 ** (2 / 4)), math.cos(2 / 10_000 ** (2 / 4))],
    ])
    torch.testing.assert_close(table, expected)


def test_decoder_is_causal():
    model = _tiny()
    src = torch.tensor([[5, 6, 7, 8]])
    tgt_a, tgt_b = torch.tensor([[BOS, 9, 10, 11]]), torch.tensor([[BOS, 9, 30, 31]])
    with torch.no_grad():
        a, b = model(src, tgt_a), model(src, tgt_b)
    torch.testing.assert_close(a[:, :2], b[:, :2])  # positions 0, 1 never see the changed tokens 2, 3
    assert not torch.allclose(a[:, 2:], b[:, 2:])


def test_padding_does_not_change_a_sentence_result():
    gen = torch.Generator().manual_seed(0)
    model = _tiny()
    src, tgt_in, _ = transformer.sentence_pair_batch(6, 40, 3, 9, gen)
    src_len, tgt_len = (src != PAD).sum(dim=1), (tgt_in != PAD).sum(dim=1)
    row = int(torch.argmin(src_len + tgt_len))  # padded on both sides (lengths 3..9 over 6 draws)
    n_src, n_tgt = int(src_len[row]), int(tgt_len[row])
    assert n_src < src.shape[1] and n_tgt < tgt_in.shape[1]
    with torch.no_grad():
        batched = model(src, tgt_in)[row, :n_tgt]
        alone = model(src[row:row + 1, :n_src], tgt_in[row:row + 1, :n_tgt])[0]
    torch.testing.assert_close(batched, alone)


# --- Synthetic data ------------------------------------------------------------------------

def test_sentence_pairs_cover_lengths_10_to_50_and_the_regular_vocab():
    gen = torch.Generator().manual_seed(0)
    src, tgt_in, tgt_out = transformer.sentence_pair_batch(1000, VOCAB, 10, 50, gen)
    src_len = (src != PAD).sum(dim=1)
    tgt_len = (tgt_out != PAD).sum(dim=1) - 1  # minus </s>
    for lengths in (src_len, tgt_len):
        assert int(lengths.min()) == 10 and int(lengths.max()) == 50
        assert len(torch.unique(lengths)) == 50 - 10 + 1  # every length occurs
        # Uniform 10..50 has mean (10 + 50) / 2 and sd sqrt((41^2 - 1) / 12) ~ 11.8; the mean of
        # 1000 draws is within 4 standard errors (4 * 11.8 / sqrt(1000) ~ 1.5) of it.
        assert abs(float(lengths.float().mean()) - (10 + 50) / 2) < 1.5
    assert src.shape == (1000, 50) and tgt_in.shape == tgt_out.shape == (1000, 51)
    words = torch.cat([src[src != PAD], tgt_in[:, 1:][tgt_in[:, 1:] != PAD]])
    assert int(words.min()) >= FIRST_TOKEN and int(words.max()) < VOCAB  # no specials inside sentences
    # Ids uniform over FIRST_TOKEN..VOCAB-1: mean (3 + 36999) / 2, sd ~ 36997 / sqrt(12) ~ 10,680; with
    # ~60,000 words the standard error is ~ 44, so 4 standard errors is under 200.
    assert abs(float(words.double().mean()) - (FIRST_TOKEN + VOCAB - 1) / 2) < 200
    assert bool((tgt_in[:, 0] == BOS).all())
    assert torch.equal(tgt_out[torch.arange(1000), tgt_len], torch.full((1000,), EOS))
    # Right padding: every row is its words then only PAD.
    assert torch.equal(src != PAD, torch.arange(50) < src_len.unsqueeze(1))
    # Teacher forcing: the decoder's input is its expected output shifted right by one.
    shifted = tgt_out[:, :-1]
    assert torch.equal(tgt_in[:, 1:], shifted.masked_fill(shifted == EOS, PAD))


def test_batch_tokens_hand_count():
    src = torch.tensor([[5, 6, 7], [8, 9, PAD]])
    tgt_out = torch.tensor([[5, EOS, PAD], [6, 7, EOS]])
    assert transformer.batch_tokens(src, tgt_out) == (3 + 2) + (2 + 3)


def test_units_per_step_is_pool_mean_of_tokens():
    work = transformer.build(3, "cpu", "test", seed=1, pool_size=2)
    inputs = work.inputs()  # (src, tgt_in, tgt_out) per pool batch
    per_batch = [int((inputs[i] != PAD).sum() + (inputs[i + 2] != PAD).sum()) for i in (0, 3)]
    assert work.units_per_step == {"tokens/s": (per_batch[0] + per_batch[1]) / 2}


def test_same_seed_same_workload():
    a, b = transformer.build(2, "cpu", "test", seed=3), transformer.build(2, "cpu", "test", seed=3)
    c = transformer.build(2, "cpu", "test", seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.inputs(), b.inputs(), strict=True))
    assert all(torch.equal(x, y) for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a.inputs(), c.inputs()))
    assert not all(torch.equal(x, y) for x, y in zip(a.model.parameters(), c.model.parameters()))


# --- Training ------------------------------------------------------------------------------

def test_test_size_training_lowers_loss_on_a_fixed_batch():
    work = transformer.build(4, "cpu", "test", seed=0, pool_size=1)
    losses = []
    with torch.random.fork_rng():
        torch.manual_seed(0)  # dropout draws from the global generator; fix it so the test is repeatable
        for _ in range(8):
            loss = work.step()
            assert isinstance(loss, torch.Tensor) and loss.ndim == 0
            losses.append(float(loss.detach()))
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": None}, {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": "cpu", "size": "test", **kwargs}
    with pytest.raises(UsageError):
        transformer.build(**args)
