"""The WGAN-GP digits task: the real digits' fixed split, the Fréchet distance against a hand computation, and a
short training that moves the generated digits toward the held-out ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tbd.models.tasks import digits_wgan
from tbd.models.tasks.digits import load_split

pytest.importorskip("torchmetrics")


@pytest.fixture(scope="module")
def task():
    torch.set_num_threads(1)
    return digits_wgan.build("wgan", 64, 0, "test")


def test_the_data_is_the_digits_split_at_the_generators_side(task):
    train_x, _, test_x, _ = load_split()
    assert task.train_samples == len(train_x) == 1437 and task.eval_samples == len(test_x) == 360
    assert task.train_x.shape == (1437, 3, 32, 32)  # WGAN_SIZES["test"] draws 32x32
    # The same images in the generator's [-1, 1] range: load_split's first training digit, pixel for pixel.
    assert torch.equal(task.train_x[0], 2 * train_x[0] - 1)
    assert float(task.train_x.min()) == -1.0 and float(task.train_x.max()) <= 1.0
    # The held-out digits, and only they, are the real side of the distance.
    assert int(task.fid.real_features_num_samples) == 360


def test_the_feature_classifier_knows_the_held_out_digits():
    _, _, test_x, test_y = load_split()
    net = digits_wgan.feature_extractor()
    with torch.no_grad():
        accuracy = float((net.logits(2 * test_x - 1).argmax(1) == test_y).float().mean())
    assert accuracy >= 0.95  # a digits feature space, not an arbitrary one
    assert net(2 * test_x[:3] - 1).shape == (3, digits_wgan.FEATURES)


def test_the_score_is_the_frechet_distance_of_the_classifiers_features():
    train_x, _, test_x, _ = load_split()
    real, fake = 2 * test_x[:200] - 1, 2 * train_x[:150] - 1
    metric = digits_wgan.fid_metric(torch.device("cpu"))
    metric.update(real, real=True)
    metric.update(fake, real=False)
    net = digits_wgan.feature_extractor()
    with torch.no_grad():
        a, b = net(real).double().numpy(), net(fake).double().numpy()
    # By hand: ||mu_a - mu_b||^2 + Tr(S_a + S_b - 2 (S_a S_b)^(1/2)), unbiased covariances.
    # Tr (S_a S_b)^(1/2) = Tr (S_a^(1/2) S_b S_a^(1/2))^(1/2), a symmetric form numpy's eigh takes.
    s_a, s_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    w, v = np.linalg.eigh(s_a)
    half = v @ np.diag(np.sqrt(w.clip(min=0))) @ v.T
    trace_root = np.sqrt(np.linalg.eigvalsh(half @ s_b @ half).clip(min=0)).sum()
    expected = ((a.mean(0) - b.mean(0)) ** 2).sum() + np.trace(s_a) + np.trace(s_b) - 2 * trace_root
    assert float(metric.compute()) == pytest.approx(expected, rel=1e-3)


def test_a_tiny_frechet_distance_by_hand():
    """One feature: the distance of N(m1, s1^2) and N(m2, s2^2) is (m1 - m2)^2 + (s1 - s2)^2."""
    class Identity(torch.nn.Module):
        num_features = 1

        def forward(self, x):
            return x.view(len(x), 1)

    from torchmetrics.image.fid import FrechetInceptionDistance

    metric = FrechetInceptionDistance(feature=Identity())
    metric.update(torch.tensor([0.0, 2.0]), real=True)  # mean 1, sample variance 2
    metric.update(torch.tensor([3.0, 5.0, 7.0]), real=False)  # mean 5, sample variance 4
    assert float(metric.compute()) == pytest.approx((1 - 5) ** 2 + (2 ** 0.5 - 2) ** 2, rel=1e-5)


def test_short_training_moves_the_samples_toward_the_held_out_digits(task):
    untrained = task.evaluate()
    assert untrained > 100 and task.evaluate() == pytest.approx(untrained, rel=1e-6)  # a fixed generated set
    # Shorter epochs: 640 images at batch 32 and 2 critic updates are 10 generator updates.
    task.train_x, task.batch = task.train_x[:640], 32
    for _ in range(3):
        assert task.train_epoch() == 640
    trained = task.evaluate()
    assert 0 <= trained < 0.7 * untrained
    assert task.latency_per_item_s() is None
    assert task.samples_per_step == 2 * 32  # the profiler's step: one iteration, n_critic real batches
    task.train_step()


def test_only_wgan():
    with pytest.raises(ValueError, match="wgan"):
        digits_wgan.build("resnet50", 64, 0, "test")
