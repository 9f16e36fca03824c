"""Inception-v3 in TensorFlow (Keras 3): parameter count against PyTorch's, grid sizes, data, the aux loss, training.

Runs only where tensorflow imports (its own venv, .venv-tensorflow):
    .venv-tensorflow/bin/python -m pytest -q -p no:cacheprovider tests/models/tensorflow/test_tensorflow_inception3.py
"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
import keras  # noqa: E402  (Keras 3, installed with tensorflow)
from param_counts import inception3_counts  # noqa: E402

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.tensorflow import inception3  # noqa: E402

CPU = "/CPU:0"
# models/pytorch/inception3.py (tests/models/pytorch/test_pytorch_inception3.py): torchvision's documented count for
# inception_v3 with the auxiliary classifier and 1000 classes.
PYTORCH_PARAMS = 27_161_264
SIDE, CLASSES = 299, 1000


def _count(variables) -> int:
    return sum(int(np.prod(v.shape)) for v in variables)


@pytest.fixture(scope="module")
def full():
    """The full-size workload (built for counting and shapes only; no steps)."""
    return inception3.build(2, CPU, "full", seed=0)


def test_full_parameter_count_matches_pytorch(full):
    trainable, moving = inception3_counts()
    assert trainable == PYTORCH_PARAMS
    assert _count(full.model.trainable_weights) == trainable
    assert _count(full.model.non_trainable_weights) == moving
    aux = [v for v in full.model.trainable_weights if v.path.startswith("AuxLogits")]
    assert _count(aux) == (768 * 128 + 2 * 128) + (128 * 768 * 5 * 5 + 2 * 768) + (768 * 1000 + 1000)


def test_grid_sizes_follow_the_paper_table_1(full):
    """35x35x288 after Mixed_5d, 17x17x768 after Mixed_6e, 8x8x2048 after Mixed_7c (NHWC)."""
    model = full.model
    shapes = {n: tuple(model.get_layer(f"Mixed_{n}").output.shape) for n in ("5d", "6a", "6e", "7a", "7c")}
    assert shapes == {"5d": (None, 35, 35, 288), "6a": (None, 17, 17, 768), "6e": (None, 17, 17, 768),
                      "7a": (None, 8, 8, 1280), "7c": (None, 8, 8, 2048)}
    assert [tuple(t.shape) for t in model.outputs] == [(None, CLASSES), (None, CLASSES)]
    bns = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
    # One BatchNorm per BasicConv2d: stem 5, A 3 x 7, B 4, C 4 x 10, aux 2, D 6, E 2 x 9 (torchvision's 96).
    assert len(bns) == 5 + 3 * 7 + 4 + 4 * 10 + 2 + 6 + 2 * 9 and all(bn.epsilon == 0.001 for bn in bns)
    assert all(not layer.use_bias for layer in model.layers if isinstance(layer, keras.layers.Conv2D))


def test_full_workload_data_is_imagenet_shaped(full):
    assert (full.name, full.samples_per_step, full.throughput_unit) == ("inception3", 2, "images/s")
    assert isinstance(full.optimizer, keras.optimizers.RMSprop)
    inputs = [t.numpy() for t in full.inputs()]
    assert len(inputs) == 2 * 3  # (images, labels) for each of the 3 pool batches
    images, labels = np.concatenate(inputs[0::2]), np.concatenate(inputs[1::2])
    assert inputs[0].shape == (2, SIDE, SIDE, 3) and images.dtype == np.float32
    assert labels.dtype == np.int32 and labels.min() >= 0 and labels.max() < CLASSES
    # Normalised images: per channel mean 0, std 1; over 6 x 299 x 299 values the standard error
    # of the mean is ~1 / 732.
    mean, std = images.mean(axis=(0, 1, 2)), images.std(axis=(0, 1, 2))
    assert np.all(np.abs(mean) < 0.01) and np.all(np.abs(std - 1) < 0.01)


def _smoothed_ce(logits: np.ndarray, labels: np.ndarray, eps: float = 0.1) -> float:
    """Mean cross-entropy against (1 - eps) * one_hot + eps / C, in float64."""
    z = logits.astype(np.float64)
    log_p = z - z.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    nll = -log_p[np.arange(len(labels)), labels]
    return float(np.mean((1 - eps) * nll - eps * log_p.mean(-1)))


def test_loss_is_main_plus_0_4_aux_and_gradients_reach_the_aux_head():
    work = inception3.build(4, CPU, "test", seed=0, pool_size=1)
    model = work.model
    model.get_layer("dropout").rate = 0.0  # before the first trace, so the step's forward is deterministic
    images, labels = work.inputs()
    with tf.GradientTape(persistent=True) as tape:
        logits, aux = model(images, training=True)
        total = inception3.inception_loss(labels, logits, aux)
        main_only = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)(
            tf.one_hot(labels, 10), logits)
    expected = _smoothed_ce(logits.numpy(), labels.numpy()) + 0.4 * _smoothed_ce(aux.numpy(), labels.numpy())
    assert float(total) == pytest.approx(expected, rel=1e-5)
    aux_vars = [v for v in model.trainable_variables if v.path.startswith("AuxLogits")]
    assert len(aux_vars) == 2 * 3 + 2  # conv0, conv1 (kernel, gamma, beta), fc (kernel, bias)
    assert all(g is not None and float(tf.reduce_sum(tf.abs(g))) > 0 for g in tape.gradient(total, aux_vars))
    assert all(g is None for g in tape.gradient(main_only, aux_vars))  # only the aux loss reaches the aux head
    # The step's loss is computed before its update, from the same weights (training-mode BatchNorm
    # uses batch statistics, so the moving stats the forward above updated do not enter).
    assert float(work.step()) == pytest.approx(expected, rel=1e-4)


def test_test_size_training_lowers_loss_on_a_fixed_batch_with_one_trace():
    work = inception3.build(4, CPU, "test", seed=0, pool_size=1)
    names = {layer.name for layer in work.model.layers}
    # Every block type: A, B, C, D, E and the auxiliary head, one of each.
    assert {"Mixed_5b", "Mixed_6a", "Mixed_6b", "Mixed_7a", "Mixed_7b", "AuxLogits_fc", "fc"} <= names
    assert not {"Mixed_5c", "Mixed_6c", "Mixed_7c"} & names
    assert [tuple(t.shape) for t in work.inputs()] == [(4, SIDE, SIDE, 3), (4,)]
    losses = []
    for _ in range(8):
        loss = work.step()
        assert isinstance(loss, tf.Tensor) and loss.shape == ()
        losses.append(float(loss))
    assert all(np.isfinite(losses))
    assert losses[-1] < losses[0]
    assert work.step.train_step.experimental_get_tracing_count() == 1


def test_same_seed_same_workload():
    a, b = inception3.build(2, CPU, "test", seed=3), inception3.build(2, CPU, "test", seed=3)
    c = inception3.build(2, CPU, "test", seed=4)

    def values(work):
        return [v.numpy() for v in work.model.weights]

    assert all(np.array_equal(x, y) for x, y in zip(a.inputs(), b.inputs(), strict=True))
    assert all(np.array_equal(x, y) for x, y in zip(values(a), values(b), strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a.inputs(), c.inputs()))
    assert not all(np.array_equal(x, y) for x, y in zip(values(a), values(c)))


# batch 1: the auxiliary head's BatchNorm would see one value per channel (1x1 map).
@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": 1}, {"batch": None}, {"batch": 2.0},
                                    {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": CPU, "size": "test", **kwargs}
    with pytest.raises(UsageError):
        inception3.build(**args)
