"""The PyTorch suite workloads: architecture sizes, synthetic data, and that a step trains."""

from __future__ import annotations

import math

import pytest
import torch

from tbd.core.errors import UsageError
from tbd.models.base import Workload
from tbd.models.pytorch import resnet50, seq2seq
from tbd.models.pytorch.seq2seq import BOS, EOS, FIRST_TOKEN, PAD

FULL_VOCAB = 17_188


def _param_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _meta(factory, *args) -> torch.nn.Module:
    """Build a module on the meta device: shapes only, no memory, no init cost."""
    with torch.device("meta"):
        return factory(*args)


# --- ResNet -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    # torchvision's documented counts (ResNet50/101/152_Weights.IMAGENET1K_V1 "num_params").
    ("resnet50", 25_557_032),
    ("resnet101", 44_549_160),
    ("resnet152", 60_192_808),
])
def test_resnet_parameter_counts_match_torchvision(name, expected):
    assert _param_count(_meta(resnet50.resnet, resnet50.DEPTHS[name])) == expected


def test_resnet_is_v1_5_stride_on_the_3x3_conv():
    model = _meta(resnet50.resnet, resnet50.DEPTHS["resnet50"])
    blocks = [m for m in model if isinstance(m, resnet50.Bottleneck)]
    first_of_stage2 = blocks[3]  # stage 1 has 3 blocks
    assert first_of_stage2.conv1.stride == (1, 1)
    assert first_of_stage2.conv2.stride == (2, 2)
    assert first_of_stage2.downsample[0].stride == (2, 2)


def test_full_resnet50_workload_shapes():
    work = resnet50.build(2, "cpu", "full", seed=0)
    assert isinstance(work, Workload)
    assert (work.name, work.samples_per_step, work.throughput_unit) == ("resnet50", 2, "images/s")
    assert _param_count(work.model) == 25_557_032
    inputs = work.inputs()
    assert len(inputs) == 2 * 3  # (images, labels) for each of the 3 pool batches
    images, labels = inputs[0], inputs[1]
    assert images.shape == (2, 3, 224, 224) and images.dtype == torch.float32
    assert labels.shape == (2,) and int(labels.min()) >= 0 and int(labels.max()) < 1000


# --- Seq2Seq ------------------------------------------------------------------------------

def test_seq2seq_parameter_count_closed_form():
    vocab, embed, hidden, layers = FULL_VOCAB, 512, 512, 2
    embeddings = 2 * vocab * embed  # source and target tables
    lstm_layer = 4 * (embed * hidden + hidden * hidden + 2 * hidden)  # 4 gates: W_ih, W_hh, b_ih, b_hh
    assert embed == hidden  # so every layer (first included) has the same input width
    lstms = 2 * layers * lstm_layer  # encoder and decoder
    attention = hidden * hidden + (2 * hidden) * hidden  # W_a (score), W_c (concat -> 512), no bias
    projection = hidden * vocab  # no bias
    model = _meta(seq2seq.Seq2Seq, vocab, embed, hidden, layers)
    assert _param_count(model) == embeddings + lstms + attention + projection


def test_sentence_pairs_use_the_whole_length_range_and_vocab():
    gen = torch.Generator().manual_seed(0)
    src, src_len, tgt_in, tgt_out = seq2seq.sentence_pair_batch(500, FULL_VOCAB, 20, 30, gen)
    tgt_len = (tgt_out != PAD).sum(dim=1) - 1  # minus </s>
    for lengths in (src_len, tgt_len):
        assert int(lengths.min()) == 20 and int(lengths.max()) == 30
        assert len(torch.unique(lengths)) == 30 - 20 + 1  # every length occurs
    assert torch.equal((src != PAD).sum(dim=1), src_len)
    assert src.shape == (500, 30) and tgt_in.shape == tgt_out.shape == (500, 31)
    assert bool((src_len[:-1] >= src_len[1:]).all())  # longest source first, for packing
    words = src[src != PAD]
    assert int(words.min()) >= FIRST_TOKEN and int(words.max()) < FULL_VOCAB
    assert bool((tgt_in[:, 0] == BOS).all())
    assert torch.equal(tgt_out[torch.arange(500), tgt_len], torch.full((500,), EOS))
    # Teacher forcing: the decoder's input is its expected output shifted right by one.
    shifted = tgt_out[:, :-1]
    assert torch.equal(tgt_in[:, 1:], shifted.masked_fill(shifted == EOS, PAD))


