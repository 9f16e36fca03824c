"""Inception-v3 workload: architecture sizes, synthetic ImageNet data, the auxiliary loss, training."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from tbd.core.errors import UsageError
from tbd.models.base import Workload
from tbd.models.pytorch import inception3

# torchvision's documented parameter count for Inception_V3_Weights.IMAGENET1K_V1 ("num_params"):
# inception_v3 with the auxiliary classifier and 1000 classes.
TORCHVISION_PARAMS = 27_161_264
SIDE, CLASSES = 299, 1000  # ImageNet at Inception-v3's input size (TBD paper Table III; Szegedy et al. Table 1)


def _param_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _meta_model(**kwargs) -> inception3.Inception3:
    with torch.device("meta"):
        return inception3.Inception3(**kwargs)


def test_full_parameter_count_matches_torchvision():
    assert _param_count(_meta_model()) == TORCHVISION_PARAMS


def test_aux_head_parameter_count_closed_form():
    # The auxiliary head alone, term by term: conv0 1x1 768->128 (+ BN 2x128), conv1 5x5 128->768
    # (+ BN 2x768), fc 768->1000 with bias.
    aux = (768 * 128 + 2 * 128) + (128 * 768 * 5 * 5 + 2 * 768) + (768 * 1000 + 1000)
    assert _param_count(_meta_model().AuxLogits) == aux


def test_grid_sizes_follow_the_paper_table_1():
    """35x35x288 after Mixed_5d, 17x17x768 after Mixed_6e, 8x8x2048 after Mixed_7c (Szegedy et al. Table 1)."""
    model = _meta_model()
    shapes = {}

    def record(name):
        return lambda _module, _inputs, out: shapes.__setitem__(name, tuple(out.shape))

    for name in ("5d", "6a", "6e", "7a", "7c"):
        getattr(model, f"Mixed_{name}").register_forward_hook(record(name))
    logits, aux = model(torch.empty(2, 3, SIDE, SIDE, device="meta"))
    assert shapes == {"5d": (2, 288, 35, 35), "6a": (2, 768, 17, 17), "6e": (2, 768, 17, 17),
                      "7a": (2, 1280, 8, 8), "7c": (2, 2048, 8, 8)}
    assert tuple(logits.shape) == tuple(aux.shape) == (2, CLASSES)
    assert all(m.bn.eps == 0.001 for m in model.modules() if isinstance(m, inception3.BasicConv2d))


def test_test_size_keeps_every_block_type():
    model = inception3.build(2, "cpu", "test", pool_size=1).model
    kinds = {type(m) for m in model.modules()}
    assert {inception3.InceptionA, inception3.InceptionB, inception3.InceptionC, inception3.InceptionD,
            inception3.InceptionE, inception3.InceptionAux} <= kinds
    assert model.eval()(torch.zeros(1, 3, SIDE, SIDE)).shape == (1, 10)  # eval: main logits only


def test_full_workload_data_is_imagenet_shaped():
    work = inception3.build(2, "cpu", "full", seed=0)
    assert isinstance(work, Workload)
    assert (work.name, work.samples_per_step, work.throughput_unit) == ("inception3", 2, "images/s")
    assert _param_count(work.model) == TORCHVISION_PARAMS
    inputs = work.inputs()
    assert len(inputs) == 2 * 3  # (images, labels) for each of the 3 pool batches
    images = torch.cat(inputs[0::2])
    labels = torch.cat(inputs[1::2])
    assert inputs[0].shape == (2, 3, SIDE, SIDE) and images.dtype == torch.float32
    assert labels.dtype == torch.int64 and int(labels.min()) >= 0 and int(labels.max()) < CLASSES
    # Images as a normalising transform leaves them: per channel mean 0, std 1. Over
    # 6 x 299 x 299 values per channel the standard error of the mean is ~1 / 732.
    mean, std = images.mean(dim=(0, 2, 3)), images.std(dim=(0, 2, 3))
    assert bool((mean.abs() < 0.01).all()) and bool(((std - 1).abs() < 0.01).all())


def test_labels_are_uniform_over_classes():
    labels = torch.cat(inception3.build(25, "cpu", "test", seed=0, pool_size=4).inputs()[1::2])
    counts = torch.bincount(labels, minlength=10)
    assert counts.shape == (10,) and int(counts.sum()) == 100
    # Uniform over 10 classes: 10 per class, binomial std sqrt(100 * 0.1 * 0.9) = 3; every class
    # occurs and none exceeds 10 + 4 std.
    assert int(counts.min()) > 0 and int(counts.max()) < 10 + 4 * 3


def test_loss_is_main_plus_0_4_aux_and_gradients_reach_the_aux_head():
    work = inception3.build(4, "cpu", "test", seed=0, pool_size=1)  # batch as below: reuses oneDNN primitives
    images, labels = work.inputs()
    torch.manual_seed(0)  # dropout draws from the global RNG
    logits, aux = work.model(images)
    expected = (F.cross_entropy(logits, labels, label_smoothing=0.1)
                + 0.4 * F.cross_entropy(aux, labels, label_smoothing=0.1))
    torch.manual_seed(0)
    loss = work.step()  # forward sees the same weights (the update comes after)
    torch.testing.assert_close(loss.detach(), expected.detach())
    aux_grads = [p.grad for p in work.model.AuxLogits.parameters()]
    assert all(g is not None and float(g.abs().sum()) > 0 for g in aux_grads)


def test_test_size_training_lowers_loss_on_a_fixed_batch():
    torch.manual_seed(0)  # dropout
    work = inception3.build(4, "cpu", "test", seed=0, pool_size=1)
    losses = []
    for _ in range(8):
        loss = work.step()
        assert isinstance(loss, torch.Tensor) and loss.ndim == 0
        losses.append(float(loss.detach()))
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


def test_same_seed_same_workload():
    a, b = inception3.build(2, "cpu", "test", seed=3), inception3.build(2, "cpu", "test", seed=3)
    c = inception3.build(2, "cpu", "test", seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.inputs(), b.inputs(), strict=True))
    assert all(torch.equal(x, y) for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a.inputs(), c.inputs()))
    assert not all(torch.equal(x, y) for x, y in zip(a.model.parameters(), c.model.parameters()))


# batch 1: the auxiliary head's BatchNorm would see one value per channel (1x1 map), which
# training-mode BatchNorm cannot normalise.
@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": 1}, {"batch": None}, {"batch": 2.0},
                                    {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": "cpu", "size": "test", **kwargs}
    with pytest.raises(UsageError):
        inception3.build(**args)
