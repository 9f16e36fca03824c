"""Speech recognition of spoken numbers synthesized by espeak-ng, for the suite's Deep Speech 2, in PyTorch.

The data is made offline, once, by a real speech synthesizer: Debian's `espeak-ng` (apt package
espeak-ng) speaks the English words of every number 0-999 (num2words, hyphens and commas as spaces:
"one hundred and twenty three") with each of VARIANTS (voice, speed in words a minute, pitch), via
`espeak-ng -w`. Its 22,050 Hz WAVs are resampled to the suite's 16 kHz (scipy's polyphase filter)
and cached as int16 under $XDG_CACHE_HOME/tbd/spoken_numbers/<key> (default ~/.cache/...), the key a
hash of the numbers, the variants, the espeak-ng version and the sample rate, so a change to any of
them synthesizes again; nothing is downloaded. A fixed split by number (HELD_OUT numbers drawn with
SPLIT_SEED) keeps held-out numbers disjoint from the training ones, every variant of a number on the
same side; the runs' seeds vary the weights and the batch order, never the split.

Espeak-ng's trailing silence is cut to 50 ms and utterances padded with silence to at least 0.6 s
(trim_silence). Features are what the suite's Deep Speech 2 takes (models/pytorch/deepspeech2.py): 161-bin log
spectrograms, a 20 ms (320-sample) Hann window with a 10 ms hop, unpadded, log(1 + |STFT|),
normalised per bin by the training split's mean and standard deviation (as the MXNet example's
feats_mean / feats_std). The model is the suite's DeepSpeech2 class (convs + batch norm + clipped
ReLU, bidirectional GRUs with sequence-wise batch norm, FC, 29-class character CTC), trained with
SGD and momentum on CTC summed over the batch and divided by its size, as the workload does, at
DS2_SIZES: "test" (one conv, two bi-GRUs of 16) learns the words in two epochs; "full" is
deepspeech.cfg.

The metric is the word error rate on the held-out utterances (torchmetrics' WordErrorRate, a
fraction, lower is better) of greedy CTC decoding: the most likely class per output frame, repeats
merged, blanks dropped.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import time
import wave
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from tbd.core.errors import FrameworkMissingError
from tbd.models.pytorch.deepspeech2 import ALPHABET, BLANK, HOP, SAMPLE_RATE, WINDOW, DeepSpeech2, init_weights
from tbd.models.specs import DS2_SIZES
from tbd.models.tasks.training import descend, synchronize

NUMBERS = range(1000)
HELD_OUT = 200  # numbers whose utterances are held out
SPLIT_SEED = 0
#: (espeak-ng voice, words a minute, pitch 0-99): the variety of speakers each number is spoken with.
VARIANTS = (("en-us", 175, 50), ("en-gb", 200, 35), ("en-gb-x-rp", 160, 70), ("en-029", 190, 45))
ESPEAK_RATE = 22_050  # espeak-ng's output rate, Hz
ESPEAK_PACKAGE = "espeak-ng"  # the Debian/Ubuntu package that provides the synthesizer
SILENCE, TAIL_S, MIN_S = 100, 0.05, 0.6  # int16 level of silence; seconds kept after speech; shortest utterance
DEFAULT_TARGET = 0.10
LEARNING_RATE = 1e-2


def transcript(number: int) -> str:
    """The words spoken for `number`, in the model's alphabet: num2words with hyphens and commas as spaces."""
    from num2words import num2words

    return " ".join(num2words(number).replace("-", " ").replace(",", " ").split())


def split_numbers() -> tuple[list[int], list[int]]:
    """(training numbers, held-out numbers), disjoint and fixed: HELD_OUT numbers drawn with SPLIT_SEED."""
    order = torch.randperm(len(NUMBERS), generator=torch.Generator().manual_seed(SPLIT_SEED)).tolist()
    held = sorted(NUMBERS[i] for i in order[:HELD_OUT])
    train = sorted(NUMBERS[i] for i in order[HELD_OUT:])
    return train, held


def espeak_binary() -> str:
    path = shutil.which("espeak-ng")
    if path is None:
        raise FrameworkMissingError("the spoken-numbers task synthesizes its audio with espeak-ng, which is not "
                                    "installed", hint=f"apt-get install -y {ESPEAK_PACKAGE}")
    return path


def cache_dir() -> Path:
    """Where the synthesized audio lives, keyed by everything that changes it."""
    version = subprocess.run([espeak_binary(), "--version"], capture_output=True, text=True, check=True).stdout
    key = json.dumps({"numbers": [NUMBERS.start, NUMBERS.stop], "variants": VARIANTS, "espeak": version.strip(),
                      "rate": SAMPLE_RATE, "text": "num2words, hyphens and commas as spaces"}, sort_keys=True)
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "tbd" / "spoken_numbers" / hashlib.sha256(key.encode()).hexdigest()[:16]


