"""Inception-v3 in MXNet Gluon: parameter count against PyTorch's, grid sizes, data, the aux loss, training.

Runs only where mxnet imports (its own venv, .venv-mxnet):
    .venv-mxnet/bin/python -m pytest -q tests/models/mxnet/test_mxnet_inception3.py
"""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
from mxnet import autograd, gluon  # noqa: E402
from param_counts import inception3_counts  # noqa: E402

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.mxnet import inception3  # noqa: E402

# models/pytorch/inception3.py (tests/models/pytorch/test_pytorch_inception3.py): torchvision's documented count for
# inception_v3 with the auxiliary classifier and 1000 classes.
PYTORCH_PARAMS = 27_161_264
SIDE, CLASSES = 299, 1000


def _count(params, trainable: bool) -> int:
    return sum(int(np.prod(p.shape)) for p in params.values() if (p.grad_req != "null") == trainable)


@pytest.fixture(scope="module")
def full():
    """The full-size workload (built for counting and shapes only; no steps)."""
    return inception3.build(2, mx.cpu(), "full", seed=0)


def test_full_parameter_count_matches_pytorch(full):
    trainable, running = inception3_counts()
    assert trainable == PYTORCH_PARAMS
    params = full.model.collect_params()
    assert _count(params, trainable=True) == trainable
    assert _count(params, trainable=False) == running
    aux = full.model.AuxLogits.collect_params()
    assert _count(aux, True) == (768 * 128 + 2 * 128) + (128 * 768 * 5 * 5 + 2 * 768) + (768 * 1000 + 1000)


def test_grid_sizes_follow_the_paper_table_1(full):
    """35x35x288 after Mixed_5d, 17x17x768 after Mixed_6e, 8x8x2048 after Mixed_7c (NCHW)."""
    model = full.model
    x = mx.sym.var("data")
    x = model.maxpool1(model.Conv2d_2b_3x3(model.Conv2d_2a_3x3(model.Conv2d_1a_3x3(x))))
    x = model.maxpool2(model.Conv2d_4a_3x3(model.Conv2d_3b_1x1(x)))
    shapes = {}
    for name in model._before_aux + model._after_aux:
        x = getattr(model, name)(x)
        shapes[name[-2:]] = tuple(x.infer_shape(data=(2, 3, SIDE, SIDE))[1][0])
    assert {k: shapes[k] for k in ("5d", "6a", "6e", "7a", "7c")} == {
        "5d": (2, 288, 35, 35), "6a": (2, 768, 17, 17), "6e": (2, 768, 17, 17),
        "7a": (2, 1280, 8, 8), "7c": (2, 2048, 8, 8)}
    bns = [b for b in _blocks(model) if isinstance(b, gluon.nn.BatchNorm)]
    # One BatchNorm per BasicConv2d: stem 5, A 3 x 7, B 4, C 4 x 10, aux 2, D 6, E 2 x 9 (torchvision's 96).
    assert len(bns) == 5 + 3 * 7 + 4 + 4 * 10 + 2 + 6 + 2 * 9
    assert all(bn._kwargs["eps"] == 0.001 for bn in bns)
    assert all(c._kwargs["no_bias"] for c in _blocks(model) if isinstance(c, gluon.nn.Conv2D))


def _blocks(block):
    """Every descendant block of `block`, depth first."""
    for child in block._children.values():
        yield child
        yield from _blocks(child)


def test_full_workload_data_is_imagenet_shaped(full):
    assert (full.name, full.samples_per_step, full.throughput_unit) == ("inception3", 2, "images/s")
    assert isinstance(full.optimizer, gluon.Trainer)
    inputs = [a.asnumpy() for a in full.inputs()]
    assert len(inputs) == 2 * 3  # (images, labels) for each of the 3 pool batches
    images, labels = np.concatenate(inputs[0::2]), np.concatenate(inputs[1::2])
    assert inputs[0].shape == (2, 3, SIDE, SIDE) and images.dtype == np.float32
    assert labels.dtype == np.int32 and labels.min() >= 0 and labels.max() < CLASSES
    # Normalised images: per channel mean 0, std 1; over 6 x 299 x 299 values the standard error
    # of the mean is ~1 / 732.
    mean, std = images.mean(axis=(0, 2, 3)), images.std(axis=(0, 2, 3))
    assert np.all(np.abs(mean) < 0.01) and np.all(np.abs(std - 1) < 0.01)


