"""MXNet Deep Speech 2: parameter count by closed form, LibriSpeech-shaped numpy data, CTC labels, a step that trains.

    .venv-mxnet/bin/python -m pytest -q tests/models/mxnet/test_mxnet_deepspeech2.py
"""

from __future__ import annotations

import math

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

from tbd.core.errors import UsageError  # noqa: E402
from tbd.models.base import Workload  # noqa: E402
from tbd.models.host_data import speech
from tbd.models.mxnet import deepspeech2 as ds  # noqa: E402

PYTORCH_PARAMS = 180_987_293  # models/pytorch/deepspeech2.py (tests/models/pytorch/test_pytorch_deepspeech2.py closed form)


def _trainable(block) -> int:
    return sum(int(np.prod(p.shape)) for p in block.collect_params().values() if p.grad_req != "null")


def test_full_parameter_count_closed_form_matches_pytorch():
    hidden, classes = 1760, 29
    freq = ((161 - 41) // 2 + 1 - 21) // 2 + 1  # 161 bins -> 61 -> 21
    convs = (32 * 1 * 11 * 41 + 2 * 32) + (32 * 32 * 11 * 21 + 2 * 32)  # no bias; BN gamma, beta

    def gru_direction(inputs: int) -> int:  # 3 gates: i2h_weight, h2h_weight, i2h_bias, h2h_bias
        return 3 * (inputs * hidden + hidden * hidden + 2 * hidden)

    first_gru = 2 * gru_direction(32 * freq)
    later_grus = 4 * (2 * gru_direction(hidden) + 2 * hidden)  # directions summed (1760 in) + input BN
    rear_fc = 2 * hidden * hidden + 2 * hidden  # 3520 -> 1760, no bias; BN
    classifier = hidden * classes + classes
    expected = convs + first_gru + later_grus + rear_fc + classifier
    # Shapes are all given up front, so the full model is counted without initialising 181 M values.
    full = ds._SIZES["full"]
    model = ds.DeepSpeech2(full.convs, full.gru_layers, full.hidden, full.fc)
    assert _trainable(model) == expected == PYTORCH_PARAMS


def test_output_frames_and_audio_seconds_by_hand():
    frames = speech.spectrogram_frames(np.array([16_000]))  # 1 s: 1 + (16000 - 320) // 160 = 99
    assert int(frames[0]) == 99
    assert int(speech.output_frames(frames, ds._SIZES["full"].convs)[0]) == (99 - 11) // 2 + 1 - 11 + 1  # 35
    assert speech.audio_seconds(frames) == ((99 - 1) * 160 + 320) / 16_000


def test_librispeech_duration_spread():
    d = speech.utterance_durations(20_000, np.random.RandomState(0))
    # Mixture mean: 0.15 * (1.5 + 10) / 2 + 0.80 * (10 + 16) / 2 + 0.05 * (16 + 24.5) / 2 = 12.275 s.
    assert abs(d.mean() - 12.275) < 0.1
    assert d.min() >= 1.5 and d.max() <= 24.5 and d.max() > 23.0 and d.min() < 2.0
    assert ((d >= 10) & (d <= 17)).mean() > 0.75  # 0.80 + 0.05 * (17 - 16) / (24.5 - 16) ≈ 0.806


def test_speech_batch_shapes_and_transcripts():
    convs = ds._SIZES["full"].convs
    spec, frames, targets, target_lengths = speech.speech_batch(64, convs, None, np.random.RandomState(1))
    assert spec.shape == (64, 1, int(frames[0]), 161) and spec.dtype == np.float32
    assert (frames[:-1] >= frames[1:]).all()
    inside = np.arange(spec.shape[2])[None, :] < frames[:, None]
    assert (spec[:, 0][~inside] == 0).all()
    values = spec[:, 0][inside]
    assert abs(values.mean()) < 0.01 and abs(values.std() - 1) < 0.01
    real = np.arange(targets.shape[1])[None, :] < target_lengths[:, None]
    assert targets[real].min() >= 1 and targets[real].max() == speech.CLASSES - 1
    assert (targets[~real] == speech.BLANK).all()
    seconds = ((frames - 1) * 160 + 320) / 16_000
    assert 14.0 < target_lengths.sum() / seconds.sum() < 16.0  # ~15 characters a second
    repeats = ((targets[:, 1:] == targets[:, :-1]) & real[:, 1:]).sum(axis=1)
    assert (target_lengths + repeats <= speech.output_frames(frames, convs)).all()  # a CTC path exists


def test_workload_pool_ctc_labels_and_audio_seconds():
    work = ds.build(3, mx.cpu(), "test", seed=2, pool_size=2)
    assert isinstance(work, Workload)
    assert (work.name, work.throughput_unit, work.units_per_step) == ("deepspeech2", "audio_s/s", {"utterances/s": 3.0})
    arrays = work.inputs()
    seconds = []
    for spec, labels, lengths, label_lengths in (arrays[0:4], arrays[4:8]):
        spec, labels = spec.asnumpy(), labels.asnumpy()
        frames = (np.abs(spec[:, 0]).sum(axis=2) > 0).sum(axis=1)  # nonzero frames per utterance
        seconds.append(((frames - 1) * 160 + 320).sum() / 16_000)
        assert (lengths.asnumpy() == (frames - 11) // 2 + 1).all()  # test conv: 11 frames, stride 2
        # Blank last: characters 0..27, -1 past each transcript's end.
        real = np.arange(labels.shape[1])[None, :] < label_lengths.asnumpy()[:, None]
        assert labels[real].min() >= 0 and labels[real].max() <= 27 and (labels[~real] == -1).all()
    assert work.samples_per_step == pytest.approx((seconds[0] + seconds[1]) / 2)
    assert 3 * 0.5 <= work.samples_per_step <= 3 * 1.0


def test_model_output_shape():
    test = ds._SIZES["test"]
    model = ds.DeepSpeech2(test.convs, test.gru_layers, test.hidden, test.fc)
    model.initialize()
    out = model(mx.nd.zeros((2, 1, 30, 161)))
    assert out.shape == (2, (30 - 11) // 2 + 1, 29)


def test_test_size_training_lowers_loss_on_a_fixed_batch():
    work = ds.build(4, mx.cpu(), "test", seed=0, pool_size=1)
    losses = []
    for _ in range(6):
        loss = work.step()
        assert loss.shape == (4,)
        losses.append(float(loss.mean().asscalar()))
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


def test_same_seed_same_workload():
    a, b, c = (ds.build(2, mx.cpu(), "test", seed=s, pool_size=1) for s in (3, 3, 4))
    assert all((x.asnumpy() == y.asnumpy()).all() for x, y in zip(a.inputs(), b.inputs(), strict=True))
    pa, pb = (list(w.model.collect_params().values()) for w in (a, b))
    assert all((x.data().asnumpy() == y.data().asnumpy()).all() for x, y in zip(pa, pb, strict=True))
    assert a.inputs()[0].shape != c.inputs()[0].shape or not (a.inputs()[0].asnumpy() == c.inputs()[0].asnumpy()).all()


@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": None}, {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": mx.cpu(), "size": "test", **kwargs}
    with pytest.raises(UsageError):
        ds.build(**args)
