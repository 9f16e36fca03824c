"""The Inception-v3 digits task: the ResNet task's split at 75x75, the smallest side the network takes, and training."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("sklearn")

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.tasks import digits, inception_digits  # noqa: E402
from tbd.models.tasks.inception_digits import SIDE, InceptionNoAux, build, load_inception_split  # noqa: E402


@pytest.fixture(scope="module")
def split():
    return load_inception_split()


def test_split_is_the_resnet_tasks_upsampled(split):
    train_x, train_y, test_x, test_y = split
    d_train_x, d_train_y, d_test_x, d_test_y = digits.load_split()
    assert train_x.shape == (1437, 3, SIDE, SIDE) and test_x.shape == (360, 3, SIDE, SIDE)
    assert torch.equal(train_y, d_train_y) and torch.equal(test_y, d_test_y)
    # Downsampling back to 32x32 recovers the ResNet task's images (bilinear both ways, smooth images).
    back = torch.nn.functional.interpolate(test_x[:20], size=32, mode="bilinear", antialias=True)
    assert (back - d_test_x[:20]).abs().mean() < 0.02
    assert float(train_x.min()) >= 0.0 and float(train_x.max()) <= 1.0


def test_data_is_sklearns_digits(split):
    from sklearn.datasets import load_digits

    data = load_digits()
    _, train_y, _, test_y = split
    assert torch.bincount(torch.cat([train_y, test_y])).tolist() == torch.bincount(
        torch.tensor(data.target)).tolist()
    assert data.target[0] == 0 and data.images[0][0].tolist() == [0, 0, 5, 13, 9, 1, 0, 0]


def test_75_is_the_smallest_side_the_network_takes():
    model = InceptionNoAux(10, ((32,), (128,), 1), 1 / 16).eval()
    with torch.no_grad():
        assert model(torch.zeros(2, 3, SIDE, SIDE)).shape == (2, 10)
        with pytest.raises(RuntimeError):
            model(torch.zeros(2, 3, SIDE - 1, SIDE - 1))


def test_batch_below_two_is_refused():
    with pytest.raises(UsageError):
        build("inception3", 1, 0, "test")


def test_short_training_beats_chance_and_counts_samples():
    torch.manual_seed(0)
    task = build("inception3", 64, 0, "test")
    assert task.train_samples == 1437 and task.eval_samples == 360
    before = task.evaluate()
    assert 0.0 <= before <= 1.0
    assert task.train_epoch() == 1437
    after = task.evaluate()
    assert after > 0.3  # chance is 0.1; one epoch reaches 0.5..0.9 over seeds 0..2
    assert task.latency_per_item_s() > 0
    assert task.hyperparameters["opt_name"] == "rmsprop"
    assert task.hyperparameters["opt_base_learning_rate"] == pytest.approx(inception_digits.LR_PER_IMAGE * 64)
