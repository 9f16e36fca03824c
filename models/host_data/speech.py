"""Seeded synthetic LibriSpeech-shaped speech batches drawn with numpy, for the non-PyTorch Deep Speech 2 ports.

The same distributions as models/pytorch/deepspeech2.py (which draws with a torch.Generator):
utterance durations from a LibriSpeech-like mixture (or uniform for the test size), 161-bin
standard-normal log spectrograms with a 20 ms window and 10 ms hop at 16 kHz, zero past each
utterance's end, and character transcripts of 12-18 characters a second, capped so a CTC path
exists. Framework-neutral so the MXNet and TensorFlow interpreters (no torch) share one copy.

Label convention here is PyTorch's: BLANK = 0, characters 1..28; a framework whose CTC puts the
blank last shifts the labels itself.
"""

from __future__ import annotations

import numpy as np

from tbd.models.specs import DS2ConvSpec

SAMPLE_RATE = 16_000  # LibriSpeech audio, Hz
WINDOW = 320  # 20 ms spectrogram window, samples
HOP = 160  # 10 ms hop, samples
BINS = WINDOW // 2 + 1  # 161 frequency bins of a 320-point real FFT
#: Characters of the transcripts: space, apostrophe, a-z (the example's default.cfg, no bi-graphemes).
ALPHABET = " '" + "abcdefghijklmnopqrstuvwxyz"
BLANK = 0  # CTC blank in this module's labels; characters are 1..len(ALPHABET)
CLASSES = 1 + len(ALPHABET)  # 29

#: Utterance durations for "full": a mixture shaped like LibriSpeech train-clean-100/360 (Panayotov
#: et al., ICASSP 2015). (weight, low s, high s, kind): "uniform" or "triangular" (mean of two
#: uniforms). Mean = 0.15 * (1.5 + 10) / 2 + 0.80 * (10 + 16) / 2 + 0.05 * (16 + 24.5) / 2 = 12.275 s.
LIBRISPEECH_DURATIONS = ((0.15, 1.5, 10.0, "uniform"), (0.80, 10.0, 16.0, "triangular"),
                         (0.05, 16.0, 24.5, "uniform"))
#: Characters per second of speech: uniform 12..18 (mean 15, LibriSpeech's read-speech rate).
CHARS_PER_S = (12.0, 18.0)

ConvSpec = DS2ConvSpec  # one convolution: (output channels, (time, frequency) kernel, stride)


def output_frames(frames: np.ndarray, convs: tuple[ConvSpec, ...]) -> np.ndarray:
    """Frames after the unpadded convolutions: t -> (t - kernel) // stride + 1 per layer (int64)."""
    frames = np.asarray(frames, dtype=np.int64)
    for _, (kernel, _), (stride, _) in convs:
        frames = (frames - kernel) // stride + 1
    return frames


def utterance_durations(count: int, rng: np.random.RandomState,
                        uniform_s: tuple[float, float] | None = None) -> np.ndarray:
    """Utterance durations in seconds, float64 [count]: LibriSpeech's mixture, or uniform over `uniform_s`."""
    if uniform_s is not None:
        low, high = uniform_s
        return low + (high - low) * rng.random_sample(count)
    weights = np.array([w for w, *_ in LIBRISPEECH_DURATIONS])
    component = rng.choice(len(weights), size=count, p=weights / weights.sum())
    u = rng.random_sample((2, count))
    durations = np.empty(count)
    for i, (_, low, high, kind) in enumerate(LIBRISPEECH_DURATIONS):
        unit = u.mean(axis=0) if kind == "triangular" else u[0]
        durations = np.where(component == i, low + (high - low) * unit, durations)
    return durations


def spectrogram_frames(samples: np.ndarray) -> np.ndarray:
    """STFT frames of `samples`-long audio, unpadded: 1 + (samples - WINDOW) // HOP (int64)."""
    return 1 + (np.asarray(samples, dtype=np.int64) - WINDOW) // HOP


def audio_seconds(frames: np.ndarray) -> float:
    """Seconds of audio behind spectrograms of `frames` frames: the shortest audio giving that many."""
    return float(((np.asarray(frames, dtype=np.int64) - 1) * HOP + WINDOW).sum()) / SAMPLE_RATE


def speech_batch(batch: int, convs: tuple[ConvSpec, ...], durations_s: tuple[float, float] | None,
                 rng: np.random.RandomState) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One synthetic batch of normalised log spectrograms and character transcripts.

    As models/pytorch/deepspeech2.speech_batch: frames standard normal (the example's per-bin
    mean/std normalisation) and zero past each utterance's end; transcripts uniform over the 28
    characters, duration x U(CHARS_PER_S) long, capped at half the CTC output frames (room for a
    blank between repeats); utterances longest first.

    Args:
        batch: utterances in the batch.
        convs: the model's convolutions (they set the CTC output frames that cap the transcripts).
        durations_s: uniform duration range in seconds, or None for the LibriSpeech mixture.
        rng: host random state that fixes the draw.
    Returns:
        (spectrograms float32 [B, 1, T, BINS], frames int64 [B], targets int64 [B, S] (characters
        1..28, padded with BLANK), target_lengths int64 [B]); T and S are the batch's longest.
    """
    durations = utterance_durations(batch, rng, durations_s)
    samples = np.round(durations * SAMPLE_RATE).astype(np.int64)
    frames = np.sort(spectrogram_frames(samples))[::-1].copy()
    width = int(frames[0])
    spectrograms = rng.standard_normal((batch, 1, width, BINS)).astype(np.float32)
    spectrograms[:, 0][np.arange(width)[None, :] >= frames[:, None]] = 0.0  # a view: writes through

    low, high = CHARS_PER_S
    rate = low + (high - low) * rng.random_sample(batch)
    seconds = ((frames - 1) * HOP + WINDOW) / SAMPLE_RATE
    target_lengths = np.round(seconds * rate).astype(np.int64)
    target_lengths = np.maximum(np.minimum(target_lengths, output_frames(frames, convs) // 2), 1)
    targets = rng.randint(1, CLASSES, size=(batch, int(target_lengths.max()))).astype(np.int64)
    targets[np.arange(targets.shape[1])[None, :] >= target_lengths[:, None]] = BLANK
    return spectrograms, frames, targets, target_lengths
