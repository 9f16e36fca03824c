"""MXNet Gluon suite workloads: parameter counts against PyTorch's, a learning step, synthetic data.

Runs only where mxnet imports (its own venv, .venv-mxnet: MXNet 1.9.1 needs numpy < 1.24):
    .venv-mxnet/bin/python -m pytest -q tests/models/mxnet/test_mxnet_suite.py
"""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from param_counts import resnet50_counts, seq2seq_count  # noqa: E402

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.mxnet import resnet50, seq2seq  # noqa: E402


def _trainable(block) -> int:
    """Values in parameters that get gradients (Gluon also lists BatchNorm running stats, grad_req 'null')."""
    return sum(int(np.prod(p.shape)) for p in block.collect_params().values() if p.grad_req != "null")


def _frozen(block) -> int:
    return sum(int(np.prod(p.shape)) for p in block.collect_params().values() if p.grad_req == "null")


def test_resnet50_full_parameter_count_matches_pytorch():
    trainable, running = resnet50_counts()
    assert trainable == 25_557_032  # torchvision's documented ResNet-50 count
    model = resnet50.build(1, mx.cpu(), "full", pool_size=1).model
    assert _trainable(model) == trainable
    assert _frozen(model) == running


def test_seq2seq_full_parameter_count_matches_pytorch():
    assert seq2seq_count() == 35_592_192  # models/pytorch/seq2seq.py's count
    assert _trainable(seq2seq.build(1, mx.cpu(), "full", pool_size=1).model) == seq2seq_count()


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


def test_seq2seq_workload_counts_tokens_and_holds_the_pool():
    workload = seq2seq.build(2, mx.cpu(), "test", seed=3, pool_size=2)
    arrays = workload.inputs()
    assert len(arrays) == 2 * 4
    per_batch = [seq2seq.batch_tokens(arrays[i].asnumpy(), arrays[i + 2].asnumpy()) for i in (0, 4)]
    assert workload.units_per_step == {"tokens/s": sum(per_batch) / 2}
    assert workload.samples_per_step == 2 and workload.throughput_unit == "sentences/s"


@pytest.mark.parametrize("kwargs", [{"size": "huge"}, {"batch": 0}, {"pool_size": 0}, {"batch": 2.0}])
def test_bad_build_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": mx.cpu(), "size": "test", **kwargs}
    with pytest.raises(UsageError):
        resnet50.build(**args)
