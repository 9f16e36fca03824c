"""TensorFlow (Keras 3) suite workloads: parameter counts against PyTorch's, a learning step, synthetic data.

Runs only where tensorflow imports (its own venv, .venv-tensorflow):
    .venv-tensorflow/bin/python -m pytest -q tests/models/tensorflow/test_tensorflow_suite.py
"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
import keras  # noqa: E402  (Keras 3, installed with tensorflow)
from param_counts import resnet50_counts, seq2seq_count  # noqa: E402

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.tensorflow import resnet50, seq2seq  # noqa: E402

CPU = "/CPU:0"


def _count(variables) -> int:
    return sum(int(np.prod(v.shape)) for v in variables)


def test_resnet50_full_parameter_count_matches_pytorch():
    trainable, moving = resnet50_counts()
    assert trainable == 25_557_032  # torchvision's documented ResNet-50 count
    model = resnet50.build(1, CPU, "full", pool_size=1).model
    assert _count(model.trainable_weights) == trainable
    assert _count(model.non_trainable_weights) == moving


def test_seq2seq_full_parameter_count_within_one_percent_of_pytorch():
    pytorch = seq2seq_count(lstm_biases=2)
    assert pytorch == 35_592_192  # models/pytorch/seq2seq.py's count
    keras_count = seq2seq_count(lstm_biases=1)
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


def test_seq2seq_workload_counts_tokens_and_holds_the_pool():
    workload = seq2seq.build(2, CPU, "test", seed=3, pool_size=2)
    tensors = workload.inputs()
    assert len(tensors) == 2 * 3 and all(t.dtype == tf.int32 for t in tensors)
    per_batch = [seq2seq.batch_tokens(tensors[i].numpy(), tensors[i + 2].numpy()) for i in (0, 3)]
    assert workload.units_per_step == {"tokens/s": sum(per_batch) / 2}
    assert workload.samples_per_step == 2 and workload.throughput_unit == "sentences/s"
    assert isinstance(workload.optimizer, keras.optimizers.Adam)


def test_same_seed_gives_same_weights_and_data():
    first, second = (resnet50.build(2, CPU, "test", seed=7, pool_size=1) for _ in range(2))
    for a, b in zip(first.model.weights + first.inputs(), second.model.weights + second.inputs()):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("kwargs", [{"size": "huge"}, {"batch": 0}, {"pool_size": 0}, {"batch": 2.0}])
def test_bad_build_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": CPU, "size": "test", **kwargs}
    with pytest.raises(UsageError):
        resnet50.build(**args)