def test_batch_tokens_hand_count():
    src = torch.tensor([[5, 6, 7], [8, 9, PAD]])
    tgt_out = torch.tensor([[5, EOS, PAD], [6, 7, EOS]])
    assert seq2seq.batch_tokens(src, tgt_out) == (3 + 2) + (2 + 3)


def test_seq2seq_units_per_step_is_pool_mean_of_tokens():
    work = seq2seq.build(3, "cpu", "test", seed=1, pool_size=2)
    inputs = work.inputs()  # (src, tgt_in, tgt_out) per pool batch
    # Counted from the decoder *input* (<s> + words) rather than its output (words + </s>): same count.
    per_batch = [int((inputs[i] != PAD).sum() + (inputs[i + 1] != PAD).sum()) for i in (0, 3)]
    assert work.units_per_step == {"tokens/s": (per_batch[0] + per_batch[1]) / 2}
    assert (work.samples_per_step, work.throughput_unit) == (3, "sentences/s")


def test_seq2seq_padding_does_not_change_a_sentence_result():
    gen = torch.Generator().manual_seed(0)
    model = seq2seq.Seq2Seq(50, 8, 8, 2).eval()
    src, src_len, tgt_in, _ = seq2seq.sentence_pair_batch(4, 50, 3, 9, gen)
    last = 3  # shortest source; padded in the batch
    assert int(src_len[last]) < src.shape[1]
    n_src = int(src_len[last])
    n_tgt = int((tgt_in[last] != PAD).sum())
    with torch.no_grad():
        batched = model(src, src_len, tgt_in)[last, :n_tgt]
        alone = model(src[last:, :n_src], src_len[last:], tgt_in[last:, :n_tgt])[0]
    torch.testing.assert_close(batched, alone)


# --- Both ---------------------------------------------------------------------------------

@pytest.mark.parametrize("module", [resnet50, seq2seq])
def test_test_size_training_lowers_loss_on_a_fixed_batch(module):
    work = module.build(4, "cpu", "test", seed=0, pool_size=1)
    losses = []
    for _ in range(8):
        loss = work.step()
        assert isinstance(loss, torch.Tensor) and loss.ndim == 0
        losses.append(float(loss.detach()))
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("module", [resnet50, seq2seq])
def test_same_seed_same_workload(module):
    a, b = module.build(2, "cpu", "test", seed=3), module.build(2, "cpu", "test", seed=3)
    c = module.build(2, "cpu", "test", seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.inputs(), b.inputs(), strict=True))
    assert all(torch.equal(x, y) for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a.inputs(), c.inputs()))


@pytest.mark.parametrize("module", [resnet50, seq2seq])
@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": None}, {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(module, kwargs):
    args = {"batch": 2, "device": "cpu", "size": "test", **kwargs}
    with pytest.raises(UsageError):
        module.build(**args)


@pytest.mark.parametrize("variant, params", [("resnet101", 44_549_160), ("resnet152", 60_192_808)])
def test_deeper_resnets_are_registered_builders(variant, params):
    # torchvision's resnet101 / resnet152 parameter counts (torchvision.models docs, 1000 classes)
    from tbd.cli.registry import load_builder

    build = load_builder(variant, "pytorch")
    wl = build(batch=8, device="cpu", size="test", seed=0, pool_size=1)
    assert wl.name == variant
    losses = [float(wl.step().detach()) for _ in range(10)]
    assert all(map(math.isfinite, losses)) and losses[-1] < losses[0]
    from tbd.models.pytorch.resnet50 import DEPTHS, resnet

    with torch.device("meta"):
        assert sum(p.numel() for p in resnet(DEPTHS[variant]).parameters()) == params