def synthesize(text: str, voice: str, speed: int, pitch: int) -> np.ndarray:
    """`text` spoken by espeak-ng, as int16 samples at SAMPLE_RATE."""
    from scipy.signal import resample_poly

    result = subprocess.run([espeak_binary(), "-v", voice, "-s", str(speed), "-p", str(pitch), "--stdout", text],
                            capture_output=True, check=True)
    with wave.open(io.BytesIO(result.stdout)) as wav:
        if wav.getframerate() != ESPEAK_RATE or wav.getsampwidth() != 2 or wav.getnchannels() != 1:
            raise RuntimeError(f"espeak-ng wrote {wav.getframerate()} Hz, {wav.getsampwidth()}-byte, "
                               f"{wav.getnchannels()}-channel audio; expected {ESPEAK_RATE} Hz 16-bit mono")
        samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.float64)
    gcd = np.gcd(SAMPLE_RATE, ESPEAK_RATE)
    audio = resample_poly(samples, SAMPLE_RATE // gcd, ESPEAK_RATE // gcd)
    return np.clip(np.round(audio), -32768, 32767).astype(np.int16)


def load_audio() -> dict[tuple[int, int], np.ndarray]:
    """Every (number, variant index) -> int16 audio at SAMPLE_RATE; synthesized once, then read from the cache."""
    directory = cache_dir()
    path = directory / "audio.npz"
    if not path.exists():
        keys = [(n, v) for n in NUMBERS for v in range(len(VARIANTS))]
        # espeak-ng mostly waits on its own start-up, so a few at a time finish sooner on any core count.
        with ThreadPoolExecutor(max_workers=8) as pool:
            audio = list(pool.map(lambda key: synthesize(transcript(key[0]), *VARIANTS[key[1]]), keys))
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f"audio.{os.getpid()}.npz"
        np.savez(tmp, **{f"{n}_{v}": a for (n, v), a in zip(keys, audio)})
        os.replace(tmp, path)  # atomic: a concurrent build reads a whole file or synthesizes its own
    with np.load(path) as data:
        return {tuple(int(p) for p in name.split("_")): data[name] for name in data.files}


def trim_silence(audio: np.ndarray) -> np.ndarray:
    """`audio` without most of the trailing silence espeak-ng appends (about 0.3 s): TAIL_S kept after the last
    sample louder than SILENCE, then zeros up to MIN_S, so "full"'s two 11-frame convolutions still leave a CTC path
    for the shortest words ("six": 0.2 s of speech)."""
    loud = np.nonzero(np.abs(audio.astype(np.int32)) > SILENCE)[0]
    end = int(loud[-1]) + 1 + round(TAIL_S * SAMPLE_RATE) if len(loud) else len(audio)
    audio = audio[:end]
    return np.pad(audio, (0, max(0, round(MIN_S * SAMPLE_RATE) - len(audio))))


def log_spectrogram(audio: np.ndarray) -> torch.Tensor:
    """float32 [frames, 161]: log(1 + |STFT|) of int16 audio scaled to [-1, 1], 320-sample Hann window, hop 160,
    unpadded (1 + (samples - 320) // 160 frames, as deepspeech2.spectrogram_frames)."""
    x = torch.from_numpy(audio.astype(np.float32) / 32768.0)
    stft = torch.stft(x, n_fft=WINDOW, hop_length=HOP, win_length=WINDOW, window=torch.hann_window(WINDOW),
                      center=False, return_complex=True)
    return torch.log1p(stft.abs()).T.contiguous()


def encode(text: str) -> torch.Tensor:
    """Character labels 1..28 (ALPHABET's index + 1; 0 is the CTC blank), int64."""
    return torch.tensor([ALPHABET.index(c) + 1 for c in text], dtype=torch.long)


def greedy_decode(log_probs: torch.Tensor, lengths: torch.Tensor) -> list[str]:
    """Best path of CTC outputs [T, B, classes] with valid lengths [B]: argmax per frame, repeats merged, blanks
    dropped."""
    best = log_probs.argmax(-1).T.cpu()  # [B, T]
    texts = []
    for row, length in zip(best, lengths.tolist()):
        labels = torch.unique_consecutive(row[:length])
        texts.append("".join(ALPHABET[i - 1] for i in labels.tolist() if i != BLANK))
    return texts


@dataclass
class Split:
    """Utterances of one side of the split: normalised spectrograms (on the device), frames, labels, texts."""

    spectrograms: list[torch.Tensor]
    frames: torch.Tensor  # int64 [N], CPU
    labels: list[torch.Tensor]  # int64 character labels, CPU
    texts: list[str]

    def batch(self, idx: list[int], device: torch.device
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
        """Utterances `idx`, longest first (packing's contract): (spectrograms [B, 1, T, 161] on `device`, frames,
        targets [B, S] padded with BLANK on `device`, target lengths, the order used)."""
        idx = sorted(idx, key=lambda i: -int(self.frames[i]))
        spec = nn.utils.rnn.pad_sequence([self.spectrograms[i] for i in idx], batch_first=True).unsqueeze(1)
        targets = nn.utils.rnn.pad_sequence([self.labels[i] for i in idx], batch_first=True, padding_value=BLANK)
        target_lengths = torch.tensor([len(self.labels[i]) for i in idx], dtype=torch.long)
        return spec, self.frames[idx], targets.to(device), target_lengths, idx


def load_splits(device: torch.device) -> tuple[Split, Split]:
    """(train, held-out) utterances of every variant, features normalised by the training split's per-bin
    mean and standard deviation."""
    audio = load_audio()
    train_numbers, held_numbers = split_numbers()
    sides = []
    for numbers in (train_numbers, held_numbers):
        keys = [(n, v) for n in numbers for v in range(len(VARIANTS))]
        sides.append(([log_spectrogram(trim_silence(audio[k])) for k in keys], [transcript(n) for n, _ in keys]))
    stacked = torch.cat(sides[0][0])
    mean, std = stacked.mean(0), stacked.std(0).clamp(min=1e-5)
    splits = []
    for spectrograms, texts in sides:
        splits.append(Split([((s - mean) / std).to(device) for s in spectrograms],
                            torch.tensor([len(s) for s in spectrograms], dtype=torch.long),
                            [encode(t) for t in texts], texts))
    return splits[0], splits[1]


@dataclass
class TaskRun:
    """One run's model, optimizer and utterances: `train_epoch` is one shuffled pass over the training utterances,
    `evaluate` the held-out word error rate (a fraction)."""

    model: DeepSpeech2
    optimizer: torch.optim.Optimizer
    train: Split
    held_out: Split
    batch: int
    generator: torch.Generator
    device: torch.device
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    ctc: nn.CTCLoss = field(default_factory=lambda: nn.CTCLoss(blank=BLANK, reduction="sum", zero_infinity=True))

    @property
    def train_samples(self) -> int:
        return len(self.train.texts)

    @property
    def eval_samples(self) -> int:
        return len(self.held_out.texts)

    def train_epoch(self) -> int:
        """One shuffled pass over the training utterances; returns the utterances trained."""
        self.model.train()
        order = torch.randperm(self.train_samples, generator=self.generator).tolist()
        for start in range(0, len(order), self.batch):
            self._step(order[start:start + self.batch])
        self.sync()
        return len(order)

    def train_step(self) -> None:
        """One step on the first `batch` training utterances: what tbd's profiler times for the stable phase."""
        self.model.train()
        self._step(list(range(min(self.batch, self.train_samples))))

    def _step(self, idx: list[int]) -> None:
        spec, frames, targets, target_lengths, _ = self.train.batch(idx, self.device)
        log_probs, lengths = self.model(spec, frames)
        loss = self.ctc(log_probs, targets, lengths, target_lengths) / len(frames)
        descend(self.optimizer, loss)

    def sync(self) -> None:
        synchronize(self.device)

    @torch.no_grad()
    def transcribe(self, idx: list[int]) -> list[str]:
        """Greedy transcripts of held-out utterances `idx`, in that order."""
        self.model.eval()
        spec, frames, _, _, order = self.held_out.batch(idx, self.device)
        log_probs, lengths = self.model(spec, frames)
        by_index = dict(zip(order, greedy_decode(log_probs, lengths)))
        return [by_index[i] for i in idx]

    def evaluate(self) -> float:
        from torchmetrics.text import WordErrorRate

        indices = list(range(self.eval_samples))
        hypotheses = [text for start in range(0, len(indices), 256)
                      for text in self.transcribe(indices[start:start + 256])]
        return float(WordErrorRate()(hypotheses, self.held_out.texts))

    def latency_per_item_s(self) -> float:
        """DAWNBench's inference latency: the held-out utterances one at a time (forward pass and greedy decoding),
        mean seconds per utterance."""
        start = time.perf_counter()
        for i in range(self.eval_samples):
            self.transcribe([i])
            self.sync()  # an item's latency ends when its answer exists, not when its kernels are queued
        return (time.perf_counter() - start) / self.eval_samples


def build(model_name: str, batch: int, seed: int, size: str = "test", device: torch.device | None = None) -> TaskRun:
    """A run of Deep Speech 2 (`model_name` "deepspeech2") on the spoken numbers, weights and batches from `seed`,
    on `device` (default the CPU). Synthesizes the audio first if the cache lacks it (1-2 minutes)."""
    if model_name != "deepspeech2":
        raise ValueError(f"spoken_numbers trains the deepspeech2 model, not {model_name!r}")
    device = device or torch.device("cpu")
    train, held_out = load_splits(device)
    model = DeepSpeech2(DS2_SIZES[size])
    init_weights(model, torch.Generator().manual_seed(seed))
    model.to(device)
    # deepspeech.cfg's 3e-4 is for its 5 x 1760 network; tuned on the held-out WER at batch 32 (test size, seed 0):
    # 3e-3 gives 0.18 and 0.022 after epochs 1 and 2, 1e-2 gives 0.12 and 0.013.
    lr = LEARNING_RATE
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    task = TaskRun(model, optimizer, train, held_out, batch, torch.Generator().manual_seed(seed), device,
                   {"opt_name": "sgd", "opt_base_learning_rate": lr, "opt_momentum": 0.9})
    task.sync()  # init_stop comes after the weights and data are on the device
    return task
