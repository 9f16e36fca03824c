"""Deep Speech 2: convolutions, bidirectional GRUs and CTC on synthetic LibriSpeech-shaped audio, in PyTorch.

The TBD paper's speech workload is MXNet's example/speech_recognition (github.com/apache/mxnet,
example/speech_recognition; "deepSpeech.mxnet"), an implementation of Deep Speech 2 (Amodei et
al., "Deep Speech 2: End-to-End Speech Recognition in English and Mandarin", ICML 2016). Its full
configuration, deepspeech.cfg, gives the sizes used here:
- input: 161-bin log spectrograms (`width = 161`: a 20 ms / 320-sample window at 16 kHz, 10 ms
  hop), laid out [batch, 1, time, frequency] as arch_deepspeech.py reshapes them;
- conv1: 32 filters of 11 (time) x 41 (frequency), stride 2 x 2; conv2: 32 filters of 11 x 21,
  stride 1 (time) x 2 (frequency); no padding and no bias (`no_bias=is_batchnorm`), each followed
  by batch norm. 161 bins become (161 - 41) // 2 + 1 = 61, then (61 - 21) // 2 + 1 = 21, so the
  recurrent stack reads 32 * 21 = 672 features per output frame;
- `num_rnn_layer = 5`, `rnn_type = bigru`, `num_hidden_rnn_list = [1760] * 5`;
- one rear fully connected layer of 1760 units (no bias, batch norm, ReLU), then the CTC layer's
  classifier (stt_layer_warpctc.py: a biased FullyConnected to the classes, blank included);
- optimizer `sgd` with `{"momentum": 0.9}`, `learning_rate = 0.0003`, `weight_decay = 0`,
  initializer Xavier(magnitude=2, factor_type="in").

Deliberate departures (none changes a layer's shape except where noted):
- Characters, not bi-graphemes: 29 classes (blank, space, apostrophe, a-z) as in the example's
  default.cfg (`is_bi_graphemes = False`); deepspeech.cfg's bi-grapheme vocabulary only widens
  the final classifier.
- Clipped ReLU min(max(x, 0), 20) after batch norm (Amodei et al. 2016, §3.1), where MXNet applies
  a plain ReLU before its batch norm; no parameters either way.
- Recurrent stack: five nn.GRU(bidirectional=True) layers over packed sequences. Each layer's
  input is 1760 wide, as in MXNet (whose bi_gru_unroll runs two independent 5-layer stacks, one
  per direction) and in Deep Speech 2 (which sums the two directions, §3.1): we sum the directions
  between layers and concatenate them after the last one, as MXNet's Concat feeding the rear
  fully connected layer (3520 -> 1760) does. So every GRU and FC weight has MXNet's shape.
- Batch norm in the recurrent stack: MXNet normalises each step's input-to-hidden gate projection
  with gamma/beta per time step (their number grows with the bucket length), which nn.GRU cannot
  express. We use sequence-wise batch norm (Amodei et al. 2016, §3.2) on the input of GRU
  layers 2-5, over the real (packed) frames only, as deepspeech.pytorch (SeanNaren) does.
- Gradient clipping (`clip_gradient = 100`, element-wise) is left out, so step() is exactly
  zero_grad, forward, loss, backward, optimizer step; bucketing is replaced by padding per batch.
- Loss: summed CTC over the batch divided by the batch size, the gradient MXNet's warp-ctc gives
  after Module's default rescale_grad = 1 / batch_size.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from tbd.models.base import Workload, pool_workload
from tbd.models.pytorch.synthetic import POOL_SIZE, check_build_args
from tbd.models.specs import DS2_SIZES, DS2Config, DS2ConvSpec

#: Data-parallel engines this model runs under (tbd profile --data-parallel; checked by 2-rank tests).
DATA_PARALLEL = ("ddp", "fsdp")

SAMPLE_RATE = 16_000  # LibriSpeech audio, Hz
WINDOW = 320  # 20 ms spectrogram window, samples
HOP = 160  # 10 ms hop, samples
BINS = WINDOW // 2 + 1  # 161 frequency bins of a 320-point real FFT
#: CTC classes: blank first (nn.CTCLoss's default blank=0), then the characters.
ALPHABET = " '" + "abcdefghijklmnopqrstuvwxyz"
BLANK = 0
CLASSES = 1 + len(ALPHABET)  # 29
CLIP = 20.0  # clipped ReLU ceiling (Amodei et al. 2016, §3.1)


# Layer sizes are framework-neutral: one copy in models/specs.py.
ConvSpec, Config, _SIZES = DS2ConvSpec, DS2Config, DS2_SIZES


def output_frames(frames: torch.Tensor, convs: tuple[ConvSpec, ...]) -> torch.Tensor:
    """Frames after the unpadded convolutions: t -> (t - kernel) // stride + 1 per layer (int64)."""
    for _, (kernel, _), (stride, _) in convs:
        frames = torch.div(frames - kernel, stride, rounding_mode="floor") + 1
    return frames