def _smoothed_ce(logits: np.ndarray, labels: np.ndarray, eps: float = 0.1) -> np.ndarray:
    """Per-image cross-entropy against (1 - eps) * one_hot + eps / C, in float64."""
    z = logits.astype(np.float64)
    log_p = z - z.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    nll = -log_p[np.arange(len(labels)), labels]
    return (1 - eps) * nll - eps * log_p.mean(-1)


def test_loss_is_main_plus_0_4_aux_and_gradients_reach_the_aux_head():
    work = inception3.build(4, mx.cpu(), "test", seed=0, pool_size=1)
    model = work.model
    model.dropout._rate = 0.0  # before the first (hybridizing) call, so the step's forward is deterministic
    images, labels = work.inputs()
    with autograd.train_mode():  # training-mode BatchNorm (batch statistics), as in the step
        logits, aux = model(images)
    labels_np = labels.asnumpy().astype(np.int64)
    expected = _smoothed_ce(logits.asnumpy(), labels_np) + 0.4 * _smoothed_ce(aux.asnumpy(), labels_np)
    loss = work.step()  # the step's loss is computed before its update, from the same weights
    assert loss.shape == (4,)
    np.testing.assert_allclose(loss.asnumpy(), expected, rtol=1e-4)
    aux_params = [p for p in model.AuxLogits.collect_params().values() if p.grad_req != "null"]
    assert len(aux_params) == 2 * 3 + 2  # conv0, conv1 (weight, gamma, beta), fc (weight, bias)
    # The aux head lies on no path to the main logits: its gradient comes from the 0.4 * CE(aux) term.
    assert all(float(p.grad().abs().sum().asscalar()) > 0 for p in aux_params)


def test_test_size_training_lowers_loss_on_a_fixed_batch():
    work = inception3.build(4, mx.cpu(), "test", seed=0, pool_size=1)
    model = work.model
    # Every block type: A, B, C, D, E and the auxiliary head, one of each.
    assert [type(getattr(model, n)).__name__ for n in model._before_aux + model._after_aux] == [
        "InceptionA", "InceptionB", "InceptionC", "InceptionD", "InceptionE"]
    assert isinstance(model.AuxLogits, inception3.InceptionAux)
    assert [a.shape for a in work.inputs()] == [(4, 3, SIDE, SIDE), (4,)]
    losses = []
    for _ in range(8):
        loss = work.step()
        assert isinstance(loss, mx.nd.NDArray) and loss.shape == (4,)
        losses.append(float(loss.mean().asscalar()))
    assert all(np.isfinite(losses))
    assert losses[-1] < losses[0]


def test_same_seed_same_workload():
    a, b = inception3.build(2, mx.cpu(), "test", seed=3), inception3.build(2, mx.cpu(), "test", seed=3)
    c = inception3.build(2, mx.cpu(), "test", seed=4)

    def values(work):
        return [p.data().asnumpy() for p in work.model.collect_params().values()]

    assert all(np.array_equal(x.asnumpy(), y.asnumpy()) for x, y in zip(a.inputs(), b.inputs(), strict=True))
    assert all(np.array_equal(x, y) for x, y in zip(values(a), values(b), strict=True))
    assert not all(np.array_equal(x.asnumpy(), y.asnumpy()) for x, y in zip(a.inputs(), c.inputs()))
    assert not all(np.array_equal(x, y) for x, y in zip(values(a), values(c)))


# batch 1: the auxiliary head's BatchNorm would see one value per channel (1x1 map).
@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": 1}, {"batch": None}, {"batch": 2.0},
                                    {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": mx.cpu(), "size": "test", **kwargs}
    with pytest.raises(UsageError):
        inception3.build(**args)
