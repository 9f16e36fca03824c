"""Deep Speech 2: convolutions, bidirectional GRUs and CTC on synthetic LibriSpeech-shaped audio, in MXNet Gluon.

Layer for layer the model of models/pytorch/deepspeech2.py (see its docstring for the sources:
Amodei et al., ICML 2016, as configured by MXNet's example/speech_recognition deepspeech.cfg):
two unpadded, bias-free convolutions 32 x 11x41 / 2x2 and 32 x 11x21 / 1x2 on 161-bin
spectrograms, each with batch norm and a clipped ReLU min(max(x, 0), 20); five bidirectional GRU
layers of 1760 units (gluon.rnn.GRU(bidirectional=True): the fused RNN operator, cuDNN on a GPU;
gates r, z, n in the same order and with the same formula as PyTorch's nn.GRU, and two bias
vectors per direction, i2h and h2h, as PyTorch's b_ih and b_hh, so the counts match exactly);
the two directions summed and batch-normalised between layers (sequence-wise BN, Amodei et al.
§3.2), concatenated after the last; a rear fully connected layer 3520 -> 1760 without bias, batch
norm, clipped ReLU; a biased classifier to 29 classes; CTC. SGD with momentum 0.9 at lr 3e-4,
weights Xavier(magnitude=2, factor_type="in") (MXNet's own initializer, deepspeech.cfg's choice).
Trainable parameters: 180,987,293, as in PyTorch.

CTC: gluon.loss.CTCLoss (MXNet's ctc_loss, blank_label="last"): the blank is the LAST class
(index 28) and the characters are 0..27, where PyTorch has blank 0 and characters 1..28; the data
(models/host_data/speech.py, PyTorch's convention) is shifted by one when the pool is built, and label
padding is -1 (ignored anyway: label lengths are passed). The classifier's 29 outputs are the
unnormalised activations CTCLoss expects (it applies the softmax itself). Its per-utterance losses
summed and scaled by trainer.step(batch) give PyTorch's summed CTC / batch gradient.

Deliberate departures from the PyTorch version:
- Padding: each pool batch is padded to its own longest utterance (one shape per batch, as
  PyTorch's), but the GRUs run over the padded frames: PyTorch packs the sequences, and MXNet's
  fused RNN has `use_sequence_length` only with cuDNN (on the CPU it is ignored or rejected).
  MXNet's example/speech_recognition also runs its bucketed, padded batches through the RNN
  unmasked. CTC only reads each utterance's own output frames (data lengths are passed), so what
  differs is the backward direction's start for short utterances and the batch-norm statistics
  of the recurrent stack and rear FC layer, which here include the padded frames (PyTorch's
  include only real frames); the step's cost is that of the padded batch, the same GRU kernels.
- Hybridization: the whole network and the loss are hybridized with the default flags
  (static_alloc=False, static_shape=False), because pool batches differ in length T and
  static_shape cannot hold across them; only the CTC lengths, host-built NDArrays, change.
"""

from __future__ import annotations

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn, rnn

from tbd.models.base import Workload, pool_workload
from tbd.models.host_data.speech import BINS, CLASSES, audio_seconds, output_frames, speech_batch
from tbd.models.host_data.synthetic import POOL_SIZE, check_build_args
from tbd.models.specs import DS2_SIZES

CLIP = 20.0  # clipped ReLU ceiling (Amodei et al. 2016, §3.1)
LR, MOMENTUM = 3e-4, 0.9  # deepspeech.cfg [optimizer]

_SIZES = DS2_SIZES  # framework-neutral: one copy in models/specs.py