class DeepSpeech2(nn.Module):
    """Conv + BN + clipped ReLU layers, bidirectional GRUs, FC + BN + clipped ReLU, classifier."""

    def __init__(self, config: Config, bins: int = BINS, classes: int = CLASSES):
        super().__init__()
        self.config = config
        layers: list[nn.Module] = []
        channels, features = 1, bins
        for out_channels, kernel, stride in config.convs:
            layers += [nn.Conv2d(channels, out_channels, kernel, stride=stride, bias=False),
                       nn.BatchNorm2d(out_channels), nn.Hardtanh(0.0, CLIP)]
            channels, features = out_channels, (features - kernel[1]) // stride[1] + 1
        self.convs = nn.Sequential(*layers)
        hidden = config.hidden
        self.grus = nn.ModuleList(nn.GRU(channels * features if i == 0 else hidden, hidden, bidirectional=True)
                                  for i in range(config.gru_layers))
        # Sequence-wise BN on the input of every GRU but the first (whose input left a conv BN).
        self.gru_norms = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(config.gru_layers - 1))
        self.fc = nn.Linear(2 * hidden, config.fc, bias=False)  # BN follows, so no bias (as MXNet)
        self.fc_norm = nn.BatchNorm1d(config.fc)
        self.classifier = nn.Linear(config.fc, classes)

    def forward(self, spectrograms: torch.Tensor, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """CTC log-probabilities float [T', B, classes] and their lengths (int64 [B], CPU).

        `spectrograms` is float [B, 1, T, bins], zero-padded past each utterance's end; `frames`
        is int64 [B] on the CPU, longest first (pack_padded_sequence's contract). Output frame t
        only sees input frames of its own utterance (no conv padding), so padding changes nothing
        but the batch-norm statistics of the conv layers.
        """
        x = self.convs(spectrograms)  # [B, C, T', F']
        x = x.permute(0, 2, 1, 3).flatten(2)  # [B, T', C * F'], as MXNet's transpose + reshape
        lengths = output_frames(frames, self.config.convs)
        seq = pack_padded_sequence(x, lengths, batch_first=True)
        hidden = self.config.hidden
        for i, gru in enumerate(self.grus):
            if i > 0:
                seq = _on_data(seq, lambda d, i=i: self.gru_norms[i - 1](d[:, :hidden] + d[:, hidden:]))
            seq, _ = gru(seq)
        seq = _on_data(seq, lambda d: torch.log_softmax(
            self.classifier(nn.functional.hardtanh(self.fc_norm(self.fc(d)), 0.0, CLIP)), dim=-1))
        log_probs, _ = pad_packed_sequence(seq)  # [T', B, classes]
        return log_probs, lengths


def _on_data(seq: PackedSequence, fn) -> PackedSequence:
    """Apply a per-frame function to the real frames of a packed sequence (padding never enters BN)."""
    return seq._replace(data=fn(seq.data))


def build(batch: int, device: "torch.device | str", size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE, parallel: Callable[[nn.Module], nn.Module] | None = None) -> Workload:
    """Deep Speech 2 training workload: SGD with momentum on `pool_size` synthetic utterance batches.

    Args:
        batch: utterances per iteration.
        device: where the model, optimizer state and batches live ("cpu", "cuda", ...).
        size: "full" (deepspeech.cfg) or "test" (tiny, same layer types, 0.5-1 s utterances, for CI).
        seed: fixes weight init and data (drawn on the CPU, so identical on every device).
        pool_size: synthetic batches kept on the device and cycled through by step().
        parallel: wraps the model for data-parallel training (e.g. in DistributedDataParallel);
            step() runs the forward pass through the wrapper, while Workload.model and the
            optimizer keep the module itself (FSDP shards it in place, before the optimizer is
            made). None: single process.
    Returns:
        Workload whose step() runs one iteration and returns the loss tensor (no host sync);
        samples_per_step is the pool's mean seconds of audio per batch (throughput in audio_s/s),
        units_per_step["utterances/s"] the batch size.
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    config = _SIZES[size]
    device = torch.device(device)
    generator = torch.Generator().manual_seed(seed)

    model = DeepSpeech2(config)
    init_weights(model, generator)
    model.to(device).train()
    # Wrapped before the optimizer is made: FSDP replaces the parameters with their shards.
    net = parallel(model) if parallel else model
    optimizer = torch.optim.SGD(model.parameters(), lr=3e-4, momentum=0.9)  # deepspeech.cfg [optimizer]
    ctc = nn.CTCLoss(blank=BLANK, reduction="sum", zero_infinity=True)

    host_pool = [speech_batch(batch, config, generator) for _ in range(pool_size)]
    # Lengths stay on the host: packing and CTC want them there, so the step never syncs.
    pool = [(spec.to(device), frames, targets.to(device), target_lengths)
            for spec, frames, targets, target_lengths in host_pool]

    def train_step(spec, frames, targets, target_lengths) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        log_probs, lengths = net(spec, frames)
        loss = ctc(log_probs, targets, lengths, target_lengths) / batch
        loss.backward()
        optimizer.step()
        return loss

    audio_s = sum(audio_seconds(frames) for _, frames, _, _ in host_pool) / pool_size
    convs = ", ".join(f"{c}x{k[0]}x{k[1]}/{s[0]}x{s[1]}" for c, k, s in config.convs)
    return pool_workload(
        "deepspeech2", pool, train_step,
        samples_per_step=audio_s,
        throughput_unit="audio_s/s",
        units_per_step={"utterances/s": float(batch)},
        model=model,
        optimizer=optimizer,
        inputs=lambda: [t for spec, _, targets, _ in pool for t in (spec, targets)],
        description=(f"Deep Speech 2 (MXNet example/speech_recognition deepspeech.cfg; {size}: conv {convs} "
                     f"+ BN, {config.gru_layers} bi-GRU x {config.hidden}, FC {config.fc}, {CLASSES}-class CTC), "
                     f"SGD momentum 0.9, {pool_size} synthetic batches of {batch} utterances"),
    )


def init_weights(model: nn.Module, generator: torch.Generator) -> None:
    """MXNet's Xavier(magnitude=2, factor_type="in"): weights U(-sqrt(2 / fan_in), +); biases 0, BN gamma 1."""
    for name, param in model.named_parameters():
        if param.dim() > 1:  # conv, linear and GRU weight matrices: fan_in = inputs per output
            bound = math.sqrt(2.0 / param[0].numel())
            nn.init.uniform_(param, -bound, bound, generator=generator)
        elif name.endswith("weight"):  # the only 1-D weights are batch-norm gammas
            nn.init.ones_(param)
        else:
            nn.init.zeros_(param)


# --- Synthetic LibriSpeech-shaped data ---------------------------------------------------------

#: Utterance durations for "full": a mixture shaped like LibriSpeech train-clean-100/360 (Panayotov
#: et al., ICASSP 2015: segments mostly 10-17 s, mean about 12.3 s, longest about 24.5 s, a tail of
#: short ones). (weight, low s, high s, kind): "uniform" or "triangular" (mean of two uniforms).
#: Mean = 0.15 * (1.5 + 10) / 2 + 0.80 * (10 + 16) / 2 + 0.05 * (16 + 24.5) / 2 = 12.275 s.
LIBRISPEECH_DURATIONS = ((0.15, 1.5, 10.0, "uniform"), (0.80, 10.0, 16.0, "triangular"),
                         (0.05, 16.0, 24.5, "uniform"))
#: Characters per second of speech: uniform 12..18 (mean 15, LibriSpeech's read-speech rate).
CHARS_PER_S = (12.0, 18.0)


def utterance_durations(count: int, generator: torch.Generator,
                        uniform_s: tuple[float, float] | None = None) -> torch.Tensor:
    """Utterance durations in seconds, float64 [count]: LibriSpeech's mixture, or uniform over `uniform_s`."""
    if uniform_s is not None:
        low, high = uniform_s
        return low + (high - low) * torch.rand(count, generator=generator, dtype=torch.float64)
    weights = torch.tensor([w for w, *_ in LIBRISPEECH_DURATIONS], dtype=torch.float64)
    component = torch.multinomial(weights, count, replacement=True, generator=generator)
    u = torch.rand((2, count), generator=generator, dtype=torch.float64)
    durations = torch.empty(count, dtype=torch.float64)
    for i, (_, low, high, kind) in enumerate(LIBRISPEECH_DURATIONS):
        unit = u.mean(dim=0) if kind == "triangular" else u[0]
        durations = torch.where(component == i, low + (high - low) * unit, durations)
    return durations


def spectrogram_frames(samples: torch.Tensor) -> torch.Tensor:
    """STFT frames of `samples`-long audio, unpadded: 1 + (samples - WINDOW) // HOP (int64)."""
    return 1 + torch.div(samples - WINDOW, HOP, rounding_mode="floor")


def audio_seconds(frames: torch.Tensor) -> float:
    """Seconds of audio behind spectrograms of `frames` frames: the shortest audio giving that many."""
    return float(((frames - 1) * HOP + WINDOW).sum()) / SAMPLE_RATE


def speech_batch(batch: int, config: Config, generator: torch.Generator
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One synthetic batch of normalised log spectrograms and character transcripts.

    The example normalises each bin to zero mean and unit variance over the training set
    (stt_datagenerator.py, feats_mean / feats_std), so frames are standard normal; past an
    utterance's end they are zero. Transcripts are uniform over the 28 characters, with
    duration x U(CHARS_PER_S) characters, capped at half the CTC output frames so a path exists
    even if every character repeated its neighbour (CTC needs a blank between repeats).
    Utterances come longest first, as pack_padded_sequence(enforce_sorted=True) wants.

    Returns:
        (spectrograms float32 [B, 1, T, BINS], frames int64 [B], targets int64 [B, S] (padded
        with BLANK), target_lengths int64 [B]), all on the CPU; T and S are the batch's longest.
    """
    durations = utterance_durations(batch, generator, config.durations_s)
    samples = torch.round(durations * SAMPLE_RATE).long()
    frames = spectrogram_frames(samples).sort(descending=True).values
    width = int(frames[0])
    spectrograms = torch.randn((batch, 1, width, BINS), generator=generator)
    spectrograms.masked_fill_((torch.arange(width) >= frames.unsqueeze(1)).view(batch, 1, width, 1), 0.0)

    low, high = CHARS_PER_S
    rate = low + (high - low) * torch.rand(batch, generator=generator, dtype=torch.float64)
    seconds = ((frames - 1) * HOP + WINDOW).double() / SAMPLE_RATE
    target_lengths = torch.round(seconds * rate).long()
    target_lengths = torch.minimum(target_lengths, output_frames(frames, config.convs) // 2).clamp(min=1)
    targets = torch.randint(1, CLASSES, (batch, int(target_lengths.max())), generator=generator)
    targets.masked_fill_(torch.arange(targets.shape[1]) >= target_lengths.unsqueeze(1), BLANK)
    return spectrograms, frames, targets, target_lengths
