"""TensorFlow (Keras 3) suite workloads: parameter counts against PyTorch's, a learning step, synthetic data.

Runs only where tensorflow imports (its own venv, .venv-tensorflow):
    PYTHONPATH=. .venv-tensorflow/bin/python -m pytest -q tests/test_models_tensorflow.py
"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
import keras  # noqa: E402  (Keras 3, installed with tensorflow)

from models import numpy_synthetic as synthetic  # noqa: E402
from models.tensorflow import resnet50, seq2seq  # noqa: E402
from tbd.errors import UsageError  # noqa: E402

CPU = "/CPU:0"


def _count(variables) -> int:
    return sum(int(np.prod(v.shape)) for v in variables)


def _resnet50_counts() -> tuple[int, int]:
    """(trainable parameters, BatchNorm moving-stat values) of ResNet-50 v1.5, 1000 classes, by closed form."""
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
    return weights + 2 * bn_channels, 2 * bn_channels  # gamma+beta trainable; moving mean+variance not


def _seq2seq_count(vocab=17_188, embed=512, hidden=512, lstm_biases=1) -> int:
    """Trainable parameters of the NMT model by closed form; Keras LSTMs have 1 bias vector per layer, PyTorch's 2."""
    lstm_layer0 = 4 * hidden * (embed + hidden) + lstm_biases * 4 * hidden
    lstm_layer1 = 4 * hidden * (hidden + hidden) + lstm_biases * 4 * hidden
    return (2 * vocab * embed + 2 * (lstm_layer0 + lstm_layer1)
            + hidden * hidden + 2 * hidden * hidden + hidden * vocab)


def test_resnet50_full_parameter_count_matches_pytorch():
    trainable, moving = _resnet50_counts()
    assert trainable == 25_557_032  # torchvision's documented ResNet-50 count
    model = resnet50.build(1, CPU, "full", pool_size=1).model
    assert _count(model.trainable_weights) == trainable
    assert _count(model.non_trainable_weights) == moving


def test_seq2seq_full_parameter_count_within_one_percent_of_pytorch():
    pytorch = _seq2seq_count(lstm_biases=2)
    assert pytorch == 35_592_192  # models/pytorch/seq2seq.py's count
    keras_count = _seq2seq_count(lstm_biases=1)
    assert keras_count == pytorch - 4 * (4 * 512)  # one 4H bias fewer in each of the 4 LSTM layers
    model = seq2seq.build(1, CPU, "full", pool_size=1).model
    assert _count(model.trainable_weights) == keras_count
    assert model.non_trainable_weights == []
    assert abs(keras_count - pytorch) / pytorch < 0.01


@pytest.mark.parametrize("module", [resnet50, seq2seq])
def test_training_lowers_the_loss_on_a_fixed_batch(module):
    workload = module.build(4, CPU, "test", pool_size=1)
    losses = [float(workload.step()) for _ in range(10)]
    assert all(np.isfinite(losses))
    assert losses[-1] < losses[0]


def test_resnet_step_returns_a_scalar_tensor_and_traces_once():
    workload = resnet50.build(3, CPU, "test", pool_size=2)
    losses = [workload.step() for _ in range(4)]
    assert all(isinstance(loss, tf.Tensor) and loss.shape == () for loss in losses)
    assert workload.step.train_step.experimental_get_tracing_count() == 1
    assert [tuple(t.shape) for t in workload.inputs()] == [(3, 32, 32, 3), (3,)] * 2
    assert workload.samples_per_step == 3 and workload.throughput_unit == "images/s"
    assert isinstance(workload.optimizer, keras.optimizers.SGD)


def test_seq2seq_pool_is_padded_to_one_static_shape_and_traces_once():
    workload = seq2seq.build(4, CPU, "test", seed=0, pool_size=3)
    srcs, tgt_outs = workload.inputs()[0::3], workload.inputs()[2::3]
    assert len({tuple(s.shape) for s in srcs}) == 1 and len({tuple(t.shape) for t in tgt_outs}) == 1
    # The batches' own lengths still differ: the pool's longest sets the width, the rest is PAD.
    real_lengths = {int(tf.reduce_max(tf.reduce_sum(tf.cast(s != seq2seq.PAD, tf.int32), 1))) for s in srcs}
    assert max(real_lengths) == srcs[0].shape[1]
    losses = [workload.step() for _ in range(6)]
    assert all(isinstance(loss, tf.Tensor) and loss.shape == () for loss in losses)
    assert workload.step.train_step.experimental_get_tracing_count() == 1
    # Every dimension is static in the traced graph (where tbd reads the shapes for FLOPs).
    graph = workload.step.train_step.get_concrete_function().graph
    matmuls = [op for op in graph.get_operations() if op.type.startswith("BatchMatMul")]
    assert matmuls and all(t.shape.is_fully_defined() for op in matmuls for t in op.inputs)


def test_seq2seq_loss_is_the_mean_over_real_target_tokens():
    workload = seq2seq.build(3, CPU, "test", pool_size=1)
    src, tgt_in, tgt_out = workload.inputs()
    logits = workload.model((src, tgt_in)).numpy().astype(np.float64)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    labels = tgt_out.numpy()
    nll = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    real = labels != seq2seq.PAD
    expected = nll[real].sum() / real.sum()
    loss = workload.step()  # the step's loss is computed before its update
    assert float(loss) == pytest.approx(expected, rel=1e-5)


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
    workload = seq2seq.build(2, CPU, "test", seed=3, pool_size=2)
    tensors = workload.inputs()
    assert len(tensors) == 2 * 3 and all(t.dtype == tf.int32 for t in tensors)
    per_batch = [seq2seq.batch_tokens(tensors[i].numpy(), tensors[i + 2].numpy()) for i in (0, 3)]
    assert workload.units_per_step == {"tokens/s": sum(per_batch) / 2}
    assert workload.samples_per_step == 2 and workload.throughput_unit == "sentences/s"
    assert isinstance(workload.optimizer, keras.optimizers.Adam)


def test_image_batch_shapes_and_seeding():
    images, labels = synthetic.image_batch(5, (8, 8, 3), 10, np.random.RandomState(1))
    assert images.shape == (5, 8, 8, 3) and images.dtype == np.float32
    assert labels.shape == (5,) and labels.min() >= 0 and labels.max() < 10
    again, _ = synthetic.image_batch(5, (8, 8, 3), 10, np.random.RandomState(1))
    assert np.array_equal(images, again)


def test_same_seed_gives_same_weights_and_data():
    first, second = (resnet50.build(2, CPU, "test", seed=7, pool_size=1) for _ in range(2))
    for a, b in zip(first.model.weights + first.inputs(), second.model.weights + second.inputs()):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("kwargs", [{"size": "huge"}, {"batch": 0}, {"pool_size": 0}, {"batch": 2.0}])
def test_bad_build_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": CPU, "size": "test", **kwargs}
    with pytest.raises(UsageError):
        resnet50.build(**args)