class DeepSpeech2(gluon.HybridBlock):
    """Conv + BN + clipped ReLU layers, bidirectional GRUs, FC + BN + clipped ReLU, classifier."""

    def __init__(self, convs, gru_layers: int, hidden: int, fc: int, bins: int = BINS, classes: int = CLASSES,
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden = hidden
        with self.name_scope():
            self.convs = nn.HybridSequential(prefix="conv_")
            channels, features = 1, bins
            for out_channels, kernel, stride in convs:
                self.convs.add(nn.Conv2D(out_channels, kernel, strides=stride, use_bias=False,
                                         in_channels=channels),
                               nn.BatchNorm(in_channels=out_channels))
                channels, features = out_channels, (features - kernel[1]) // stride[1] + 1
            self.grus = nn.HybridSequential(prefix="gru_")
            self.gru_norms = nn.HybridSequential(prefix="grunorm_")
            for i in range(gru_layers):
                self.grus.add(rnn.GRU(hidden, 1, layout="NTC", bidirectional=True,
                                      input_size=channels * features if i == 0 else hidden))
                if i > 0:  # BN on the summed directions feeding GRUs 2..L (axis -1: over batch and time)
                    self.gru_norms.add(nn.BatchNorm(axis=-1, in_channels=hidden))
            self.fc = nn.Dense(fc, in_units=2 * hidden, use_bias=False, flatten=False)
            self.fc_norm = nn.BatchNorm(axis=-1, in_channels=fc)
            self.classifier = nn.Dense(classes, in_units=fc, flatten=False)

    def hybrid_forward(self, F, spectrograms):
        """CTC activations float32 [B, T', classes] (unnormalised) from spectrograms [B, 1, T, bins]."""
        x = spectrograms
        for i in range(0, len(self.convs), 2):
            x = F.clip(self.convs[i + 1](self.convs[i](x)), 0.0, CLIP)
        x = F.reshape(F.transpose(x, axes=(0, 2, 1, 3)), shape=(0, 0, -1))  # [B, T', C * F'], as MXNet's example
        for i in range(len(self.grus)):
            if i > 0:
                forward, backward = F.split(x, num_outputs=2, axis=-1)
                x = self.gru_norms[i - 1](forward + backward)
            x = self.grus[i](x)  # [B, T', 2H]: directions concatenated
        x = F.clip(self.fc_norm(self.fc(x)), 0.0, CLIP)
        return self.classifier(x)


def build(batch: int, device: mx.Context, size: str = "full", seed: int = 0,
          *, pool_size: int = POOL_SIZE) -> Workload:
    """Deep Speech 2 training workload: SGD with momentum on `pool_size` synthetic utterance batches.

    Args:
        batch: utterances per iteration.
        device: mx.Context where parameters, optimizer state and batches live.
        size: "full" (deepspeech.cfg) or "test" (tiny, same layer types, 0.5-1 s utterances, for CI).
        seed: fixes weight init (mx.random.seed) and data (numpy RandomState).
        pool_size: synthetic batches kept on the device and cycled through by step().
    Returns:
        Workload whose step() runs one iteration and returns the per-utterance CTC loss NDArray [batch]
        without waiting for it; samples_per_step is the pool's mean seconds of audio per batch
        (throughput in audio_s/s), units_per_step["utterances/s"] the batch size.
    """
    check_build_args(batch, size, tuple(_SIZES), pool_size)
    cfg = _SIZES[size]
    convs, gru_layers, hidden, fc, durations_s = cfg.convs, cfg.gru_layers, cfg.hidden, cfg.fc, cfg.durations_s
    rng = np.random.RandomState(seed)
    mx.random.seed(seed)

    model = DeepSpeech2(convs, gru_layers, hidden, fc)
    # Xavier on every weight (fan_in = inputs per output, U(+-sqrt(2 / fan_in))); Gluon's
    # Initializer sets biases and BN beta to 0, gamma to 1, as the PyTorch version does.
    model.initialize(mx.init.Xavier(rnd_type="uniform", factor_type="in", magnitude=2), ctx=device)
    model.hybridize()
    trainer = gluon.Trainer(model.collect_params(), "sgd", {"learning_rate": LR, "momentum": MOMENTUM})
    ctc = gluon.loss.CTCLoss(layout="NTC", label_layout="NT")
    ctc.hybridize()

    host_pool = [speech_batch(batch, convs, durations_s, rng) for _ in range(pool_size)]
    pool = [_to_device(*arrays, convs, device) for arrays in host_pool]

    def train_step(spec, labels, lengths, label_lengths) -> mx.nd.NDArray:
        with autograd.record():
            loss = ctc(model(spec), labels, lengths, label_lengths)
        loss.backward()
        trainer.step(batch)  # rescale_grad 1 / batch: summed CTC / batch, as PyTorch and MXNet's example
        return loss

    audio_s = sum(audio_seconds(frames) for _, frames, _, _ in host_pool) / pool_size
    conv_text = ", ".join(f"{c}x{k[0]}x{k[1]}/{s[0]}x{s[1]}" for c, k, s in convs)
    return pool_workload(
        "deepspeech2", pool, train_step,
        samples_per_step=audio_s,
        throughput_unit="audio_s/s",
        units_per_step={"utterances/s": float(batch)},
        model=model,
        aux_modules=[ctc],  # the hybridized loss: its operators are logged too
        optimizer=trainer,
        description=(f"Deep Speech 2 (MXNet example/speech_recognition deepspeech.cfg; {size}: conv {conv_text} "
                     f"+ BN, {gru_layers} bi-GRU x {hidden}, FC {fc}, {CLASSES}-class CTC, blank last), MXNet "
                     f"Gluon hybridized, GRUs over padding, SGD momentum 0.9, {pool_size} synthetic batches of "
                     f"{batch} utterances"),
    )


def _to_device(spectrograms: np.ndarray, frames: np.ndarray, targets: np.ndarray, target_lengths: np.ndarray,
               convs, device: mx.Context) -> tuple[mx.nd.NDArray, ...]:
    """(spectrograms, labels, output lengths, label lengths) on `device` in gluon CTCLoss's convention.

    Labels shift from blank-first (characters 1..28) to blank-last (characters 0..27), padded with -1;
    lengths are float32, as ctc_loss's data_lengths / label_lengths inputs are read.
    """
    real = np.arange(targets.shape[1])[None, :] < target_lengths[:, None]
    labels = np.where(real, targets - 1, -1).astype(np.float32)
    lengths = output_frames(frames, convs).astype(np.float32)
    return tuple(mx.nd.array(a, ctx=device, dtype=a.dtype)
                 for a in (spectrograms, labels, lengths, target_lengths.astype(np.float32)))
