"""MXNet Gluon suite workloads: parameter counts against PyTorch's, a learning step, synthetic data.

Runs only where mxnet imports (its own venv, .venv-mxnet: MXNet 1.9.1 needs numpy < 1.24):
    PYTHONPATH=. .venv-mxnet/bin/python -m pytest -q tests/test_models_mxnet.py
"""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from models import numpy_synthetic as synthetic  # noqa: E402
from models.mxnet import resnet50, seq2seq  # noqa: E402
from tbd.errors import UsageError  # noqa: E402


def _trainable(block) -> int:
    """Values in parameters that get gradients (Gluon also lists BatchNorm running stats, grad_req 'null')."""
    return sum(int(np.prod(p.shape)) for p in block.collect_params().values() if p.grad_req != "null")


def _frozen(block) -> int:
    return sum(int(np.prod(p.shape)) for p in block.collect_params().values() if p.grad_req == "null")


def _resnet50_counts() -> tuple[int, int]:
    """(trainable parameters, BatchNorm running-stat values) of ResNet-50 v1.5, 1000 classes, by closed form."""
    weights, bn_channels = 3 * 64 * 7 * 7, 64  # stem conv and its BatchNorm
    in_ch = 64
    for stage, blocks in enumerate((3, 4, 6, 3)):
        w = 64 * 2 ** stage
        for block in range(blocks):
            weights += in_ch * w + 9 * w * w + w * 4 * w  # 1x1, 3x3, 1x1 convolutions, no bias
            bn_channels += w + w + 4 * w
            if block == 0:  # projection shortcut: 1x1 conv + BatchNorm
                weights += in_ch * 4 * w
                bn_channels += 4 * w
            in_ch = 4 * w
    weights += 2048 * 1000 + 1000  # fully connected layer with bias
    return weights + 2 * bn_channels, 2 * bn_channels  # gamma+beta trainable; mean+var running stats


def _seq2seq_count(vocab=17_188, embed=512, hidden=512) -> int:
    """Trainable parameters of the NMT model by closed form (two LSTM bias vectors per layer)."""
    lstm_layer0 = 4 * hidden * (embed + hidden) + 2 * 4 * hidden
    lstm_layer1 = 4 * hidden * (hidden + hidden) + 2 * 4 * hidden
    return (2 * vocab * embed + 2 * (lstm_layer0 + lstm_layer1)
            + hidden * hidden + 2 * hidden * hidden + hidden * vocab)


def test_resnet50_full_parameter_count_matches_pytorch():
    trainable, running = _resnet50_counts()
    assert trainable == 25_557_032  # torchvision's documented ResNet-50 count
    model = resnet50.build(1, mx.cpu(), "full", pool_size=1).model
    assert _trainable(model) == trainable
    assert _frozen(model) == running


def test_seq2seq_full_parameter_count_matches_pytorch():
    assert _seq2seq_count() == 35_592_192  # models/pytorch/seq2seq.py's count
    assert _trainable(seq2seq.build(1, mx.cpu(), "full", pool_size=1).model) == _seq2seq_count()


@pytest.mark.parametrize("module", [resnet50, seq2seq])
def test_training_lowers_the_loss_on_a_fixed_batch(module):
    workload = module.build(4, mx.cpu(), "test", pool_size=1)
    losses = [float(workload.step().mean().asscalar()) for _ in range(8)]
    assert losses[-1] < losses[0]
    assert all(np.isfinite(losses))


def test_step_returns_per_sample_loss_without_reading_it():
    workload = resnet50.build(3, mx.cpu(), "test", pool_size=2)
    loss = workload.step()
    assert isinstance(loss, mx.nd.NDArray) and loss.shape == (3,)
    assert workload.samples_per_step == 3 and workload.throughput_unit == "images/s"
    assert [a.shape for a in workload.inputs()] == [(3, 3, 32, 32), (3,)] * 2
    assert isinstance(workload.optimizer, mx.gluon.Trainer)


def test_seq2seq_loss_is_the_mean_over_real_target_tokens():
    workload = seq2seq.build(3, mx.cpu(), "test", pool_size=1)
    src, tgt_in, tgt_out, weight = workload.inputs()
    logits = workload.model(src, tgt_in).asnumpy().astype(np.float64)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    labels = tgt_out.asnumpy()
    nll = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    real = labels != seq2seq.PAD
    expected = nll[real].sum() / real.sum()
    loss = workload.step()  # the step's loss is computed before its update
    assert float(loss.mean().asscalar()) == pytest.approx(expected, rel=1e-5)


def test_sentence_pair_batch_layout():
    rng = np.random.RandomState(0)
    src, tgt_in, tgt_out = seq2seq.sentence_pair_batch(64, 50, 4, 8, rng)
    src_len = (src != seq2seq.PAD).sum(1)
    assert src_len.min() >= 4 and src_len.max() <= 8 and src.shape[1] == src_len.max()
    assert np.all(np.diff(src_len) <= 0)  # longest source first
    assert src[src != seq2seq.PAD].min() >= seq2seq.FIRST_TOKEN and src.max() < 50
    assert tgt_in.shape == tgt_out.shape and np.all(tgt_in[:, 0] == seq2seq.BOS)
    tgt_len = (tgt_out != seq2seq.PAD).sum(1) - 1  # words, without </s>
    assert tgt_len.min() >= 4 and tgt_len.max() <= 8 and tgt_out.shape[1] == tgt_len.max() + 1
    assert np.all(tgt_out[np.arange(64), tgt_len] == seq2seq.EOS)
    assert np.all((tgt_out == seq2seq.EOS).sum(1) == 1)
    # The decoder reads the words shifted right by one: tgt_in[t + 1] == tgt_out[t] for words.
    words = np.arange(tgt_out.shape[1] - 1)[None, :] < tgt_len[:, None]
    assert np.all(tgt_in[:, 1:][words] == tgt_out[:, :-1][words])
    assert seq2seq.batch_tokens(src, tgt_out) == src_len.sum() + (tgt_len + 1).sum()


def test_seq2seq_workload_counts_tokens_and_holds_the_pool():
    workload = seq2seq.build(2, mx.cpu(), "test", seed=3, pool_size=2)
    arrays = workload.inputs()
    assert len(arrays) == 2 * 4
    per_batch = [seq2seq.batch_tokens(arrays[i].asnumpy(), arrays[i + 2].asnumpy()) for i in (0, 4)]
    assert workload.units_per_step == {"tokens/s": sum(per_batch) / 2}
    assert workload.samples_per_step == 2 and workload.throughput_unit == "sentences/s"


def test_image_batch_shapes_and_seeding():
    images, labels = synthetic.image_batch(5, (3, 8, 8), 10, np.random.RandomState(1))
    assert images.shape == (5, 3, 8, 8) and images.dtype == np.float32
    assert labels.shape == (5,) and labels.min() >= 0 and labels.max() < 10
    again, _ = synthetic.image_batch(5, (3, 8, 8), 10, np.random.RandomState(1))
    assert np.array_equal(images, again)


@pytest.mark.parametrize("kwargs", [{"size": "huge"}, {"batch": 0}, {"pool_size": 0}, {"batch": 2.0}])
def test_bad_build_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": mx.cpu(), "size": "test", **kwargs}
    with pytest.raises(UsageError):
        resnet50.build(**args)
