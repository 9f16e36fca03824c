"""Deep Speech 2 workload: layer sizes by closed form, LibriSpeech-shaped data, a step that trains."""

from __future__ import annotations

import math

import pytest
import torch

from tbd.core.errors import UsageError
from tbd.models.base import Workload
from tbd.models.pytorch import deepspeech2 as ds


def _param_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_full_parameter_count_closed_form():
    # MXNet example/speech_recognition deepspeech.cfg: conv 32 x (11 x 41) stride (2, 2) and
    # 32 x (11 x 21) stride (1, 2), no bias, batch norm; 5 bi-GRU of 1760; rear FC 1760 (no bias,
    # batch norm); classifier to 29 characters (blank, space, apostrophe, a-z).
    hidden, classes = 1760, 29
    freq = ((161 - 41) // 2 + 1 - 21) // 2 + 1  # 161 bins -> 61 -> 21
    assert freq == 21
    convs = (32 * 1 * 11 * 41 + 2 * 32) + (32 * 32 * 11 * 21 + 2 * 32)  # weights + BN gamma, beta

    def gru_direction(inputs: int) -> int:  # 3 gates: W_ih, W_hh, b_ih, b_hh
        return 3 * (inputs * hidden + hidden * hidden + 2 * hidden)

    first_gru = 2 * gru_direction(32 * freq)  # reads 672 conv features
    later_grus = 4 * (2 * gru_direction(hidden) + 2 * hidden)  # directions summed (1760 in) + input BN
    rear_fc = 2 * hidden * hidden + 2 * hidden  # concatenated directions (3520) -> 1760, no bias; BN
    classifier = hidden * classes + classes
    expected = convs + first_gru + later_grus + rear_fc + classifier
    with torch.device("meta"):
        model = ds.DeepSpeech2(ds._SIZES["full"])
    assert _param_count(model) == expected == 180_987_293


def test_output_frames_by_hand():
    # 1 s at 16 kHz: 1 + (16000 - 320) // 160 = 99 frames; conv1 (11, stride 2): (99 - 11) // 2 + 1
    # = 45; conv2 (11, stride 1): 45 - 11 + 1 = 35.
    frames = ds.spectrogram_frames(torch.tensor([16_000]))
    assert int(frames) == 99
    assert int(ds.output_frames(frames, ds._SIZES["full"].convs)) == 35
    assert ds.audio_seconds(frames) == 16_000 / 16_000  # (99 - 1) * 160 + 320 samples


def test_model_output_shape_matches_output_frames():
    gen = torch.Generator().manual_seed(0)
    model = ds.DeepSpeech2(ds._SIZES["test"]).eval()
    spec, frames, _, _ = ds.speech_batch(3, ds._SIZES["test"], gen)
    with torch.no_grad():
        log_probs, lengths = model(spec, frames)
    assert torch.equal(lengths, ds.output_frames(frames, ds._SIZES["test"].convs))
    assert log_probs.shape == (int(lengths[0]), 3, ds.CLASSES)
    torch.testing.assert_close(log_probs[: int(lengths[0]), 0].exp().sum(-1), torch.ones(int(lengths[0])))


def test_librispeech_duration_spread():
    gen = torch.Generator().manual_seed(0)
    d = ds.utterance_durations(20_000, gen)
    # Mixture mean: 0.15 * (1.5 + 10) / 2 + 0.80 * (10 + 16) / 2 + 0.05 * (16 + 24.5) / 2 = 12.275 s.
    assert abs(float(d.mean()) - 12.3) < 1.0
    assert abs(float(d.mean()) - 12.275) < 0.1
    assert float(d.min()) >= 1.0 and float(d.max()) <= 25.0
    assert float(d.max()) > 23.0 and float(d.min()) < 2.0  # long and short tails both occur
    mostly = float(((d >= 10) & (d <= 17)).double().mean())
    assert mostly > 0.75  # 0.80 + 0.05 * (17 - 16) / (24.5 - 16) ≈ 0.806 expected


def test_speech_batch_shapes_and_transcripts():
    gen = torch.Generator().manual_seed(1)
    config = ds._SIZES["full"]
    spec, frames, targets, target_lengths = ds.speech_batch(64, config, gen)
    assert spec.shape == (64, 1, int(frames[0]), 161) and spec.dtype == torch.float32
    assert bool((frames[:-1] >= frames[1:]).all())  # longest first, for packing
    # Zero past each utterance's end, standard normal (normalised log spectrogram) inside it.
    inside = torch.arange(spec.shape[2]) < frames.unsqueeze(1)
    assert bool((spec[:, 0][~inside] == 0).all())
    values = spec[:, 0][inside]
    assert abs(float(values.mean())) < 0.01 and abs(float(values.std()) - 1) < 0.01
    # Characters only (no blank) up to each length, blank padding after; ~15 characters a second.
    real = torch.arange(targets.shape[1]) < target_lengths.unsqueeze(1)
    assert int(targets[real].min()) >= 1 and int(targets[real].max()) == ds.CLASSES - 1
    assert bool((targets[~real] == ds.BLANK).all())
    seconds = ((frames - 1) * ds.HOP + ds.WINDOW).double() / ds.SAMPLE_RATE
    rate = float(target_lengths.sum() / seconds.sum())
    assert 14.0 < rate < 16.0
    # CTC feasibility: labels plus a blank between each repeated pair fit in the output frames.
    repeats = ((targets[:, 1:] == targets[:, :-1]) & real[:, 1:]).sum(dim=1)
    assert bool((target_lengths + repeats <= ds.output_frames(frames, config.convs)).all())


def test_workload_reports_audio_seconds():
    work = ds.build(3, "cpu", "test", seed=2, pool_size=2)
    assert isinstance(work, Workload)
    assert (work.name, work.throughput_unit) == ("deepspeech2", "audio_s/s")
    assert work.units_per_step == {"utterances/s": 3.0}
    specs = work.inputs()[0::2]  # (spectrograms, targets) per pool batch
    frames = [(s[:, 0].abs().sum(dim=2) > 0).sum(dim=1) for s in specs]  # nonzero frames per utterance
    seconds = [float(((f - 1) * 160 + 320).sum()) / 16_000 for f in frames]
    assert work.samples_per_step == pytest.approx((seconds[0] + seconds[1]) / 2)
    assert 3 * 0.5 <= work.samples_per_step <= 3 * 1.0  # test utterances last 0.5..1 s


def test_padding_does_not_change_an_utterance_result():
    gen = torch.Generator().manual_seed(0)
    config = ds._SIZES["test"]
    model = ds.DeepSpeech2(config).eval()  # eval: BN uses running statistics, not the batch's
    spec, frames, _, _ = ds.speech_batch(4, config, gen)
    last = 3  # shortest utterance; padded in the batch
    assert int(frames[last]) < spec.shape[2]
    with torch.no_grad():
        batched, lengths = model(spec, frames)
        alone, _ = model(spec[last:, :, : int(frames[last])], frames[last:])
    n = int(lengths[last])
    torch.testing.assert_close(batched[:n, last], alone[:n, 0])


def test_test_size_training_lowers_loss_on_a_fixed_batch():
    work = ds.build(4, "cpu", "test", seed=0, pool_size=1)
    losses = []
    for _ in range(6):
        loss = work.step()
        assert isinstance(loss, torch.Tensor) and loss.ndim == 0
        losses.append(float(loss.detach()))
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


def test_same_seed_same_workload():
    a, b = ds.build(2, "cpu", "test", seed=3), ds.build(2, "cpu", "test", seed=3)
    c = ds.build(2, "cpu", "test", seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.inputs(), b.inputs(), strict=True))
    assert all(torch.equal(x, y) for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True))
    assert a.samples_per_step == b.samples_per_step
    assert not all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a.inputs(), c.inputs()))


@pytest.mark.parametrize("kwargs", [{"batch": 0}, {"batch": None}, {"size": "huge"}, {"pool_size": 0}])
def test_bad_arguments_raise_usage_error(kwargs):
    args = {"batch": 2, "device": "cpu", "size": "test", **kwargs}
    with pytest.raises(UsageError):
        ds.build(**args)
